"""dplib — the tested library behind *Differential Privacy for Machine Learning, an interactive book*.

Every formula a chapter runs lives here, once, with its source cited and its tests in ``tests/``.

Modules (by topic): ``mechanisms`` (randomized response, Laplace, Gaussian, discrete samplers,
exponential mechanism), ``accounting`` (composition, Rényi DP, privacy-loss distributions,
noise calibration), ``langevin`` (privacy dynamics of noisy gradient descent), ``attacks``
(linkage, …), ``samplers`` (Poisson, fixed-size and shuffled batches),
``datasets`` (offline, seeded data), ``device`` (device choice and seeding), ``plotting`` (figure
style), ``widgets`` (interactive figures that also render statically on the website).
"""
from __future__ import annotations

__version__ = "0.1.0"

from . import (accounting, attacks, datasets, langevin, mechanisms, plotting,  # noqa: E402
               samplers, widgets)
from .device import get_device, quick_mode, seed_everything, setup  # noqa: E402

__all__ = ["accounting", "attacks", "datasets", "langevin", "mechanisms", "plotting",
           "samplers", "widgets", "get_device", "quick_mode", "seed_everything", "setup",
           "__version__"]
