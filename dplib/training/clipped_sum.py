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
the order of float additions). What is data-independent — the model's structure, hooks,
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
from .models import _state

__all__ = ["private_clipped_sum", "exact_clipped_sum", "private_per_example_grads",
           "StateSnapshot"]


class StateSnapshot:
    """A copy of a model's parameters, buffers and module attributes, to undo what a forward
    pass wrote (the check of :func:`~dplib.training.models.forward_must_not_mutate` only sees
    it). Tensors are cloned once per snapshot; :meth:`changed` compares identities and version
    counters, as that check does."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.marks = _state(model)
        self.tensors = [(t, t.detach().clone()) for t in
                        {id(t): t for t in (*model.parameters(), *model.buffers())}.values()]
        self.attrs = [(m, {k: v for k, v in vars(m).items()
                           if k not in ("_parameters", "_buffers", "_modules")},
                       dict(m._parameters), dict(m._buffers))
                      for m in model.modules()]

    def changed(self) -> bool:
        return _state(self.model) != self.marks

    def restore(self) -> None:
        """Put every saved object back and every saved value into its tensor."""
        for m, attrs, params, bufs in self.attrs:
            for k in [k for k in vars(m) if k not in attrs and k not in
                      ("_parameters", "_buffers", "_modules")]:
                delattr(m, k)
            vars(m).update(attrs)
            m._parameters.clear()
            m._parameters.update(params)
            m._buffers.clear()
            m._buffers.update(bufs)
        with torch.no_grad():
            for t, saved in self.tensors:
                t.copy_(saved)
        self.marks = _state(self.model)


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


def private_per_example_grads(model: nn.Module, loss_fn: Callable, x: torch.Tensor,
                              y: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per-example gradients ``{name: [B, *shape]}`` by ``vmap``
    (:func:`~dplib.training.grads.per_example_grads`), recomputed one example at a time where
    ``vmap`` raises or the forward pass changes the model's state, as
    :func:`private_clipped_sum` does; an example that still fails gets NaN rows, which the
    caller zeroes like any non-finite gradient (the gradient encoding does)."""
    check_batch(x, y)
    snap = StateSnapshot(model)
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
                        max_norm: float, *, ghost: bool = False, chunk_size: int | None = None
                        ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """The clipped sum of one batch by the fast path (``ghost`` norms or ``vmap`` in chunks of
    ``chunk_size``), recomputed exactly by :func:`exact_clipped_sum` when that path raises or
    the forward pass changes the model's state — so what a step does never depends on whether a
    batch passed a fast path's checks (module docstring). Returns (sum per trainable parameter
    name, per-example norms [B], per-example losses [B])."""
    check_batch(x, y)
    c = check_max_grad_norm(max_norm)
    if not isinstance(ghost, bool):
        raise ValueError(f"ghost must be True or False, got {ghost!r}")
    if ghost:
        check_ghost_supported(model)     # reads the model alone: the same answer for any data
    snap = StateSnapshot(model)
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
