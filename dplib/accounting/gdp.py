"""Gaussian differential privacy (f-DP) and its central-limit approximation for DP-SGD.

* A mechanism is μ-GDP when distinguishing D from D' is no easier than telling N(0, 1) from
  N(μ, 1) (Dong, Roth & Su 2022, Sec. 2). The Gaussian mechanism with ℓ2 sensitivity Δ and noise
  σ is exactly (Δ/σ)-GDP, k-fold composition of μ_i-GDP is sqrt(Σ μ_i²)-GDP (their Sec. 3), and
  μ-GDP converts to (ε, δ) exactly as a Gaussian mechanism with σ/Δ = 1/μ (their Sec. 2; the
  same curve as Balle & Wang 2018, Thm 8).
* **Approximation only**: T steps of the Poisson-subsampled Gaussian (rate q, noise multiplier σ)
  are *approximately* μ-GDP with μ = q·sqrt(T·(e^{1/σ²} − 1)) — the central limit theorem of
  Dong, Roth & Su 2022 (Sec. 3 and 5) applied to DP-SGD. This limit is not an upper bound and can
  under-report ε.
"""
from __future__ import annotations

import math

from .._constraints import constrained
from ..mechanisms.gaussian import gaussian_epsilon
from ._params import COUNT, DELTA, NOISE_MULTIPLIER, POSITIVE, SAMPLE_RATE

__all__ = ["gdp_epsilon", "clt_mu"]


@constrained(mu=POSITIVE, delta=DELTA)
def gdp_epsilon(mu: float, delta: float) -> float:
    """ε such that μ-GDP implies (ε, δ)-DP: the Gaussian mechanism's ε at σ/Δ = 1/μ (exact)."""
    return float(gaussian_epsilon(1.0 / mu, delta))


@constrained(sample_rate=SAMPLE_RATE, noise_multiplier=NOISE_MULTIPLIER, num_steps=COUNT)
def clt_mu(sample_rate: float, noise_multiplier: float, num_steps: int) -> float:
    """CLT approximation μ = q·sqrt(T·(e^{1/σ²} − 1)) for Poisson-subsampled Gaussian steps.

    An approximation (Dong, Roth & Su 2022, Sec. 5), not a bound: use it for intuition and
    compare with :class:`~dplib.accounting.PLDAccountant`, never to report a guarantee.
    Computed in log space where e^{1/σ²} overflows a float (σ ≲ 0.038); inf where μ itself does.
    """
    q, s, t = sample_rate, noise_multiplier, num_steps      # declared (checked on the call)
    x = 1.0 / s**2
    if x < 700.0:
        return q * math.sqrt(t * math.expm1(x))
    # σ ≲ 0.038: e^{1/σ²} overflows a float; μ in log space, inf only if μ itself does.
    log_mu = math.log(q) + 0.5 * (math.log(t) + x + math.log1p(-math.exp(-x)))
    return math.exp(log_mu) if log_mu < 709.0 else math.inf
