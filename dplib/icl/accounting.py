"""Privacy accounting for DP in-context learning, on top of :mod:`dplib.accounting`.

Everything private in this package is one of two mechanisms, repeated over queries (or tokens):

1. **A Gaussian mechanism on a sum of per-subset answers.** The private exemplars are split into
   disjoint subsets; each subset's prompt gives one answer (a one-hot vote, a probability vector
   over tokens, a unit-norm embedding); the answers are summed and Gaussian noise is added.
   Because every exemplar is in at most one subset, changing one exemplar changes at most *one*
   answer, so the ℓ2 sensitivity Δ of the sum is the largest distance between two answers:

   * one-hot votes, probability vectors: ‖e_a − e_b‖₂ ≤ √2  (:data:`VOTE_SENSITIVITY`);
   * unit-norm embeddings: ‖u − v‖₂ ≤ 2  (:data:`EMBEDDING_SENSITIVITY`).

   With noise N(0, s²) per coordinate this is the Gaussian mechanism with noise multiplier
   σ = s/Δ. When each query first keeps every exemplar independently with probability q
   (Poisson subsampling) and assigns the kept ones to subsets independently and uniformly, one
   query is exactly the Poisson-subsampled Gaussian mechanism DP-SGD uses, under add/remove
   adjacency of one exemplar, and Q queries compose as Q steps: the accountants of
   :mod:`dplib.accounting` apply unchanged (:class:`~dplib.accounting.RDPAccountant`,
   :class:`~dplib.accounting.PLDAccountant`, :func:`~dplib.accounting.calibrate_noise`).
   (The change of one answer may depend on the other exemplars of its subset; the pair of output
   distributions is then a mixture, over the rest of the sample, of pairs each no worse than the
   one-dimensional worst case, and joint convexity of the divergences the accountants bound keeps
   the worst case — the argument behind DP-SGD's accounting too.) With q = 1 and one fixed
   partition reused by every query, the same numbers hold under replace-one adjacency (n public):
   the Gaussian mechanism is symmetric, so RDPAccountant(q = 1) is exact for both relations.

2. **A pure ε-DP selection per query** (report-noisy-max with Gumbel noise = the exponential
   mechanism, the joint exponential mechanism of KSA, propose-test-release). Q of them compose by
   :func:`~dplib.accounting.optimal_composition_epsilon` (Kairouz, Oh & Viswanath 2015); the
   per-query ε₀ for a total budget is found by :func:`per_query_epsilon`.

Nothing here re-derives a bound: this module only translates between "(ε, δ) over Q queries" and
the noise the mechanisms need.
"""
from __future__ import annotations

import functools
import math

from scipy.optimize import brentq

from .._constraints import constrained
from .._validate import shown
from ..accounting import calibrate_noise, dpsgd_event, make_accountant, optimal_composition_epsilon
from ..accounting._params import DELTA0
from ._params import (ACCOUNTANT, COUNT, DELTA, EPSILON, EPSILON_OR_INF, POSITIVE, SAMPLE_RATE,
                      SENSITIVITY)

__all__ = ["VOTE_SENSITIVITY", "EMBEDDING_SENSITIVITY", "gaussian_noise_std",
           "gaussian_epsilon_spent", "vote_noise_std", "per_query_epsilon"]

#: ℓ2 distance between two one-hot votes (or two probability vectors): the sensitivity of a
#: vote histogram when one exemplar changes one subset's vote.
VOTE_SENSITIVITY = math.sqrt(2.0)
#: ℓ2 distance bound between two unit-norm embeddings.
EMBEDDING_SENSITIVITY = 2.0


@constrained(epsilon=EPSILON_OR_INF, delta=DELTA, num_releases=COUNT, sample_rate=SAMPLE_RATE,
             sensitivity=SENSITIVITY, accountant=ACCOUNTANT)
def gaussian_noise_std(epsilon: float, delta: float, num_releases: int,
                       sample_rate: float = 1.0, sensitivity: float = VOTE_SENSITIVITY, *,
                       accountant: str = "rdp") -> float:
    """Standard deviation s of the Gaussian noise per coordinate that makes ``num_releases``
    Poisson-subsampled (rate q) Gaussian releases of ℓ2 sensitivity Δ (ε, δ)-DP in total.

    s = Δ · σ with σ = :func:`dplib.accounting.calibrate_noise` (ε, δ, q, Q, accountant): the
    smallest noise multiplier the accountant certifies (Mironov, Talwar & Zhang 2019 for "rdp";
    privacy-loss distributions for "pld"). ε = ``math.inf`` returns 0 (no noise, no privacy).
    """
    if math.isinf(epsilon):
        return 0.0
    return sensitivity * _calibrated_sigma(epsilon, delta, sample_rate, num_releases, accountant)


@functools.lru_cache(maxsize=256)
def _calibrated_sigma(eps: float, delta: float, q: float, steps: int, accountant: str) -> float:
    """:func:`dplib.accounting.calibrate_noise`, memoised: experiments ask the same question in
    every run, and a calibration takes up to a second."""
    return calibrate_noise(eps, delta, q, steps, accountant)


@constrained(epsilon=EPSILON_OR_INF, delta=DELTA, num_queries=COUNT, sample_rate=SAMPLE_RATE,
             accountant=ACCOUNTANT)
def vote_noise_std(epsilon: float, delta: float, num_queries: int, sample_rate: float = 1.0, *,
                   accountant: str = "rdp") -> float:
    """Noise std on every vote count for DP-ICL classification with Q queries:
    :func:`gaussian_noise_std` with Δ = √2 (:data:`VOTE_SENSITIVITY`)."""
    return gaussian_noise_std(epsilon, delta, num_queries, sample_rate, VOTE_SENSITIVITY,
                              accountant=accountant)


@constrained(noise_std=POSITIVE, delta=DELTA, num_releases=COUNT, sample_rate=SAMPLE_RATE,
             sensitivity=SENSITIVITY, accountant=ACCOUNTANT)
def gaussian_epsilon_spent(noise_std: float, delta: float, num_releases: int,
                           sample_rate: float = 1.0, sensitivity: float = VOTE_SENSITIVITY, *,
                           accountant: str = "rdp") -> float:
    """ε after ``num_releases`` releases with noise std s (the inverse of
    :func:`gaussian_noise_std`): the accountant's ε for noise multiplier s/Δ, rate q, Q steps."""
    event = dpsgd_event(noise_std / sensitivity, sample_rate, num_releases)
    return make_accountant(accountant).compose(event).get_epsilon(delta)


@constrained(epsilon=EPSILON, delta=DELTA, num_queries=COUNT, delta_per_query=DELTA0)
def per_query_epsilon(epsilon: float, delta: float, num_queries: int, *,
                      delta_per_query: float = 0.0) -> float:
    """The largest ε₀ such that ``num_queries`` (ε₀, δ₀)-DP mechanisms compose to (ε, δ)-DP under
    the optimal composition theorem (Kairouz, Oh & Viswanath 2015, Thm 3.3), found by bisection
    on :func:`dplib.accounting.optimal_composition_epsilon` (increasing in ε₀). δ₀ =
    ``delta_per_query`` (0 for pure mechanisms) must leave room: 1 − (1 − δ₀)^Q < δ.
    One query: ε₀ = ε (and δ₀ ≤ δ is required).
    """
    eps, d, k, d0 = epsilon, delta, num_queries, delta_per_query
    floor = -math.expm1(k * math.log1p(-d0))
    if floor >= d:
        raise ValueError(f"delta_per_query must satisfy 1 - (1 - delta_per_query)^num_queries < "
                         f"delta = {d:g}, got delta_per_query = {shown(d0)} (total {floor:.3g})")
    if k == 1 or math.isinf(eps):
        return eps

    def gap(e0: float) -> float:
        return optimal_composition_epsilon(e0, d0, k, d) - eps

    lo, hi = eps / k, eps
    if gap(lo) > 0:
        raise ValueError(f"epsilon = {eps:g} cannot be met by {k} mechanisms with "
                         f"delta_per_query = {d0:g} even at basic composition; lower "
                         "delta_per_query")
    e0 = brentq(gap, lo, hi, xtol=1e-12 * eps, rtol=1e-10)
    while gap(e0) > 0:            # step to the feasible side of the root
        e0 *= 1 - 1e-9
    return e0
