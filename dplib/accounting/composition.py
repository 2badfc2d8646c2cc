"""Composition theorems for (ε, δ)-DP mechanisms (adaptive composition of k mechanisms).

* Basic composition (Dwork & Roth 2014, "The Algorithmic Foundations of Differential Privacy",
  Thm 3.16): ε and δ add up.
* Advanced composition (Dwork, Rothblum & Vadhan 2010, "Boosting and Differential Privacy";
  Dwork & Roth 2014, Thm 3.20): k-fold composition of (ε, δ)-DP mechanisms is (ε', kδ + δ')-DP with
  ε' = ε·sqrt(2k·ln(1/δ')) + k·ε·(e^ε − 1).
* Optimal homogeneous composition (Kairouz, Oh & Viswanath 2015, "The Composition Theorem for
  Differential Privacy", ICML, Thm 3.3): the exact privacy region of the k-fold composition of
  (ε, δ)-DP mechanisms. It is attained by k copies of a randomized-response-like mechanism, so it is
  the best any theorem that knows only (ε, δ) and k can say — a reference for the two above.

These hold for any neighbouring relation as long as every mechanism is (ε, δ)-DP under it.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, logsumexp

from .._constraints import Options, RealArray, constrained
from .._validate import shown
from ._params import COUNT, DELTA, DELTA0, EPSILON, POSITIVE

__all__ = ["basic_composition", "advanced_composition", "group_privacy",
           "optimal_composition_delta",
           "optimal_composition_epsilon"]


#: ε of each mechanism: a number or a non-empty 1-D array of finite reals ≥ 0.
_EPSILONS = RealArray(0.0, math.inf, closed="left", max_ndim=1)
#: δ of each mechanism: a number or a non-empty 1-D array in [0, 1).
_DELTAS = RealArray(0.0, 1.0, closed="left", max_ndim=1, family="prob_array")
#: The parameters of an (ε, δ)-DP mechanism run k times.
_MECHANISM = dict(epsilon=EPSILON, delta=DELTA0, k=COUNT)


@constrained(epsilons=_EPSILONS, deltas=_DELTAS, k=COUNT)
def basic_composition(epsilons: object, deltas: object = 0.0, k: int = 1) -> tuple[float, float]:
    """(Σ ε_i, Σ δ_i) for mechanisms that are (ε_i, δ_i)-DP, each run ``k`` times.

    Dwork & Roth 2014, Thm 3.16 (holds under adaptive composition, Dwork & Roth 2014 Thm 3.16 and
    §3.5.2). ``epsilons`` and ``deltas`` are scalars or 1-D arrays (broadcast together); the result
    is (k·Σε, k·Σδ). The δ total is not capped: a total ≥ 1 means the bound says nothing.
    """
    try:
        eps, dlt = np.broadcast_arrays(epsilons, deltas)
    except ValueError:
        raise ValueError(f"epsilons and deltas must have the same length (or one be a scalar), "
                         f"got {epsilons.size} and {deltas.size}") from None
    return float(k * eps.sum()), float(k * dlt.sum())


@constrained(**_MECHANISM, delta_slack=DELTA, form=Options("drv", "kov"))
def advanced_composition(epsilon: float, delta: float, k: int, delta_slack: float, *,
                         form: str = "drv") -> tuple[float, float]:
    """(ε', kδ + δ') for the k-fold adaptive composition of an (ε, δ)-DP mechanism.

    ε' = ε·sqrt(2k·ln(1/δ')) + k·ε·(e^ε − 1)   (Dwork, Rothblum & Vadhan 2010, Thm III.3;
    Dwork & Roth 2014, Thm 3.20), with δ' = ``delta_slack`` ∈ (0, 1).

    ``form="kov"`` gives the sharper closed form ε' = ε·sqrt(2k·ln(1/δ')) + k·ε·(e^ε − 1)/(e^ε + 1)
    (Kairouz, Oh & Viswanath 2015, Thm 3.4, third expression), the bound Razaviyayn's lecture
    notes quote (``RazaviyaynLecture11``, with a misprinted denominator e^{ε+1}). Both are upper bounds on the exact optimum,
    :func:`optimal_composition_epsilon`; the δ returned is kδ + δ' in both cases (for KOV,
    1 − (1 − δ)^k (1 − δ') ≤ kδ + δ'). Where ε' exceeds the largest double (``form="drv"``,
    ε ≳ 700) it is returned as inf, the bound rounded up.
    """
    eps, dlt, slack = epsilon, delta, delta_slack          # declared (checked on the call)
    if form == "kov":
        excess = k * eps * math.tanh(eps / 2)           # (e^ε − 1)/(e^ε + 1) = tanh(ε/2)
    elif eps < 700.0:
        excess = k * eps * math.expm1(eps)
    else:
        # e^ε overflows a float from ε ≈ 709.8 on, but every ε ≥ 0 is in the documented range:
        # k·ε·(e^ε − 1) is taken in log space, and where it exceeds the largest double the
        # bound is above every float (and vacuous), so inf — rounding up — is its true value.
        excess = _exp_or_inf(math.log(k) + math.log(eps) + eps + math.log1p(-math.exp(-eps)))
    eps_total = eps * math.sqrt(2 * k * math.log(1 / slack)) + excess
    return eps_total, k * dlt + slack


def _exp_or_inf(x: float) -> float:
    """e^x, or inf where it exceeds the largest double (a bound that large is rounded up)."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _log_expm1(x: float) -> float:
    """log(e^x − 1) for x > 0 without overflow (x + log(1 − e^{−x}) for large x; inf at inf)."""
    return math.log(math.expm1(x)) if x < 700.0 else x + math.log1p(-math.exp(-x))


def _rr_log_weights(epsilon: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The privacy loss of k-fold ε-randomized response: value (k − 2ℓ)ε with probability
    C(k, ℓ) p^{k−ℓ}(1−p)^ℓ, p = e^ε/(1+e^ε) (Kairouz et al. 2015, proof of Thm 3.3). Log space."""
    ell = np.arange(k + 1, dtype=float)
    log_p = -np.logaddexp(0.0, -epsilon)     # log(e^ε/(1+e^ε))
    log_1mp = -np.logaddexp(0.0, epsilon)    # log(1/(1+e^ε))
    log_w = gammaln(k + 1) - gammaln(ell + 1) - gammaln(k - ell + 1) + (k - ell) * log_p + ell * log_1mp
    return (k - 2 * ell) * epsilon, log_w


@constrained(**_MECHANISM, target_epsilon=EPSILON)
def optimal_composition_delta(epsilon: float, delta: float, k: int, target_epsilon: float) -> float:
    """Smallest δ_total such that every k-fold composition of (ε, δ)-DP mechanisms is
    (target_epsilon, δ_total)-DP — exact (Kairouz, Oh & Viswanath 2015, Thm 3.3).

    δ_total = 1 − (1−δ)^k + (1−δ)^k · Σ_ℓ C(k,ℓ) p^{k−ℓ}(1−p)^ℓ (1 − e^{ε_t − (k−2ℓ)ε})_+,
    p = e^ε/(1+e^ε). At ε_t = (k − 2i)ε this is KOV's 1 − (1−δ)^k (1 − δ_i); between those points it
    is the hockey-stick divergence of the same extremal pair, hence still optimal.
    """
    eps, dlt, eps_t = epsilon, delta, target_epsilon        # declared
    loss, log_w = _rr_log_weights(eps, k)
    pos = loss > eps_t
    if pos.any():
        # Σ w (1 − e^{ε_t − L}) over L > ε_t, every factor in (0, 1]: no cancellation.
        log_terms = log_w[pos] + np.log(-np.expm1(eps_t - loss[pos]))
        rr_delta = float(np.exp(logsumexp(log_terms)))
    else:
        rr_delta = 0.0
    keep = math.exp(k * math.log1p(-dlt))          # (1 − δ)^k
    return min(1.0, -math.expm1(k * math.log1p(-dlt)) + keep * rr_delta)


@constrained(**_MECHANISM, target_delta=DELTA)
def optimal_composition_epsilon(epsilon: float, delta: float, k: int, target_delta: float) -> float:
    """Smallest ε_total such that every k-fold composition of (ε, δ)-DP mechanisms is
    (ε_total, target_delta)-DP (Kairouz, Oh & Viswanath 2015, Thm 3.3), by exact inversion of
    :func:`optimal_composition_delta`, which is continuous and decreasing in ε_total.

    Raises ``ValueError`` if target_delta ≤ 1 − (1−δ)^k (no finite ε_total reaches it).
    """
    eps, dlt, target = epsilon, delta, target_delta         # declared
    floor = -math.expm1(k * math.log1p(-dlt))
    if target <= floor:
        raise ValueError(f"target_delta must be in ({floor:g}, 1) = (1 − (1−δ)^k, 1) for δ={dlt:g}, "
                         f"k={k}, got {shown(target_delta)}")
    if optimal_composition_delta(eps, dlt, k, 0.0) <= target:
        return 0.0
    # δ(ε_t) is piecewise of the form a − b·e^{ε_t} between consecutive loss values (k − 2ℓ)ε:
    # find the piece by bisection over the breakpoints, then solve exactly.
    loss, log_w = _rr_log_weights(eps, k)
    breaks = np.unique(np.concatenate([[0.0], loss[loss > 0]]))
    lo, hi = 0, breaks.size - 1
    if optimal_composition_delta(eps, dlt, k, float(breaks[hi])) > target:
        raise RuntimeError("unreachable: δ at the largest loss is the floor")  # pragma: no cover
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if optimal_composition_delta(eps, dlt, k, float(breaks[mid])) > target:
            lo = mid
        else:
            hi = mid
    above = loss > breaks[lo]
    keep = math.exp(k * math.log1p(-dlt))
    a = keep * float(np.exp(logsumexp(log_w[above])))
    log_b = logsumexp(log_w[above] - loss[above])
    # floor + a − e^{ε_t}·keep·e^{log_b} = target  ⇒  ε_t = log((floor + a − target)/keep) − log_b
    return float(math.log((floor + a - target) / keep) - log_b)


@constrained(epsilon=POSITIVE, delta=DELTA0, k=COUNT)
def group_privacy(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """(kε, δ·(e^{kε} − 1)/(e^ε − 1)): what an (ε, δ)-DP mechanism guarantees for data sets that
    differ in k records (the group-privacy lemma of ``RazaviyaynLecture11``; Dwork & Roth 2014,
    Thm 2.2 for δ = 0).

    Walk from D to D' through k − 1 intermediate data sets: each step multiplies by e^ε and adds δ,
    so the δ terms form the geometric sum δ(1 + e^ε + … + e^{(k−1)ε}). Computed in log space where
    e^{kε} overflows; a δ total above the largest double is returned as inf (rounded up).
    """
    eps, dlt = epsilon, delta                                # declared
    if k * eps < 700.0:
        return k * eps, dlt * math.expm1(k * eps) / math.expm1(eps)
    # Every ε > 0 is in the documented range, but e^{kε} overflows from kε ≈ 709.8 (ε = 710,
    # k = 2 raised OverflowError) although δ(e^{kε} − 1)/(e^ε − 1) ≈ δ·e^{(k−1)ε} may be a
    # double: there it is taken in log space. A total above the largest double is rounded up to
    # inf (it is ≥ 1 long before: the bound is then vacuous, but still true).
    if dlt == 0.0:
        return k * eps, 0.0
    return k * eps, _exp_or_inf(math.log(dlt) + _log_expm1(k * eps) - _log_expm1(eps))
