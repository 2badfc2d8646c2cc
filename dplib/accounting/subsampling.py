"""Privacy amplification by subsampling: (ε, δ) amplification and the RDP of sampling without
replacement.

Which sampler goes with which neighbouring relation matters (Balle, Barthe & Gaboardi 2018,
"Privacy Amplification by Subsampling: Tight Analyses via Couplings and Divergences", NeurIPS,
§5 and Table 1):

* **Poisson subsampling** (each record kept independently with probability q; the batch size is
  random and may be 0) amplifies under **add/remove-one** adjacency.
* **Sampling without replacement** (a uniformly random subset of fixed size m of n records,
  γ = m/n) amplifies under **replace-one** (substitution) adjacency: n is public, so adding or
  removing a record is not a neighbouring change it can describe.

Both give the same (ε, δ) formula, ε' = log(1 + γ(e^ε − 1)), δ' = γδ (BBG 2018, Thm 8 for Poisson /
remove-one, Thm 9 for without replacement / substitution). For the Gaussian mechanism the tighter
per-order analyses are:

* Poisson, add/remove: :func:`dplib.accounting.subsampled_gaussian_rdp` (Mironov, Talwar & Zhang
  2019) and :func:`dplib.accounting.subsampled_gaussian_pld`;
* without replacement, replace-one: :func:`wor_gaussian_rdp` here (Wang, Balle & Kasiviswanathan
  2019, "Subsampled Rényi Differential Privacy and Analytical Moments Accountant", AISTATS,
  Thm 27 with Cor. 10 for fractional orders) — the analysis behind dp-accounting's
  ``SampledWithoutReplacementDpEvent``;
* Poisson, replace-one: ``PLDAccountant(neighboring="replace_one")`` (the pair of dp-accounting's
  ``NeighboringRelation.REPLACE_ONE``);
* without replacement, replace-one, tighter: the PLD of the dominating pair of Zhu, Dong & Wang
  2022 (:mod:`dplib.accounting.without_replacement`), composed by ``PLDAccountant``.

**Units.** The accountants take ``noise_multiplier`` = noise std / C (clipping norm) for every
sampler and relation (:mod:`dplib.accounting.events`) and convert internally. The formula
:func:`wor_gaussian_rdp` below is WBK's statement for a base mechanism N(0, σ²) vs N(1, σ²), i.e.
σ = noise std / (replace-one sensitivity 2C); ``RDPAccountant`` passes it σ/2.
"""
from __future__ import annotations

import functools
import math

import mpmath
import numpy as np
from scipy.special import gammaln, logsumexp

from .._constraints import Interval, RealArray, constrained
from .._validate import shown
from ._base import by_order_blocks
from ._params import (COUNT, DELTA, EPSILON, NOISE_MULTIPLIER, ORDERS_CAPPED, POSITIVE,
                      SAMPLE_RATE)

__all__ = ["amplified_epsilon", "amplified_delta", "amplify", "amplified_epsilon_bound",
           "wor_gaussian_rdp", "amplified_advanced_composition"]

#: Orders above this use only the second branch of each min in WBK 2019 Thm 27 (a valid, looser
#: bound that needs no forward differences) — the same cut-off as dp-accounting.
WBK_EXACT_MAX_ORDER = 256


@constrained(epsilon=RealArray(0.0, math.inf, closed="left", nonempty=False),
             sample_rate=SAMPLE_RATE)
def amplified_epsilon(epsilon: object, sample_rate: float) -> np.ndarray | float:
    """ε' = log(1 + γ(e^ε − 1)) of an (ε, δ)-DP mechanism run on a subsample of rate γ.

    Balle, Barthe & Gaboardi 2018, Thm 8 (Poisson sampling with probability γ, add/remove
    adjacency) and Thm 9 (sampling m of n without replacement, γ = m/n, replace-one adjacency).
    Computed as log1p(γ·expm1(ε)) — accurate for tiny γ and ε. Vectorised over ``epsilon`` (ε ≥ 0).
    """
    eps, g = epsilon, sample_rate                      # declared (checked on the call)
    small = np.log1p(g * np.expm1(np.minimum(eps, 30.0)))          # accurate for tiny γ, ε
    large = np.logaddexp(math.log1p(-g) if g < 1 else -np.inf, math.log(g) + eps)  # no overflow
    out = np.where(eps > 30.0, large, small)
    return float(out) if out.ndim == 0 else out


@constrained(delta=RealArray(0.0, 1.0, closed="both", nonempty=False), sample_rate=SAMPLE_RATE)
def amplified_delta(delta: object, sample_rate: float) -> np.ndarray | float:
    """δ' = γδ (Balle, Barthe & Gaboardi 2018, Thms 8–9; adjacency as in :func:`amplified_epsilon`)."""
    out = sample_rate * delta                          # declared
    return float(out) if out.ndim == 0 else out


@constrained(epsilon=EPSILON, delta=Interval(0.0, 1.0, closed="both"), sample_rate=SAMPLE_RATE)
def amplify(epsilon: float, delta: float,
            sample_rate: float) -> tuple[float, float]:
    """(ε', δ') = (log(1 + γ(e^ε − 1)), γδ) — BBG 2018 Thm 8 (Poisson, add/remove) and Thm 9
    (m of n without replacement, γ = m/n, replace-one). Scalars only."""
    return float(amplified_epsilon(epsilon, sample_rate)), float(amplified_delta(delta, sample_rate))


@constrained(epsilon=RealArray(0.0, 1.0, closed="both", nonempty=False), sample_rate=SAMPLE_RATE)
def amplified_epsilon_bound(epsilon: object, sample_rate: float) -> np.ndarray | float:
    """The simple bound 2γε ≥ log(1 + γ(e^ε − 1)), valid for 0 ≤ ε ≤ 1.

    Because log(1 + x) ≤ x and e^ε − 1 ≤ 2ε on [0, 1] (e − 1 < 2 and e^ε − 1 is convex). Quoted
    for ε ≤ 1 by Razaviyayn (``RazaviyaynLecture11``); ε outside [0, 1] is refused, not extrapolated.
    """
    out = 2.0 * sample_rate * epsilon                  # declared
    return float(out) if out.ndim == 0 else out


@functools.lru_cache(maxsize=64)
def _log_forward_differences(sigma: float, kmax: int) -> np.ndarray:
    """log Δ^k g(0), k = 0..kmax, for g(x) = exp((x − 1)x/(2σ²)) = exp((x−1)·ε_G(x)), where
    ε_G(x) = x/(2σ²) is the Gaussian's RDP (WBK 2019, Thm 27 uses the even-order ones).

    Δ^k g(0) = Σ_l (−1)^{k−l} C(k, l) g(l) cancels heavily when σ is large, so it is summed in
    mpmath, raising the precision until two precisions agree to 1e-14 (relative). Even-order
    differences are positive (all even derivatives of e^{c(x−1/2)²} are); odd ones may not be and
    are returned as NaN (never used).
    """
    out = np.full(kmax + 1, np.nan)
    dps = 30
    while True:
        vals = []
        for prec in (dps, dps + 15):
            with mpmath.workdps(prec):
                two_s2 = 2 * mpmath.mpf(sigma) ** 2
                v = np.array([mpmath.exp(mpmath.mpf(l * (l - 1)) / two_s2)
                              for l in range(kmax + 1)], dtype=object)
                res = [v[0]]
                for _ in range(kmax):          # Δ^k g(0) is the head after k differencings
                    v = v[1:] - v[:-1]
                    res.append(v[0])
                vals.append(res)
        if all(abs(x - y) <= mpmath.mpf("1e-14") * abs(y) for x, y in zip(*vals) if y != 0):
            break
        dps *= 2
    for k, v in enumerate(vals[1]):
        if v > 0:
            out[k] = float(mpmath.log(v))
    return out


def _wbk_log_a_int(alpha: np.ndarray, gamma: float, sigma: float) -> np.ndarray:
    """log of WBK 2019 Thm 27's bound on E[(p/q)^α] for integer α ≥ 2 (vectorised over α):

        1 + γ²C(α,2)·min{4(e^{ε(2)} − 1), 2e^{ε(2)}}
          + Σ_{j=3}^{α} γ^j C(α,j)·min{4·(Δ^{2⌊j/2⌋}g(0)·Δ^{2⌈j/2⌉}g(0))^{1/2}, 2e^{(j−1)ε(j)}},

    ε(j) = j/(2σ²), g as in :func:`_log_forward_differences`. Above order
    :data:`WBK_EXACT_MAX_ORDER` only the second branch of each min is used (still a bound).
    Computed per block of orders (:func:`~dplib.accounting._base.by_order_blocks`).
    """
    return by_order_blocks(alpha, lambda block: _wbk_log_a_int_block(block, gamma, sigma))


def _wbk_log_a_int_block(alpha: np.ndarray, gamma: float, sigma: float) -> np.ndarray:
    """:func:`_wbk_log_a_int` for one block of orders."""
    a_max = int(alpha.max())
    j = np.arange(2, a_max + 1, dtype=float)
    cgf = (j - 1) * j / (2 * sigma**2)                     # (j − 1)·ε(j)
    second = math.log(2) + cgf
    first = np.full_like(j, np.inf)
    e2 = 1.0 / sigma**2                                      # ε(2)
    first[0] = math.log(4) + e2 + math.log1p(-math.exp(-e2))  # log 4(e^{ε(2)} − 1)
    kmax = min(a_max, WBK_EXACT_MAX_ORDER)
    if kmax >= 3:
        ld = _log_forward_differences(float(sigma), kmax + (kmax % 2))
        jj = np.arange(3, kmax + 1)
        lo, hi = 2 * (jj // 2), 2 * ((jj + 1) // 2)
        first[jj - 2] = math.log(4) + 0.5 * (ld[lo] + ld[hi])
    branch = np.minimum(first, second)
    a = alpha[:, None]
    jm = j[None, :]
    with np.errstate(invalid="ignore"):
        log_binom = gammaln(a + 1) - gammaln(jm + 1) - gammaln(a - jm + 1)
    terms = np.where(jm <= a, log_binom + jm * math.log(gamma) + branch[None, :], -np.inf)
    exact = alpha <= WBK_EXACT_MAX_ORDER
    if (~exact).any():   # orders above the cut-off: second branch only (except j = 2)
        br2 = np.concatenate([[branch[0]], second[1:]])
        t2 = np.where(jm <= a, log_binom + jm * math.log(gamma) + br2[None, :], -np.inf)
        terms = np.where(exact[:, None], terms, t2)
    return np.logaddexp(0.0, logsumexp(terms, axis=1))


@constrained(orders=ORDERS_CAPPED, noise_multiplier=NOISE_MULTIPLIER, sample_rate=SAMPLE_RATE)
def wor_gaussian_rdp(orders: object, noise_multiplier: float, sample_rate: float) -> np.ndarray:
    """RDP bound r(α) of one step of the Gaussian mechanism on a batch of m records drawn
    without replacement from n (γ = ``sample_rate`` = m/n), under replace-one adjacency.

    Wang, Balle & Kasiviswanathan 2019, Thm 27 (the Gaussian-specific strengthening of their
    Thm 9) for integer α; for fractional α the log-moment (α − 1)r(α) is interpolated linearly
    between ⌊α⌋ and ⌈α⌉, an upper bound because it is convex in α (WBK 2019, Cor. 10). γ = 1 is
    the plain Gaussian α/(2σ²) (Mironov 2017, Prop. 7).

    Orders α ∈ (1, 1e6] (:data:`~dplib.accounting._base.MAX_ORDER`: the sum has α terms).

    Units (of this formula, not of the accountants): σ = ``noise_multiplier`` = noise std / ℓ2
    sensitivity of the released sum under replace-one (2C for a clipped sum with clipping norm C),
    i.e. σ = s/(2C) for noise std s — the base mechanism is N(0, σ²) vs N(1, σ²).
    ``RDPAccountant(neighboring="replace_one")`` takes s/C like every accountant and passes half
    of it here.
    """
    alpha, sigma, gamma = orders, noise_multiplier, sample_rate      # declared
    if gamma == 1.0:
        return alpha / (2.0 * sigma**2)
    lo, hi = np.floor(alpha), np.ceil(alpha)
    ints = np.unique(np.concatenate([lo, hi]))
    ints = ints[ints >= 2]
    log_a = dict(zip(ints.tolist(), _wbk_log_a_int(ints, gamma, sigma).tolist())) if ints.size \
        else {}
    log_a[1.0] = 0.0
    t = alpha - lo
    la = (1 - t) * np.array([log_a[x] for x in lo]) + t * np.array([log_a[x] for x in hi])
    return la / (alpha - 1.0)


@constrained(noise_multiplier=NOISE_MULTIPLIER, sample_rate=SAMPLE_RATE, num_steps=COUNT,
             delta=DELTA, sensitivity=POSITIVE)
def amplified_advanced_composition(noise_multiplier: float, sample_rate: float, num_steps: int,
                                   delta: float, sensitivity: float = 1.0) -> float:
    """ε of T subsampled Gaussian steps by the pre-RDP recipe: amplify, then compose.

    Each step is the Gaussian mechanism (ℓ2 sensitivity Δ, noise σ) made (ε0, δ0)-DP with the
    exact δ(ε) curve (Balle & Wang 2018, Thm 8), amplified by subsampling at rate q to
    (ln(1 + q(e^{ε0} − 1)), q·δ0) (Balle, Barthe & Gaboardi 2018), then composed over T steps by
    advanced composition (Dwork, Rothblum & Vadhan 2010). δ is split evenly: T·q·δ0 = δ/2 for the
    steps and δ' = δ/2 for the composition, so δ < 2Tq is needed (δ0 < 1; ``ValueError``
    otherwise). A valid but loose upper bound, shown to compare with the RDP and PLD
    accountants; the split of δ is a choice, not an optimum; inf where it exceeds every double
    (e.g. σ = 0.02, q = 0.01, T = 10, δ = 1e-5: ε0 ≈ 1444). Use
    ``sensitivity=2`` under replace-one adjacency (a replaced record moves a clipped sum by up to
    2C) with sampling without replacement, whose amplification has the same form (BBG 2018).
    """
    from ..mechanisms.gaussian import gaussian_epsilon
    from .composition import advanced_composition

    sigma, q, t, d, sens = noise_multiplier, sample_rate, num_steps, delta, sensitivity
    if t <= d / (2 * q):     # int vs float compares exactly, with no overflow for huge T
        raise ValueError(
            f"delta must be < 2·num_steps·sample_rate = {2 * q * t:g} for this recipe (each step "
            f"gets δ0 = delta/(2·num_steps·sample_rate), which must be < 1), got "
            f"delta={shown(delta)} "
            f"with sample_rate={shown(sample_rate)}, num_steps={shown(num_steps)}")
    d0 = d / (2 * t * q)
    e0 = float(gaussian_epsilon(sigma, d0, sens))
    e1 = float(amplified_epsilon(e0, q))
    return advanced_composition(e1, q * d0, t, d / 2)[0]
