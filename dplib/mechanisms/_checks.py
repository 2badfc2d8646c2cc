"""Checks shared by the additive mechanisms (Laplace, Gaussian): is the answer fine enough for
the noise, and is a computed noise scale a usable double (Mironov 2012 on floating point)."""
from __future__ import annotations

import math

import numpy as np

from .._validate import shown


#: A value is released only where doubles are at most Δ·2⁻¹⁰ apart (see :func:`check_resolution`).
_RESOLUTION = 2.0 ** -10


def check_resolution(name: str, x: np.ndarray, sensitivity: float) -> None:
    """Refuse a query answer whose doubles are coarser than Δ·2⁻¹⁰ (Δ = ``sensitivity``).

    Rounding a real answer to the nearest double moves it by up to half the spacing of doubles
    there, so two neighbouring answers can become doubles Δ + spacing apart, and the noise added
    to them is rounded to the same grid (at 2⁵³ doubles are 2 apart; at 1e20 Laplace(1) noise
    vanishes and the output *is* the input). Below the bound the sensitivity grows by less than
    0.1 %. Clamping and rounding to a coarser grid is the principled cure (the snapping
    mechanism of Mironov 2012); here such a value is refused.
    """
    worst = float(np.max(np.abs(x)))
    gap = float(np.spacing(worst))
    if gap / _RESOLUTION > sensitivity:          # exact: a power of two, no underflow
        bound = 2.0 ** min(math.floor(math.log2(sensitivity)) + 43, 1023)
        raise ValueError(
            f"{name} must have every |entry| below about {bound:g} for sensitivity "
            f"{sensitivity:g} (doubles there are at most sensitivity/1024 apart), got "
            f"{shown(worst)}, "
            f"where doubles are {gap:g} apart: neighbouring answers would round further apart "
            "than the sensitivity and the noise would be lost to rounding")


def check_noise_scale(name: str, scale: float) -> float:
    """A computed noise scale (Δ/ε, σ) must be a finite double > 0: an overflow to inf would
    release inf or NaN, an underflow to 0 would release the value itself."""
    if not 0.0 < scale < math.inf:
        raise ValueError(f"{name} must be a finite noise scale in (0, inf), got {shown(scale)}; "
                         "choose epsilon and sensitivity of less extreme ratio")
    return scale
