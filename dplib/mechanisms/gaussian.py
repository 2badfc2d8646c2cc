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
  (``scipy.special.log_ndtr``), so tails as small as δ = 1e-12 and ε = 20 stay accurate.

Privacy loss (Balle & Wang 2018, Lemma 3; Dwork & Roth 2014, proof of Thm A.1): with f(D) = 0 and
f(D') = Δ (1-d after rotating), L(o) = ln p_D(o)/p_D'(o) = (Δ² − 2Δo)/(2σ²); for o ~ N(0, σ²),
L ~ N(η, 2η) with η = Δ²/(2σ²).
"""
from __future__ import annotations

import numpy as np
from scipy.special import log_ndtr

from .._validate import (as_generator, check_choice, check_finite_array, check_positive,
                         check_real, check_real_array)
from .laplace import check_noise_scale, check_resolution

__all__ = ["gaussian_sigma", "gaussian_delta", "gaussian_epsilon", "gaussian_mechanism",
           "gaussian_privacy_loss"]

_METHODS = ("classic", "analytic")


def _scalar_or_array(x: np.ndarray) -> np.ndarray | float:
    return float(x) if np.ndim(x) == 0 else x


def _log_delta(sigma: np.ndarray, epsilon: np.ndarray, sensitivity: float) -> np.ndarray:
    """log of Φ(a) − e^ε Φ(b), a = Δ/(2σ) − εσ/Δ, b = −Δ/(2σ) − εσ/Δ (Balle & Wang 2018, Thm 8).

    Written as log Φ(a) + log1p(−exp(ε + log Φ(b) − log Φ(a))); −inf where the difference is ≤ 0.
    """
    r = sensitivity / sigma
    s = epsilon / r                      # εσ/Δ
    la = log_ndtr(r / 2 - s)
    lb = log_ndtr(-r / 2 - s)
    diff = epsilon + lb - la             # ≤ 0 in exact arithmetic
    with np.errstate(divide="ignore", invalid="ignore"):
        out = la + np.log1p(-np.exp(np.minimum(diff, 0.0)))
    return np.where(diff < 0, out, -np.inf)


def gaussian_delta(sigma: float | np.ndarray, epsilon: float | np.ndarray,
                   sensitivity: float = 1.0) -> np.ndarray | float:
    """Exact δ(ε) of the Gaussian mechanism N(0, σ²) on ℓ2 sensitivity Δ (Balle & Wang 2018, Thm 8).

    δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ): the smallest δ for which the mechanism is
    (ε, δ)-DP. Vectorised with broadcasting over ``sigma`` and ``epsilon`` (ε ≥ 0 allowed).
    """
    sig = check_real_array("sigma", sigma, low=0.0)
    eps = check_real_array("epsilon", epsilon, low=0.0, high=np.inf, low_open=False)
    d = check_positive("sensitivity", sensitivity)
    return _scalar_or_array(np.exp(_log_delta(sig, eps, d)))


def gaussian_epsilon(sigma: float | np.ndarray, delta: float | np.ndarray,
                     sensitivity: float = 1.0) -> np.ndarray | float:
    """Smallest ε ≥ 0 with δ(ε) ≤ ``delta`` for N(0, σ²) noise (inverse of :func:`gaussian_delta`).

    δ(ε) is decreasing in ε (Balle & Wang 2018, Thm 8), so a vectorised bisection on ε finds it;
    returns 0 when the mechanism is already (0, δ)-DP.
    """
    sig = check_real_array("sigma", sigma, low=0.0)
    dl = check_real_array("delta", delta, low=0.0, high=1.0)
    d = check_positive("sensitivity", sensitivity)
    sig, log_target = np.broadcast_arrays(sig, np.log(dl))
    lo = np.zeros(sig.shape)
    hi = np.ones(sig.shape)
    for _ in range(200):                       # grow the bracket until δ(hi) ≤ δ
        big = _log_delta(sig, hi, d) > log_target
        if not big.any():
            break
        hi = np.where(big, hi * 2, hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        too_small = _log_delta(sig, mid, d) > log_target
        lo = np.where(too_small, mid, lo)
        hi = np.where(too_small, hi, mid)
    eps = np.where(_log_delta(sig, np.zeros(sig.shape), d) <= log_target, 0.0, hi)
    return _scalar_or_array(eps)


def gaussian_sigma(epsilon: float | np.ndarray, delta: float | np.ndarray,
                   sensitivity: float = 1.0, method: str = "classic") -> np.ndarray | float:
    """Noise standard deviation σ making the Gaussian mechanism (ε, δ)-DP for ℓ2 sensitivity Δ.

    ``method="classic"``: σ = Δ √(2 ln(1.25/δ)) / ε (Dwork & Roth 2014, Thm A.1), which is a
    theorem only for 0 < ε < 1: larger ε raises ``ValueError``. ``method="analytic"``: the
    smallest σ satisfying Balle & Wang (2018) Thm 8 (their Alg. 1), valid for every ε > 0 and
    never larger than the classic σ. Vectorised with broadcasting over ``epsilon``, ``delta``.
    """
    method = check_choice("method", method, _METHODS)
    eps = check_real_array("epsilon", epsilon, low=0.0)
    dl = check_real_array("delta", delta, low=0.0, high=1.0)
    d = check_positive("sensitivity", sensitivity)
    if method == "classic":
        if np.any(eps >= 1):
            bad = eps[eps >= 1].flat[0]
            raise ValueError(
                f"epsilon must be in (0, 1) for method='classic', got {bad!r}: the classic "
                "bound (Dwork & Roth 2014, Thm A.1) is proved only for epsilon < 1; use "
                "method='analytic' (Balle & Wang 2018), valid for every epsilon > 0")
        with np.errstate(over="ignore"):      # inf for a subnormal ε; the mechanism refuses it
            return _scalar_or_array(d * np.sqrt(2.0 * np.log(1.25 / dl)) / eps)
    eps, dl = np.broadcast_arrays(eps, dl)
    log_target = np.log(dl)
    # Bracket in units of Δ: δ(σ) → 1 as σ → 0 and → 0 as σ → ∞; grow until it holds.
    lo = np.full(eps.shape, np.log(1e-3))
    hi = np.full(eps.shape, np.log(1e3))
    for _ in range(100):
        lo_bad = _log_delta(np.exp(lo) * d, eps, d) <= log_target   # lo must violate δ
        hi_bad = _log_delta(np.exp(hi) * d, eps, d) > log_target    # hi must satisfy δ
        if not (lo_bad.any() or hi_bad.any()):
            break
        lo = np.where(lo_bad, lo - 5.0, lo)
        hi = np.where(hi_bad, hi + 5.0, hi)
    else:  # pragma: no cover - the bracket grows by e^5 per step; 100 steps cover all doubles
        raise RuntimeError("could not bracket sigma")
    for _ in range(120):                          # bisection in log σ to machine precision
        mid = 0.5 * (lo + hi)
        ok = _log_delta(np.exp(mid) * d, eps, d) <= log_target
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    return _scalar_or_array(np.exp(hi) * d)


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
    x = check_finite_array("value", value)
    # one (ε, δ) for the whole release: gaussian_sigma is vectorised, this function is not
    eps = check_positive("epsilon", epsilon)
    dl = check_real("delta", delta, low=0.0, high=1.0)
    sigma = check_noise_scale("sigma", gaussian_sigma(eps, dl, sensitivity, method))
    check_resolution("value", x, check_positive("sensitivity", sensitivity))
    out = x + as_generator(rng).normal(0.0, sigma, size=x.shape)
    return _scalar_or_array(out)


def gaussian_privacy_loss(output: float | np.ndarray, sigma: float,
                          sensitivity: float = 1.0) -> np.ndarray | float:
    """Privacy loss L(o) = ln p_D(o)/p_D'(o) = (Δ² − 2Δo)/(2σ²) for f(D) = 0, f(D') = Δ.

    Unbounded in o, which is why the Gaussian mechanism is (ε, δ)- and not ε-DP: δ(ε) is the
    mass where L exceeds ε, weighted as in Balle & Wang (2018), Thm 5. Vectorised over ``output``.
    """
    o = check_finite_array("output", output)
    s = check_positive("sigma", sigma)
    d = check_positive("sensitivity", sensitivity)
    return _scalar_or_array((d * d - 2.0 * d * o) / (2.0 * s * s))
