"""User-level DP-SGD: the privacy unit is a person (all of one user's records), not one record.

Record-level DP-SGD (:mod:`dplib.training.trainer`) protects one record. When one person
contributes many records (a user's messages, a patient's visits), a record-level (ε, δ) only
gives (kε, δ(e^{kε} − 1)/(e^ε − 1)) for the k records of one person by group privacy
(:func:`dplib.accounting.group_privacy`; Dwork & Roth 2014, Thm 2.2 for δ = 0), far weaker than
a run whose unit is the user (Ponomareva et al. 2023 on choosing the privacy unit).
Charles et al. 2024 compare two families of user-level DP-SGD: sampling examples (ELS, per-example
clipping, accounted with the user's group of examples) and sampling users (ULS, per-user
clipping). This module is the second, DP-FedAvg's aggregation with one gradient step per user
(McMahan, Ramage, Talwar & Zhang 2018, Algorithm 1, the fixed-denominator estimator):

0. Contribution bound, once before training: each user keeps at most ``records_per_user``
   records, chosen uniformly at random among its own records (:func:`cap_records`: a random key
   per record from the run's generator, the k smallest keys of each user kept), made before any
   batch exists and never from the records' contents. The keys are drawn by record position, so
   adding a user can change which records another user keeps, but not the law of that choice
   (uniform among the user's records), which is what the guarantee needs.
1. Poisson sampling of USERS: every one of the m users is in U_t independently with probability
   q = ``sample_rate`` (:func:`dplib.samplers.poisson_batches` on user indices).
2. Each sampled user's gradient is the MEAN over its kept records, g_u = (1/k_u) Σ_{i∈u} ∇ℓ_i,
   the gradient of the user's own average loss (the "user gradient" of Charles et al. 2024's
   ULS; one local step of DP-FedAvg), clipped as one vector: ḡ_u = g_u·min(1, C/‖g_u‖).
   Why the mean, not the sum: either gives sensitivity C after clipping, but the sum's norm grows
   with k_u, so heavy users would be clipped hardest and light users' directions would be
   drowned; the mean weighs every sampled user equally (the user is the unit), and a user's
   clipping no longer depends on how many records it has.
3. Noise on the sum over users: (Σ_{u∈U_t} ḡ_u + N(0, σ²C² I)) / B_U, where B_U is the public
   EXPECTED number of sampled users (``expected_batch_size``, default q·m, which treats the
   number of users m as public, the convention of the record-level trainer).

Privacy: adding or removing one user (all its records) changes the clipped sum by at most C in
ℓ2 norm, and users are Poisson-sampled at rate q, so each step is the Poisson-subsampled Gaussian
mechanism with noise multiplier σ over users: the SAME DP-SGD event (σ, q, T) the record-level
accountant composes, with "one record of the sampled population" read as "one user"
(Abadi et al. 2016, Sec. 3.1; the user-level analysis of DP-FedAvg, McMahan et al. 2018). The cap is not needed for the bound
(the clipped mean has norm ≤ C whatever k_u); it bounds the work per user and per step.

Vectorised: per-example gradients by ``vmap`` (in chunks), summed into their users with
``index_add_`` (a segment sum weighted by 1/k_u), per-user norms, one weighted sum — no Python
loop over users or records. As in :mod:`dplib.training.clipped_sum`, a batch whose fast path
raises or changes the model's state is recomputed exactly by :func:`exact_user_clipped_sum`
(autograd, one record at a time), so nothing observable depends on which users were sampled; a
user with a record whose gradient is not finite, or whose computation fails, adds nothing (a
function of that user alone: the sensitivity stays C).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

from .._constraints import Integer, IsCallable, constrained, unconstrained
from .._validate import check_int, check_real, shown
from ._params import ACCOUNTANT, COUNT, DELTA, POSITIVE, RNG, SAMPLE_RATE, optional
from ..accounting import group_privacy
from .clipped_sum import StateSnapshot
from .grads import clip_factors, cpu_chunk_size, row_norms, weighted_example_sum

__all__ = ["check_user_ids", "cap_records", "UserIndex", "user_clipped_sum",
           "exact_user_clipped_sum", "group_epsilon", "UnitComparison", "compare_privacy_units"]


@constrained(n=COUNT)
def check_user_ids(user_ids: object, n: int) -> np.ndarray:
    """``user_ids`` as an int64 array of length ``n`` (one non-negative integer per record), or a
    ``ValueError`` naming ``user_ids``: a length other than the number of records, a
    non-integer value (a float with a fraction, NaN, a string, a bool) or a negative id."""
    arr = user_ids.detach().cpu().numpy() if isinstance(user_ids, torch.Tensor) \
        else np.asarray(user_ids) if not isinstance(user_ids, (str, bytes)) else None
    if arr is None or arr.dtype == object or arr.dtype == bool or arr.ndim != 1 \
            or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"user_ids must be a 1-d array of non-negative integers (one per "
                         f"record), got {shown(user_ids)}"[:300])
    if arr.shape[0] != n:
        raise ValueError(f"user_ids must hold one id per record ({n}), got {arr.shape[0]}")
    if not np.issubdtype(arr.dtype, np.integer):
        if not bool(np.all(np.isfinite(arr))) or not bool(np.all(arr == np.round(arr))):
            raise ValueError(f"user_ids must be integers, got non-integer values such as "
                             f"{shown(arr[~np.isfinite(arr) | (arr != np.round(arr))][:3])}")
    if arr.size and bool((arr < 0).any()):
        raise ValueError(f"user_ids must be >= 0, got {shown(arr[arr < 0][:3])}")
    return arr.astype(np.int64)


@constrained(records_per_user=optional(COUNT), rng=RNG)
def cap_records(user_ids: object, records_per_user: int | None, *, rng) -> np.ndarray:
    """The sorted indices of the records kept when each user keeps at most ``records_per_user``
    of its records (None: all), chosen uniformly at random among that user's records: every
    record gets an independent uniform key from ``rng`` and each user keeps its k smallest keys.
    The choice depends only on the user's record positions and the generator — no record's
    content — and is made once, before training (the contribution bound of Charles et al. 2024;
    Amin, Kulesza, Muñoz Medina & Vassilvitskii 2019 on choosing the bound)."""
    ids = check_user_ids(user_ids, len(user_ids) if hasattr(user_ids, "__len__") else 1)
    gen, k = rng, records_per_user
    if k is None:
        return np.arange(ids.size)
    keys = gen.random(ids.size)
    order = np.lexsort((keys, ids))                 # by user, then by random key
    sorted_ids = ids[order]
    first = np.searchsorted(sorted_ids, sorted_ids, side="left")
    rank = np.arange(ids.size) - first              # position within the user's records
    return np.sort(order[rank < k])


@dataclass(frozen=True)
@unconstrained("an index record built by UserIndex.build from user ids it checked")
class UserIndex:
    """Records grouped by user: ``users`` (the distinct ids, sorted), ``order`` (record indices
    grouped by user), ``starts``/``counts`` (each user's slice of ``order``)."""
    users: np.ndarray
    order: np.ndarray
    starts: np.ndarray
    counts: np.ndarray

    @classmethod
    @unconstrained("a constructor from user ids, checked in the body by check_user_ids")
    def build(cls, user_ids: object) -> "UserIndex":
        """The index of ``user_ids`` (one id per record)."""
        ids = check_user_ids(user_ids, len(user_ids))
        order = np.argsort(ids, kind="stable")
        users, starts, counts = np.unique(ids[order], return_index=True, return_counts=True)
        return cls(users, order, starts, counts)

    @property
    def n_users(self) -> int:
        return int(self.users.size)

    @unconstrained("called by train every step with the sampled user positions (Poisson batches "
                   "of the users; no check per step)")
    def records(self, batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For user positions ``batch`` (indices into :attr:`users`): (record indices, the
        position in ``batch`` of each record's user), without a loop over users."""
        batch = np.asarray(batch, dtype=np.int64)
        cnt = self.counts[batch]
        seg = np.repeat(np.arange(batch.size), cnt)
        offset = np.arange(seg.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        return self.order[np.repeat(self.starts[batch], cnt) + offset], seg


def _grads_and_losses(model: nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor):
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def one(p, b, xi, yi):
        return loss_fn(functional_call(model, (p, b), (xi.unsqueeze(0),)), yi.unsqueeze(0))
    g, losses = vmap(grad_and_value(one), in_dims=(None, None, 0, 0),
                     randomness="different")(params, buffers, x, y)
    return dict(g), losses


def _check_norm(max_norm: object) -> float:
    """C in (0, ∞] (∞: no clipping, only with σ = 0), as every trainer checks it."""
    return check_real("max_norm", max_norm, low=0.0, high=math.inf, high_open=False)


def _check_batch(x: object, y: object) -> None:
    for name, v in (("x", x), ("y", y)):
        if not isinstance(v, torch.Tensor) or v.dim() == 0:
            raise ValueError(f"{name} must be a torch tensor with a batch dimension, got "
                             f"{type(v).__name__} {shown(v)}"[:300])
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must have the same number of examples, got {x.shape[0]} "
                         f"and {y.shape[0]}")


def _check_segments(x: torch.Tensor, segments: object, n_users: object) -> tuple[torch.Tensor, int]:
    m = check_int("n_users", n_users, low=0)
    if not isinstance(segments, torch.Tensor) or segments.dim() != 1 \
            or segments.shape[0] != x.shape[0] or segments.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"segments must be an integer tensor [B] (each record's user in "
                         f"[0, n_users)), got {shown(segments)}"[:300])
    if segments.numel() and (int(segments.min()) < 0 or int(segments.max()) >= m):
        raise ValueError(f"segments must lie in [0, n_users={m}), got values in "
                         f"[{int(segments.min())}, {int(segments.max())}]")
    return segments.long(), m


def _clip_users(acc: dict, c: float) -> tuple[dict, torch.Tensor]:
    """Σ_u min(1, C/‖g_u‖) g_u over the rows of ``acc`` (a user with a non-finite gradient adds 0)."""
    if not acc or next(iter(acc.values())).shape[0] == 0:
        return {k: a.new_zeros(a.shape[1:]) for k, a in acc.items()}, torch.zeros(0,
                                                                                   dtype=torch.float64)
    per_param = [row_norms(a.reshape(a.shape[0], -1)) for a in acc.values()]
    norms = torch.linalg.vector_norm(torch.stack(per_param), dim=0)   # float64, no overflow
    f = clip_factors(norms, c)
    return {k: weighted_example_sum(f, a) for k, a in acc.items()}, norms


@unconstrained("a per-step part of a user-level run: called every step by train with the run's "
               "checked C and the sampled users' records (no check per step); it keeps its own "
               "checks of the tensors")
def user_clipped_sum(model: nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor,
                     segments: torch.Tensor, n_users: int, max_norm: float, *,
                     chunk_size: int | None = None, snapshot: StateSnapshot | None = None
                     ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """Σ_u min(1, C/‖g_u‖) g_u with g_u = (1/k_u) Σ_{i: segments_i = u} ∇ℓ(f(x_i), y_i), the
    clipped sum of step 2 of the module docstring (Charles et al. 2024, ULS; McMahan et al. 2018,
    Alg. 1 with one local step). ``segments`` [B] gives each record's user in [0, ``n_users``).
    Fast path: ``vmap`` per-example gradients in chunks of ``chunk_size`` records (None: about
    32 MiB of gradients on a CPU, the whole batch on a GPU), segment-summed by ``index_add_``;
    when it raises or the forward pass changes the model's state, the model is restored and the
    batch recomputed by :func:`exact_user_clipped_sum`. Returns (sum per trainable parameter,
    per-user gradient norms [n_users] (float64), per-record losses [B])."""
    _check_batch(x, y)
    c = _check_norm(max_norm)
    seg, m = _check_segments(x, segments, n_users)
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    step = check_int("chunk_size", chunk_size) if chunk_size is not None else (
        max(x.shape[0], 1) if x.device.type != "cpu" else cpu_chunk_size(
            {k: p.detach() for k, p in params.items()}))
    if snapshot is not None and not isinstance(snapshot, StateSnapshot):
        raise ValueError(f"snapshot must be a StateSnapshot of this model, got "
                         f"{shown(snapshot)}"[:200])
    snap = StateSnapshot(model) if snapshot is None else snapshot
    if snapshot is not None:
        snap.refresh()
    losses: list = []
    try:
        counts = torch.bincount(seg, minlength=m).clamp(min=1)
        w = 1.0 / counts[seg].double()
        acc = {k: p.new_zeros((m, *p.shape)) for k, p in params.items()}
        for s in range(0, x.shape[0], step):      # a loop over chunks, not over records
            g, ls = _grads_and_losses(model, loss_fn, x[s:s + step], y[s:s + step])
            ws, ss = w[s:s + step], seg[s:s + step]
            for k in acc:
                gk = g[k]
                acc[k].index_add_(0, ss, gk * ws.to(gk.dtype).view(-1, *([1] * (gk.dim() - 1))))
            losses.append(ls.detach().reshape(-1))
        ok = not snap.changed()
    except Exception:                     # noqa: BLE001 - a failing batch takes the exact path
        ok = False
    if ok:
        total, norms = _clip_users(acc, c)
        loss = torch.cat(losses) if losses else x.new_zeros(0, dtype=torch.float32)
        return total, norms, loss
    snap.restore()
    return exact_user_clipped_sum(model, loss_fn, x, y, seg, m, c, snapshot=snap)


@unconstrained("a per-step part of a user-level run: called every step by train with the run's "
               "checked C and the sampled users' records (no check per step); it keeps its own "
               "checks of the tensors")
def exact_user_clipped_sum(model: nn.Module, loss_fn: Callable, x: torch.Tensor,
                           y: torch.Tensor, segments: torch.Tensor, n_users: int,
                           max_norm: float, *, snapshot: StateSnapshot | None = None
                           ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """The reference and fallback of :func:`user_clipped_sum`: each record's gradient by plain
    autograd, one record at a time; a record whose forward or backward raises or changes the
    model's state (restored from ``snapshot``) gets NaN gradients, so its whole user adds
    nothing — as a non-finite gradient does in the fast path. Slow: used only where the fast
    path fails."""
    _check_batch(x, y)
    c = _check_norm(max_norm)
    seg, m = _check_segments(x, segments, n_users)
    snap = StateSnapshot(model) if snapshot is None else snapshot
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    acc = {k: p.new_zeros((m, *p.shape)) for k, p in params.items()}
    counts = torch.bincount(seg, minlength=m).clamp(min=1)
    losses = []
    for i in range(x.shape[0]):           # the exact path: one record at a time by design
        try:
            with torch.enable_grad():
                loss = loss_fn(model(x[i:i + 1]), y[i:i + 1]).reshape(())
                grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
            bad = snap.changed()
        except Exception:                 # noqa: BLE001 - this record poisons its user
            grads, loss, bad = None, None, True
        u = int(seg[i])
        if bad:
            snap.restore()
            for k in acc:
                acc[k][u] = math.nan
            losses.append(math.nan)
            continue
        for (k, p), g in zip(params.items(), grads):
            if g is not None:
                acc[k][u] += g.detach() / float(counts[u])
        losses.append(float(loss.detach()))
    total, norms = _clip_users(acc, c)
    dtype = next(iter(params.values())).dtype if params else torch.float32
    return total, norms, torch.tensor(losses, dtype=dtype, device=x.device)


@constrained(epsilon_of_delta=IsCallable("a function δ -> ε"), k=COUNT, delta=DELTA,
             grid=Integer(min=2))
def group_epsilon(epsilon_of_delta: Callable[[float], float], k: int, delta: float, *,
                  grid: int = 200) -> float:
    """The smallest group ε for groups of ``k`` records at ``delta`` that the group-privacy lemma
    gives a record-level run: the minimum over record-level δ' ∈ [1e-300, δ] of k·ε(δ') subject
    to δ'(e^{kε(δ')} − 1)/(e^{ε(δ')} − 1) ≤ δ (:func:`dplib.accounting.group_privacy`; Dwork &
    Roth 2014, Thm 2.2 for δ = 0, with the δ terms δ(1 + e^ε + … + e^{(k−1)ε}) of the chain of k
    neighbouring data sets). ``epsilon_of_delta``: the run's ε at a given δ' (e.g.
    ``accountant.get_epsilon``). ``math.inf`` when no δ' ∈ [1e-300, δ] works: the lemma then
    gives no group ε at δ from this run.

    The optimisation is one-dimensional and solved to floating-point resolution, not on a grid:

    1. The objective k·ε(δ') is non-increasing in δ': an (ε, δ')-DP mechanism is (ε, δ'')-DP
       for every δ'' ≥ δ', so the smallest ε an accountant certifies cannot grow with δ'. The
       optimum is therefore at the LARGEST feasible δ'.
    2. The constraint g(δ') = δ'·Σ_{j<k} e^{jε(δ')} ≤ δ is not monotone in general (δ' grows
       while ε(δ') falls), so the largest feasible δ' is bracketed first: ``grid`` values of δ'
       log-spaced in [1e-300, δ] (200 by default), the largest feasible one δ_lo and the next
       one δ_hi (infeasible).
    3. Bisection in log δ' on [δ_lo, δ_hi] keeps the invariant "δ_lo feasible, δ_hi not" until
       the two are adjacent doubles, and returns k·ε(δ_lo).

    Guarantees: the value returned is k·ε(δ') at a δ' whose group δ is ≤ δ (checked with the
    lemma's formula), so it is a valid group ε and never below the optimum of the formula; it is
    never above the grid minimum of step 2; and it is the optimum whenever the feasible set has no
    part beyond δ_hi that the bracketing grid misses — for instance when g is non-decreasing
    beyond δ_lo (tests/unit/test_user_level.py compares it with grids of 20,000 values of δ' for
    the Gaussian mechanism's zCDP curve and with finer grids for a DP-SGD run). Tighter group analyses exist (Charles et al. 2024 derive a tight
    accountant for ELS); this is the generic lemma, what a record-level guarantee alone
    implies."""
    d, g = delta, grid

    def value(log10_dp: float) -> float:
        """k·ε(δ') when δ' = 10^log10_dp is feasible, else inf."""
        dp = min(10.0 ** log10_dp, d)
        e = float(epsilon_of_delta(dp))
        if not math.isfinite(e):
            return math.inf
        ek, dk = group_privacy(max(e, 1e-300), dp, k)
        return ek if dk <= d else math.inf

    us = np.linspace(-300.0, math.log10(d), g)       # the bracketing grid of log10 δ'
    vals = [value(float(u)) for u in us]             # a grid of δ' values, not examples
    ok = [i for i, v in enumerate(vals) if math.isfinite(v)]
    if not ok:
        return math.inf
    i = ok[-1]
    best = min(vals[j] for j in ok)
    if i == g - 1:                                   # δ' = δ itself is feasible (ε = 0 or k = 1)
        return best
    lo, hi, v_lo = float(us[i]), float(us[i + 1]), vals[i]
    while True:                                      # bisection to adjacent doubles
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        v = value(mid)
        if math.isfinite(v):
            lo, v_lo = mid, v
        else:
            hi = mid
    return min(best, v_lo)


@dataclass(frozen=True)
@unconstrained("a result record of compare_privacy_units")
class UnitComparison:
    """:func:`compare_privacy_units`' numbers: the run's ε at δ (the same number whether its unit
    is a record or a user), ``group`` = (kε, δ_k) by the group lemma at the run's δ, and
    ``group_epsilon_at_delta``, the best group ε at δ (:func:`group_epsilon`; inf: none from
    the lemma)."""
    epsilon: float
    delta: float
    records_per_user: int
    group: tuple[float, float]
    group_epsilon_at_delta: float


@constrained(noise_multiplier=POSITIVE, sample_rate=SAMPLE_RATE, steps=COUNT, delta=DELTA,
             records_per_user=COUNT, accountant=ACCOUNTANT)
def compare_privacy_units(noise_multiplier: float, sample_rate: float, steps: int,
                          delta: float, records_per_user: int, *, accountant: str = "rdp"
                          ) -> UnitComparison:
    """Record-level DP with group privacy versus a user-level run, for the same (σ, q, T).

    A user-level run (users sampled at q, one clipped gradient per user) and a record-level run
    (records sampled at q) are the same DP-SGD event, so both have the same ε at δ — but the
    first bounds what is learnt about a USER, the second about one record. For a user with k =
    ``records_per_user`` records the record-level run only guarantees (kε, δ(e^{kε} − 1)/(e^ε −
    1)) (:func:`dplib.accounting.group_privacy`), and :func:`group_epsilon` the best such ε at δ."""
    from ..accounting import dpsgd_event, make_accountant
    s, q, t, d, k = noise_multiplier, sample_rate, steps, delta, records_per_user
    acc = make_accountant(accountant).compose(dpsgd_event(s, q, t))
    eps = float(acc.get_epsilon(d))
    return UnitComparison(eps, d, k, group_privacy(eps, d, k),
                          group_epsilon(acc.get_epsilon, k, d))
