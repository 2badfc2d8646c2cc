"""Rényi differential privacy (RDP) of the (subsampled) Gaussian mechanism and its conversion to (ε, δ).

Definitions (Mironov 2017, "Rényi Differential Privacy", CSF, Def. 3–4): a mechanism M is
(α, r)-RDP if D_α(M(D) ‖ M(D')) ≤ r for all neighbours D, D', where

    D_α(P ‖ Q) = 1/(α−1) · log E_{x∼Q}[(P(x)/Q(x))^α],   α > 1.

RDP composes by adding r at each order α (Mironov 2017, Prop. 1), so an accountant keeps one
number per order and converts to (ε, δ) only at the end.

Mechanism and conventions (the same as Opacus and dp-accounting): each step samples every record
independently with probability q (Poisson subsampling), adds the ℓ2-clipped (sensitivity 1)
contributions and adds N(0, σ²) noise; neighbouring datasets differ by adding or removing one
record. In one dimension the pair of output distributions is μ0 = N(0, σ²) and the mixture
μ = (1−q)·N(0, σ²) + q·N(1, σ²) (Mironov, Talwar & Zhang 2019, "Rényi Differential Privacy of the
Sampled Gaussian Mechanism", arXiv:1908.10530, §3). Its RDP is

    r(α) = 1/(α−1) · log A_α,   A_α = E_{z∼μ0}[(μ(z)/μ0(z))^α]                      (MTZ 2019, §3.3)

that is D_α(μ ‖ μ0): μ is the output law of the dataset that holds the record, so this is the
*remove* direction (dp-accounting's ``AdjacencyType.REMOVE``, and ``direction="remove"`` of
:func:`dplib.accounting.pld_grid.subsampled_gaussian_pld`). MTZ 2019 show that A_α also bounds the
other (*add*) direction, E_{z∼μ}[(μ0(z)/μ(z))^α], so A_α gives the
RDP of both add and remove (for fractional α this is the same claim Opacus and TF-privacy rely on;
the tests check it numerically).

All sums are in log space (``scipy.special.logsumexp``/``gammaln``/``log_ndtr``) and vectorised over
the orders, so large σ, tiny q, large α and large step counts neither overflow nor lose precision.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln, gammasgn, log_ndtr

from .._constraints import Custom, constrained, unconstrained
from .._validate import shown
from ._base import Accountant, by_order_blocks
from ._params import (CONVERSION, COUNT, DELTA, EPSILON, MAX_ORDER, NEIGHBORING,
                      NOISE_MULTIPLIER, ORDERS, ORDERS_CAPPED, ORDERS_OR_DEFAULT, SAMPLE_RATE,
                      SAMPLING, check_orders)
from .events import EVENT, LaplaceEvent, ZCDPEvent
from .registry import register_accountant
from .subsampling import wor_gaussian_rdp

__all__ = [
    "DEFAULT_ORDERS", "OPACUS_ORDERS", "gaussian_rdp", "laplace_rdp", "subsampled_gaussian_rdp",
    "rdp_to_epsilon", "rdp_to_delta", "RDPAccountant",
]

#: The order grid of Opacus' RDPAccountant (``DEFAULT_ALPHAS``): 1.1, 1.2, …, 10.9, 12, …, 63.
OPACUS_ORDERS: np.ndarray = np.concatenate([1 + np.arange(1, 100) / 10.0, np.arange(12, 64)])
#: dplib's default grid: Opacus' grid plus larger integer orders, which the optimum needs when ε is
#: small (large σ, few steps). More orders can only lower ε (the conversion minimises over them).
DEFAULT_ORDERS: np.ndarray = np.concatenate([OPACUS_ORDERS, [72, 80, 96, 128, 192, 256, 512, 1024]])

# The fractional-order series are summed until the newest terms fall below e^{-_SERIES_TOL} times the
# running sum. The series alternate in sign once i > α, so the neglected tail is at most the first
# omitted term (Leibniz): relative error ≤ e^{-36} ≈ 2e-16 of A_α. Near q = ½ the terms decay only
# like i^{−α−2} (up to ~1e6 terms for α = 1.1); orders that need more than _SERIES_MAX_TERMS
# (q ≈ ½ with σ ≳ 10) use the convexity bound instead, which keeps every call under ~0.2 s.
_SERIES_TOL = 36.0
_SERIES_MAX_TERMS = 1 << 17


@constrained(orders=ORDERS, noise_multiplier=NOISE_MULTIPLIER)
def gaussian_rdp(orders: object, noise_multiplier: float) -> np.ndarray:
    """RDP of the Gaussian mechanism with sensitivity 1 and noise N(0, σ²): r(α) = α / (2σ²).

    Mironov 2017, Prop. 7 (D_α(N(1, σ²) ‖ N(0, σ²)) = α/(2σ²)). Vectorised over ``orders``.
    """
    return orders / (2.0 * noise_multiplier**2)          # declared (checked on the call)


@constrained(orders=ORDERS, noise_multiplier=NOISE_MULTIPLIER)
def laplace_rdp(orders: object, noise_multiplier: float) -> np.ndarray:
    """RDP of the Laplace mechanism with ℓ1 sensitivity 1 and scale b = σ (Mironov 2017, Prop. 6):

        r(α) = 1/(α−1) · log( α/(2α−1) · e^{(α−1)/b} + (α−1)/(2α−1) · e^{−α/b} ),

    summed in log space (no overflow for b ≪ 1). It tends to 1/b = ε of the Laplace mechanism as
    α → ∞. Vectorised over ``orders``.
    """
    alpha, b = orders, noise_multiplier                 # declared
    log_sum = np.logaddexp(np.log(alpha / (2 * alpha - 1)) + (alpha - 1) / b,
                           np.log((alpha - 1) / (2 * alpha - 1)) - alpha / b)
    return np.maximum(log_sum / (alpha - 1), 0.0)


def _log_a_integer(alpha: np.ndarray, q: float, sigma: float) -> np.ndarray:
    """log A_α for integer α ≥ 2 by the binomial expansion (MTZ 2019, §3.3, integer α):

        A_α = Σ_{i=0}^{α} C(α, i) (1−q)^{α−i} q^i exp((i² − i)/(2σ²)).

    Written as A_α = 1 + Σ_{i≥2} C(α,i)(1−q)^{α−i} q^i (exp((i²−i)/(2σ²)) − 1), which holds because
    the binomial weights sum to 1 and the i = 0, 1 exponents vanish. Every term is ≥ 0, so the sum
    has no cancellation and log A_α = log1p(·) stays accurate when A_α − 1 is tiny (tiny q, huge σ).
    One (orders × i) matrix per block of orders (:func:`~dplib.accounting._base.by_order_blocks`).
    """
    return by_order_blocks(alpha, lambda block: _log_a_integer_block(block, q, sigma))


def _logsumexp_rows(a: np.ndarray) -> np.ndarray:
    """``scipy.special.logsumexp(a, axis=1)`` of a real 2-D array, by the same operations in the
    same order (so the same bits; checked on random arrays with ties, ±inf and all -inf rows in
    tests/unit/test_rdp_logsumexp.py): log1p(s/m) + log m + max, s the sum of exp(a − max) over
    the entries below the row's maximum, m the number of entries equal to it; rows whose result
    is not finite get log Σ exp(a). ``a`` has at least one column (every caller's has). scipy's
    version also converts, copies and sums the whole array for every row's fallback; this one is about three times faster, which the fractional-order
    series (:func:`_log_a_fractional`) pays once per chunk and calibrations pay per σ tried."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        a_max = a.max(axis=1, keepdims=True)
        top = a == a_max
        m = np.count_nonzero(top, axis=1).astype(float)[:, None]
        e = np.where(top, -np.inf, a)
        np.subtract(e, a_max, out=e)
        np.exp(e, out=e)
        s = e.sum(axis=1, keepdims=True)
        s = np.where(s == 0, s, s / m)
        out = np.log1p(s) + np.log(m) + a_max
        bad = ~np.isfinite(out[:, 0])
        if bad.any():
            out[bad] = np.log(np.exp(a[bad]).sum(axis=1, keepdims=True))
    return out[:, 0]


def _log_a_integer_block(alpha: np.ndarray, q: float, sigma: float) -> np.ndarray:
    """:func:`_log_a_integer` for one block of orders."""
    a_max = int(alpha.max())
    i = np.arange(2, a_max + 1, dtype=float)[None, :]
    a = alpha[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        log_binom = gammaln(a + 1) - gammaln(i + 1) - gammaln(a - i + 1)
        x = (i * i - i) / (2.0 * sigma**2)
        # log(e^x − 1), stable for small and large x (x > 0 here since i ≥ 2).
        log_expm1 = np.where(x > 1.0, x + np.log1p(-np.exp(-np.maximum(x, 1.0))),
                             np.log(np.expm1(np.minimum(x, 1.0))))
        terms = log_binom + (a - i) * math.log1p(-q) + i * math.log(q) + log_expm1
    terms = np.where(i <= a, terms, -np.inf)
    log_rest = _logsumexp_rows(terms)
    return np.logaddexp(0.0, log_rest)


def _log_a_fractional(alpha: np.ndarray, q: float, sigma: float) -> np.ndarray:
    """Upper bounds on log A_α for fractional α by the two series of MTZ 2019, §3.3:

        A_α = Σ_{i≥0} C(α,i) [ (1−q)^{α−i} q^i e^{(i²−i)/(2σ²)} · ½ erfc((i − z0)/(√2 σ))
                              + (1−q)^{i} q^{α−i} e^{(j²−j)/(2σ²)} · ½ erfc((z0 − j)/(√2 σ)) ],

    with j = α − i, z0 = σ² log(1/q − 1) + ½, C(α, i) the generalised binomial coefficient (its sign
    alternates for i > α) and ½ erfc(x/√2) = Φ(−x). Terms are evaluated in chunks of i for all
    orders at once; an order leaves the loop when its newest terms are below e^{-36} of its sum.

    The positive terms sum to S₊ and the negative ones to S₋, A_α = S₊ − S₋. When A_α − 1 is far
    below the round-off of S₊ ≈ 1 (tiny q, huge σ: A_α − 1 ≈ 1e-22) the difference is noise and
    once came out negative. So a bound on the floating-point error is carried along. A term
    exp(s) whose exponent s adds up pieces of total size M (log-gammas, log Φ, the quadratic
    exponent) has |Δs| ≤ ~11·u·M (u = 2^-53: each piece to a few ulps of its size, then about seven
    roundings of partial sums), so a relative error ≤ 16·u·(M + 2) with exp's own; the pairwise
    sums (``logsumexp``) of c chunks add at most (13 + 2c)·u·(S₊ + S₋) (Higham 2002, §4.2, log₂ of
    the chunk length 4096 is 12); the neglected tail is at most e^{-36}·S₊. Their sum E bounds
    |computed − exact|, and log(S₊ − S₋ + E) is returned. Orders whose series has not converged
    within :data:`_SERIES_MAX_TERMS` terms get +inf (the caller then uses the convexity bound of
    :func:`_log_a_interpolated`).
    """
    log_q, log_1mq = math.log(q), math.log1p(-q)
    z0 = sigma**2 * (math.log(1.0 / q - 1.0) if q < 0.5 else log_1mq - log_q) + 0.5
    n = alpha.size
    log_pos = np.full(n, -np.inf)   # log of the sum of the positive terms
    log_neg = np.full(n, -np.inf)   # log of the sum of |negative terms|
    log_err = np.full(n, -np.inf)   # log Σ |term|·(M + 2), the round-off allowance
    active = np.ones(n, dtype=bool)
    start, chunk, chunks = 0, 64, 0
    while active.any() and start < _SERIES_MAX_TERMS:
        a = alpha[active][:, None]
        i = np.arange(start, start + chunk, dtype=float)[None, :]
        j = a - i
        g_a, g_i, g_j = gammaln(a + 1), gammaln(i + 1), gammaln(j + 1)
        sign = gammasgn(j + 1)  # sign of C(α, i) = Γ(α+1)/(Γ(i+1)Γ(α−i+1)), Γ(α+1) > 0
        # The pieces of the two exponents; those depending on i only are rows (cheap).
        i_lq, i_l1q, x_i = i * log_q, i * log_1mq, (i * i - i) / (2 * sigma**2)
        j_lq, j_l1q, x_j = j * log_q, j * log_1mq, (j * j - j) / (2 * sigma**2)
        n_i, n_j = log_ndtr((z0 - i) / sigma), log_ndtr((j - z0) / sigma)
        log_binom = g_a - g_i - g_j
        s0 = log_binom + j_l1q + i_lq + x_i + n_i
        s1 = log_binom + i_l1q + j_lq + x_j + n_j
        size = (np.abs(g_a) + np.abs(g_i) + np.abs(g_j) + np.abs(j_lq) + np.abs(j_l1q)
                + np.abs(x_j) + np.abs(n_j) + (np.abs(i_lq) + np.abs(i_l1q) + x_i + np.abs(n_i)
                                               + 2.0))
        both = np.logaddexp(s0, s1)
        pos = _logsumexp_rows(np.where(sign > 0, both, -np.inf))
        neg = _logsumexp_rows(np.where(sign < 0, both, -np.inf))
        err = _logsumexp_rows(both + np.log(size))
        idx = np.flatnonzero(active)
        log_pos[idx] = np.logaddexp(log_pos[idx], pos)
        log_neg[idx] = np.logaddexp(log_neg[idx], neg)
        log_err[idx] = np.logaddexp(log_err[idx], err)
        # Converged when the whole chunk (past the first terms, i > α, where the series alternates)
        # is negligible against the running sum.
        newest = both.max(axis=1)
        done = (newest < log_pos[idx] - _SERIES_TOL) & (start > a[:, 0])
        active[idx[done]] = False
        start += chunk
        chunks += 1
        chunk = min(chunk * 2, 4096)
    u = np.finfo(float).eps / 2
    # E / S₊, every piece in log space relative to S₊ (S₊ > 0: the i = 0 term is).
    rel_err = (16 * u * np.exp(log_err - log_pos)
               + (13 + 2 * chunks) * u * (1 + np.exp(log_neg - log_pos))
               + math.exp(-_SERIES_TOL))
    x = rel_err - np.exp(log_neg - log_pos)               # (S₊ − S₋ + E)/S₊ − 1
    ok = ~active & (x > -1)                               # else no bound from the series
    upper = np.full(n, np.inf)
    upper[ok] = log_pos[ok] + np.log1p(x[ok])
    return upper


def _log_a_interpolated(alpha: np.ndarray, q: float, sigma: float) -> np.ndarray:
    """Upper bound on log A_α for any α > 1 from the integer orders around it, by convexity.

    Λ(α) = log A_α = log E_{μ0}[(μ/μ0)^α] is convex in α: for α = (1−θ)a + θb, Hölder's inequality
    with exponents 1/(1−θ) and 1/θ gives E[X^α] ≤ E[X^a]^{1−θ}·E[X^b]^θ (van Erven & Harremoës
    2014, Cor. 2: (α−1)·D_α is convex in α). So Λ(α) ≤ (⌈α⌉ − α)·Λ(⌊α⌋) + (α − ⌊α⌋)·Λ(⌈α⌉), with
    Λ(1) = 0 (μ ≪ μ0) and Λ at integers from :func:`_log_a_integer`, a sum of non-negative terms
    with no cancellation. For α ∈ (1, 2) this is r(α) ≤ r(2), the monotonicity of RDP in α.
    """
    lo, hi = np.floor(alpha), np.floor(alpha) + 1.0
    ints = np.unique(np.concatenate([lo[lo >= 2], hi]))
    table = dict(zip(ints.tolist(), _log_a_integer(ints, q, sigma).tolist()))
    table[1.0] = 0.0
    f_lo = np.array([table[v] for v in lo.tolist()])
    f_hi = np.array([table[v] for v in hi.tolist()])
    return (hi - alpha) * f_lo + (alpha - lo) * f_hi


@constrained(orders=ORDERS_CAPPED, noise_multiplier=NOISE_MULTIPLIER, sample_rate=SAMPLE_RATE)
def subsampled_gaussian_rdp(orders: object, noise_multiplier: float,
                            sample_rate: float) -> np.ndarray:
    """RDP r(α) of one step of the Poisson-subsampled Gaussian mechanism (sensitivity 1).

    r(α) = log(A_α)/(α − 1) (Mironov, Talwar & Zhang 2019, §3.3); integer orders use the binomial
    expansion, fractional orders the two-series formula. q = 1 is the plain Gaussian, α/(2σ²)
    (Mironov 2017, Prop. 7). Poisson subsampling, add/remove adjacency.

    Every value is an upper bound, also where round-off swamps the exact value: a fractional order
    gets the smaller of (a) the series plus a bound on its floating-point error and (b) the
    convexity bound from the two integer orders around it (:func:`_log_a_interpolated`). Where
    the series is accurate (the usual range) (a) is the exact value to ~1e-13; where A_α − 1 is
    below the series' round-off (tiny q and huge σ, e.g. q = 1e-8, σ = 1000, where it once came
    out negative) or the series converges too slowly (q near ½ with σ ≳ 10), (b) decides.

    Parameters
    ----------
    orders : α ∈ (1, 1e6] (:data:`~dplib.accounting._base.MAX_ORDER`), scalar or 1-D array.
    noise_multiplier : σ > 0, noise standard deviation divided by the ℓ2 sensitivity.
    sample_rate : q ∈ (0, 1], the Poisson sampling probability.

    Returns an array with one RDP value per order (for one step; multiply by the number of steps).
    The last :data:`_MEMO_SIZE` curves computed are remembered (a chapter asks for the same σ and q
    many times: a calibration, then each ε reported); a copy is returned, so the memo cannot be
    changed through it.
    """
    alpha, sigma, q = orders, noise_multiplier, sample_rate      # declared
    key = (alpha.tobytes(), alpha.shape, float(sigma), float(q))
    if key not in _MEMO:
        _MEMO[key] = _subsampled_gaussian_rdp(alpha, float(sigma), float(q))
        while len(_MEMO) > _MEMO_SIZE:
            del _MEMO[next(iter(_MEMO))]                  # the oldest first
    return _MEMO[key].copy()


#: Curves remembered by :func:`subsampled_gaussian_rdp` (about 8 KB each for 100 orders).
_MEMO_SIZE = 512
_MEMO: dict[tuple, np.ndarray] = {}


def _subsampled_gaussian_rdp(alpha: np.ndarray, sigma: float, q: float) -> np.ndarray:
    """:func:`subsampled_gaussian_rdp` on checked values, without the memo."""
    if q == 1.0:
        return alpha / (2.0 * sigma**2)
    is_int = alpha == np.round(alpha)
    log_a = np.empty_like(alpha)
    if is_int.any():
        log_a[is_int] = _log_a_integer(alpha[is_int], q, sigma)
    if (~is_int).any():
        frac = alpha[~is_int]
        log_a[~is_int] = np.minimum(_log_a_fractional(frac, q, sigma),
                                    _log_a_interpolated(frac, q, sigma))
    return log_a / (alpha - 1.0)


def _conversion_terms(alpha: np.ndarray, method: str) -> np.ndarray:
    if method == "improved":
        # log((α−1)/α) − log(α)/(α−1): the extra terms of CKS 2020, Prop. 12 / Balle et al. 2020, Thm 21.
        return np.log1p(-1.0 / alpha) - np.log(alpha) / (alpha - 1.0)
    return np.zeros_like(alpha)       # "classic" (method: declared)


def _check_rdp(name: str, rdp: object) -> np.ndarray:
    """RDP values: reals in [0, inf] (one per order: a relation, checked by the function)."""
    try:
        r = (np.atleast_1d(np.asarray(rdp, dtype=float)) if not isinstance(rdp, (str, bool))
             else None)
    except (TypeError, ValueError):
        r = None
    if r is None:
        raise ValueError(f"{name} must be real numbers in [0, inf], one per order, got "
                         f"{shown(rdp)}")
    if np.isnan(r).any() or (r < 0).any():
        raise ValueError(f"{name} must be in [0, inf], got {shown(r[np.isnan(r) | (r < 0)][0])}")
    return r


#: An RDP curve's values r(α) ∈ [0, inf].
RDP_VALUES = Custom(_check_rdp, "reals in [0, inf], one per order",
                    [[-0.1, 0.2, 0.4], [np.nan, 0.2, 0.4], "abc", None, True, [-1e-300]])


def _one_per_order(alpha: np.ndarray, r: np.ndarray) -> None:
    if r.shape != alpha.shape:
        raise ValueError(f"rdp must have one value per order ({alpha.size}), got shape {r.shape}")


@constrained(orders=ORDERS, rdp=RDP_VALUES, delta=DELTA, method=CONVERSION)
def rdp_to_epsilon(orders: object, rdp: object, delta: float, *,
                   method: str = "improved") -> tuple[float, float]:
    """Smallest ε over the orders such that (α, r(α))-RDP implies (ε, δ)-DP; returns (ε, best α).

    * ``method="classic"`` — ε = r + log(1/δ)/(α − 1) (Mironov 2017, Prop. 3).
    * ``method="improved"`` (default, as in Opacus) — ε = r + log((α−1)/α) − (log δ + log α)/(α−1)
      (Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for Differential Privacy", Prop. 12;
      Balle et al. 2020, "Hypothesis Testing Interpretations and Rényi DP", Thm 21). The extra terms are < 0 for
      every α > 1, so it is never worse than the classic bound; it is what Opacus' ``get_privacy_spent`` uses.

    ε is reported as max(ε, 0): (ε, δ)-DP with ε < 0 carries no extra meaning.
    Orders where r is infinite are skipped; if all are, ε = inf.

    With ``method="improved"`` one more valid step (the one dp-accounting takes): the total
    variation distance is at most √(1 − e^{−KL}) (Bretagnolle & Huber 1979) and KL ≤ r(α) for
    every α > 1 (Rényi divergences grow with the order; van Erven & Harremoës 2014, Thm 3);
    (0, δ)-DP is exactly TV ≤ δ. So ε = 0 as soon as δ ≥ √(1 − e^{−min_α r(α)}). Without it, tiny
    divergences gave ε = 1.41 at δ = 0.1 for q = 1e-5, σ = 0.2, T = 1, where the exact ε is 0
    (found by the accountant stress grid).
    """
    alpha, r, d = orders, rdp, delta                     # declared (checked on the call)
    _one_per_order(alpha, r)
    if method == "improved":
        j = int(np.argmin(r))
        if d * d + math.expm1(-float(r[j])) > 0:
            return 0.0, float(alpha[j])
    eps = r + math.log(1.0 / d) / (alpha - 1.0) + _conversion_terms(alpha, method)
    k = int(np.argmin(eps))
    return max(float(eps[k]), 0.0), float(alpha[k])


@constrained(orders=ORDERS, rdp=RDP_VALUES, epsilon=EPSILON, method=CONVERSION)
def rdp_to_delta(orders: object, rdp: object, epsilon: float, *,
                 method: str = "improved") -> tuple[float, float]:
    """Smallest δ over the orders such that (α, r(α))-RDP implies (ε, δ)-DP; returns (δ, best α).

    The same two conversions as :func:`rdp_to_epsilon`, solved for δ:
    classic δ = exp((α−1)(r − ε)) (Mironov 2017, Prop. 3); improved
    δ = exp((α−1)(r − ε + log(1 − 1/α)) − log α) (CKS 2020, Prop. 12). δ is capped at 1
    (every mechanism is (ε, 1)-DP). ``"improved"`` also uses δ(ε) ≤ TV ≤ √(1 − e^{−min r})
    (Bretagnolle & Huber 1979; see :func:`rdp_to_epsilon`).
    """
    alpha, r, eps = orders, rdp, epsilon                 # declared
    _one_per_order(alpha, r)
    log_delta = (alpha - 1.0) * (r - eps + _conversion_terms(alpha, method))
    k = int(np.argmin(log_delta))
    delta = float(min(math.exp(min(log_delta[k], 0.0)), 1.0))
    if method == "improved":
        j = int(np.argmin(r))
        tv = math.sqrt(-math.expm1(-float(r[j])))
        if tv < delta:
            return tv, float(alpha[j])
    return delta, float(alpha[k])


@register_accountant("rdp")
class RDPAccountant(Accountant):
    """Privacy accountant by Rényi DP (Mironov 2017; Mironov, Talwar & Zhang 2019): the RDP of every
    event adds up per order (Mironov 2017, Prop. 1) and is converted to (ε, δ) at the end.

    Defaults: Poisson subsampling (for the :meth:`step` shorthand), add/remove-one adjacency — the
    conventions of Opacus' ``RDPAccountant`` and dp-accounting's ``RdpAccountant``.

    >>> acc = RDPAccountant().step(noise_multiplier=1.1, sample_rate=256/60000, num_steps=14062)
    >>> round(acc.get_epsilon(1e-5), 2)
    2.6

    What it bounds (σ = noise scale / clipping norm C in every case, :mod:`.events`):

    * Gaussian on a Poisson sample, add/remove: :func:`subsampled_gaussian_rdp` (MTZ 2019);
    * Gaussian on every record (q = 1): :func:`gaussian_rdp` with sensitivity C (add/remove) or
      2C (replace-one, σ/2 internally);
    * Gaussian on a batch of fixed size drawn without replacement, replace-one: Wang, Balle &
      Kasiviswanathan 2019, Thm 27 (:func:`dplib.accounting.subsampling.wor_gaussian_rdp`, which
      takes the noise relative to the replace-one sensitivity 2C: σ/2 is passed to it here);
    * Laplace on every record: :func:`laplace_rdp` (sensitivity C or 2C likewise);
    * any :class:`~dplib.accounting.events.RDPCurveEvent` (its own curve), among them
      :class:`~dplib.accounting.events.ZCDPEvent`: r(α) = αρ exactly (Bun & Steinke 2016,
      Def. 1.1; 4ρ for replace-one from an add/remove claim, their Prop. 1.9).

    Anything else (Poisson sampling under replace-one, subsampled Laplace) raises ``ValueError``
    naming the event; :class:`~dplib.accounting.PLDAccountant` bounds the Poisson replace-one case.

    Parameters
    ----------
    orders : the grid of orders α ∈ (1, 1e6] over which the conversion minimises (default
        :data:`DEFAULT_ORDERS`; pass :data:`OPACUS_ORDERS` to reproduce Opacus exactly); the cap
        is :data:`~dplib.accounting._base.MAX_ORDER`, whose comment says why.
    conversion : "improved" (CKS 2020 Prop. 12, default) or "classic" (Mironov 2017 Prop. 3).
    neighboring : "add_remove" (default) or "replace_one".
    sampling : the sampler the :meth:`step` shorthand describes: "poisson" (default) or
        "without_replacement" (needs ``neighboring="replace_one"``).
    """

    @constrained(orders=ORDERS_OR_DEFAULT, conversion=CONVERSION, sampling=SAMPLING,
                 neighboring=NEIGHBORING)
    def __init__(self, orders: object = None, conversion: str = "improved", *,
                 sampling: str = "poisson", neighboring: str = "add_remove") -> None:
        super().__init__(neighboring=neighboring, sampling=sampling)
        if sampling == "without_replacement" and neighboring != "replace_one":
            raise ValueError("(sampling, neighboring): sampling='without_replacement' is analysed "
                             "under neighboring='replace_one' (n is public), got "
                             f"({shown(sampling)}, {shown(neighboring)})")
        self.orders = check_orders(DEFAULT_ORDERS, high=MAX_ORDER) if orders is None else orders
        self.conversion = conversion
        self._rdp = np.zeros_like(self.orders)

    def _check_supported(self, leaf) -> None:
        super()._check_supported(leaf)
        if leaf.sample_rate < 1.0 and issubclass(leaf.mechanism, LaplaceEvent):
            self._refuse(leaf, "no Rényi bound for the subsampled Laplace mechanism here")
        if (leaf.sample_rate < 1.0 and leaf.sampling == "poisson"
                and self.neighboring == "replace_one"):
            self._refuse(leaf, "no Rényi bound for Poisson sampling under replace-one here; "
                               "use PLDAccountant(neighboring='replace_one')")
        if isinstance(leaf.curve, ZCDPEvent):      # a replace-one claim bounds no add/remove
            try:
                leaf.curve.rho_under(self.neighboring)
            except ValueError as exc:
                self._refuse(leaf, str(exc))

    @unconstrained("hook called by compose with flattened, checked leaves")
    def step_rdp(self, leaf) -> np.ndarray:
        """RDP of one run of a flattened event (:class:`~dplib.accounting.events.Step`) at
        :attr:`orders`, under this accountant's relation."""
        if leaf.curve is not None:
            return np.asarray(leaf.curve.rdp(self.orders, self.neighboring), dtype=float)
        # replace-one moves a clipped sum by up to 2C: noise σC is multiplier σ/2 for
        # sensitivity 2C
        sigma = leaf.noise_multiplier / (2.0 if self.neighboring == "replace_one" else 1.0)
        if issubclass(leaf.mechanism, LaplaceEvent):
            return laplace_rdp(self.orders, sigma)
        if leaf.sample_rate == 1.0:
            return gaussian_rdp(self.orders, sigma)
        if leaf.sampling == "poisson":
            return subsampled_gaussian_rdp(self.orders, sigma, leaf.sample_rate)
        return wor_gaussian_rdp(self.orders, sigma, leaf.sample_rate)

    def _add(self, leaf) -> None:
        # RDP composes additively (Mironov 2017, Prop. 1): T runs cost T·r(α).
        self._rdp = self._rdp + leaf.count * self.step_rdp(leaf)

    @property
    def rdp(self) -> np.ndarray:
        """The accumulated RDP, one value per order in :attr:`orders`."""
        return self._rdp.copy()

    @constrained(event=EVENT, count=COUNT, delta=DELTA)
    def epsilon_after(self, event, count: int, delta: float) -> float:
        """ε at ``delta`` after ``count`` more runs of ``event``: the history's RDP plus count
        times the event's curve (Mironov 2017, Prop. 1), converted once — no copy, no
        re-composition. This accountant is left unchanged."""
        from .events import flatten
        total = self._rdp.copy()
        cache = self.__dict__.setdefault("_step_cache", {})   # a trainer asks after every step
        for leaf in flatten(event):
            self._check_supported(leaf)
            key = (leaf.mechanism, leaf.noise_multiplier, leaf.sample_rate, leaf.sampling,
                   id(leaf.curve) if leaf.curve is not None else None)
            if key not in cache:
                cache[key] = (leaf.curve, self.step_rdp(leaf))   # the curve kept: its id stays
            total = total + count * leaf.count * cache[key][1]
        return rdp_to_epsilon(self.orders, total, delta, method=self.conversion)[0]

    @constrained(delta=DELTA)
    def get_epsilon(self, delta: float) -> float:
        """ε such that the history is (ε, δ)-DP (minimised over the order grid)."""
        self._require_history()
        return rdp_to_epsilon(self.orders, self._rdp, delta, method=self.conversion)[0]

    @constrained(epsilon=EPSILON)
    def get_delta(self, epsilon: float) -> float:
        """δ such that the history is (ε, δ)-DP (minimised over the order grid)."""
        self._require_history()
        return rdp_to_delta(self.orders, self._rdp, epsilon, method=self.conversion)[0]
