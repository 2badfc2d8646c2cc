"""Smooth sensitivity of the median, and the noise that makes releasing with it private.

Nissim, Raskhodnikova & Smith (2007, "Smooth sensitivity and sampling in private data analysis",
STOC; NRS07 below). Data x ∈ [L, U]ⁿ, n public, neighbours differ in one record (replace-one).
The *local* sensitivity LS(x) = max over neighbours x' of |f(x) − f(x')| can be far below the
global one, but adding noise ∝ LS(x) is not private: LS itself leaks (NRS07, §1.2). A
β-*smooth* upper bound S(x) ≥ LS(x) with S(x) ≤ e^β S(x') for neighbours is safe (NRS07,
Def. 2.1–2.2); the smallest is the smooth sensitivity

    S*_β(x) = max_{k ≥ 0} e^{−kβ} A^{(k)}(x),   A^{(k)}(x) = max_{y: d(x,y) ≤ k} LS(y)
    (NRS07, Def. 2.2 and Prop. 3.1 / eq. (2)).

For the median x_(m) of the sorted data (m = ⌈n/2⌉, the lower median; NRS07 §3.1 takes n odd,
the argument is the same for any fixed rank m), with x_(i) = L for i < 1 and U for i > n,

    A^{(k)}(x) = max_{0 ≤ t ≤ k+1} (x_(m+t) − x_(m+t−k−1))                (NRS07, §3.1).

Release (NRS07, Def. 2.5 and Lemma 2.6): if the noise law h is (α, β)-admissible — shifting it
by ≤ α or scaling it by e^{±β} changes the probability of any event by at most e^{ε/2}
(plus δ/2) — then f(x) + (S(x)/α)·Z, Z ~ h, with S β-smooth, is (ε, δ)-DP. Two laws:

* ``delta = 0`` (pure ε-DP): the Cauchy law h(z) ∝ 1/(1 + z²) (γ = 2 of the family
  1/(1 + |z|^γ) of NRS07, §2.2), admissible with α = β = ε/(2(γ + 1)) = ε/6: release
  median + (6 S*_{ε/6}(x)/ε)·Z. (Shifting by α moves log h by at most α·max|2z/(1+z²)| = α;
  scaling by e^{λ} by at most |λ| — both ≤ ε/6 < ε/2; tests/unit/test_selection_smooth.py checks
  these two bounds numerically.)
* ``delta > 0``: Laplace, α = ε/2, β = ε/(2 ln(2/δ)) (NRS07, §2.2, the Laplace example):
  release median + (2 S*_β(x)/ε)·Lap(1). The test file checks the dilation condition's δ/2
  numerically as well.

Floating-point caveat: Cauchy and Laplace noise come from numpy's float samplers (the setting of
Mironov 2012): the law holds only up to rounding, a teaching implementation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._constraints import constrained, unconstrained
from .._validate import check_finite_array, check_real
from ..accounting._params import POSITIVE
from ._params import DELTA_OR_ZERO, REAL, RELEASE_RNG, SIZE_OR_NONE, make_release_rng

__all__ = ["check_bounded_data", "median_sensitivity_at_distance", "median_smooth_sensitivity",
           "smooth_median", "SmoothRelease", "median_noise_parameters"]

#: Rows of k processed at once (k × n matrix per block, ~32 MB).
_BLOCK = 1 << 22


@unconstrained("a validator: raising ValueError on bad input is all it does (the relation "
               "of x to lower < upper, used by the declared functions)")
def check_bounded_data(x: object, lower: object, upper: object
                       ) -> tuple[np.ndarray, float, float]:
    """x: a non-empty 1-d array of finite reals inside [lower, upper] (public bounds, lower <
    upper); returned sorted. Values outside are refused, not clipped: a value outside the
    declared range means the range is not the data's, and clipping would hide it."""
    lo = check_real("lower", lower)
    hi = check_real("upper", upper)
    if not lo < hi or not math.isfinite(hi - lo):
        raise ValueError(f"(lower, upper) must satisfy lower < upper with a finite width "
                         f"upper - lower, got ({lower!r}, {upper!r})")
    a = check_finite_array("x", x)
    if a.ndim != 1:
        raise ValueError(f"x must be a 1-d array of records, got shape {a.shape}")
    out = (a < lo) | (a > hi)
    if out.any():
        raise ValueError(f"x must lie in [lower, upper] = [{lo:g}, {hi:g}], got "
                         f"{float(a[out][0])!r}")
    return np.sort(a), lo, hi


@constrained(lower=REAL, upper=REAL)
def median_sensitivity_at_distance(x: object, lower: float, upper: float) -> np.ndarray:
    """A^{(k)}(x) for k = 0, …, n: the largest local sensitivity of the (lower) median over data
    sets within k changed records of x (NRS07, §3.1). A^{(0)} is LS(x); A^{(k)} = U − L once
    k ≥ ⌈n/2⌉ or so. Vectorised over (k, t) in blocks of k."""
    xs, lo, hi = check_bounded_data(x, lower, upper)
    return _a_k(xs, lo, hi)


def _a_k(xs: np.ndarray, lo: float, hi: float) -> np.ndarray:
    n = xs.size
    m = (n + 1) // 2                               # 1-based rank of the lower median
    xp = np.concatenate([[lo], xs, [hi]])          # xp[i] = x_(i), i = 0 … n+1 (padded)
    ks = np.arange(n + 1)
    out = np.empty(n + 1)
    rows = max(1, _BLOCK // (n + 2))
    t = np.arange(n + 2)[None, :]
    for start in range(0, n + 1, rows):            # blocks of orders k, not a loop per k
        k = ks[start:start + rows][:, None]
        hi_idx = np.clip(m + t, 0, n + 1)
        lo_idx = np.clip(m + t - k - 1, 0, n + 1)
        gap = xp[hi_idx] - xp[lo_idx]
        gap = np.where(t <= k + 1, gap, -np.inf)
        out[start:start + rows] = gap.max(axis=1)
    return out


@constrained(beta=POSITIVE, lower=REAL, upper=REAL)
def median_smooth_sensitivity(x: object, beta: float, lower: float, upper: float) -> float:
    """S*_β(x) = max_k e^{−kβ} A^{(k)}(x) (NRS07, Def. 2.2, Prop. 3.1, §3.1), β > 0."""
    xs, lo, hi = check_bounded_data(x, lower, upper)
    a = _a_k(xs, lo, hi)
    return float(np.max(np.exp(-beta * np.arange(a.size)) * a))


@constrained(epsilon=POSITIVE, delta=DELTA_OR_ZERO)
def median_noise_parameters(epsilon: float, delta: float = 0.0) -> dict:
    """(α, β, law) of the admissible noise for ``smooth_median`` (module note): δ = 0 → Cauchy,
    α = β = ε/6; δ ∈ (0, 1) → Laplace, α = ε/2, β = ε/(2 ln(2/δ)) (NRS07, §2.2)."""
    eps, d = epsilon, delta
    if d == 0.0:
        return {"law": "cauchy", "alpha": eps / 6.0, "beta": eps / 6.0}
    return {"law": "laplace", "alpha": eps / 2.0, "beta": eps / (2.0 * math.log(2.0 / d))}


@unconstrained("result record returned by smooth_median")
@dataclass(frozen=True)
class SmoothRelease:
    """Result of :func:`smooth_median`: the released ``value`` (an array with ``size``); ``noise_scale`` = S/α;
    ``smooth_sensitivity`` S*_β(x) and ``beta``, ``law``. Only ``value`` is private: the
    smooth sensitivity and the scale depend on the data and are returned for teaching (NRS07
    warn that publishing them is a release of its own)."""

    value: float | np.ndarray
    noise_scale: float
    smooth_sensitivity: float
    beta: float
    law: str


@constrained(epsilon=POSITIVE, lower=REAL, upper=REAL, delta=DELTA_OR_ZERO, size=SIZE_OR_NONE,
             rng=RELEASE_RNG)
def smooth_median(x: object, epsilon: float, lower: float, upper: float, *,
                  delta: float = 0.0, size: int | None = None,
                  rng: np.random.Generator | int | None = None) -> SmoothRelease:
    """The median of x released with smooth-sensitivity noise: (ε, 0)-DP with Cauchy noise
    (``delta=0``) or (ε, δ)-DP with Laplace noise, replace-one neighbours, n public
    (NRS07, Lemma 2.6 with the laws of :func:`median_noise_parameters`).

    ``size``: None (default) for one release (``value`` a float), or the number of independent
    releases on the same data (``value`` an array; for audits and figures — each costs ε).
    ``rng``: Generator or seed for experiments; ``None`` (default) fresh OS entropy.
    Floating-point caveat: numpy's float Cauchy/Laplace samplers (Mironov 2012)."""
    xs, lo, hi = check_bounded_data(x, lower, upper)
    p = median_noise_parameters(epsilon, delta)
    shape = None if size is None else (size,)
    gen = make_release_rng(rng)   # a Generator when passed (declared); None: fresh entropy
    a = _a_k(xs, lo, hi)
    s = float(np.max(np.exp(-p["beta"] * np.arange(a.size)) * a))
    z = gen.standard_cauchy(shape) if p["law"] == "cauchy" else gen.laplace(0.0, 1.0, shape)
    scale = s / p["alpha"]
    med = float(xs[(xs.size + 1) // 2 - 1])
    value = med + scale * z
    return SmoothRelease(float(value) if size is None else value, scale, s, p["beta"],
                         p["law"])
