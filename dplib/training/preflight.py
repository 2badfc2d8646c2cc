"""The pre-flight of a private run: everything a run may refuse, decided before any randomness.

A private run (:mod:`dplib.training.config`) is a public configuration, this pre-flight, and then
steps in which nothing observable depends on which records were sampled. The pre-flight may look
at the model and at ALL the training data, and refuse them as a whole — the same answer for every
seed, before a batch or a noise draw exists. After it, a step never raises, stops early or
retries because of the batch it drew (:mod:`dplib.training.clipped_sum` recomputes a batch that
fails a fast path's check exactly instead).

:func:`preflight` is what every trainer runs — :func:`~dplib.training.train`,
:func:`~dplib.training.train_distributed` (on every rank), :func:`~dplib.training.train_models_batched`,
:func:`~dplib.encoding.train_encoded` — so they refuse the same models and data:

1. :func:`~dplib.training.models.check_dp_compatible` — no batch normalisation, something to train;
2. the ghost path's structural checks (:func:`~dplib.training.ghost.check_ghost_supported`) and
   a ghost step on a synthetic probe (:func:`check_ghost_on_probe`) when ``config.ghost``;
3. :func:`~dplib.training.models.check_examples_independent` — the model does not mix the
   examples of a batch (on a fresh synthetic probe, every layer's rows with ``layers``);
4. :func:`check_sum_range` — the noisy sum cannot overflow the parameters' dtype;
5. :func:`check_every_record_runs` — the model and the loss run on every record.
Finite inputs are checked when the data are read (:func:`as_tensors` with ``finite=True``).
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .._constraints import Custom, Flag, InstanceOf, Integer, IsCallable, constrained, unconstrained
from .._validate import shown
from ._params import COUNT, MAX_GRAD_NORM, NOISE_MULTIPLIER0
from .config import RunConfig
from .ghost import check_ghost_supported, ghost_plan
from .grads import check_batch, per_example_losses
from .models import check_dp_compatible, check_examples_independent, forward_must_not_mutate
from ..device import release_generator

__all__ = ["preflight", "check_model_and_data", "check_sum_range", "narrowest_dtype", "check_every_record_runs",
           "check_ghost_on_probe", "as_tensors"]


_MODULE = InstanceOf(nn.Module, "a torch.nn.Module", bad=(None, 1.0, "model"))
_LOSS = IsCallable("a loss function loss_fn(logits, targets)")


def _float_dtype(name: str, value: object) -> torch.dtype:
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise ValueError(f"{name} must be a floating-point torch dtype, got {shown(value)}")
    return value


@constrained(config=InstanceOf(RunConfig, "a RunConfig"), loss_fn=_LOSS, sigma=NOISE_MULTIPLIER0)
def preflight(model: nn.Module, x: torch.Tensor, y: torch.Tensor, config: RunConfig, *,
              loss_fn: Callable, sigma: float, name: str = "train_data") -> None:
    """Refuse, with a ``ValueError``, a model or training data (x, y) a DP-SGD run of
    ``config`` cannot train privately (module docstring): checks 1–5, on the model as it will
    train (its device, train mode). ``sigma`` is the run's noise multiplier (for the overflow
    bound of :func:`check_sum_range`)."""
    check_model_and_data(model, x, y, loss_fn=loss_fn, ghost=config.ghost, name=name,
                         chunk_size=min(config.virtual_batch_size or 1024, 1024))
    check_sum_range(config.max_grad_norm, sigma, x.shape[0], narrowest_dtype(model))


@constrained(loss_fn=_LOSS, ghost=Flag(), chunk_size=COUNT)
def check_model_and_data(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *,
                         loss_fn: Callable, ghost: bool = False, name: str = "train_data",
                         chunk_size: int = 1024) -> None:
    """Checks 1, 2, 3 and 5 of the module docstring — what every private trainer refuses,
    whatever its privatizer (the gradient encoding adds its own overflow bound)."""
    check_dp_compatible(model)
    check_batch(x, y)
    if ghost:
        check_ghost_supported(model)
    check_examples_independent(model, x, layers=ghost)
    check_every_record_runs(model, loss_fn, x, y, name=name, chunk_size=chunk_size)
    if ghost:
        check_ghost_on_probe(model, loss_fn, x, y)


@unconstrained("a validator of the model on a synthetic probe shaped like the batch tensors it "
               "is given (checked in the body by check_batch); raising ValueError is all it does")
def check_ghost_on_probe(model: nn.Module, loss_fn: Callable, like_x: torch.Tensor,
                         like_y: torch.Tensor) -> None:
    """Refuse ``ghost=True`` for a model whose ghost step fails on a synthetic probe (eight
    random inputs shaped like ``like_x``, labels 0 shaped like ``like_y``; never the private
    data): a custom autograd Function, a layer run twice, an in-place change of a layer's
    output, a loss that is not one scalar per example. Inside a step such a batch would be
    recomputed exactly, one example at a time — correct but slow on every step — so the run is
    told up front to use ``ghost=False``. Leaves the model's state and torch's random state as
    it found them."""
    check_batch(like_x, like_y)
    gen = release_generator(None)
    shape = (8, *like_x.shape[1:])
    probe = torch.randn(shape, generator=gen, dtype=like_x.dtype) \
        if like_x.is_floating_point() else torch.randint(0, 2, shape, generator=gen).to(
            like_x.dtype)
    dev = next((p.device for p in model.parameters()), like_x.device)
    labels = torch.zeros((8, *like_y.shape[1:]), dtype=like_y.dtype, device=dev)
    forked = [dev] if dev.type == "cuda" else []
    try:
        with torch.random.fork_rng(devices=forked), forward_must_not_mutate(model):
            ghost_plan(model, loss_fn, probe.to(dev), labels)
    except Exception as exc:    # noqa: BLE001 - any failure on the probe refuses ghost=True
        raise ValueError(f"ghost=True cannot compute this model's clipped sum ({exc}); use "
                         "ghost=False (per-example gradients by vmap)"[:600]) from exc


@constrained(max_grad_norm=MAX_GRAD_NORM, noise_multiplier=NOISE_MULTIPLIER0,
             size=Integer(min=0),
             dtype=Custom(_float_dtype, "a floating-point torch dtype",
                          [torch.int64, "float32", None, torch.bool]))
def check_sum_range(max_grad_norm: float, noise_multiplier: float, size: int,
                    dtype: torch.dtype = torch.float32) -> None:
    """Refuse a clipping norm so large that the noisy sum could overflow ``dtype``.

    Each coordinate of Σ_i ḡ_i + N(0, σ²C²) is at most size·C + |z|·σC, and |z| < 40 for every
    float Gaussian sampler. If that bound could exceed the dtype's largest number, whether the
    released update is finite would depend on how many large records were sampled — a membership
    signal. Checked before training, from public quantities (C, σ, the data-set size n).
    """
    if not math.isfinite(max_grad_norm):
        return
    bound = max_grad_norm * (size + 40.0 * noise_multiplier)
    top = torch.finfo(dtype).max / 4
    if bound >= top:
        raise ValueError(f"max_grad_norm={max_grad_norm:g} is too large for {dtype}: the noisy "
                         f"sum of up to {size} clipped gradients could reach {bound:.3g}, beyond "
                         f"{top:.3g}, and overflow only for some batches; use max_grad_norm < "
                         f"{top / (size + 40.0 * noise_multiplier):.3g} (rescale the loss)")


@constrained(model=_MODULE)
def narrowest_dtype(model: nn.Module) -> torch.dtype:
    """The floating dtype, among ``model``'s trainable parameters, with the smallest largest
    value (``torch.finfo(dtype).max``): the dtype in which a clipped sum overflows first, so the
    one :func:`check_sum_range` must be given (float32 if there is none)."""
    dtypes = {p.dtype for p in model.parameters() if p.requires_grad and p.is_floating_point()}
    return min(dtypes, key=lambda t: torch.finfo(t).max, default=torch.float32)


@constrained(model=_MODULE, loss_fn=_LOSS, chunk_size=COUNT)
def check_every_record_runs(model: nn.Module, loss_fn: Callable, x: torch.Tensor,
                            y: torch.Tensor, *, name: str = "train_data",
                            chunk_size: int = 1024) -> None:
    """Refuse, with a ``ValueError``, training data on which the model or the loss raises.

    A record the model or the loss cannot take (a class label outside [0, K), a token id outside
    the vocabulary, …) makes training raise only in the first step whose Poisson batch contains
    it: whether, and when, a run stops would then be a release that no noise covers (a
    membership test). So every trainer runs the model — in the train/eval mode the caller has
    set, the mode it trains in; with gradients enabled, as a step runs it (no backward pass); on
    the device of its parameters — and the
    per-example loss (:func:`~dplib.training.grads.per_example_losses`) once over ALL of (x, y),
    ``chunk_size`` rows at a time, before the first step and before any noise is drawn; an
    exception becomes a ``ValueError`` naming the rows of the failing chunk. Cost: one forward
    pass over the n records (an epoch of DP-SGD takes a forward and a backward
    pass over n records in expectation). Non-finite losses are not refused: such an example gets
    clip factor 0 and adds nothing (:func:`~dplib.training.grads.clip_factors`). The pass leaves
    torch's CPU (and CUDA) random state as it found it (``fork_rng``: dropout in train mode
    draws from it) and must not change the model
    (:func:`~dplib.training.models.forward_must_not_mutate`).
    """
    check_batch(x, y)
    step = chunk_size
    if loss_fn is F.cross_entropy and not y.is_floating_point() and bool((y < 0).any()):
        # cross-entropy skips label -100 (its ignore_index) without raising: such a record would
        # train nothing and report loss 0 on the fast per-example path but NaN on the exact one
        s = int(torch.nonzero(y.reshape(y.shape[0], -1).lt(0).any(1))[0]) // step * step
        raise ValueError(f"the model or the loss fails on some record of {name} rows {s} to "
                         f"{min(s + step, x.shape[0]) - 1}: labels must be class indices in "
                         f"[0, classes) for the default cross-entropy loss, got "
                         f"{int(y.min())}")
    dev = next((p.device for p in model.parameters()), x.device)
    forked = [dev] if dev.type == "cuda" else []
    # with gradients enabled, as in a step (a model must not behave differently in the check);
    # each chunk's graph is freed once its loss is read
    with torch.random.fork_rng(devices=forked), torch.enable_grad(), \
            forward_must_not_mutate(model):
        for s in range(0, x.shape[0], step):
            try:   # .item(): a CUDA kernel's error surfaces here, not in a later step
                per_example_losses(model, loss_fn, x[s:s + step].to(dev),
                                   y[s:s + step].to(dev)).detach().sum().item()
            except Exception as exc:   # noqa: BLE001 - any failure is refused up front
                raise ValueError(
                    f"the model or the loss fails on some record of {name} rows {s} to "
                    f"{min(s + step, x.shape[0]) - 1} ({type(exc).__name__}: {exc})"[:400]
                    + ": such a record would stop training only in a step that samples it, a "
                    "membership test. Fix or remove it (e.g. labels in [0, classes), token ids "
                    "below the vocabulary size).") from exc


@constrained(finite=Flag())
def as_tensors(data: object, name: str, *, finite: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise ValueError(f"{name} must be a pair (X, y) of tensors or arrays, got "
                         f"{type(data).__name__}")
    x, y = data
    x = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
    y = torch.as_tensor(np.asarray(y) if not isinstance(y, torch.Tensor) else y)
    if x.shape[0] != y.shape[0] or x.shape[0] == 0:
        raise ValueError(f"{name} must hold the same positive number of inputs and labels, got "
                         f"{x.shape[0]} and {y.shape[0]}")
    if x.is_floating_point():
        x = x.float()
    if not y.is_floating_point():
        y = y.long()
    if finite:
        for part, t in (("inputs", x), ("labels", y)):
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                raise ValueError(
                    f"{name} {part} must be finite, got {int((~torch.isfinite(t)).sum())} inf or "
                    "NaN values: a non-finite record would turn the update into NaN exactly when "
                    "it is sampled (a perfect membership test). Remove or impute them first.")
    return x, y


