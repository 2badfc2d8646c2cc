"""Where code runs and how it is seeded: one call sets both up for a chapter.

``setup(seed)`` is the first thing every notebook calls. It seeds Python's ``random``, NumPy and
(when installed) PyTorch, picks the best device (CUDA, then Apple MPS, then CPU), reads the quick
switch ``DPBOOK_QUICK=1`` that the tests set, and prints one line saying what it found.
"""
from __future__ import annotations

import importlib.util
import os
import random
import secrets
from dataclasses import dataclass

import numpy as np

from ._common_params import FLAG, SEED
from ._constraints import Custom, constrained, unconstrained
from ._validate import check_int, shown

__all__ = ["quick_mode", "get_device", "as_device", "seed_everything", "setup", "Setup",
           "release_seed", "release_generator", "DEVICE"]

_DEVICE_NAMES = ("cuda", "mps", "cpu")


def _is_torch_device(value: object) -> bool:
    """A ``torch.device``, recognised without importing torch (this module must import without
    it)."""
    return type(value).__name__ == "device" and type(value).__module__ == "torch"


def _check_device(name: str, value: object) -> object:
    """None, a ``torch.device`` or a device name; returned as given (:func:`as_device` turns it
    into a ``torch.device``)."""
    if value is None or _is_torch_device(value):
        return value
    if not isinstance(value, str) or (value not in _DEVICE_NAMES
                                      and not value.startswith("cuda:")):
        raise ValueError(f"{name} must be None, a torch.device, or 'cuda', 'cuda:N', 'mps' or "
                         f"'cpu', got {shown(value)}")
    return value


#: A ``device`` argument: None (the GPU when there is one, :func:`get_device`), a
#: ``torch.device``, or one of 'cuda', 'cuda:N', 'mps', 'cpu' (returned as given).
DEVICE = Custom(_check_device, "None, a torch.device, or 'cuda', 'cuda:N', 'mps' or 'cpu'",
                ["tpu", 3, "", float("nan"), "cudaz", "gpu", ["cpu"]])


def _check_bits(name: str, value: object) -> int:
    bits = check_int(name, value)
    if bits > 63:
        raise ValueError(f"{name} must be an integer in [1, 63], got {shown(bits)}")
    return bits


def quick_mode() -> bool:
    """True when ``DPBOOK_QUICK`` is set to anything but '', '0' or 'false' (tests set it to 1)."""
    return os.environ.get("DPBOOK_QUICK", "").strip().lower() not in ("", "0", "false", "no")


def _torch():
    """PyTorch if it is installed, else None (chapters 1–4 need only NumPy)."""
    if importlib.util.find_spec("torch") is None:
        return None
    import torch
    return torch


@constrained(prefer=DEVICE)
def get_device(prefer: str | None = None):
    """The device training code should use: ``prefer`` if given, else cuda > mps > cpu.

    Returns a ``torch.device`` when PyTorch is installed, else the string ``"cpu"``.
    """
    torch = _torch()
    if prefer is not None:
        return as_device(prefer, "prefer")
    if torch is None:
        return "cpu"
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


@unconstrained("a validator: it checks the caller's device argument under the caller's "
               "parameter name (the declaration DEVICE's check, with the conversion)")
def as_device(device: object = None, name: str = "device"):
    """``device`` as training code takes it: None (→ :func:`get_device`, the GPU when there is
    one), a ``torch.device``, or one of 'cuda', 'cuda:N', 'mps', 'cpu'. One check for every
    ``device`` argument of dplib; a ``ValueError`` naming ``name`` otherwise."""
    torch = _torch()
    if device is None:
        return get_device()
    if torch is not None and isinstance(device, torch.device):
        return device
    _check_device(name, device)
    return torch.device(device) if torch is not None else device


@constrained(bits=Custom(_check_bits, "an integer in [1, 63]", [0, 64, -1, 2.5, None, "8", True],
                         family="int1"))
def release_seed(seed: object = None, name: str = "seed", *, bits: int = 63) -> int:
    """The random seed from which a private release draws its randomness.

    ``None`` (the default of every dplib function that releases a private output): 63 fresh bits
    of OS entropy (``secrets.randbits``), so the noise is unknown to anyone who knows the public
    inputs — a fixed default seed would make every noise draw a known function of them, and two
    runs on neighbouring data sets would differ by exactly the target's noise-free contribution.
    An integer ≥ 0 is returned as it is: a fixed seed makes a run reproducible, which is right for
    experiments and teaching, never for a release. Functions record this seed value in their result.
    ``bits`` (1–63): fewer fresh bits for callers that derive per-run seeds from this one (e.g.
    seed·10⁶ + r), so the derived seeds stay below torch's 2⁶⁴ limit. (``seed`` is checked in
    the body, under the caller's parameter ``name``; ``bits`` is declared.)
    """
    if seed is None:
        return secrets.randbits(bits)
    return check_int(name, seed, low=0)


_DEFAULT_SEEDS: dict[str, int] = {}    # device type -> torch's default for a new generator


def _torch_default_seed(torch, device) -> int:
    """``initial_seed()`` of a new, never-seeded ``torch.Generator`` on ``device`` (e.g.
    67280421310721 on the CPU), read from such a generator once per device type and kept — not at import,
    because this module must import without torch and a CUDA generator needs CUDA."""
    if device.type not in _DEFAULT_SEEDS:
        _DEFAULT_SEEDS[device.type] = torch.Generator(device=device).initial_seed()
    return _DEFAULT_SEEDS[device.type]


@constrained(device=DEVICE)
def release_generator(generator: object = None, device: object = "cpu"):
    """The ``torch.Generator`` a private release draws its noise from.

    ``None`` (the default of the privatizers — :func:`dplib.training.noisy_gradient`,
    :class:`~dplib.training.GaussianPrivatizer`, the gradient encoding's — and of
    :func:`dplib.encoding.train.privatization_error`): a new generator on ``device``
    seeded with 63 fresh bits of OS entropy (:func:`release_seed`) — never torch's global
    generator, which :func:`setup` and :func:`seed_everything` seed with a known value (0 in every
    chapter), so noise drawn from it would be a known function of the public inputs. A given
    ``torch.Generator`` (or a list/tuple of them, one per model of a stack) is returned as it is:
    reproducible runs, for experiments and teaching — once seeded (``.manual_seed(s)``). A
    generator never seeded (``torch.Generator()``) is refused: torch gives every new generator
    the same constant seed (``torch.Generator().initial_seed()``), so its noise would be public
    and two releases on neighbouring data sets would differ by the target's contribution,
    noise-free. The check reads ``initial_seed()``, so ``manual_seed`` with that very constant is
    refused too."""
    torch = _torch()
    if torch is None:
        raise ValueError("release_generator needs torch (pip install torch)")
    if generator is None:
        dev = as_device(device)
        return torch.Generator(device=dev).manual_seed(release_seed(None))
    gens = generator if isinstance(generator, (list, tuple)) else [generator]
    if not gens or not all(isinstance(g, torch.Generator) for g in gens):
        raise ValueError(f"generator must be None, a torch.Generator or a list of them, got "
                         f"{shown(generator)}"[:300])
    for i, g in enumerate(gens):
        default = _torch_default_seed(torch, g.device)
        if g.initial_seed() == default:
            where = "generator" if gens is not generator else f"generator[{i}]"
            raise ValueError(
                f"{where} has initial_seed() {default}, the constant seed torch gives every new "
                "generator (a torch.Generator() never seeded), so the noise it draws is public. "
                "Pass None (fresh OS entropy) or a generator seeded with .manual_seed(s) for an "
                f"integer s other than {default} (that one cannot be told apart from no seed "
                "and is refused too).")
    return generator


@constrained(seed=SEED)
def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python, NumPy's legacy global state and PyTorch (CPU and CUDA) with ``seed``.

    Returns a fresh ``np.random.Generator`` seeded with ``seed``: dplib functions take it as
    their explicit ``rng``.
    """
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch = _torch()
    if torch is not None:
        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
    return np.random.default_rng(seed)


@unconstrained("result record returned by setup(), built from its checked values")
@dataclass(frozen=True)
class Setup:
    """What a chapter knows about its run: its random seed, a seeded generator, the device, quick
    mode."""
    seed: int
    rng: np.random.Generator
    device: object
    quick: bool


@constrained(seed=SEED, verbose=FLAG)
def setup(seed: int = 0, *, verbose: bool = True) -> Setup:
    """Seed everything, pick the device, read quick mode, apply the book's figure style."""
    from ._version import __version__
    from .plotting import use_book_style

    rng = seed_everything(seed)
    info = Setup(seed=seed, rng=rng, device=get_device(), quick=quick_mode())
    use_book_style()
    if verbose:
        print(f"dplib {__version__} | device: {info.device} | seed: {seed} | "
              f"quick mode: {'on' if info.quick else 'off'}")
    return info
