"""The Gaussian mechanism: classic and analytic calibration, exact δ(ε), privacy loss.

Releasing f(D) + N(0, σ² I) for a query with ℓ2 sensitivity Δ (over neighbouring datasets, under
whichever adjacency Δ was computed for) is

* **classic**: (ε, δ)-DP for σ = Δ √(2 ln(1.25/δ)) / ε when 0 < ε < 1 (Dwork & Roth 2014,
  Thm A.1; also Razaviyayn's course notes, ``RazaviyaynLecture11``). The proof needs ε < 1; for
  ε ≥ 1 the formula is not a theorem.
* **exact / analytic** (Balle & Wang 2018, Thm 8): (ε, δ)-DP if and only if

      δ ≥ Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ),

  for every ε ≥ 0. The analytic Gaussian mechanism (their Alg. 1) uses the smallest such σ,
  found here by bisection in log σ with the right-hand side evaluated in log space
  (``scipy.special.log_ndtr``, ``erfcx``) without cancellation and rounded up
  (:func:`_log_delta_upper`), so tails as small as δ = 1e-300 and any Δ/σ stay upper bounds.

Privacy loss (Balle & Wang 2018, Lemma 3; Dwork & Roth 2014, proof of Thm A.1): with f(D) = 0 and
f(D') = Δ (1-d after rotating), L(o) = ln p_D(o)/p_D'(o) = (Δ² − 2Δo)/(2σ²); for o ~ N(0, σ²),
L ~ N(η, 2η) with η = Δ²/(2σ²).
"""
from __future__ import annotations

import numpy as np
from scipy.special import erfcx, log_ndtr

from .._constraints import Options, RealArray, constrained
from ._checks import check_noise_scale, check_resolution
from ._params import (DELTA, DELTAS, EPSILON, EPSILONS, EPSILONS0, INF, RNG, SCALE, SCALES,
                      SENSITIVITY, VALUE)
from .._validate import shown

__all__ = ["gaussian_sigma", "gaussian_delta", "gaussian_log_delta", "gaussian_epsilon", "gaussian_mechanism",
           "gaussian_privacy_loss"]

_METHODS = ("classic", "analytic")
#: A value in [0, inf], scalar or array (μ and ε of :func:`gaussian_log_delta`).
_NONNEG_OR_INF = RealArray(0.0, INF, closed="both", nonempty=False, family="nonneg_array")


_U = 2.0 ** -53
#: 10-point Gauss–Legendre rule on [−1, 1] (nodes, weights) for ∫ h over [b, a] when μ ≤ 1.
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(10)
#: Relative allowance on 1 − e^d in the μ ≤ 1 branch of :func:`_log_delta_upper`: 200 times the
#: largest relative error of that branch's μ·H·(e^d − 1)/d measured against mpmath (5e-15 for
#: μ ∈ [5e-324, 1], ε/μ ∈ [0, 1e6]); ``tests/unit/test_laplace_gaussian.py`` checks that δ stays
#: at or above mpmath's.
_KAPPA = 1e-12


def _scalar_or_array(x: np.ndarray) -> np.ndarray | float:
    return float(x) if np.ndim(x) == 0 else x


def _mills_excess(t: np.ndarray) -> np.ndarray:
    """h(t) = φ(t)/Φ(t) + t > 0 to a few units of round-off (relative error < 1e-14 vs mpmath).

    For t ≥ −4 directly, φ(t)/Φ(t) = √(2/π)/erfcx(−t/√2) (no tail underflows; the sum cancels
    by at most a factor 17 there). Below, by Laplace's continued fraction for the Mills ratio,
    Φ(−x)/φ(x) = 1/(x + 1/(x + 2/(x + 3/(x + …)))) (DLMF §7.9, with Φ(−x) = erfc(x/√2)/2), whence
    h(−x) = 1/(x + 2/(x + 3/(x + …))) with no cancellation; 40 levels leave < 2e-16 for x ≥ 4
    (against mpmath).
    """
    x = np.maximum(-t, 4.0)
    k = np.zeros_like(x)
    for j in range(40, 1, -1):
        k = j / (x + k)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        direct = t + np.sqrt(2.0 / np.pi) / erfcx(-t / np.sqrt(2.0))   # φ/Φ = 0 past t ≈ 38
    return np.where(t >= -4.0, direct, 1.0 / (x + k))


def _log_ndtr_scaled(t: np.ndarray) -> np.ndarray:
    """G(t) = log Φ(t) + t²/2: log(erfcx(−t/√2)/2) for t < 0 (no cancellation; erfcx errs by
    < 7 units of round-off against mpmath), log Φ(t) + t²/2 for t ≥ 0."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        neg = np.log(erfcx(-np.minimum(t, 0.0) / np.sqrt(2.0)) / 2)
        return np.where(t < 0, neg, log_ndtr(t) + t * t / 2)


def _log_delta_upper(mu: float | np.ndarray, epsilon: float | np.ndarray) -> np.ndarray:
    """log of an upper bound on δ(ε) of μ-GDP — the Gaussian mechanism at Δ/σ = μ —
    δ(ε) = Φ(a) − e^ε·Φ(b), a = μ/2 − ε/μ, b = −μ/2 − ε/μ (Balle & Wang 2018, Thm 8; Dong, Roth &
    Su 2022, Cor. 2.13), round-off included; vectorised. The one implementation of this curve
    (:class:`dplib.accounting.PLDAccountant` uses it too).

    Written as Φ(a)·(1 − e^d), d = ε + log Φ(b) − log Φ(a) ≤ 0, in log space (``log_ndtr``).
    a is a difference of terms of size w = μ/2 + ε/μ, so it errs by ~u·w; since
    |d log Φ(x)/dx| ≤ |x| + 1 (Mills ratio), log Φ(a) errs by Δa ≲ u·((|a| + 1)·w + |log Φ(a)|);
    8Δa is added to log Φ(a). As written, d cancels (ε against log Φ(a) − log Φ(b), which agree
    to all digits when μ is small or ε large), so it is computed without cancellation from
    d log Φ(t)/dt = φ(t)/Φ(t) and ∫_b^a t dt = −ε, i.e. d = −∫_b^a h(t) dt = G(b) − G(a) with
    h(t) = φ(t)/Φ(t) + t > 0 (:func:`_mills_excess`) and G(t) = log Φ(t) + t²/2
    (:func:`_log_ndtr_scaled`):

    * μ > 1: d = G(b) − G(a), erring by Δd ≲ u·(|G(a)| + |G(b)| + 4 + w·(h(a) + h(b))) (G to a
      few ulps, and a, b off by ~u·w); 1 − e^{d − 8Δd} is used, which adds only ~e^d·8Δd.
    * μ ≤ 1, where G(b) − G(a) cancels in turn (at σ = 1.032e13, ε = 1e-12 the form as written left
      d = 0, hence δ = 0, where the exact δ is 2.6e-39): d = −μ·H with H the mean of h over
      [b, a] (length μ, midpoint −ε/μ) by 10-point Gauss–Legendre, a sum of positive terms; h is
      analytic with no pole within 2.8 of the real axis (the zeros of Φ nearest it are
      1.916 ± 2.816i, found with mpmath). 1 − e^d = μ·H·(e^d − 1)/d, taken in log space so that
      subnormal μ keep full precision, raised by the relative allowance κ = 1e-12 (:data:`_KAPPA`).

    8u·|log(1 − e^d)| is added for the final sum. The result is never below the exact log δ.
    Where δ ≥ 1e-300 the allowance is below 3e-12 of δ for μ ≤ 100 and grows as ~3e-14·μ beyond
    (3e-10 at μ = 1e4), Δa's share: rounding μ = Δ/σ itself moves a, hence δ, by about an eighth
    of that (against mpmath; ``tests/unit/test_laplace_gaussian.py`` checks it).
    """
    mu, eps = np.broadcast_arrays(np.asarray(mu, dtype=float), np.asarray(epsilon, dtype=float))
    pos = mu > 0                         # μ = Δ/σ rounded to 0: exact δ < 1e-324 (log δ = −inf)
    r = np.where(pos, mu, 1.0)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        s = eps / r
        a, b, w = r / 2 - s, -r / 2 - s, r / 2 + s
        la = log_ndtr(a)
        # 8u first, so that (|a| + 1)·w ≈ a² near the top of the doubles cannot overflow to inf
        da = 8 * _U * (np.abs(a) + 1) * w + 8 * _U * np.abs(la)
        ga, gb = _log_ndtr_scaled(a), _log_ndtr_scaled(b)
        dd = (8 * _U * (np.abs(ga) + np.abs(gb) + 4)
              + 8 * _U * w * (_mills_excess(a) + _mills_excess(b)))
        log_big = np.log(-np.expm1(np.minimum(gb - ga, 0.0) - dd))
        h_mean = 0.5 * (_mills_excess(-s[..., None] + (r / 2)[..., None] * _GL_NODES)
                        @ _GL_WEIGHTS)
        d = -r * h_mean
        ratio = np.where(d < 0, np.expm1(d) / d, 1.0)
        log_small = np.log(r) + np.log(h_mean * ratio) + _KAPPA
        lg = np.where(r > 1, log_big, log_small)
        out = np.minimum(la + da + lg + 8 * _U * np.abs(lg), 0.0)
    return np.where(pos & (la > -np.inf), out, -np.inf)


@constrained(mu=_NONNEG_OR_INF, epsilon=_NONNEG_OR_INF)
def gaussian_log_delta(mu: float | np.ndarray, epsilon: float | np.ndarray) -> np.ndarray | float:
    """log δ(ε) of the Gaussian mechanism at Δ/σ = μ (μ-GDP; Balle & Wang 2018, Thm 8), never
    below the exact value: :func:`_log_delta_upper`, the one implementation of this curve, which
    :func:`gaussian_delta` and :class:`dplib.accounting.PLDAccountant` both use. In log space, so
    δ far below the smallest double; −inf where μ = 0, and where log δ itself is below the most
    negative double (δ is then 0 in double either way). μ ∈ [0, ∞], ε ∈ [0, ∞]."""
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        return _scalar_or_array(_log_delta_upper(mu, epsilon))


def _log_delta(sigma: np.ndarray, epsilon: np.ndarray, sensitivity: float) -> np.ndarray:
    """:func:`_log_delta_upper` at μ = Δ/σ: log of δ(ε) (Balle & Wang 2018, Thm 8), rounded up."""
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        return _log_delta_upper(sensitivity / sigma, epsilon)


@constrained(sigma=SCALES, epsilon=EPSILONS0, sensitivity=SENSITIVITY)
def gaussian_delta(sigma: float | np.ndarray, epsilon: float | np.ndarray,
                   sensitivity: float = 1.0) -> np.ndarray | float:
    """δ(ε) of the Gaussian mechanism N(0, σ²) on ℓ2 sensitivity Δ (Balle & Wang 2018, Thm 8).

    δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ): the smallest δ for which the mechanism is
    (ε, δ)-DP, evaluated with its round-off bounded and rounded up (:func:`_log_delta_upper`):
    never below the exact value, and within 3e-12 of it (relative) for Δ/σ ≤ 100 and δ ≥ 1e-300
    (~3e-14·Δ/σ for larger Δ/σ).
    Vectorised with broadcasting over ``sigma`` and ``epsilon`` (ε ≥ 0 allowed).
    """
    return _scalar_or_array(np.exp(_log_delta(sigma, epsilon, sensitivity)))


@constrained(sigma=SCALES, delta=DELTAS, sensitivity=SENSITIVITY)
def gaussian_epsilon(sigma: float | np.ndarray, delta: float | np.ndarray,
                     sensitivity: float = 1.0) -> np.ndarray | float:
    """Smallest ε ≥ 0 with δ(ε) ≤ ``delta`` for N(0, σ²) noise (inverse of :func:`gaussian_delta`).

    δ(ε) is decreasing in ε (Balle & Wang 2018, Thm 8), so a vectorised bisection on ε finds it;
    the end kept is one where the rounded-up δ(ε) ≤ ``delta``, so the answer is never below the
    exact ε. Returns 0 when the mechanism is already (0, δ)-DP, and ``inf`` when δ is still above
    ``delta`` at the largest double (σ/Δ ≲ 1e-154: the exact ε ≈ Δ²/(2σ²) overflows a float).
    """
    d = sensitivity
    sig, log_target = np.broadcast_arrays(sigma, np.log(delta))
    shape = sig.shape
    sig, log_target = sig.ravel(), log_target.ravel()
    lo = np.zeros(sig.shape)
    hi = np.ones(sig.shape)
    big = _log_delta(sig, hi, d) > log_target
    while big.any():                     # double until δ(hi) ≤ δ; ≤ 1024 times before hi = inf
        lo = np.where(big, hi, lo)
        with np.errstate(over="ignore"):
            hi = np.where(big, hi * 2, hi)
        big &= np.isfinite(hi)
        big[big] = _log_delta(sig[big], hi[big], d) > log_target[big]
    out = ~np.isfinite(hi)               # δ(2^1023) > target: the exact ε exceeds every double
    hi = np.where(out, 1.0, hi)
    for _ in range(200):                 # [lo, hi] with hi ≤ 2·lo (or [0, 1]): 2^-200 relative
        mid = 0.5 * (lo + hi)
        too_small = _log_delta(sig, mid, d) > log_target
        lo = np.where(too_small, mid, lo)
        hi = np.where(too_small, hi, mid)
    eps = np.where(_log_delta(sig, np.zeros(sig.shape), d) <= log_target, 0.0, hi)
    return _scalar_or_array(np.where(out, np.inf, eps).reshape(shape))


@constrained(epsilon=EPSILONS, delta=DELTAS, sensitivity=SENSITIVITY, method=Options(*_METHODS))
def gaussian_sigma(epsilon: float | np.ndarray, delta: float | np.ndarray,
                   sensitivity: float = 1.0, method: str = "classic") -> np.ndarray | float:
    """Noise standard deviation σ making the Gaussian mechanism (ε, δ)-DP for ℓ2 sensitivity Δ.

    ``method="classic"``: σ = Δ √(2 ln(1.25/δ)) / ε (Dwork & Roth 2014, Thm A.1), which is a
    theorem only for 0 < ε < 1: larger ε raises ``ValueError``. ``method="analytic"``: the
    smallest σ satisfying Balle & Wang (2018) Thm 8 (their Alg. 1), valid for every ε > 0 and
    never larger than the classic σ; it is checked with δ rounded up (:func:`gaussian_delta`), so
    it always meets δ and exceeds the exact optimum by round-off only (inf where no double σ
    suffices). Vectorised with broadcasting over ``epsilon``, ``delta``.
    """
    eps, dl, d = epsilon, delta, sensitivity
    if method == "classic":
        if np.any(eps >= 1):
            bad = eps[eps >= 1].flat[0]
            raise ValueError(
                f"epsilon must be in (0, 1) for method='classic', got {shown(bad)}: the classic "
                "bound (Dwork & Roth 2014, Thm A.1) is proved only for epsilon < 1; use "
                "method='analytic' (Balle & Wang 2018), valid for every epsilon > 0")
        with np.errstate(over="ignore"):      # inf for a subnormal ε; the mechanism refuses it
            return _scalar_or_array(d * np.sqrt(2.0 * np.log(1.25 / dl)) / eps)
    eps, dl = np.broadcast_arrays(eps, dl)
    log_target = np.log(dl)
    # Bracket in units of Δ: δ(σ) → 1 as σ → 0 and → 0 as σ → ∞; grow until it holds.
    lo = np.full(eps.shape, np.log(1e-3))
    hi = np.full(eps.shape, np.log(1e3))
    with np.errstate(over="ignore", under="ignore"):
        for _ in range(300):   # e^5 per step: 300 steps span far more than the doubles (e^±745)
            lo_bad = _log_delta(np.exp(lo) * d, eps, d) <= log_target   # lo must violate δ
            hi_bad = _log_delta(np.exp(hi) * d, eps, d) > log_target    # hi must satisfy δ
            if not (lo_bad.any() or hi_bad.any()):
                break
            lo = np.where(lo_bad, lo - 5.0, lo)
            hi = np.where(hi_bad, hi + 5.0, hi)
        else:  # pragma: no cover - σ = inf at the top of the range has δ = 0 ≤ every target
            raise RuntimeError("could not bracket sigma")
        for _ in range(120):                          # bisection in log σ to machine precision
            mid = 0.5 * (lo + hi)
            ok = _log_delta(np.exp(mid) * d, eps, d) <= log_target
            hi = np.where(ok, mid, hi)
            lo = np.where(ok, lo, mid)
        # the σ returned is the very double at which δ(σ) ≤ target was checked (inf only where
        # every representable σ is too small, e.g. ε = δ = 1e-300 with Δ = 1e200)
        return _scalar_or_array(np.exp(hi) * d)


@constrained(value=VALUE, epsilon=EPSILON, delta=DELTA, sensitivity=SENSITIVITY,
             method=Options(*_METHODS), rng=RNG)
def gaussian_mechanism(value: float | np.ndarray, epsilon: float, delta: float,
                       sensitivity: float = 1.0, *, method: str = "analytic",
                       rng: np.random.Generator | int) -> np.ndarray | float:
    """Release ``value`` + N(0, σ² I) with σ = :func:`gaussian_sigma` (ε, δ, Δ, ``method``).

    (ε, δ)-DP for a query whose ℓ2 sensitivity (whole vector, under your adjacency) is Δ.
    The default is the analytic calibration (Balle & Wang 2018), the least noise for (ε, δ).

    Floating-point caveat: the noise comes from numpy's float Gaussian sampler. Like the float
    Laplace sampler attacked by Mironov (2012), its set of possible outputs can depend on the
    input, so the guarantee holds for the real-valued mechanism, not bit for bit for this
    implementation: fine for teaching and simulation; for a deployed release on an integer
    query use :func:`dplib.mechanisms.discrete_gaussian_mechanism` (CKS 2020), which is exact.

    Refused, as for :func:`dplib.mechanisms.laplace_mechanism`: a σ that overflows or underflows
    and a value whose doubles are more than Δ/1024 apart.
    """
    x = value
    # one (ε, δ) for the whole release (declared scalars): gaussian_sigma is vectorised
    sigma = check_noise_scale("sigma", gaussian_sigma(epsilon, delta, sensitivity, method))
    check_resolution("value", x, sensitivity)
    out = x + rng.normal(0.0, sigma, size=x.shape)
    return _scalar_or_array(out)


@constrained(output=VALUE, sigma=SCALE, sensitivity=SENSITIVITY)
def gaussian_privacy_loss(output: float | np.ndarray, sigma: float,
                          sensitivity: float = 1.0) -> np.ndarray | float:
    """Privacy loss L(o) = ln p_D(o)/p_D'(o) = (Δ² − 2Δo)/(2σ²) for f(D) = 0, f(D') = Δ.

    Unbounded in o, which is why the Gaussian mechanism is (ε, δ)- and not ε-DP: δ(ε) is the
    mass where L exceeds ε, weighted as in Balle & Wang (2018), Thm 5. Vectorised over ``output``.
    """
    o, s, d = output, sigma, sensitivity
    return _scalar_or_array((d * d - 2.0 * d * o) / (2.0 * s * s))
