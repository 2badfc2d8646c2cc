"""dplib — the tested library behind *Differential Privacy for Machine Learning, an interactive book*.

Every formula a chapter runs lives here, once, with its source cited and its tests in ``tests/``.

Modules (by topic): ``mechanisms`` (randomized response, Laplace, Gaussian, discrete samplers,
exponential mechanism), ``accounting`` (events that every accountant consumes, composition, Rényi
DP, privacy-loss distributions, a registry of accountants, noise calibration), ``langevin`` (privacy dynamics of noisy gradient descent, and DP-SGLD of Ryffel et
al. 2022 in ``langevin.sgld``), ``features`` (offline public feature maps),
``encoding`` (gradient encoding and numerical RDP for arbitrary noise, Nasr et al. 2020),
``attacks`` (linkage, membership inference, auditing), ``training`` (the one DP-SGD engine, DP-SGD
and DP-Adam with per-example gradients, model stacks; needs torch, imported on first use), ``icl`` (differentially private in-context
learning), ``samplers`` (Poisson, fixed-size and shuffled batches), ``selection`` (sparse vector,
propose-test-release, smooth sensitivity, PATE, private hyper-parameter tuning), ``datasets``
(offline, seeded data), ``device`` (device choice and seeding), ``plotting`` (figure style), ``tables`` (text
tables), ``widgets`` (interactive figures that also render statically on the website), and
``reporting`` (a complete privacy statement from any private result), ``deployments`` (published
deployments — the 2020 US Census, Gboard, Apple — recomputed), ``synthetic`` (private synthetic
data: MWEM, MST), ``user_data`` (data sets in which people contribute many records),
``experiments`` (the drivers behind the chapters' stored results), and ``testing`` (the
bad-input and stress tables, for tests and benchmarks; not imported here).
"""
from __future__ import annotations

from ._version import __version__  # noqa: E402

from .device import as_device, get_device, quick_mode, seed_everything, setup  # noqa: E402

__all__ = ["accounting", "attacks", "datasets", "deployments", "encoding", "experiments",
           "features", "icl", "langevin", "mechanisms", "plotting", "reporting", "samplers",
           "selection", "synthetic", "training", "user_data", "widgets", "get_device",
           "as_device", "quick_mode", "seed_everything", "setup", "__version__"]


# Every topic package loads on first use (PEP 562), so that ``import dplib`` and
# ``import dplib.accounting`` stay light: neither loads torch, scikit-learn nor matplotlib's pyplot
# (tests/unit/test_imports.py). ``dplib.training`` needs torch; the others need only what they use.
_LAZY = ("accounting", "attacks", "datasets", "deployments", "encoding", "experiments", "features",
         "icl", "langevin", "mechanisms", "plotting", "reporting", "samplers", "selection",
         "synthetic", "training", "user_data", "widgets")


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'dplib' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
