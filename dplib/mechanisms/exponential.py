"""The exponential mechanism and report-noisy-max, for choosing one of k candidates privately.

Exponential mechanism (McSherry & Talwar 2007, Thm 6; Dwork & Roth 2014, Def. 3.4 and Thm 3.10):
given utilities u(D, r) whose sensitivity Δu = max over neighbouring D, D' and all r of
|u(D, r) − u(D', r)|, choose r with probability ∝ exp(ε u(D, r) / (2Δu)). It is ε-DP. The
weights are computed as ε(u − max u)/(2Δu) (the law only depends on differences) and
normalised with log-sum-exp, so utilities of any finite magnitude and any ε/Δu, however large
or small, give the exact law or its limit (arg-max, uniform) rather than NaN.

Report-noisy-max adds independent noise to every score and reports the index of the largest:

* ``noise="gumbel"``: Gumbel(0, 2Δu/ε) noise. By the Gumbel-max trick the argmax is distributed
  *exactly* as the exponential mechanism (Durfee & Rogers 2019, Lemma 4.2), hence ε-DP.
* ``noise="laplace"``: Laplace(0, 2Δu/ε) noise is ε-DP for any scores of sensitivity Δu; when
  the scores are *monotone* counts (adding one person can only raise every count, or only lower
  every count) Laplace(0, Δu/ε) already suffices (Dwork & Roth 2014, Claim 3.9):
  pass ``monotone=True`` for that scale.

Report-noisy-max likewise takes the arg-max of (s − max s)/scale + Z for standard noise Z —
the same arg-max in exact arithmetic — so noise is never absorbed by the rounding of huge scores
(which broke ties toward the first index) and a noise scale that overflows gives the uniform
choice, its limit.

Everything is vectorised over leading axes: ``utilities`` of shape (..., k) gives one choice per
row of the last axis.
"""
from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from .._constraints import Custom, Flag, Options, constrained
from .._validate import check_finite_array
from ._params import EPSILON, RNG, SENSITIVITY

__all__ = ["exponential_mechanism_probabilities", "exponential_mechanism", "report_noisy_max"]


def _scores(name: str, utilities: object) -> np.ndarray:
    u = check_finite_array(name, utilities)
    if u.ndim == 0 or u.shape[-1] < 1:
        raise ValueError(f"{name} must have at least one candidate along its last axis, "
                         f"got shape {u.shape}")
    return u


#: Scores of the candidates: finite reals, at least one candidate along the last axis.
_SCORES = Custom(_scores, "finite real scores, one per candidate along the last axis",
                 [[], [np.nan], [1.0, np.inf], "abc", None, 1.0, np.zeros((2, 0))],
                 family="array")


def _log_weights(u: np.ndarray, epsilon: float, sensitivity: float) -> np.ndarray:
    """ε(u − max u)/(2Δu) along the last axis, with no overflow and no NaN.

    Halving before subtracting keeps u/2 − max(u)/2 finite for every finite u; ε/Δu may
    overflow to inf (the non-maximal entries then get −inf: the arg-max law) or underflow to 0
    (all weights 0: the uniform law), and the maxima keep weight 0 in both cases.
    """
    half_gap = u / 2 - u.max(axis=-1, keepdims=True) / 2
    with np.errstate(over="ignore", invalid="ignore"):
        a = half_gap * (epsilon / sensitivity)
    return np.where(half_gap == 0, 0.0, a)


@constrained(utilities=_SCORES, epsilon=EPSILON, sensitivity=SENSITIVITY)
def exponential_mechanism_probabilities(utilities: object, epsilon: float,
                                        sensitivity: float = 1.0) -> np.ndarray:
    """P(r) = exp(ε u_r/(2Δu)) / Σ_s exp(ε u_s/(2Δu)) along the last axis (McSherry & Talwar 2007).

    Computed as exp(a − logsumexp(a)) with a = ε(u − max u)/(2Δu), so neither huge utilities
    nor an extreme ε/Δu overflow (see :func:`_log_weights`).
    """
    a = _log_weights(utilities, epsilon, sensitivity)
    return np.exp(a - logsumexp(a, axis=-1, keepdims=True))


@constrained(utilities=_SCORES, epsilon=EPSILON, sensitivity=SENSITIVITY, rng=RNG)
def exponential_mechanism(utilities: object, epsilon: float, sensitivity: float = 1.0, *,
                          rng: np.random.Generator | int) -> np.ndarray | int:
    """Index chosen by the ε-DP exponential mechanism along the last axis of ``utilities``.

    Sampled by inverting the cumulative probabilities of
    :func:`exponential_mechanism_probabilities` with one uniform draw per row.

    Floating-point caveat: the probabilities and the uniform draw are IEEE doubles, so the
    output law is the stated one only up to rounding (the concern of Mironov 2012 for float
    noise; for the exponential mechanism see Ilvento 2020, "Implementing the exponential
    mechanism with base-2 differential privacy"). The output is one of k indices, so rounding
    moves probabilities by ~1e-16 and cannot reveal the input the way a float Laplace output
    can; still, it is a teaching implementation, not an exact sampler.
    """
    p = exponential_mechanism_probabilities(utilities, epsilon, sensitivity)
    cdf = np.cumsum(p, axis=-1)
    u = rng.random(p.shape[:-1] + (1,)) * cdf[..., -1:]
    idx = np.minimum((cdf <= u).sum(axis=-1), p.shape[-1] - 1)
    return int(idx) if idx.ndim == 0 else idx


@constrained(scores=_SCORES, epsilon=EPSILON, sensitivity=SENSITIVITY,
             noise=Options("gumbel", "laplace"), monotone=Flag(), rng=RNG)
def report_noisy_max(scores: object, epsilon: float, sensitivity: float = 1.0, *,
                     noise: str = "gumbel", monotone: bool = False,
                     rng: np.random.Generator | int) -> np.ndarray | int:
    """argmax of scores + noise along the last axis; ε-DP (see the module note for each case).

    ``noise="gumbel"``: scale 2Δu/ε, the exponential mechanism in law (Durfee & Rogers 2019).
    ``noise="laplace"``: scale 2Δu/ε, or Δu/ε with ``monotone=True`` for monotone counts
    (Dwork & Roth 2014, Claim 3.9). ``monotone`` is refused with Gumbel noise.

    Computed as argmax((s − max s)/scale + Z) with Z standard Gumbel or Laplace noise, the same
    arg-max as s + scale·Z, so huge scores do not absorb the noise and an overflowing scale
    gives the uniform choice (its limit) instead of NaN noise.

    Floating-point caveat: the noise is drawn by numpy's float samplers (the setting of
    Mironov 2012). Only the argmax is released, which hides the low-order bits that make a
    float Laplace *value* leak, but the law is still exact only up to rounding: a teaching
    implementation, not a certified sampler.
    """
    s, eps, du, gen = scores, epsilon, sensitivity, rng
    if noise == "gumbel":
        if monotone:
            raise ValueError("monotone=True applies only to noise='laplace' (Dwork & Roth 2014, "
                             "Claim 3.9); Gumbel noise always uses scale 2*sensitivity/epsilon")
        z = gen.gumbel(0.0, 1.0, size=s.shape)
    else:
        z = gen.laplace(0.0, 1.0, size=s.shape)
    with np.errstate(over="ignore"):
        scale = (2.0 if noise == "gumbel" or not monotone else 1.0) * du / eps   # may be inf
    # argmax(s + scale·Z) = argmax(gap/scale + Z/2) with gap = (s − max s)/2 ≤ 0, finite
    gap = s / 2 - s.max(axis=-1, keepdims=True) / 2
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        t = np.where(gap == 0, 0.0, gap / scale)
    idx = np.argmax(t + z / 2, axis=-1)
    return int(idx) if idx.ndim == 0 else idx
