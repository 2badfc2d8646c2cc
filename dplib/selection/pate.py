"""PATE: private aggregation of teacher ensembles (Papernot et al. 2017, ICLR; 2018, ICLR).

Split the private data into t disjoint partitions, train one *teacher* on each, and label public
(unlabelled) queries by a noisy vote of the teachers. One record lives in one partition, so it
can change one teacher's vote: one count of the vote histogram n(x) ∈ ℕ^k goes down by one and
another goes up by one (ℓ1 change 2, ℓ2 change √2), under add/remove or replace-one of a record
alike. A *student* trained on the noisy labels inherits the privacy of the aggregation.

* **LNMax** (Papernot et al. 2017, §2.1, eq. (1)): argmax_j n_j(x) + Lap(1/γ). Each answer is
  post-processing of the Laplace mechanism on a histogram of ℓ1 sensitivity 2, hence 2γ-DP
  (Papernot et al. 2017, §3; Dwork & Roth 2014, Thm 3.6); its Rényi curve is that of the
  Laplace mechanism with scale 1/(2γ) per unit of sensitivity (Mironov 2017, Prop. 6).
* **GNMax** (Papernot et al. 2018, §4.1): argmax_j n_j(x) + N(0, σ²). Data-independent bound:
  (λ, λ/σ²)-RDP per answer (Papernot et al. 2018, Prop. 8: the Gaussian mechanism on ℓ2
  sensitivity √2). :class:`GNMaxEvent` / :class:`LNMaxEvent` are these per-answer curves as
  accounting events; Q answers compose like any event.
* **Data-dependent analysis** (Papernot et al. 2018, Thm 6 with Prop. 7 and the orders of
  Prop. 10): when the teachers agree strongly, q̃ ≥ P[GNMax(x) ≠ argmax n(x)] is tiny,
  q̃ = Σ_{j ≠ j*} ½ erfc((n_{j*} − n_j)/(2σ)) (Prop. 7), and the RDP *at this x* is far below
  λ/σ². But that ε is a function of the votes, i.e. of the private data: publishing it leaks.
  Papernot et al. (2018, §4.3 and App. C) release it only after adding noise calibrated to its
  *smooth sensitivity* (NRS07). :func:`data_dependent_rdp_not_publishable` computes the raw
  bound — for teaching and for comparison; its name says what it is not.

Ties in the vote (equal noisy counts) have probability 0 with continuous noise; ``np.argmax``
then picks the lowest class index (deterministic). Equal raw counts are split by the noise,
whatever their size: the aggregators add the noise to the gaps n − max n, never to huge counts
whose rounding would swallow it. Floating-point caveat: Laplace/Gaussian noise
from numpy's float samplers (Mironov 2012): a teaching implementation.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr, logsumexp

from .._constraints import Integer, constrained, unconstrained
from .._validate import shown
from ..accounting import RDPAccountant, RDPCurveEvent, laplace_rdp, rdp_to_epsilon
from ..accounting._params import COUNT, DELTA, POSITIVE
from ._params import ORDERS_OR_NONE, POSITIVE_OR_NONE, RELEASE_RNG, RNG, make_release_rng
from .ptr import split_blocks

__all__ = ["teacher_partitions", "vote_histogram", "lnmax", "gnmax", "LNMaxEvent",
           "GNMaxEvent", "pate_epsilon", "gnmax_log_q", "data_dependent_rdp_not_publishable",
           "data_dependent_epsilon_not_publishable"]


@constrained(n=COUNT, num_teachers=COUNT, rng=RNG)
def teacher_partitions(n: int, num_teachers: int, *, rng: np.random.Generator | int) -> list:
    """Disjoint index sets, one per teacher, covering 0 … n−1 (a public random split;
    :func:`~.ptr.split_blocks`)."""
    t = num_teachers
    if t > n:
        raise ValueError(f"num_teachers must be in [1, n={n}], got {shown(num_teachers)}")
    return split_blocks(n, t, rng=rng)


@constrained(num_classes=Integer(min=2))
def vote_histogram(teacher_predictions: object, num_classes: int) -> np.ndarray:
    """Vote counts n(x), shape (queries, classes), from integer predictions of shape
    (teachers, queries) with labels in [0, num_classes)."""
    k = num_classes
    p = np.asarray(teacher_predictions)
    if p.ndim == 1:
        p = p[:, None]
    if p.ndim != 2 or p.size == 0 or p.dtype == bool or not np.issubdtype(p.dtype, np.integer):
        raise ValueError(f"teacher_predictions must be a non-empty integer array (teachers, "
                         f"queries), got {shown(teacher_predictions)}"[:200])
    bad = (p < 0) | (p >= k)
    if bad.any():
        raise ValueError(f"teacher_predictions must be labels in [0, {k}), got "
                         f"{int(p[bad].flat[0])}")
    one_hot = p[..., None] == np.arange(k)
    return one_hot.sum(axis=0)


def _votes(votes: object) -> np.ndarray:
    v = np.asarray(votes)
    if v.dtype == bool or not np.issubdtype(v.dtype, np.number) or v.ndim == 0 \
            or v.shape[-1] < 2:
        raise ValueError(f"votes must be counts of shape (..., classes ≥ 2), got {shown(votes)}"[:200])
    v = v.astype(float)
    if not np.isfinite(v).all() or (v < 0).any() or (v != np.round(v)).any():
        raise ValueError("votes must be non-negative integer counts (finite), got "
                         f"{float(v[~np.isfinite(v) | (v < 0) | (v != np.round(v))][0])!r}")
    return v


def _gap_over_scale(v: np.ndarray, scale: float) -> np.ndarray:
    """(n − max n)/scale along the last axis: argmax(n + scale·Z) = argmax(gap/scale + Z) in
    exact arithmetic, and huge counts or scales neither absorb the noise nor overflow (a scale
    so large that gap/scale underflows gives the uniform choice, its limit)."""
    gap = v - v.max(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
        out = np.where(gap == 0, 0.0, gap / scale)
    return out


@constrained(gamma=POSITIVE, rng=RELEASE_RNG)
def lnmax(votes: object, gamma: float, *, rng: np.random.Generator | int | None = None
          ) -> np.ndarray | int:
    """LNMax label per query: argmax_j n_j + Lap(1/γ) (Papernot et al. 2017, eq. (1)); 2γ-DP per
    query. ``rng``: Generator or seed, ``None`` (default) fresh OS entropy. Floating-point
    caveat: numpy's float Laplace sampler (Mironov 2012); only the label is released."""
    v = _votes(votes)
    z = make_release_rng(rng).laplace(0.0, 1.0, size=v.shape)
    idx = np.argmax(_gap_over_scale(v, 1.0 / gamma) + z, axis=-1)
    return int(idx) if idx.ndim == 0 else idx


@constrained(sigma=POSITIVE, rng=RELEASE_RNG)
def gnmax(votes: object, sigma: float, *, rng: np.random.Generator | int | None = None
          ) -> np.ndarray | int:
    """GNMax label per query: argmax_j n_j + N(0, σ²) (Papernot et al. 2018, §4.1);
    (λ, λ/σ²)-RDP per query (Prop. 8). ``rng``: Generator or seed, ``None`` (default) fresh OS
    entropy. Floating-point caveat: numpy's float Gaussian sampler (Mironov 2012)."""
    v = _votes(votes)
    z = make_release_rng(rng).normal(0.0, 1.0, size=v.shape)
    idx = np.argmax(_gap_over_scale(v, sigma) + z, axis=-1)
    return int(idx) if idx.ndim == 0 else idx


@dataclass(frozen=True)
@constrained(sigma=POSITIVE)
class GNMaxEvent(RDPCurveEvent):
    """One GNMax answer with noise σ as an accounting event: λ/σ² at every order λ
    (Papernot et al. 2018, Prop. 8), under add/remove or replace-one of a training record
    (either changes at most one teacher's vote)."""

    sigma: float

    @unconstrained("the curve the Rényi accountant asks for at its checked orders")
    def rdp(self, orders: np.ndarray, neighboring: str) -> np.ndarray:
        return np.asarray(orders, dtype=float) / self.sigma ** 2


@dataclass(frozen=True)
@constrained(gamma=POSITIVE)
class LNMaxEvent(RDPCurveEvent):
    """One LNMax answer with noise Lap(1/γ) as an accounting event: the Laplace mechanism's RDP
    (Mironov 2017, Prop. 6) for ℓ1 sensitivity 2, i.e. scale 1/(2γ) per unit; 2γ-DP
    (Papernot et al. 2017, §3)."""

    gamma: float

    @unconstrained("the curve the Rényi accountant asks for at its checked orders")
    def rdp(self, orders: np.ndarray, neighboring: str) -> np.ndarray:
        return laplace_rdp(orders, 1.0 / (2.0 * self.gamma))


@constrained(num_queries=COUNT, delta=DELTA, sigma=POSITIVE_OR_NONE, gamma=POSITIVE_OR_NONE)
def pate_epsilon(num_queries: int, delta: float, *, sigma: float | None = None,
                 gamma: float | None = None) -> float:
    """Data-independent ε at δ of ``num_queries`` answers of GNMax (``sigma``) or LNMax
    (``gamma``): the events composed in :class:`~dplib.accounting.RDPAccountant`. This is the
    ε that may be published."""
    q = num_queries
    if (sigma is None) == (gamma is None):
        raise ValueError(f"sigma / gamma: give exactly one (GNMax or LNMax), got "
                         f"sigma={sigma!r}, gamma={gamma!r}")
    event = GNMaxEvent(sigma) if sigma is not None else LNMaxEvent(gamma)
    return RDPAccountant().compose(event, q).get_epsilon(delta)


@constrained(sigma=POSITIVE)
def gnmax_log_q(votes: object, sigma: float) -> np.ndarray | float:
    """log q̃ per query, q̃ = Σ_{j≠j*} ½ erfc((n_{j*} − n_j)/(2σ)) ≥ P[GNMax ≠ j*] (Papernot
    et al. 2018, Prop. 7), capped at log(1 − 1/k) (the answer is wrong with probability ≤
    1 − 1/k at worst). j* = argmax n (lowest index among ties). Computed in log space."""
    v = _votes(votes)
    s = sigma
    k = v.shape[-1]
    top = np.argmax(v, axis=-1)[..., None]
    gap = np.take_along_axis(v, top, axis=-1) - v
    # ½ erfc(g/(2σ)) = Φ(−g/(√2 σ))
    terms = np.where(np.arange(k) == top, -np.inf, log_ndtr(-gap / (math.sqrt(2) * s)))
    out = np.minimum(logsumexp(terms, axis=-1), math.log1p(-1.0 / k))
    return float(out) if out.ndim == 0 else out


def _theorem6(log_q: np.ndarray, sigma: float, alpha: np.ndarray) -> np.ndarray:
    """Per-query RDP (queries × orders): min(λ/σ², Thm 6 bound) with μ₂ = σ√(log 1/q̃),
    μ₁ = μ₂ + 1, ε_i = μ_i/σ² (Papernot et al. 2018, Thm 6 and Prop. 10), where the theorem
    applies (λ < μ₁, μ₂ > 1, q̃ e^{ε₂} < 1 and its condition on q̃); elsewhere λ/σ²."""
    lq = log_q[:, None]
    a = alpha[None, :]
    base = np.broadcast_to(a / sigma ** 2, (lq.shape[0], a.shape[1])).copy()
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mu2 = sigma * np.sqrt(-lq)
        mu1 = mu2 + 1
        e1, e2 = mu1 / sigma ** 2, mu2 / sigma ** 2
        ok_q = (-lq > e2) & (lq <= (mu2 - 1) * e2 - mu2 * (np.log1p(1 / (mu1 - 1))
                                                           + np.log1p(1 / (mu2 - 1))))
        ok = (mu1 > a) & (mu2 > 1) & ok_q
        log1mq = np.log(-np.expm1(lq))
        x = (lq + e2) * (1 - 1 / mu2)
        log_a = (a - 1) * (log1mq - np.log(-np.expm1(x)))
        log_b = (a - 1) * (e1 - lq / (mu1 - 1))
        dep = np.logaddexp(log1mq + log_a, lq + log_b) / (a - 1)
    return np.where(ok & np.isfinite(dep), np.minimum(base, dep), base)


@constrained(sigma=POSITIVE, orders=ORDERS_OR_NONE)
def data_dependent_rdp_not_publishable(votes: object, sigma: float,
                                       orders: object = None) -> np.ndarray:
    """Total data-dependent RDP of GNMax answers to the queries ``votes`` (queries × classes),
    summed over queries (Papernot et al. 2018, Thm 6, Prop. 7, Prop. 10), at ``orders``
    (default: :data:`dplib.accounting.DEFAULT_ORDERS`).

    NOT PUBLISHABLE: the value depends on the votes, which depend on the private data. Releasing
    it (or an ε computed from it) is itself a release with no privacy guarantee; Papernot et
    al. (2018, §4.3, App. C) publish it only with noise calibrated to its smooth sensitivity
    (Nissim, Raskhodnikova & Smith 2007). Use :func:`pate_epsilon` for a publishable ε."""
    from ..accounting import DEFAULT_ORDERS
    alpha = np.asarray(DEFAULT_ORDERS if orders is None else orders, dtype=float).reshape(-1)
    v = _votes(votes)
    lq = np.atleast_1d(gnmax_log_q(v.reshape(-1, v.shape[-1]), sigma))
    return _theorem6(lq, sigma, alpha).sum(axis=0)


@constrained(sigma=POSITIVE, delta=DELTA)
def data_dependent_epsilon_not_publishable(votes: object, sigma: float, delta: float) -> float:
    """ε at δ of :func:`data_dependent_rdp_not_publishable` (RDP→DP conversion of
    :func:`dplib.accounting.rdp_to_epsilon`). NOT PUBLISHABLE: see that function."""
    from ..accounting import DEFAULT_ORDERS
    r = data_dependent_rdp_not_publishable(votes, sigma, DEFAULT_ORDERS)
    return rdp_to_epsilon(DEFAULT_ORDERS, r, delta)[0]
