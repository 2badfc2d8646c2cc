"""DP-SGD and shadow models over several processes with ``torch.distributed`` (gloo or nccl).

Data-parallel DP-SGD (:func:`train_distributed`) is the one DP-SGD engine
(:func:`dplib.training.engine.dpsgd_loop`) with two parts swapped in:

* the **private sum** — each of the W ranks holds a shard of the data, takes its part of the
  Poisson batch, computes its clipped per-example gradient sum (vmap or ghost norms, exactly as
  :func:`dplib.training.train`) and the W partial sums are all-reduced: the global clipped sum;
* the **privatizer** — :class:`BroadcastPrivatizer`: rank 0 adds N(0, σ²C²) **once** to that
  sum, drawing it from the run's seeded generator, and broadcasts the noisy sum to every rank.

Then every rank divides by the same public divisor q·n (n the GLOBAL data-set size, summed over
the shards) and takes the same optimiser step, so the replicas stay identical (rank 0's initial
parameters are broadcast first, as ``DistributedDataParallel`` does). Nothing else changes: the
global batch is Poisson with rate q over all n records, each step is the subsampled Gaussian
mechanism of Abadi et al. (2016), and the accountant
(:class:`~dplib.training.engine.EpsilonTracker`) sees the global q and the step count T, whatever
W is.

Why one draw and not W: each rank could add N(0, σ²C²/W) to its partial sum (the W draws add up
to N(0, σ²C²), the split used by secure-aggregation protocols; Opacus' distributed optimizer
instead adds the whole noise on rank 0, as here). The split is valid only if every rank is
honest: a rank that omits or subtracts its share leaves the sum under-noised. With the noise
drawn once, no rank has to add noise honestly — but every rank holds the run's seed and the
noiseless all-reduced sum, so all of them must keep those private (ε covers what leaves the
group: the noisy sums and the models); hiding the partial sums from each other needs secure
aggregation (Bonawitz et al. 2017).

Batches (``sampling``): ``"shared"`` (default) draws the global Poisson mask over all n records
on every rank from the run's seed — exactly the batches :func:`~dplib.training.train` draws — and
each rank keeps its shard's part; so a W-rank run equals the single-process run with the same
seed up to float round-off of the summation order. ``"local"`` lets each rank Poisson-sample its
own shard with its own generator (spawned from the run's seed): the same law (independent inclusions
at rate q), no global index needed, not reproducible across world sizes.

:func:`train_models_distributed` spreads the model stack of
:func:`~dplib.training.batched.train_models_batched` over the ranks (model m keeps its own seed,
so the result does not depend on W) and gathers the parameters. :func:`launch` runs a function on
W local processes (tests, notebooks, benchmarks). The book's recipe on W processes and its command
line (``torchrun --nproc_per_node=W -m dplib.experiments.distributed --data digits``) are an
experiment: :mod:`dplib.experiments.distributed`.
"""
from __future__ import annotations

import math
import os
import socket
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from .._constraints import Custom, Integer, IsCallable, Options, constrained, unconstrained
from .._validate import check_choice
from ._params import COUNT, POSITIVE
from ..device import as_device, release_seed
from ..samplers import poisson_batches
from .batched import BatchedModels, check_masks, train_models_batched
from .clipped_sum import StateSnapshot, private_clipped_sum
from .config import RunConfig
from .engine import EpsilonTracker, Privatizer, dpsgd_loop
from .models import check_dp_compatible
from .preflight import as_tensors, check_sum_range, narrowest_dtype, preflight
from .not_private import NotPrivate
from .trainer import TrainResult, evaluate, make_optimizer, make_privatizer

__all__ = ["BroadcastPrivatizer", "train_distributed", "train_models_distributed", "launch"]


def _world(group: object = None) -> tuple[int, int]:
    """(rank, world size); (0, 1) when no process group is initialised: one process."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(group), dist.get_world_size(group)
    return 0, 1


def _global_rank(rank: int, group: object) -> int:
    """The global rank of ``group``'s rank ``rank`` (what broadcast's ``src`` means)."""
    return rank if group is None else dist.get_global_rank(group, rank)


def _agree(local: dict, group: object) -> list[dict]:
    """All-gather every rank's ``{"error", "settings", ...}`` and raise the same ValueError on
    every rank if a rank failed its checks or the public settings differ — before any
    collective of the training loop, so a bad input never leaves a rank waiting (a hang)."""
    rank, world = _world(group)
    if world == 1:
        everyone = [local]
    else:
        everyone = [None] * world
        dist.all_gather_object(everyone, local, group=group)
    errors: dict[str, list[int]] = {}
    for r, g in enumerate(everyone):
        if g["error"]:
            errors.setdefault(g["error"], []).append(r)
    if errors:
        raise ValueError("; ".join(f"rank{'s' if len(rs) > 1 else ''} "
                                   f"{', '.join(map(str, rs))}: {e}" for e, rs in errors.items()))
    for key, mine in everyone[0]["settings"].items():
        values = [g["settings"].get(key) for g in everyone]
        if any(v != mine for v in values):
            shown = "different values" if key == "seed" else values
            raise ValueError(f"{key} must be the same on every rank (a public setting of the "
                             f"run), got {shown} on ranks 0..{world - 1}")
    return everyone


def _allreduce(tensors: dict[str, torch.Tensor], group: object, world: int
               ) -> dict[str, torch.Tensor]:
    """The sum over ranks of each tensor, in one all-reduce of a flat buffer."""
    if world == 1:
        return tensors
    flat = torch.cat([t.reshape(-1) for t in tensors.values()])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
    out, i = {}, 0
    for k, t in tensors.items():
        out[k] = flat[i:i + t.numel()].view_as(t)
        i += t.numel()
    return out


def _broadcast(tensors: dict[str, torch.Tensor], src: int, group: object
               ) -> dict[str, torch.Tensor]:
    """Rank ``src``'s tensors on every rank (one broadcast of a flat buffer)."""
    flat = torch.cat([t.reshape(-1) for t in tensors.values()]).contiguous()
    dist.broadcast(flat, src=_global_rank(src, group), group=group)
    out, i = {}, 0
    for k, t in tensors.items():
        out[k] = flat[i:i + t.numel()].view_as(t).clone()
        i += t.numel()
    return out


def _check_privatizer(name: str, value: object) -> object:
    if not (callable(getattr(value, "add_noise", None))
            and callable(getattr(value, "event", None))):
        raise ValueError(f"{name} must be a privatizer (add_noise and event), got "
                         f"{type(value).__name__}")
    return value


@dataclass(frozen=True)
@constrained(inner=Custom(_check_privatizer, "a privatizer (add_noise and event)",
                          [None, "noise", object()]),
             src=Integer(min=0))
class BroadcastPrivatizer:
    """A privatizer whose noise is drawn once, on rank ``src``, and broadcast.

    Rank ``src`` applies ``inner`` (e.g. :class:`~dplib.training.engine.GaussianPrivatizer`) to
    the all-reduced sum with the run's generator and sends the noisy sum to every rank; the
    others draw nothing (their ``generator`` may be None). So the noise is N(0, σ²C²) once, not
    once per rank — and every rank continues from bit-identical noisy sums. The privacy event is
    ``inner``'s. The split alternative, N(0, σ²C²/W) on every rank, is valid only if every rank
    is honest (module docstring). Without a process group it is ``inner``."""

    inner: Privatizer
    src: int = 0
    group: object = None

    def __post_init__(self) -> None:
        world = _world(self.group)[1]
        if self.src >= world:
            raise ValueError(f"src must be a rank in [0, {world - 1}], got {self.src}")

    @unconstrained("a step of the engine: called by dpsgd_loop every step with the run's clipped "
                   "sum and generator (no check per step)")
    def add_noise(self, total: dict[str, torch.Tensor], generator: object
                  ) -> tuple[dict[str, torch.Tensor], dict]:
        """The noisy sum drawn on rank ``src``, the same tensors on every rank."""
        rank, world = _world(self.group)
        if world == 1:
            return self.inner.add_noise(total, generator)
        noisy = self.inner.add_noise(total, generator)[0] if rank == self.src else total
        return _broadcast(noisy, self.src, self.group), {}

    @unconstrained("called by EpsilonTracker with the run's checked rate and step count (inner's "
                   "event checks them)")
    def event(self, sample_rate: float, steps: int) -> object:
        """``inner``'s event: the global rate q and step count, whatever the world size."""
        return self.inner.event(sample_rate, steps)


def _shard_size(shard: object, rank: int) -> None:
    """Refuse an empty shard by name (as_tensors checks the rest)."""
    if isinstance(shard, (tuple, list)) and len(shard) == 2 and hasattr(shard[0], "__len__") \
            and len(shard[0]) == 0:
        raise ValueError(f"shard of rank {rank} is empty: every rank needs at least one record "
                         "(more ranks than records, or a wrong split of the data)")


@unconstrained("its settings are checked in the body inside the all-gather of every rank's "
               "settings (a declaration raising on one rank alone would leave the others waiting "
               "at the collective); RunConfig checks them there")
def train_distributed(model: nn.Module, shard: object, *, sample_rate: float, lr: float,
                      epochs: float | None = None, steps: int | None = None,
                      noise_multiplier: float | None = None,
                      target_epsilon: float | None = None, max_grad_norm: float = 1.0,
                      delta: float = 1e-5, optimizer: str = "sgd", momentum: float = 0.0,
                      weight_decay: float = 0.0, betas: tuple[float, float] = (0.9, 0.999),
                      accountant: str = "rdp", ghost: bool = False,
                      virtual_batch_size: int | None = None, loss_fn: Callable | None = None,
                      device: object = None, seed: int | None = None, sampling: str = "shared",
                      expected_batch_size: float | None = None, eval_data: object = None,
                      group: object = None) -> TrainResult:
    """DP-SGD / DP-Adam of :func:`dplib.training.train` on this rank's ``shard`` (X, y) of the
    data, the ranks of ``group`` (default: the whole world; none initialised: one process)
    together training one model (module docstring). Every rank calls it with the same public
    settings; the shards are the data set's parts in rank order (rank 0 first).

    Before training the ranks all-gather their settings: a rank whose arguments fail a check, an
    empty shard, a record the model or the loss fails on (the whole shard is run before step 1,
    as in ``train``), or a setting that differs between ranks (q, σ or the ε target, C, δ, T, the
    optimiser, the accountant, the parameter shapes, the random seed) raises the same ValueError
    on every rank. ``seed``: the same integer on every rank, or None everywhere (rank 0 draws
    fresh OS entropy and shares it). The divisor is ``expected_batch_size`` or q·n (global n).

    Returns :class:`~dplib.training.trainer.TrainResult` (the same on every rank): the privacy
    fields as ``train`` with the global q and T; ``batch_sizes`` of the global batches,
    ``clip_fraction`` over all ranks, one ``history`` entry (the whole run's mean loss, test
    accuracy on ``eval_data``) — diagnostics without privacy, as in ``train``.
    """
    rank, world = _world(group)
    local: dict[str, Any] = {"error": None, "settings": {}, "n": 0, "seed": None}
    try:
        check_dp_compatible(model)
        cfg = RunConfig(
            sample_rate=sample_rate, lr=lr, epochs=epochs, steps=steps,
            noise_multiplier=noise_multiplier, target_epsilon=target_epsilon,
            max_grad_norm=max_grad_norm, delta=delta, optimizer=optimizer, momentum=momentum,
            weight_decay=weight_decay, betas=betas, accountant=accountant, ghost=ghost,
            virtual_batch_size=virtual_batch_size, expected_batch_size=expected_batch_size,
            device=device)
        q, lr, c, d, T = cfg.sample_rate, cfg.lr, cfg.max_grad_norm, cfg.delta, cfg.num_steps
        mom, wd, vbs, ebs = cfg.momentum, cfg.weight_decay, cfg.virtual_batch_size, \
            cfg.expected_batch_size
        check_choice("sampling", sampling, ("shared", "local"))
        _shard_size(shard, rank)
        x, y = as_tensors(shard, "shard", finite=True)
        sigma = cfg.sigma()
        given = None if seed is None else release_seed(seed)
        dev, loss = as_device(device), F.cross_entropy if loss_fn is None else loss_fn
        # the same pre-flight as train, on this rank's shard (the overflow bound is checked
        # again below with the global n)
        preflight(model.to(dev).train(), x.to(dev), y.to(dev), cfg, loss_fn=loss, sigma=sigma,
                  name="shard")
        evals = None if eval_data is None else as_tensors(eval_data, "eval_data")
        local["settings"] = dict(
            sample_rate=q, noise_multiplier=sigma, max_grad_norm=c, delta=d, steps=T, lr=lr,
            optimizer=optimizer, momentum=mom, weight_decay=wd, betas=tuple(betas),
            accountant=accountant, ghost=ghost, sampling=sampling, expected_batch_size=ebs,
            parameters=[(k, tuple(p.shape)) for k, p in model.named_parameters()],
            seed=given)
        local["n"] = int(x.shape[0])
        # no seed anywhere: rank 0 draws fresh OS entropy and _agree shares it
        local["seed"] = release_seed(None) if given is None and rank == 0 else given
    except Exception as exc:   # noqa: BLE001 - reported on every rank by _agree, never a hang
        local["error"] = f"{type(exc).__name__}: {exc}"
    everyone = _agree(local, group)
    seed = everyone[0]["seed"]
    sizes = [g["n"] for g in everyone]
    n, offset = sum(sizes), sum(sizes[:rank])
    check_sum_range(c, sigma, n, narrowest_dtype(model))
    # the model is on dev and in train mode since the record check above
    if world > 1:                  # identical replicas: rank 0's initial state everywhere
        with torch.no_grad():
            for v in model.state_dict().values():
                dist.broadcast(v, src=_global_rank(0, group), group=group)
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    opt = make_optimizer(cfg, params)
    x_dev, y_dev = x.to(dev), y.to(dev)
    if sampling == "shared":       # train's global batches; this rank keeps its shard's part
        batches = [b[(b >= offset) & (b < offset + sizes[rank])] - offset
                   for b in poisson_batches(n, q, T, rng=np.random.default_rng(seed))]
    else:                          # each shard Poisson-sampled by its own generator
        child = np.random.SeedSequence(seed).spawn(world)[rank]
        batches = poisson_batches(sizes[rank], q, T, rng=np.random.default_rng(child))
    noise_gen = torch.Generator(device="cpu").manual_seed(seed) if rank == 0 else None
    privatizer = BroadcastPrivatizer(
        make_privatizer(cfg, sigma, sum(p.numel() for p in params.values())), src=0, group=group)
    eps = EpsilonTracker(privatizer, q, T, d, accountant)
    denom = q * n if ebs is None else ebs
    tally = torch.zeros(4, dtype=torch.float64, device=dev)   # loss sum, count, clipped, seen

    snapshot = StateSnapshot(model)

    def private_sum(idx: np.ndarray) -> tuple[dict, dict]:
        ii = torch.from_numpy(idx).to(dev)
        # σ = 0 and divisor 1: exactly train's clipped sum (vmap or ghost), no noise
        total, norms, losses = private_clipped_sum(model, loss, x_dev[ii], y_dev[ii], c,
                                                   ghost=cfg.ghost, chunk_size=vbs,
                                                   snapshot=snapshot)
        return _allreduce(total, group, world), {"norms": norms, "losses": losses}

    def update(grads: dict, t: int) -> None:
        for k, p in params.items():
            p.grad = grads[k]
        opt.step()

    def on_step(t: int, info: dict) -> None:      # on the device: no sync per step
        norms, losses = info["norms"].detach(), info["losses"].detach()
        clipped = (norms > c).sum() if math.isfinite(c) else norms.new_zeros(())
        finite = torch.isfinite(losses)        # an example the exact path left out has NaN
        tally.add_(torch.stack([losses.double().nan_to_num(0.0, 0.0, 0.0).sum(),
                                finite.double().sum(), clipped.double(),
                                tally.new_tensor(norms.numel())]))

    dpsgd_loop(batches, private_sum, privatizer, noise_gen, denom, update, on_step)
    for p in params.values():
        p.grad = None
    counts = torch.tensor([len(b) for b in batches], dtype=torch.float64, device=dev)
    stats = _allreduce({"tally": tally, "sizes": counts}, group, world)   # device tensors: nccl
    tally, bsz = stats["tally"].cpu(), stats["sizes"].long().cpu().numpy()
    acc = None
    if evals is not None:
        acc = evaluate(model, *evals, device=dev)
        model.train()
    epsilon = eps.final()
    history = [{"step": T, "epoch": T * q, "epsilon": epsilon, "test_accuracy": acc}]
    diagnostics = NotPrivate(
        batch_sizes=bsz, train_loss=[float(tally[0] / max(float(tally[1]), 1.0))],
        clip_fraction=float(tally[2] / tally[3]) if tally[3] else float("nan"))
    return TrainResult(model=model, noise_multiplier=sigma, sample_rate=q, steps=T, delta=d,
                       epsilon=epsilon, history=history, accountant=eps.accountant,
                       max_grad_norm=c, not_private=diagnostics, seed=seed)


@unconstrained("its settings are checked in the body inside the all-gather of every rank's "
               "settings (a declaration raising on one rank alone would leave the others waiting "
               "at the collective); RunConfig checks them there")
def train_models_distributed(models: Sequence[nn.Module], X: object, y: object, masks: object,
                             *, seeds: Sequence[int] | None = None, group: object = None,
                             **train_kwargs: Any) -> BatchedModels:
    """:func:`~dplib.training.batched.train_models_batched` with the M models spread over the W
    ranks: rank r trains models r·M/W … (r+1)·M/W − 1 with their own seeds, then the stacks are
    all-gathered, so every rank returns all M models — the same models as one process trains
    (a model's batches and noise come from its own seed, not from its neighbours in the stack).

    Every rank passes the same ``models``, data, ``masks``, ``seeds`` and settings
    (``train_kwargs`` as ``train_models_batched``); ``seeds=None`` on every rank: rank 0 draws
    them and shares them. W must divide M (ValueError on every rank otherwise, as for settings
    that differ between ranks)."""
    rank, world = _world(group)
    local: dict[str, Any] = {"error": None, "settings": {}, "seed": None}
    try:
        if isinstance(models, nn.Module) or not isinstance(models, (list, tuple)) or not models:
            raise ValueError("models must be a non-empty list of nn.Module of one architecture")
        M = len(models)
        if M % world:
            raise ValueError(f"the world size {world} must divide the number of models {M} "
                             f"(each rank trains M/W of them): choose a number of models "
                             f"divisible by {world}, or a world size dividing {M}")
        mk = check_masks(masks, M, len(X))
        given = None if seeds is None else [release_seed(s, "seeds") for s in seeds]
        if given is not None and len(given) != M:
            raise ValueError(f"seeds must have one entry per model ({M}), got {len(given)}")
        public = {k: v for k, v in train_kwargs.items()
                  if isinstance(v, (int, float, str, bool, tuple, type(None)))}
        local["settings"] = dict(models=M, masks=mk.shape, settings=sorted(public.items()),
                                 seed=given)
        local["seed"] = [release_seed(None) for _ in range(M)] \
            if given is None and rank == 0 else given
    except Exception as exc:   # noqa: BLE001 - reported on every rank by _agree, never a hang
        local["error"] = f"{type(exc).__name__}: {exc}"
    seeds = _agree(local, group)[0]["seed"]
    per = M // world
    mine = slice(rank * per, (rank + 1) * per)
    status: dict[str, Any] = {"error": None, "settings": {}}
    try:
        part = train_models_batched(list(models)[mine], X, y, mk[mine], seeds=seeds[mine],
                                    **train_kwargs)
    except Exception as exc:   # noqa: BLE001 - e.g. an empty training set in one rank's slice
        status["error"] = f"{type(exc).__name__}: {exc}"
    _agree(status, group)
    if world == 1:
        return part

    def gather(stack: dict) -> dict:
        out = {}
        for k, v in stack.items():
            parts = [torch.empty_like(v) for _ in range(world)]
            dist.all_gather(parts, v.contiguous(), group=group)
            out[k] = torch.cat(parts)
        return out
    return BatchedModels(template=part.template, params=gather(part.params),
                         buffers=gather(part.buffers), masks=mk, seeds=list(seeds),
                         noise_multiplier=part.noise_multiplier, sample_rate=part.sample_rate,
                         steps=part.steps, delta=part.delta, epsilon=part.epsilon,
                         max_grad_norm=part.max_grad_norm, device=part.device)


# ---------------------------------------------------------------------------------------------
# running on several local processes
# ---------------------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spawned(rank: int, world: int, port: int, backend: str, threads: int, timeout: float,
             folder: str, fn: Callable, args: tuple) -> None:
    """One process of :func:`launch`: join the group, run ``fn``, save its value or error."""
    torch.set_num_threads(threads)
    if backend == "nccl":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    out: dict[str, Any] = {"value": None, "error": None}
    try:
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=timedelta(seconds=timeout))
        out["value"] = fn(*args)
    except Exception as exc:   # noqa: BLE001 - reported by launch, rank by rank
        out["error"] = (type(exc).__name__, str(exc))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    torch.save(out, os.path.join(folder, f"{rank}.pt"))


@constrained(fn=IsCallable("a callable"), world_size=COUNT, timeout=POSITIVE,
             backend=Options("gloo", "nccl"), threads=COUNT)
def launch(fn: Callable, world_size: int, *args: Any, timeout: float = 120.0,
           backend: str = "gloo", threads: int = 1) -> list:
    """Run ``fn(*args)`` on ``world_size`` new local processes joined in one process group
    (``torch.multiprocessing.spawn``, a free TCP port on 127.0.0.1) and return each rank's
    value, rank 0 first. The tests', notebooks' and benchmarks' stand-in for ``torchrun``.

    ``fn`` must be importable (a module-level function) and its value picklable. If a rank
    raises, every rank's error is re-raised here, as a ValueError when all of them are
    ValueErrors. After ``timeout`` seconds (also each collective's timeout) the processes are
    killed and TimeoutError is raised: a hang fails, it does not block."""
    world, limit = world_size, timeout
    with tempfile.TemporaryDirectory() as folder:
        ctx = torch.multiprocessing.spawn(
            _spawned, args=(world, _free_port(), backend, threads, limit, folder, fn, args),
            nprocs=world, join=False)
        deadline = time.monotonic() + limit
        while not ctx.join(timeout=max(0.05, min(1.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                for p in ctx.processes:
                    if p.is_alive():
                        p.kill()
                raise TimeoutError(f"launch: {world} processes still running after "
                                   f"{limit:g} s (timeout); killed")
        results = [torch.load(os.path.join(folder, f"{r}.pt"), weights_only=False)
                   for r in range(world)]
    errors = [(r, res["error"]) for r, res in enumerate(results) if res["error"]]
    if errors:
        kind = ValueError if all(e[0] == "ValueError" for _, e in errors) else RuntimeError
        raise kind("; ".join(f"rank {r}: {e[0]}: {e[1]}" for r, e in errors))
    return [res["value"] for res in results]
