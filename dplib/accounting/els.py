"""User-level privacy of example-level sampling (ELS): DP-SGD that Poisson-samples *records*,
accounted for adding or removing one *user* with k records, tightly, by privacy-loss distributions.

The mechanism (Charles, Ganesh, McKenna, McMahan, Mitchell, Pillutla & Rush 2024, "Fine-Tuning
Large Language Models with User-Level Differential Privacy", arXiv:2407.07737, DP-SGD-ELS and its
user-level accountant; Ganesh 2024, "Tight Group-Level DP Guarantees for DP-SGD with Sampling via
Mixture of Gaussians Mechanisms", arXiv:2401.10294, Poisson sampling): every record is in a step's
batch independently with probability q, each sampled record's gradient is clipped to norm C, and
N(0, σ²C²·I) is added to the sum. Removing a user with k records removes J ~ Binomial(k, q) of them
from the batch, each moving the sum by at most C. With all the user's clipped gradients equal,
of norm C, along one axis (the worst case: a multi-dimensional mixture of Gaussians is dominated
by the one-dimensional mixture with the same sensitivity norms, Choquette-Choo, Ganesh, Steinke &
Thakurta 2024, "Privacy Amplification for Matrix Mechanisms", arXiv:2310.15526, Cor. 4.7; Ganesh
2024 gives the Binomial(k, q) dominating pair of Poisson sampling and shows it tight when every
iterate is released), one step is the mixture-of-Gaussians (MoG) pair, in units of C,

* remove: P = Σ_j b_j·N(j, σ²),  Q = N(0, σ²);
* add:    P = N(0, σ²),           Q = Σ_j b_j·N(j, σ²);     b_j = C(k, j) q^j (1 − q)^{k−j},

whose privacy loss in the remove direction is L(x) = log Σ_j b_j·e^{(2jx − j²)/(2σ²)} (the add
direction's is −L(x) under N(0, σ²)). L is a log-sum-exp of affine functions of x, hence convex
and increasing: the loss intervals of a grid are x-intervals, found by Newton's method from the
right (monotone for a convex increasing function). Each step is discretised pessimistically as
:func:`dplib.accounting.pld_grid.subsampled_gaussian_pld` does (connect the dots, Doroshenko,
Ghazi, Kamath, Kumar & Manurangsi 2022, §4, Thm 4.3), T steps are composed by FFT (Koskela,
Jälkö & Honkela 2020) and ε(δ) is the worse of the two directions — the machinery of
:class:`~dplib.accounting.PLDAccountant`, which :class:`ELSAccountant` extends.

For k = 1 the pair is the Poisson-subsampled Gaussian's (b = (1 − q, q)), and the accountant uses
:func:`~dplib.accounting.pld_grid.subsampled_gaussian_pld` itself: its ε is the record-level PLD
accountant's, number for number. Components of the binomial with total weight ≤ half the step's
tail mass are dropped; that mass becomes infinite loss in the remove direction (P then has an
atom outside Q's support, a pair that dominates the true one by post-processing) and is left out
of Q in the add direction (Q gets the atom instead; same argument), so every number stays an upper
bound. At q = 1 the mixture is one Gaussian with sensitivity k, composed exactly
(μ = k·√T/σ; Dong, Roth & Su 2022, Cor. 3.3).

No Rényi bound is given here: the RDP accountant refuses the event (it has no certified Rényi
divergence for the mixture). Group privacy from a record-level guarantee
(:func:`dplib.accounting.group_privacy`, :func:`dplib.training.user_level.group_epsilon`) is a valid
but much looser bound for the same run.

>>> acc = ELSAccountant().compose(ExampleLevelUserEvent(1.0, 0.01, 2), 1000)
>>> round(acc.get_epsilon(1e-5), 1)
4.0
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, ndtr, ndtri

from .._constraints import Custom, Interval, Options, constrained, unconstrained
from .._validate import check_int
from ._params import COUNT, DELTA, NOISE_MULTIPLIER, POSITIVE, SAMPLE_RATE
from .events import EVENT, ComposedEvent, DpEvent, SelfComposedEvent, Step
from .pld import PLDAccountant
from .pld_grid import (DiscretePLD, loss_range, loss_scale, subsampled_gaussian_pld,
                       variance_over_mean_abs)
from .registry import register_accountant

__all__ = ["ExampleLevelUserEvent", "ELSAccountant", "els_user_epsilon", "binomial_weights",
           "mixture_gaussian_pld", "mixture_loss_range", "mixture_loss_scale", "MAX_RECORDS"]

#: Largest number of records per user accounted: the mixture has one Gaussian per possible count
#: of the user's records in a batch, and each costs one pass over the grid (users with more
#: records are capped before training, as every user-level method does).
MAX_RECORDS = 1000


def _check_records(name: str, value: object) -> int:
    k = check_int(name, value, low=1)
    if k > MAX_RECORDS:
        raise ValueError(f"{name} must be an integer in [1, {MAX_RECORDS}] (one Gaussian per "
                         f"possible count of the user's records in a batch), got {k}")
    return k


#: Records per user k ∈ [1, :data:`MAX_RECORDS`].
RECORDS = Custom(_check_records, f"an integer in [1, {MAX_RECORDS}]",
                 [0, -1, 1.5, 1.0, float("nan"), "2", None, True, [2], MAX_RECORDS + 1],
                 family="int1")
#: P-mass left beyond each end of a step's grid (default of the public PLD functions).
_STEP_TAIL = 1e-30
#: Largest (components × grid points) evaluated at once.
_BLOCK = 1 << 22


@constrained(sample_rate=SAMPLE_RATE, records_per_user=RECORDS,
             tail_mass=Interval(0.0, 1.0, closed="neither"))
def binomial_weights(sample_rate: float, records_per_user: int, *,
                     tail_mass: float = _STEP_TAIL) -> tuple[np.ndarray, np.ndarray, float]:
    """(j, log b_j, dropped): the counts j of a user's records in a Poisson batch that are kept,
    the log-probabilities of J ~ Binomial(k, q) there, and the total probability of the counts
    dropped — the smallest ones from each end of the support, each end's total at most
    ``tail_mass``/4 (so ``dropped`` ≤ ``tail_mass``/2). At least one count j ≥ 1 is always kept.
    log b_j = log C(k, j) + j log q + (k − j) log(1 − q), with log C(k, j) by ``gammaln``."""
    q, k = sample_rate, records_per_user
    j = np.arange(k + 1)
    with np.errstate(divide="ignore"):
        logq = math.log(q)
        log1q = math.log1p(-q) if q < 1.0 else -math.inf
        lw = (gammaln(k + 1) - gammaln(j + 1) - gammaln(k - j + 1)
              + j * logq + np.where(j < k, (k - j) * log1q, 0.0))
    w = np.exp(lw)
    lo_tail = np.cumsum(w)                    # P(J ≤ j)
    hi_tail = np.cumsum(w[::-1])[::-1]        # P(J ≥ j)
    keep = (lo_tail > tail_mass / 4) & (hi_tail > tail_mass / 4)
    keep[max(1, int(np.argmax(w)))] = True    # never empty, never only j = 0
    lo, hi = int(np.flatnonzero(keep)[0]), int(np.flatnonzero(keep)[-1])
    dropped = float(math.fsum(w[:lo]) + math.fsum(w[hi + 1:]))
    return j[lo:hi + 1], lw[lo:hi + 1], dropped


def _remove_loss(x: np.ndarray, sigma: float, j: np.ndarray, lw: np.ndarray) -> np.ndarray:
    """L(x) = log Σ_j b_j e^{(2jx − j²)/(2σ²)} for each x (remove direction; add: −L)."""
    x = np.asarray(x, dtype=float)
    s = lw[:, None] + (2.0 * j[:, None] * x[None, :] - j[:, None] ** 2.0) / (2.0 * sigma**2)
    return np.logaddexp.reduce(s, axis=0)


def _threshold(v: np.ndarray, sigma: float, j: np.ndarray, lw: np.ndarray) -> np.ndarray:
    """x with L(x) = v (remove loss), by Newton's method from the right.

    With the count j = 0 (weight b₀) split off, L(x) = v ⇔ M(x) = r with
    M(x) = log Σ_{j≥1} b_j e^{(2jx − j²)/(2σ²)} and r = v + log(1 − b₀e^{−v}); M is a log-sum-exp
    of affine functions (convex, increasing, asymptotically linear at both ends), so Newton's
    iterates from a point right of the root decrease monotonically to it in a few steps. Start:
    the smallest x at which one term alone reaches r (there M ≥ r). −inf where v ≤ log b₀ (every
    x has L(x) > v)."""
    v = np.asarray(v, dtype=float)
    out = np.full(v.shape, -np.inf)
    pos = j > 0
    jp, lwp = j[pos].astype(float), lw[pos]
    live = np.flatnonzero(v > lw[0]) if j[0] == 0 else np.arange(v.size)
    with np.errstate(divide="ignore"):
        r = v[live] + (np.log(-np.expm1(lw[0] - v[live])) if j[0] == 0 else 0.0)
    s2 = sigma**2
    scale = s2 / jp.max()
    a, b = jp / s2, lwp - jp**2 / (2.0 * s2)           # M(x) = logsumexp(a·x + b)
    x = np.min((r[None, :] - b[:, None]) / a[:, None], axis=0)
    todo = np.arange(live.size)
    for _ in range(100):
        xs = x[todo]
        step = max(1, _BLOCK // jp.size)
        dx = np.empty(xs.size)
        for start in range(0, xs.size, step):           # bounded memory
            blk = slice(start, start + step)
            t = a[:, None] * xs[None, blk] + b[:, None]
            big = np.max(t, axis=0)
            e = np.exp(t - big)
            tot = e.sum(axis=0)
            dx[blk] = (big + np.log(tot) - r[todo[blk]]) / ((a @ e) / tot)
        x[todo] = xs - dx
        todo = todo[np.abs(dx) > 1e-14 * (np.abs(xs) + scale)]
        if todo.size == 0:
            break
    out[live] = x
    return out


def _interval_masses(edges: np.ndarray) -> np.ndarray:
    """P(e_k < Z ≤ e_{k+1}) for Z ∼ N(0, 1), each on the side of the smaller tail (as
    :mod:`.pld_grid` computes them: no 1 − 1 cancellation)."""
    g = ndtr(-np.abs(edges))
    lo, hi = edges[..., :-1], edges[..., 1:]
    g_lo, g_hi = g[..., :-1], g[..., 1:]
    return np.where(lo >= 0, g_lo - g_hi, np.where(hi <= 0, g_hi - g_lo, 1.0 - g_lo - g_hi))


def _mixture_masses(edges: np.ndarray, sigma: float, j: np.ndarray,
                    lw: np.ndarray) -> np.ndarray:
    """Σ_j b_j·P(e_k < X ≤ e_{k+1}) for X ∼ N(j, σ²): the mixture's mass of each interval,
    summed over blocks of components (bounded memory)."""
    out = np.zeros(edges.size - 1)
    step = max(1, _BLOCK // edges.size)
    for start in range(0, j.size, step):
        jj, ww = j[start:start + step], np.exp(lw[start:start + step])
        out += ww @ _interval_masses((edges[None, :] - jj[:, None]) / sigma)
    return out


def _split_up(p: np.ndarray, q: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """p − e^{ε}·q ∈ [0, p] without forming e^{ε} (as in :mod:`.pld_grid`)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = eps + np.log(np.maximum(q, 0.0)) - np.log(p)
    log_ratio = np.minimum(np.where(p > 0, log_ratio, 0.0), 0.0)
    return np.where(p > 0, p * -np.expm1(log_ratio), 0.0)


def _z(tail: float) -> float:
    return float(-ndtri(min(max(tail, 1e-300), 0.5)))


def _x_range(sigma: float, j: np.ndarray, lw: np.ndarray, direction: str,
             tail_mass: float) -> tuple[float, float]:
    """[x_lo, x_hi] outside which P has mass ≤ ``tail_mass``/2 on each side: each of the n
    components of weight b gets b·Φ̄(z) ≤ tail_mass/(2n)."""
    if direction == "add":
        z = _z(tail_mass / 2)
        return -sigma * z, sigma * z
    w = np.exp(lw)
    z = np.array([_z(tail_mass / (2 * j.size * wi)) for wi in w])
    return float(np.min(j - sigma * z)), float(np.max(j + sigma * z))


_DIRECTION = Options("remove", "add")


@constrained(noise_multiplier=NOISE_MULTIPLIER, sample_rate=SAMPLE_RATE,
             records_per_user=RECORDS, direction=_DIRECTION,
             tail_mass=Interval(0.0, 1.0, closed="neither"))
def mixture_loss_range(noise_multiplier: float, sample_rate: float, records_per_user: int,
                       direction: str = "remove", tail_mass: float = _STEP_TAIL
                       ) -> tuple[float, float]:
    """(bottom, top): the losses at the ends of the x-range outside which P has mass ≤
    ``tail_mass`` (binomial counts dropped included); L is monotone in x. k = 1 gives
    :func:`~dplib.accounting.pld_grid.loss_range`."""
    s, q, k = noise_multiplier, sample_rate, records_per_user
    if k == 1:
        return loss_range(s, q, direction, tail_mass)
    j, lw, _ = binomial_weights(q, k, tail_mass=tail_mass)
    x_lo, x_hi = _x_range(s, j, lw, direction, tail_mass)
    lo, hi = _remove_loss(np.array([x_lo, x_hi]), s, j, lw)
    return (float(lo), float(hi)) if direction == "remove" else (float(-hi), float(-lo))


@constrained(noise_multiplier=NOISE_MULTIPLIER, sample_rate=SAMPLE_RATE,
             records_per_user=RECORDS, direction=_DIRECTION)
def mixture_loss_scale(noise_multiplier: float, sample_rate: float, records_per_user: int,
                       direction: str = "remove") -> float:
    """Var(L)/E|L| of one step's loss under P (80-node Gauss–Hermite per component), the scale
    :class:`ELSAccountant` caps its grid spacing by (see
    :func:`~dplib.accounting.pld_grid.loss_scale`, which k = 1 returns)."""
    s, q, k = noise_multiplier, sample_rate, records_per_user
    if k == 1:
        return loss_scale(s, q, direction)
    j, lw, _ = binomial_weights(q, k, tail_mass=1e-16)
    z, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()
    if direction == "remove":
        x = (j[:, None] + s * z[None, :]).ravel()
        wts = (np.exp(lw)[:, None] * w[None, :]).ravel()
        vals = _remove_loss(x, s, j, lw)
    else:
        vals, wts = -_remove_loss(s * z, s, j, lw), w
    return variance_over_mean_abs(vals, wts / wts.sum())


@constrained(noise_multiplier=NOISE_MULTIPLIER, sample_rate=SAMPLE_RATE,
             records_per_user=RECORDS, direction=_DIRECTION,
             value_discretization_interval=POSITIVE,
             tail_mass=Interval(0.0, 1.0, closed="neither"))
def mixture_gaussian_pld(noise_multiplier: float, sample_rate: float, records_per_user: int, *,
                         direction: str = "remove", value_discretization_interval: float = 1e-3,
                         tail_mass: float = _STEP_TAIL) -> DiscretePLD:
    """Pessimistic discrete PLD of one ELS step for a user with k records: the mixture pair of
    the module docstring (Ganesh 2024; Charles et al. 2024), P = Σ_j b_j N(j, σ²) against
    Q = N(0, σ²) (``direction="remove"``) or the reverse (``"add"``), b = Binomial(k, q).

    The grid and the split of each interval's P-mass between its ends are those of
    :func:`~dplib.accounting.pld_grid.subsampled_gaussian_pld` (connect the dots, Doroshenko et
    al. 2022, §4): interval (ε_{i−1}, ε_i] of losses is the x-interval (t_{i−1}, t_i] (remove;
    L(x) > ε ⇔ x > t(ε), t by Newton's method) or [t(−ε_i), t(−ε_{i−1})) (add), its P- and
    Q-masses are Gaussian interval masses summed over the components. Losses below the grid are
    moved up to it, the mass above it becomes δ(ε_top) of infinite loss plus the rest at ε_top,
    and the binomial counts dropped by :func:`binomial_weights` (≤ ``tail_mass``/2) become
    infinite loss (remove) or are left out of Q (add) — all pessimistic. k = 1 returns
    :func:`~dplib.accounting.pld_grid.subsampled_gaussian_pld` (the same pair)."""
    s, q, k = noise_multiplier, sample_rate, records_per_user
    h, tail = value_discretization_interval, tail_mass
    if k == 1:
        return subsampled_gaussian_pld(s, q, direction=direction,
                                       value_discretization_interval=h, tail_mass=tail)
    j, lw, dropped = binomial_weights(q, k, tail_mass=tail)
    bottom, top = mixture_loss_range(s, q, k, direction, tail)
    i0, i1 = math.floor(bottom / h), math.ceil(top / h)
    if i1 - i0 > 50_000_000:
        raise ValueError(f"value_discretization_interval={h:g} needs {i1 - i0} grid points for "
                         f"noise_multiplier={s:g}, records_per_user={k}; use a larger interval")
    eps = np.arange(i0, i1 + 1) * h
    if direction == "remove":
        t = np.concatenate([[-np.inf], _threshold(eps, s, j, lw), [np.inf]])
        q_mass = _interval_masses(t / s)
        p_mass = _mixture_masses(t, s, j, lw)
    else:
        t = np.concatenate([[-np.inf], _threshold(-eps, s, j, lw)[::-1], [np.inf]])
        p_mass = _interval_masses(t / s)[::-1]
        q_mass = _mixture_masses(t, s, j, lw)[::-1]
    pmf = np.zeros(eps.size)
    pmf[0] = p_mass[0]
    pi, qi = p_mass[1:-1], q_mass[1:-1]
    up = np.minimum(_split_up(pi, qi, eps[:-1]) / -math.expm1(-h), pi)
    pmf[1:] += up
    pmf[:-1] += pi - up
    inf_mass = float(_split_up(p_mass[-1:], q_mass[-1:], eps[-1:])[0])
    pmf[-1] += p_mass[-1] - inf_mass
    if direction == "remove":
        inf_mass += dropped
    return DiscretePLD(pmf=pmf, offset=i0, h=h, infinity_mass=inf_mass)


@dataclass(frozen=True)
@constrained(noise_multiplier=NOISE_MULTIPLIER, sample_rate=SAMPLE_RATE,
             records_per_user=RECORDS)
class ExampleLevelUserEvent(DpEvent):
    """One DP-SGD step with example-level sampling, seen from one user with k records: records
    Poisson-sampled at ``sample_rate`` q, each clipped to C, N(0, σ²C²·I) added to the sum
    (``noise_multiplier`` σ = noise std / C), adjacency = adding or removing the user's
    ``records_per_user`` records (Charles et al. 2024, DP-SGD-ELS). Accounted by
    :class:`ELSAccountant` only (the mixture pair of :mod:`dplib.accounting.els`); the other
    accountants refuse it."""

    noise_multiplier: float
    sample_rate: float
    records_per_user: int


def _els_leaves(event: DpEvent, count: int):
    if isinstance(event, SelfComposedEvent):
        yield from _els_leaves(event.event, count * event.count)
    elif isinstance(event, ComposedEvent):
        for e in event.events:
            yield from _els_leaves(e, count)
    elif isinstance(event, ExampleLevelUserEvent):
        yield Step(ExampleLevelUserEvent, event.noise_multiplier, event.sample_rate, "poisson",
                   count, curve=event)
    else:
        raise ValueError(f"event: ELSAccountant accounts ExampleLevelUserEvent steps (and their "
                         f"compositions) only, got {type(event).__name__}; use PLDAccountant "
                         "or RDPAccountant for record-level events")


@register_accountant("els")
class ELSAccountant(PLDAccountant):
    """User-level (ε, δ) of DP-SGD with example-level sampling, by the mixture-of-Gaussians PLD
    (module docstring; Charles et al. 2024; Ganesh 2024): compose
    :class:`ExampleLevelUserEvent` steps, ask :meth:`get_epsilon`/:meth:`get_delta`.

    Adjacency: adding or removing one user (both directions composed, the worse reported);
    sampler: Poisson over records. Everything else is :class:`~dplib.accounting.PLDAccountant`:
    the grid spacing ``value_discretization_interval`` (capped at 0.05·Var(L)/E|L| per phase),
    the grid budgets, the FFT composition with its truncation and round-off added to δ — every
    answer is an upper bound. No RDP fallback (no Rényi bound is stated for the mixture). Phases
    with q = 1 are one Gaussian of sensitivity k, composed exactly (route ``"gaussian"``).

    >>> acc = ELSAccountant().compose(ExampleLevelUserEvent(1.0, 0.01, 1), 1000)
    >>> from dplib.accounting import PLDAccountant
    >>> ref = PLDAccountant(rdp_fallback=False).step(noise_multiplier=1.0, sample_rate=0.01,
    ...                                              num_steps=1000)
    >>> acc.get_epsilon(1e-5) == ref.get_epsilon(1e-5)
    True
    """

    @constrained(value_discretization_interval=POSITIVE, neighboring=Options("add_remove"))
    def __init__(self, value_discretization_interval: float = 1e-3, *,
                 neighboring: str = "add_remove") -> None:
        super().__init__(value_discretization_interval, neighboring=neighboring,
                         rdp_fallback=False)

    @constrained(event=EVENT, count=COUNT)
    def compose(self, event: DpEvent, count: int = 1) -> "ELSAccountant":
        """Record ``event`` (ExampleLevelUserEvent steps, possibly composed) ``count`` times;
        returns ``self``. Other events raise ``ValueError`` before anything is recorded."""
        leaves = list(_els_leaves(event, count))
        for leaf in leaves:
            self._append_history(leaf)
        self.events.append(event)
        self._invalidate()
        return self

    @unconstrained("asks whether compose (declared) would accept the event; never raises")
    def supports(self, event: DpEvent) -> bool:
        """Whether :meth:`compose` accepts ``event``."""
        try:
            list(_els_leaves(event, 1))
        except ValueError:
            return False
        return True

    @classmethod
    @unconstrained("the hook calibrate (declared) calls with its checked arguments")
    def calibration_shortcut(cls, event_of, target_epsilon, delta, options, rtol, floor,
                             ceiling, name):
        """None: no RDP warm start for the mixture; :func:`~dplib.accounting.calibrate`
        searches with this accountant directly."""
        return None

    def _check_supported(self, leaf) -> None:      # compose checks the events itself
        pass

    def _step_pld(self, p, direction: str, h: float, tail: float) -> DiscretePLD:
        return mixture_gaussian_pld(p.noise_multiplier, p.sample_rate, p.curve.records_per_user,
                                    direction=direction, value_discretization_interval=h,
                                    tail_mass=tail)

    @staticmethod
    def _step_shape(p, direction: str, tail: float) -> tuple[float, tuple[float, float]]:
        k = p.curve.records_per_user
        return (mixture_loss_scale(p.noise_multiplier, p.sample_rate, k, direction),
                mixture_loss_range(p.noise_multiplier, p.sample_rate, k, direction, tail))

    def _gaussian_mu(self) -> float | None:
        """μ = √(Σ T·k²/σ²) when every phase has q = 1 (each step: a Gaussian of sensitivity k;
        Dong, Roth & Su 2022, Cor. 3.3), else None."""
        if any(p.sample_rate < 1.0 for p in self.history):
            return None
        return math.sqrt(math.fsum(p.num_steps * (p.curve.records_per_user
                                                  / p.noise_multiplier) ** 2
                                   for p in self.history))


@constrained(noise_multiplier=NOISE_MULTIPLIER, sample_rate=SAMPLE_RATE,
             records_per_user=RECORDS, num_steps=COUNT, delta=DELTA,
             value_discretization_interval=POSITIVE)
def els_user_epsilon(noise_multiplier: float, sample_rate: float, records_per_user: int,
                     num_steps: int, delta: float, *,
                     value_discretization_interval: float = 1e-3) -> float:
    """User-level ε at ``delta`` of ``num_steps`` DP-SGD steps with example-level sampling for a
    user with ``records_per_user`` records (:class:`ELSAccountant`; an upper bound, tight up to
    the discretisation)."""
    acc = ELSAccountant(value_discretization_interval)
    acc.compose(ExampleLevelUserEvent(noise_multiplier, sample_rate, records_per_user),
                num_steps)
    return acc.get_epsilon(delta)
