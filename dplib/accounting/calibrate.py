"""Noise calibration: the smallest noise multiplier σ that meets a target (ε, δ).

ε(σ) of the Poisson-subsampled Gaussian is decreasing in σ (more noise is a post-processing of less
noise: N(0, σ'^2) = N(0, σ²) + N(0, σ'^2 − σ²)), so σ is found by bracketing and Brent's method in log σ.
The σ returned always satisfies ε(σ) ≤ target_epsilon under the chosen accountant, and lies within
``rtol`` (relative) of the exact root.
"""
from __future__ import annotations

import math
from typing import Callable

from scipy.optimize import brentq

from .._validate import check_int, check_positive, check_probability
from ._base import check_delta
from .pld import PLDAccountant
from .rdp import RDPAccountant

__all__ = ["calibrate_noise"]

_SIGMA_MIN, _SIGMA_MAX = 1e-2, 1e4


def _epsilon(sigma: float, delta: float, q: float, steps: int, accountant: str,
             interval: float) -> float:
    acc = (RDPAccountant() if accountant == "rdp"
           else PLDAccountant(value_discretization_interval=interval))
    return acc.step(noise_multiplier=sigma, sample_rate=q, num_steps=steps).get_epsilon(delta)


def _safe_log_root(excess: Callable[[float], float], lo: float, hi: float, *,
                   rtol: float) -> float:
    """The smallest s in [lo, hi] with excess(s) ≤ 0, to relative precision ``rtol``, returned on
    the safe side: excess must be decreasing with excess(lo) > 0 ≥ excess(hi).

    Brent's method in u = log s (bracketed, so it always converges), then a step to the safe side:
    |u* − u| ≤ xtol, so s = e^{u + xtol} ≥ s* and excess(s) ≤ 0 — checked, and nudged if round-off
    disagrees. Every noise calibration of dplib ends here, so none can return noise whose ε is
    above its target by the solver's tolerance."""
    xtol = math.log1p(rtol) / 2.5
    ulo, uhi = math.log(lo), math.log(hi)
    u = brentq(lambda v: excess(lo if v == ulo else hi if v == uhi else math.exp(v)),
               ulo, uhi, xtol=xtol, rtol=1e-15)
    s = math.exp(u + xtol)
    while excess(s) > 0:    # pragma: no cover - only if excess is not monotone at round-off level
        s *= math.exp(xtol)
    return s


def calibrate_noise(target_epsilon: float, delta: float, sample_rate: float, num_steps: int,
                    accountant: str = "rdp", *, rtol: float = 1e-4,
                    value_discretization_interval: float = 1e-3) -> float:
    """Smallest noise multiplier σ (to relative tolerance ``rtol``) such that ``num_steps`` steps of
    the Poisson-subsampled Gaussian with rate ``sample_rate`` are (target_epsilon, δ)-DP.

    Conventions: Poisson subsampling, add/remove adjacency, ℓ2 sensitivity 1 (σ is the noise
    standard deviation divided by the clipping norm). ``accountant`` is "rdp"
    (:class:`~dplib.accounting.RDPAccountant`) or "pld" (:class:`~dplib.accounting.PLDAccountant`,
    which gives a smaller σ for the same guarantee). The returned σ is rounded up within the
    tolerance, so ε(σ) ≤ target_epsilon holds for it (checked before returning).

    For "pld" the bracket starts from a 10× coarser PLD's answer, itself bracketed from the RDP answer
    (PLD's ε is below RDP's up to its discretisation error); each bracket is widened until it
    really brackets, so the starting guesses affect only the speed.
    """
    eps_t = check_positive("target_epsilon", target_epsilon)
    d = check_delta(delta)
    q = check_probability("sample_rate", sample_rate, low_open=True)
    steps = check_int("num_steps", num_steps)
    if accountant not in ("rdp", "pld"):
        raise ValueError(f"accountant must be 'rdp' or 'pld', got {accountant!r}")
    tol = check_probability("rtol", rtol, low_open=True, high_open=True)
    h = check_positive("value_discretization_interval", value_discretization_interval)

    seen: dict[float, float] = {}   # brentq re-evaluates the bracket ends: remember them

    def f(s: float) -> float:
        if s not in seen:
            seen[s] = _epsilon(s, d, q, steps, accountant, h) - eps_t
        return seen[s]

    if accountant == "pld" and h < 5e-3:
        # A 10× coarser (cheaper) PLD gives a σ within a few per cent: start the bracket there.
        s_coarse = calibrate_noise(eps_t, d, q, steps, "pld", rtol=1e-3,
                                   value_discretization_interval=10 * h)
        lo, hi = s_coarse * 0.97, s_coarse * 1.002
    elif accountant == "pld":
        s_rdp = calibrate_noise(eps_t, d, q, steps, "rdp", rtol=1e-3)
        lo, hi = s_rdp * 0.7, s_rdp * 1.01
    else:
        lo, hi = 0.5, 2.0
    # Bracket: f(lo) > 0 ≥ f(hi), widening geometrically within [σ_min, σ_max].
    while f(hi) > 0:
        if hi >= _SIGMA_MAX:
            raise ValueError(f"target_epsilon={eps_t:g} needs noise_multiplier > {_SIGMA_MAX:g} for "
                             f"delta={d:g}, sample_rate={q:g}, num_steps={steps}; "
                             f"allowed target_epsilon is the ε reached at that σ or more")
        lo, hi = hi, min(hi * 4.0, _SIGMA_MAX)
    while f(lo) <= 0:
        if lo <= _SIGMA_MIN:
            return lo   # even σ_min meets the target (e.g. a huge target ε)
        lo, hi = max(lo / 4.0, _SIGMA_MIN), lo
    return _safe_log_root(f, lo, hi, rtol=tol)
