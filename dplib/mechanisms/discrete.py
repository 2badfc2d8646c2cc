"""Exact discrete Laplace and discrete Gaussian samplers (Canonne, Kamath & Steinke 2020).

The samplers use only uniform random *integers* and integer arithmetic, so the law of their
output is exactly the stated one, unlike float samplers whose output set leaks the input
(Mironov 2012). They implement, vectorised over the samples still being drawn:

* Algorithm 1 of CKS 2020 (arXiv:2004.00010): Bernoulli(exp(−γ)) for rational γ ≥ 0, using
  Bernoulli(γ/K) = Bernoulli(γ)·Bernoulli(1/K) with uniform integers;
* Algorithm 2: the discrete Laplace Lap_Z(t/s), P(z) ∝ exp(−|z| s/t), for integers s, t ≥ 1;
* Algorithm 3: the discrete Gaussian N_Z(0, σ²), P(z) ∝ exp(−z²/(2σ²)), for rational σ².

Parameters given as floats are read as the decimal they print as (``0.1`` means 1/10), via
``Fraction(repr(x))``; pass a ``fractions.Fraction`` to be explicit.

Mechanisms: adding Lap_Z(Δ/ε) to an integer query with ℓ1 sensitivity Δ is ε-DP (the geometric
mechanism, Ghosh, Roughgarden & Sundararajan 2009; CKS 2020, §1); adding N_Z(0, σ²) to an integer
query with ℓ2 sensitivity Δ is (ε, δ)-DP with δ given by CKS 2020, Thm 7 (1-d).
"""
from __future__ import annotations

from fractions import Fraction
from math import isqrt

import numpy as np

from .._constraints import Custom, Integer, constrained
from .._validate import shown
from ._params import EPSILONS0, INTEGER_POINTS, RATIONAL, RNG, SCALE

__all__ = ["bernoulli_exp", "discrete_laplace", "discrete_gaussian", "discrete_laplace_pmf",
           "discrete_gaussian_pmf", "discrete_laplace_mechanism", "discrete_gaussian_mechanism",
           "discrete_gaussian_delta"]

_INT64_SAFE = 2 ** 62

#: Largest |value| the integer mechanisms accept: value + noise then stays inside int64.
_VALUE_LIMIT = 2 ** 62


def _integer_array(name: str, value: object) -> np.ndarray:
    """A non-empty integer query answer in [−2⁶², 2⁶²], as int64.

    The bound is checked *before* the cast (uint64 2⁶³ would otherwise become −2⁶³) and leaves
    room for the noise: |Lap_Z(b)| ≥ 2⁶² for the largest b accepted (< 2⁵⁶) needs 64 successive
    Bernoulli(e⁻¹) successes, probability e⁻⁶⁴ < 2·10⁻²⁸; the discrete Gaussian's noise is far
    smaller. So value + noise cannot wrap around in int64.
    """
    arr = np.asarray(value)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be integers (a counting or integer-valued query), "
                         f"got {shown(value)}")
    if arr.size == 0:
        raise ValueError(f"{name} must be non-empty, got an empty array")
    big = arr > _VALUE_LIMIT
    if np.issubdtype(arr.dtype, np.signedinteger):
        big |= arr < -_VALUE_LIMIT
    if big.any():
        raise ValueError(f"{name} must be integers in [-2**62, 2**62] (so that value + noise "
                         f"cannot wrap around in int64), got {shown(arr[big].flat[0])}")
    return arr.astype(np.int64)


#: An integer query answer in [−2⁶², 2⁶²] (a scalar or a non-empty array), handed on as int64.
_INTEGER_VALUE = Custom(_integer_array, "integers in [-2**62, 2**62] (a counting query)",
                        [1.5, [1, 2.5], [], "3", None, True, [2 ** 63], np.nan])


def _bern_exp_unit(num: np.ndarray, den: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """CKS 2020 Alg. 1, case γ = num/den ∈ [0, 1]: K ← 1; while Bern(γ/K): K ← K+1; return K odd."""
    k = np.ones(num.shape, dtype=np.int64)
    active = np.ones(num.shape, dtype=bool)
    while active.any():
        idx = np.flatnonzero(active)
        # Bernoulli(γ/K) as the product of independent Bernoulli(num/den) and Bernoulli(1/K).
        a = (gen.integers(0, den[idx]) < num[idx]) & (gen.integers(0, k[idx]) == 0)
        k[idx[a]] += 1
        active[idx[~a]] = False
    return k % 2 == 1


def _bern_exp(num: np.ndarray, den: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """CKS 2020 Alg. 1 for γ = num/den ≥ 0 (int64 arrays, den ≥ 1): Bernoulli(exp(−γ))."""
    whole, frac = np.divmod(num, den)
    return _bern_exp_split(whole, frac, den, gen)


def _bern_exp_split(whole: np.ndarray, frac: np.ndarray, den: np.ndarray,
                    gen: np.random.Generator) -> np.ndarray:
    """CKS 2020 Alg. 1 for γ = whole + frac/den (int64 arrays, 0 ≤ frac < den): Bern(exp(−γ)).

    For γ > 1: ⌊γ⌋ independent Bernoulli(exp(−1)) must all be 1, then Bernoulli(exp(−(γ−⌊γ⌋))).
    """
    out = np.ones(whole.shape, dtype=bool)
    remaining = whole.copy()
    while True:
        idx = np.flatnonzero(out & (remaining > 0))
        if idx.size == 0:
            break
        one = np.ones(idx.size, dtype=np.int64)
        out[idx[~_bern_exp_unit(one, one, gen)]] = False
        remaining[idx] -= 1
    idx = np.flatnonzero(out)
    out[idx] = _bern_exp_unit(frac[idx], den[idx], gen)
    return out


@constrained(gamma=RATIONAL, size=Integer(min=1), rng=RNG)
def bernoulli_exp(gamma: object, size: int, *, rng: np.random.Generator | int) -> np.ndarray:
    """``size`` exact draws of Bernoulli(exp(−γ)) for rational γ > 0 (CKS 2020, Alg. 1)."""
    g = gamma
    if g.numerator >= _INT64_SAFE or g.denominator >= _INT64_SAFE:
        raise ValueError(f"gamma must have numerator and denominator < 2**62, got {g}")
    num = np.full(size, g.numerator, dtype=np.int64)
    den = np.full(size, g.denominator, dtype=np.int64)
    return _bern_exp(num, den, rng)


def _geometric_exp1(size: int, gen: np.random.Generator) -> np.ndarray:
    """V = number of successes before the first failure of Bernoulli(exp(−1)) (CKS Alg. 2, step 5)."""
    v = np.zeros(size, dtype=np.int64)
    active = np.ones(size, dtype=bool)
    while active.any():
        idx = np.flatnonzero(active)
        one = np.ones(idx.size, dtype=np.int64)
        a = _bern_exp_unit(one, one, gen)
        v[idx[a]] += 1
        active[idx[~a]] = False
    return v


def _dlap_st(s: int, t: int, size: int, gen: np.random.Generator) -> np.ndarray:
    """CKS 2020 Alg. 2: ``size`` draws of Lap_Z(t/s) for integers s, t ≥ 1 (rejection, vectorised)."""
    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:
        n = todo.size
        u = gen.integers(0, t, size=n)                                   # step 3
        d = _bern_exp(u, np.full(n, t, dtype=np.int64), gen)             # step 4: Bern(e^{−U/t})
        v = _geometric_exp1(n, gen)                                      # steps 5–7
        x = u + t * v                                                    # step 8
        y = x // s                                                       # step 9
        b = gen.integers(0, 2, size=n)                                   # step 10
        accept = d & ~((b == 1) & (y == 0))                              # steps 4 and 11
        out[todo[accept]] = ((1 - 2 * b) * y)[accept]                    # step 12
        todo = todo[~accept]
    return out


@constrained(scale=RATIONAL, size=Integer(min=1), rng=RNG)
def discrete_laplace(scale: object, size: int, *, rng: np.random.Generator | int) -> np.ndarray:
    """``size`` exact draws of the discrete Laplace Lap_Z(b), P(z) ∝ exp(−|z|/b), z ∈ ℤ.

    ``scale`` b > 0 is rational (int, Fraction, or float read as its decimal); written b = t/s
    in lowest terms and sampled by CKS 2020, Algorithm 2. Returns an int64 array.
    """
    b = scale
    if b.numerator >= 2 ** 56 or b.denominator >= _INT64_SAFE:
        raise ValueError(f"scale must be a rational t/s with t < 2**56 and s < 2**62, got {b}")
    return _dlap_st(b.denominator, b.numerator, size, rng)


@constrained(sigma_squared=RATIONAL, size=Integer(min=1), rng=RNG)
def discrete_gaussian(sigma_squared: object, size: int, *,
                      rng: np.random.Generator | int) -> np.ndarray:
    """``size`` exact draws of the discrete Gaussian N_Z(0, σ²), P(z) ∝ exp(−z²/(2σ²)), z ∈ ℤ.

    CKS 2020, Algorithm 3: with t = ⌊σ⌋ + 1, draw Y ~ Lap_Z(t) and accept it with probability
    exp(−(|Y| − σ²/t)²/(2σ²)); for σ² = p/q that exponent is the rational
    (|Y|tq − p)²/(2pqt²), computed exactly. ``sigma_squared`` is rational (int, Fraction or
    float read as its decimal); 2pqt² must stay below 2**62 (σ up to about 3·10⁴ for integer σ²).
    """
    s2 = sigma_squared
    p, q = s2.numerator, s2.denominator
    t = isqrt(p // q) + 1
    den = 2 * p * q * t * t
    if den >= _INT64_SAFE:
        raise ValueError(
            f"sigma_squared = {s2} is too large or has too large a denominator for exact int64 "
            f"arithmetic (2·p·q·t² = {den} must be < 2**62); pass a Fraction with a small "
            "denominator, e.g. Fraction(1, 3)")
    gen = rng
    out = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:
        n = todo.size
        y = _dlap_st(1, t, n, gen)                                        # step 3
        a = np.abs(y).astype(object) * (t * q) - p                        # exact integers
        num2 = a * a
        whole = (num2 // den).astype(np.int64)
        frac = (num2 % den).astype(np.int64)
        # γ = whole + frac/den; pass it to Alg. 1 as (whole·den + frac)/den without overflow:
        dens = np.full(n, den, dtype=np.int64)
        c = _bern_exp_split(whole, frac, dens, gen)                         # step 4
        out[todo[c]] = y[c]
        todo = todo[~c]
    return out


@constrained(k=INTEGER_POINTS, scale=SCALE)
def discrete_laplace_pmf(k: object, scale: float) -> np.ndarray | float:
    """P(Z = k) = tanh(1/(2b)) · exp(−|k|/b) for Z ~ Lap_Z(b) (CKS 2020, Def. 28 normalised)."""
    pmf = np.tanh(0.5 / scale) * np.exp(-np.abs(k) / scale)
    return float(pmf) if pmf.ndim == 0 else pmf


def _dgauss_log_norm(s2: float) -> float:
    r = int(np.ceil(40 * np.sqrt(s2))) + 10
    y = np.arange(-r, r + 1, dtype=float)
    return float(np.log(np.exp(-y * y / (2 * s2)).sum()))


@constrained(k=INTEGER_POINTS, sigma_squared=SCALE)
def discrete_gaussian_pmf(k: object, sigma_squared: float) -> np.ndarray | float:
    """P(Z = k) = exp(−k²/(2σ²)) / Σ_y exp(−y²/(2σ²)) for Z ~ N_Z(0, σ²) (CKS 2020, Def. 1).

    The normaliser is summed over |y| ≤ 40σ + 10 (the rest is below e^{−800}).
    """
    s2 = sigma_squared
    pmf = np.exp(-k * k / (2 * s2) - _dgauss_log_norm(s2))
    return float(pmf) if pmf.ndim == 0 else pmf


@constrained(sigma_squared=SCALE, epsilon=EPSILONS0, sensitivity=Integer(min=1))
def discrete_gaussian_delta(sigma_squared: float, epsilon: float | np.ndarray,
                            sensitivity: int = 1) -> np.ndarray | float:
    """δ of the 1-d discrete Gaussian mechanism (CKS 2020, Thm 7), integer ℓ2 sensitivity Δ:

    δ = P[Y > εσ²/Δ − Δ/2] − e^ε P[Y > εσ²/Δ + Δ/2],   Y ~ N_Z(0, σ²).
    Vectorised over ``epsilon``.
    """
    s2, d, eps = sigma_squared, sensitivity, epsilon
    r = int(np.ceil(40 * np.sqrt(s2))) + 10
    y = np.arange(-r, r + 1, dtype=float)
    pmf = discrete_gaussian_pmf(y, s2)
    tail = np.concatenate([np.cumsum(pmf[::-1])[::-1], [0.0]])     # tail[i] = P[Y ≥ y_i]

    def p_greater(x):
        # P[Y > x] = P[Y ≥ floor(x) + 1]
        i = np.clip(np.floor(x).astype(int) + 1 + r, 0, 2 * r + 1)
        return tail[i]

    e = np.asarray(eps)
    # e^ε·P[…] in log space: e^ε overflows from ε ≈ 709.8, where P[…] is 0 and inf·0 gave NaN
    with np.errstate(divide="ignore", over="ignore"):
        second = np.exp(e + np.log(p_greater(e * s2 / d + d / 2)))
    delta = p_greater(e * s2 / d - d / 2) - second
    delta = np.maximum(delta, 0.0)   # only rounding can make it negative
    return float(delta) if delta.ndim == 0 else delta


@constrained(value=_INTEGER_VALUE, epsilon=RATIONAL, sensitivity=Integer(min=1), rng=RNG)
def discrete_laplace_mechanism(value: object, epsilon: object, sensitivity: int = 1, *,
                               rng: np.random.Generator | int) -> np.ndarray | int:
    """Integer ``value`` + Lap_Z(Δ/ε) noise per coordinate: ε-DP for integer queries with ℓ1
    sensitivity Δ (Ghosh et al. 2009; CKS 2020, Alg. 2). ε is read as a rational (see module).
    ``value`` must lie in [−2⁶², 2⁶²] so that the sum cannot wrap around in int64."""
    x = value
    noise = discrete_laplace(Fraction(sensitivity) / epsilon, x.size, rng=rng).reshape(x.shape)
    out = x + noise
    return int(out) if out.ndim == 0 else out


@constrained(value=_INTEGER_VALUE, sigma_squared=RATIONAL, rng=RNG)
def discrete_gaussian_mechanism(value: object, sigma_squared: object, *,
                                rng: np.random.Generator | int) -> np.ndarray | int:
    """Integer ``value`` + N_Z(0, σ²) noise per coordinate (CKS 2020, Alg. 3).

    Its (ε, δ) for ℓ2 sensitivity Δ is :func:`discrete_gaussian_delta` (CKS 2020, Thm 7).
    ``value`` must lie in [−2⁶², 2⁶²] so that the sum cannot wrap around in int64."""
    x = value
    noise = discrete_gaussian(sigma_squared, x.size, rng=rng).reshape(x.shape)
    out = x + noise
    return int(out) if out.ndim == 0 else out
