"""The clipped-sum stage of DP-SGD: Σ_i min(1, C/‖g_i‖) g_i over one batch, never refused.

This is the only data-dependent quantity of a step (Abadi et al. 2016, Algorithm 1). Its fast
paths — ``vmap`` per-example gradients (:func:`~dplib.training.grads.clipped_grad_sum`) and ghost
norms (:func:`~dplib.training.ghost.ghost_clipped_grad_sum`) — check that the model is one they
compute correctly, and some of those checks can only be made on the batch itself: a layer run
twice, a layer output changed in place, ``vmap``'s refusal of data-dependent control flow, a
model that writes to its state. A check that fails only on batches holding some record would
stop training exactly when that record is sampled — a membership test that no noise covers (a
refusal is a release too). So :func:`private_clipped_sum` never lets a batch's failure escape:

1. it runs the fast path, with the model's state (parameters, buffers, attributes) snapshotted;
2. if the fast path raises, or the forward pass changed the model's state, the state is
   restored and the batch is recomputed by :func:`exact_clipped_sum` — plain autograd on one
   example at a time, which every model that runs on single examples supports;
3. there, an example whose forward or backward raises, or changes the model's state, gets
   clipping factor 0 and adds nothing (the state is restored), exactly as a non-finite
   gradient does (:func:`~dplib.training.grads.clip_factors`). That choice is a function of the
   example alone, so the sum's sensitivity stays C.

Which path ran is not returned or logged: the result is the same clipped sum either way (up to
the order of float additions) — provided the model computes one per-example function however it
is called. Model code can tell the paths apart (``torch.is_grad_enabled()``, a ``vmap``-wrapped
input, a batch of one) and compute something else on one of them; a record that sends its batch
to the exact path would then change the other examples' gradients too. That is deliberate code
written to leak, like a forward that copies its input to a global variable, and no check of the
model can rule it out: the model and the loss are trusted code — read them before training on
private data. (The pre-flight runs the model with gradients enabled, as the steps do, so grad mode
alone cannot tell it from a step.) What is data-independent — the model's structure, hooks,
unsupported layers — is refused once, before training, by the pre-flight
(:mod:`dplib.training.preflight`).
"""
from __future__ import annotations

import math
from collections import OrderedDict
from itertools import chain
from operator import is_, methodcaller
from typing import Callable

import torch
from torch import nn

from .ghost import check_ghost_supported, ghost_clipped_grad_sum
from .grads import (check_batch, check_max_grad_norm, clip_factors, clipped_grad_sum,
                    per_example_grads)
from .._constraints import unconstrained
from .._validate import shown

__all__ = ["private_clipped_sum", "exact_clipped_sum", "private_per_example_grads",
           "StateSnapshot"]


_CONTAINERS = (dict, list, set)
_PLAIN_CONTAINERS = frozenset({dict, OrderedDict, list, set})    # exact types: no own __len__
_ATOMS = frozenset({bool, int, float, str, type(None)})


@unconstrained("an internal record of a model's state, taken by the clipped-sum stage and the "
               "trainers from the model they were given")
class StateSnapshot:
    """What a forward pass could write in a model, to tell whether it wrote (:meth:`changed`)
    and to undo it (:meth:`restore`): every parameter's and buffer's values, version counter,
    storage, shape and ``requires_grad``; every module attribute (a tensor attribute's values
    and version too) and the contents of Python containers held as attributes (hook
    registries, a list a forward appends to; a module's parameter, buffer and submodule
    registries). Not seen: an in-place write through ``.data`` (it keeps the version counter;
    comparing every value on every step would cost more than the step's noise), a global
    variable, a file, a module outside the model — deliberate code, not slips: read the model
    before training it on private data.

    Every comparison is by identity (``is``), version counter, storage pointer, shape and flag —
    never by a value's own ``__eq__`` — and in order. A trainer keeps one snapshot for the run
    and calls :meth:`refresh` before each step: where the model's structure (modules, attributes,
    container contents) is what the last snapshot saw — the common case, only the parameters'
    values moved — only the tensors are read and their values copied (into buffers allocated
    once); the saved values are always copied anew, so a write between steps that kept the
    version counter (``p.data``) is never undone."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self._ts: list = []               # the distinct parameters and buffers, in order
        self._saved: list = []            # their values (buffers reused while they fit)
        self._fit: list = []              # (shape, dtype, device) of each saved buffer
        self._marks: tuple = ()           # flags, versions, storages, shapes: _take_tensors
        self._entries: list | None = None
        self.refresh()

    # --- taking ---------------------------------------------------------------------------
    def _take_structure(self) -> None:
        """Every module's attributes (a copy of its ``__dict__``), its containers' contents and
        its tensor attributes, and the list of distinct parameters and buffers."""
        entries, seen, tensors = [], set(), []
        atoms, plain, tensor = _ATOMS, _PLAIN_CONTAINERS, torch.Tensor
        for m in self.model.modules():
            attrs = vars(m).copy()
            empty, full, tattrs = [], [], []
            for k, v in attrs.items():
                t = type(v)
                if t in atoms:                       # neither a tensor nor a container
                    continue
                if t in plain and not v:             # most of them: empty hook registries
                    empty.append(v)
                elif isinstance(v, tensor):
                    tattrs.append((k, v, None, None))        # value and marks: _take_tensors
                elif isinstance(v, _CONTAINERS):
                    if not v:
                        empty.append(v)
                    elif isinstance(v, set):               # a set's copy may iterate otherwise
                        full.append((k, v, v.copy(), [id(x) for x in v]))
                    else:
                        full.append((k, v, v.copy(), None))
            for t in (*m._parameters.values(), *m._buffers.values()):
                if t is not None and id(t) not in seen:
                    seen.add(id(t))
                    tensors.append(t)
            entries.append([m, attrs, tuple(empty), full, tattrs])
        self._entries = entries
        self._flat = _flatten(entries)
        self._tattrs = [e for e in entries if e[4]]          # modules with tensor attributes
        old = {id(t): (saved, fit) for t, saved, fit in zip(self._ts, self._saved, self._fit)}
        kept = [old.get(id(t), (None, None)) for t in tensors]
        self._ts = tensors
        self._saved = [saved for saved, _ in kept]
        self._fit = [fit for _, fit in kept]

    def _read_marks(self) -> tuple:
        """Every parameter's and buffer's requires_grad flag, version counter, storage pointer
        and shape, as four lists (compared list to list by :meth:`_same_tensors`)."""
        ts = self._ts
        return ([t.requires_grad for t in ts], [t._version for t in ts],
                [t.data_ptr() for t in ts], [t.shape for t in ts])

    def _take_tensors(self) -> None:
        """Copy every parameter's and buffer's values (into buffers reused while they fit) and
        read its marks; clone every tensor attribute and read its marks."""
        ts = self._ts
        fit = [(t.shape, t.dtype, t.device) for t in ts]
        if fit != self._fit:                 # a tensor new, or reshaped, cast or moved
            self._saved = [s if s is not None and f == g else torch.empty_like(t.detach())
                           for t, s, f, g in zip(ts, self._saved, fit, self._fit)]
            self._fit = fit
        self._marks = self._read_marks()
        with torch.no_grad():
            torch._foreach_copy_(self._saved, ts)
        for e in self._tattrs:
            if e[4]:
                e[4] = [(k, v, v.detach().clone(), (v._version, v.data_ptr(), v.shape))
                        for k, v, _, _ in e[4]]

    def refresh(self) -> None:
        """Take the snapshot anew (the model as it is now): the structure only where it moved
        since the last snapshot, the tensors always."""
        if self._entries is None or not self._same_structure():
            self._take_structure()
        self._take_tensors()

    # --- comparing ------------------------------------------------------------------------
    def _same_structure(self) -> bool:
        """Whether every module's attributes and containers are as the snapshot saw them
        (identities and contents; tensors' versions aside): every dict (a module's
        ``__dict__``, a dict attribute) holds the same keys, in the same order, bound to the very
        same objects (identity, not ``==``: a value's own ``__eq__`` is never called; keys
        identical or equal), every list the same objects in order, every set the same members,
        every empty container is still empty. Made for all modules and containers at once
        (:func:`_flatten`): the lengths first, then the values' identities and the keys, each in
        one pass over the concatenation (equal lengths make it the container-by-container
        comparison)."""
        (mods, empty, dicts, dlens, dvals, dkeys, lists, llens, lvals, sets, slens,
         sids) = self._flat
        if any(map(len, empty)):
            return False
        ds = [*map(vars, mods), *dicts]
        if list(map(len, ds)) != dlens or not all(map(is_, chain.from_iterable(
                map(_VALUES, ds)), dvals)) or list(chain.from_iterable(ds)) != dkeys:
            return False
        if list(map(len, lists)) != llens or not all(map(is_, chain.from_iterable(lists),
                                                         lvals)):
            return False
        return list(map(len, sets)) == slens and \
            list(map(id, chain.from_iterable(sets))) == sids

    def _same_tensors(self) -> bool:
        if self._read_marks() != self._marks:
            return False
        for e in self._tattrs:
            for _, v, _, marks in e[4]:
                if (v._version, v.data_ptr(), v.shape) != marks:
                    return False
        return True

    def changed(self) -> bool:
        """Whether anything was written since the snapshot (or the last :meth:`restore`)."""
        return not (self._same_structure() and self._same_tensors())

    # --- undoing --------------------------------------------------------------------------
    def restore(self) -> None:
        """Put every saved object back, every saved value into its tensor (its storage and shape
        too, if they were replaced) and every container's contents back; then take the
        snapshot of the restored model."""
        for m, attrs, empty, full, tattrs in self._entries:
            d = vars(m)
            for k in [k for k in d if k not in attrs]:
                del d[k]                          # not delattr: no code of the model runs
            for k, v in attrs.items():                 # rebound or deleted: put back
                if k not in d or d[k] is not v:
                    d[k] = v
            for v in empty:
                v.clear()
            for _, v, saved, _ in full:
                v.clear()
                v.extend(saved) if isinstance(v, list) else v.update(saved)
            for _, v, saved, _ in tattrs:
                _put(v, saved)
        for t, saved, flag in zip(self._ts, self._saved, self._marks[0]):
            _put(t, saved)
            t.requires_grad_(flag)
        self._take_structure()
        self._take_tensors()


_VALUES = methodcaller("values")


def _flatten(entries: list) -> tuple:
    """What :meth:`StateSnapshot._same_structure` compares, as flat lists: the modules and
    every empty container; the dicts (each module's ``__dict__``, then its non-empty dict
    attributes), their lengths, values and keys in order; the lists, their lengths and values;
    the sets, their lengths and the ids of their members in iteration order."""
    mods = [e[0] for e in entries]
    empty = [v for e in entries for v in e[2]]
    full = [x for e in entries for x in e[3]]
    dicts = [(v, saved) for _, v, saved, ids in full if ids is None and isinstance(v, dict)]
    lists = [(v, saved) for _, v, saved, ids in full if ids is None and not isinstance(v, dict)]
    sets = [(v, ids) for _, v, _, ids in full if ids is not None]
    saved_dicts = [e[1] for e in entries] + [saved for _, saved in dicts]
    return (mods, empty, [v for v, _ in dicts], [len(d) for d in saved_dicts],
            [x for d in saved_dicts for x in d.values()], [k for d in saved_dicts for k in d],
            [v for v, _ in lists], [len(saved) for _, saved in lists],
            [x for _, saved in lists for x in saved], [v for v, _ in sets],
            [len(ids) for _, ids in sets], [i for _, ids in sets for i in ids])


def _put(t: torch.Tensor, saved: torch.Tensor) -> None:
    """``saved``'s values into ``t``, in place when its storage still fits, else by rebinding
    its data (a forward that replaced ``t.data`` with another shape)."""
    with torch.no_grad():
        if t.shape == saved.shape and t.dtype == saved.dtype:
            t.copy_(saved)
        else:
            t.data = saved.clone()


def _fast(model, loss_fn, x, y, c, ghost, chunk_size):
    """The fast path: ghost norms in chunks of ``chunk_size``, or ``vmap``."""
    if not ghost:
        return clipped_grad_sum(model, loss_fn, x, y, c, chunk_size=chunk_size)
    step = max(chunk_size or x.shape[0], 1)
    parts = [ghost_clipped_grad_sum(model, loss_fn, x[i:i + step], y[i:i + step], c)
             for i in range(0, max(x.shape[0], 1), step)]      # chunks, not examples
    total = parts[0][0]
    for p in parts[1:]:
        for k in total:
            total[k] += p[0][k]
    return total, torch.cat([p[1] for p in parts]), torch.cat([p[2] for p in parts])


def _one_example(model, loss_fn, params, x, y):
    """(gradient per parameter, loss) of one example by plain autograd."""
    with torch.enable_grad():
        loss = loss_fn(model(x), y)
        if loss.numel() != 1:
            raise ValueError(f"loss_fn must return one scalar per example, got {loss.shape}")
        loss = loss.reshape(())
        grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params.values(), grads)], \
        loss.detach()


def _each_example(model, loss_fn, x, y, snap):
    """(gradients, loss) of every example by plain autograd, or (None, None) for one whose
    computation raises or changes the model's state (then restored from ``snap``)."""
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    for i in range(x.shape[0]):           # the exact path: one example at a time by design
        try:
            grads, loss = _one_example(model, loss_fn, params, x[i:i + 1], y[i:i + 1])
            bad = snap.changed()
        except Exception:                 # noqa: BLE001 - any failure: this example adds nothing
            grads, loss, bad = None, None, True
        if bad:
            snap.restore()
            yield None, None
        else:
            yield grads, loss


@unconstrained("a per-step part of the clipped sum, called every step by private_clipped_sum "
               "(the exact fallback) with the run's checked C and batch (no check per step); it "
               "keeps its own checks of the tensors")
def exact_clipped_sum(model: nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor,
                      max_norm: float, snapshot: StateSnapshot | None = None
                      ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """Σ_i min(1, C/‖g_i‖) g_i by autograd on one example at a time — the reference the fast
    paths must equal, and their fallback (module docstring). An example whose computation raises
    or changes the model's state (then restored from ``snapshot``, taken here if None) adds
    nothing; its norm and loss are NaN. Returns (sum per trainable parameter, norms [B],
    losses [B]), like the fast paths. A loop over examples: slow, used only where they fail."""
    check_batch(x, y)
    c = check_max_grad_norm(max_norm)
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    total = {k: torch.zeros_like(p) for k, p in params.items()}
    snap = StateSnapshot(model) if snapshot is None else snapshot
    norms, losses = [], []
    for grads, loss in _each_example(model, loss_fn, x, y, snap):
        if grads is None:
            norms.append(math.nan)
            losses.append(math.nan)
            continue
        norm = torch.linalg.vector_norm(torch.stack(
            [torch.linalg.vector_norm(g.double()) for g in grads])).item()
        f = float(clip_factors(torch.tensor([norm], dtype=torch.float64), c)[0])
        if f > 0:
            for k, g in zip(total, grads):
                total[k] += g * f
        norms.append(norm)
        losses.append(float(loss))
    dtype = next(iter(params.values())).dtype if params else torch.float32
    return (total, torch.tensor(norms, dtype=dtype, device=x.device),
            torch.tensor(losses, dtype=dtype, device=x.device))


def _fresh(model: nn.Module, snapshot: StateSnapshot | None) -> StateSnapshot:
    if snapshot is None:
        return StateSnapshot(model)
    if not isinstance(snapshot, StateSnapshot) or snapshot.model is not model:
        raise ValueError(f"snapshot must be a StateSnapshot of this model, got "
                         f"{shown(snapshot)}"[:200])
    snapshot.refresh()
    return snapshot


@unconstrained("called every step by the gradient-encoding trainer with its batch; its "
               "parameters are a model, a loss and a batch's tensors, checked in the body (batch "
               "tensors are not declared: module docstring)")
def private_per_example_grads(model: nn.Module, loss_fn: Callable, x: torch.Tensor,
                              y: torch.Tensor, *, snapshot: StateSnapshot | None = None
                              ) -> dict[str, torch.Tensor]:
    """Per-example gradients ``{name: [B, *shape]}`` by ``vmap``
    (:func:`~dplib.training.grads.per_example_grads`), recomputed one example at a time where
    ``vmap`` raises or the forward pass changes the model's state, as
    :func:`private_clipped_sum` does; an example that still fails gets NaN rows, which the
    caller zeroes like any non-finite gradient (the gradient encoding does)."""
    check_batch(x, y)
    snap = _fresh(model, snapshot)
    try:
        out = per_example_grads(model, loss_fn, x, y)
        if not snap.changed():
            return out
    except Exception:                     # noqa: BLE001 - a failing batch takes the exact path
        pass
    snap.restore()
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    rows = {k: [] for k in params}
    for grads, _ in _each_example(model, loss_fn, x, y, snap):
        for (k, p), g in zip(params.items(), grads or [None] * len(params)):
            rows[k].append(torch.full_like(p, math.nan) if g is None else g)
    return {k: torch.stack(v) if v else params[k].new_zeros((0, *params[k].shape))
            for k, v in rows.items()}


@unconstrained("the private sum of every step of train (declared caller: RunConfig), called with "
               "the run's checked C, ghost and chunk size and the sampled batch; it keeps its "
               "own checks (module docstring: never refuses a batch mid-run)")
def private_clipped_sum(model: nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor,
                        max_norm: float, *, ghost: bool = False, chunk_size: int | None = None,
                        snapshot: StateSnapshot | None = None
                        ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """The clipped sum of one batch by the fast path (``ghost`` norms or ``vmap`` in chunks of
    ``chunk_size``), recomputed exactly by :func:`exact_clipped_sum` when that path raises or
    the forward pass changes the model's state — so what a step does never depends on whether a
    batch passed a fast path's checks (module docstring). ``snapshot``: the run's
    :class:`StateSnapshot` of ``model``, refreshed here (None: one is taken). Returns (sum per
    trainable parameter name, per-example norms [B], per-example losses [B])."""
    check_batch(x, y)
    c = check_max_grad_norm(max_norm)
    if not isinstance(ghost, bool):
        raise ValueError(f"ghost must be True or False, got {shown(ghost)}")
    if ghost:
        check_ghost_supported(model)     # reads the model alone: the same answer for any data
    snap = _fresh(model, snapshot)
    try:
        out = _fast(model, loss_fn, x, y, c, ghost, chunk_size)
        ok = not snap.changed() and out[1].shape == (x.shape[0],) \
            and out[2].shape == (x.shape[0],)
    except Exception:                     # noqa: BLE001 - a failing batch takes the exact path
        ok = False
    if ok:
        return out
    snap.restore()
    return exact_clipped_sum(model, loss_fn, x, y, c, snap)
