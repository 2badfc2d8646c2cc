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
from typing import Callable

import torch
from torch import nn

from .ghost import check_ghost_supported, ghost_clipped_grad_sum
from .grads import (check_batch, check_max_grad_norm, clip_factors, clipped_grad_sum,
                    per_example_grads)
from .._validate import shown

__all__ = ["private_clipped_sum", "exact_clipped_sum", "private_per_example_grads",
           "StateSnapshot"]


_SLOTS = ("_parameters", "_buffers", "_modules")
_CONTAINERS = (dict, list, set)


def _contents(v: object) -> object:
    """What a Python container holds, by identity (a hook registry, a list a forward appends
    to): compared by :meth:`StateSnapshot.changed`, refilled by :meth:`StateSnapshot.restore`."""
    if not v:
        return ()
    if isinstance(v, dict):
        return [(k, id(x)) for k, x in v.items()]
    return [id(x) for x in v]


class StateSnapshot:
    """What a forward pass could write in a model, to tell whether it wrote (:meth:`changed`)
    and to undo it (:meth:`restore`): every parameter's and buffer's values, version counter,
    storage, shape and ``requires_grad``; every module attribute (a tensor attribute's values
    and version too) and the contents of Python containers held as attributes (hook
    registries, a list a forward appends to). Not seen: an in-place write through ``.data``
    (it keeps the version counter; comparing every value on every step would cost more than the
    step's noise), a global variable, a file, a module outside the model — deliberate code, not
    slips: read the model before training it on private data.

    A trainer keeps one snapshot for the run and calls :meth:`refresh` before each step (the
    saved values are copied into buffers allocated once)."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.tensors: list = []
        self.refresh()

    def _marks(self) -> list:
        """One pass over the modules: identities, versions, storage, shapes, flags, contents."""
        out = []
        for m in self.model.modules():
            for t in (*m._parameters.values(), *m._buffers.values()):
                out.append(None if t is None else (id(t), t._version, t.data_ptr(),
                                                   t.shape, t.requires_grad))
            for k, v in vars(m).items():
                if k in _SLOTS:
                    continue
                if isinstance(v, torch.Tensor):
                    out.append((k, id(v), v._version, v.data_ptr(), v.shape))
                elif isinstance(v, _CONTAINERS):
                    out.append((k, id(v), _contents(v)))
                else:
                    out.append((k, id(v)))
        return out

    def refresh(self) -> None:
        """Take the snapshot anew (the model as it is now)."""
        model = self.model
        tensors = list({id(t): t for t in (*model.parameters(), *model.buffers())}.values())
        old = {id(t): saved for t, saved, _ in self.tensors}
        self.tensors = []
        for t in tensors:
            saved = old.get(id(t))
            if saved is None or saved.shape != t.shape or saved.dtype != t.dtype \
                    or saved.device != t.device:
                saved = torch.empty_like(t.detach())
            self.tensors.append((t, saved, t.requires_grad))
        with torch.no_grad():
            torch._foreach_copy_([s for _, s, _ in self.tensors],
                                 [t.detach() for t, _, _ in self.tensors])
        self.attrs = []
        for m in model.modules():
            attrs = vars(m).copy()
            saved = {k: v.detach().clone() if isinstance(v, torch.Tensor) else v.copy()
                     for k, v in attrs.items() if k not in _SLOTS and (
                         isinstance(v, torch.Tensor) or (isinstance(v, _CONTAINERS) and v))}
            self.attrs.append((m, attrs, saved, m._parameters.copy(), m._buffers.copy()))
        self.marks = self._marks()

    def changed(self) -> bool:
        """Whether anything was written since the snapshot (or the last :meth:`restore`)."""
        return self._marks() != self.marks

    def restore(self) -> None:
        """Put every saved object back, every saved value into its tensor (its storage and shape
        too, if they were replaced) and every container's contents back."""
        for m, attrs, saved, params, bufs in self.attrs:
            for k in [k for k in vars(m) if k not in attrs]:
                delattr(m, k)
            vars(m).update(attrs)
            for k, v in attrs.items():
                if k in _SLOTS:
                    continue
                if isinstance(v, torch.Tensor):
                    _put(v, saved[k])
                elif isinstance(v, _CONTAINERS):
                    v.clear()                     # refilled from the copy (none: it was empty)
                    if k in saved:
                        v.extend(saved[k]) if isinstance(v, list) else v.update(saved[k])
            m._parameters.clear()
            m._parameters.update(params)
            m._buffers.clear()
            m._buffers.update(bufs)
        for t, saved, grad_flag in self.tensors:
            _put(t, saved)
            t.requires_grad_(grad_flag)
        self.marks = self._marks()


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
