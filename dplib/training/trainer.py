"""DP-SGD and DP-Adam with Poisson batches and an accountant attached to the run.

One step t of :func:`train` (Abadi, Chu, Goodfellow, McMahan, Mironov, Talwar & Zhang 2016,
Algorithm 1, with Poisson sampling as in their moments-accountant analysis and in Opacus):

1. Poisson batch: every one of the n training records is in B_t independently with probability
   q = ``sample_rate`` (:func:`dplib.samplers.poisson_batches`; |B_t| ~ Binomial(n, q), possibly 0).
2. Per-example gradients g_i (``torch.func.vmap``; or ghost norms, ``ghost=True``), clipped to
   ḡ_i = g_i · min(1, C/‖g_i‖), C = ``max_grad_norm``.
3. Noise on the sum: G̃_t = (Σ_{i∈B_t} ḡ_i + N(0, σ²C² I)) / B, with B the EXPECTED batch size,
   which must be a public constant: the add/remove analysis assumes the only data-dependent
   quantity is the clipped sum. Dividing by the realised |B_t| breaks this (|B_t| reveals whether
   a record was sampled). So does B = q·n computed from the private data set: neighbours have n
   and n + 1 records, and the noise scale σC/(qn) differs by a factor 1 + 1/n, which the norm of
   d noise coordinates reveals once d ≫ n² (an audit on 32k parameters of pure noise at n = 100
   certified ε ≥ 1.7 against a claimed 0.016). :func:`train` takes B = ``expected_batch_size``;
   its default q·n treats n as public, the convention of Abadi et al. and Opacus — pass a public
   value when the data-set size must stay private.
4. Update: the optimiser (SGD with optional momentum/weight decay, or Adam) is applied to G̃_t.
   Anything computed from G̃_t alone is post-processing, so DP-Adam costs no extra privacy.

Privacy: each step is the Poisson-subsampled Gaussian mechanism with noise multiplier σ
(ℓ2-sensitivity C of the sum under add/remove adjacency), so T steps are accounted by
``RDPAccountant`` or ``PLDAccountant`` of :mod:`dplib.accounting` with (σ, q, T) — exactly the
object returned in :attr:`TrainResult.accountant`. Neighbouring datasets differ by adding or
removing one record; the guarantee covers the released final model AND all intermediate models.

Randomness and devices: the Poisson batches come from a NumPy generator and the Gaussian noise
from a CPU ``torch.Generator`` (then moved to ``device``), both seeded by ``seed``. By default
(``seed=None``) a seed of 63 fresh bits of OS entropy is drawn (:func:`dplib.device.release_seed`),
recorded in :attr:`TrainResult.seed`: with a seed anyone can guess, every batch and noise draw is
a known function of public inputs, and two runs on neighbouring data sets release models whose
difference is the target's clipped gradient, noise-free. A fixed seed is for experiments, never
for a release (and a second ``train`` call with the same seed reuses the same noise). The model
is initialised on the CPU; so the same seed gives the same batches and noise on CPU and GPU, and
results agree up to floating-point differences of the device arithmetic. Pass
``noise_device="device"`` to draw the noise on the accelerator (faster for very large models;
reproducible per device only).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .._constraints import Flag, Options, constrained, unconstrained
from .._validate import shown
from ._params import (ACCOUNTANT, COUNT, DECAY, LOSS_FN, MAX_GRAD_NORM, NOISE_MULTIPLIER0,
                      POSITIVE, optional)
from ..device import as_device, release_seed
from ..accounting import make_accountant as _registry_accountant
from ..samplers import poisson_batches
from .clipped_sum import StateSnapshot, private_clipped_sum
from .config import NOISE_SOURCES, RunConfig, steps_for_epochs  # noqa: F401
from .correlated import MatrixPrivatizer, cyclic_batches, run_factorization, run_groups
from .engine import EpsilonTracker, GaussianPrivatizer, batch_sizes, dpsgd_loop
from ..mechanisms.matrix_factorization import sensitivity as mf_sensitivity
from .models import check_dp_compatible
from .preflight import (as_tensors, check_every_record_runs, check_sum_range,  # noqa: F401
                        narrowest_dtype, preflight)
from .not_private import NotPrivate
from .user_level import UserIndex, cap_records, check_user_ids, user_clipped_sum

if TYPE_CHECKING:
    from ..reporting import PrivacyReport

__all__ = ["TrainResult", "train", "noisy_gradient", "evaluate", "predict_logits",
           "make_accountant", "make_optimizer", "make_privatizer", "run_batches"]


@dataclass
@unconstrained("a result record, built by train from its checked run")
class TrainResult:
    """What :func:`train` returns.

    ``epsilon`` is the final ε at ``delta`` (``math.inf`` for a non-private run, σ = 0);
    ``history`` has one dict per evaluation with keys "step", "epoch", "epsilon" and
    "test_accuracy" (of the noisy model on ``eval_data``; None without it); ``accountant`` is the
    :mod:`dplib.accounting` accountant that produced ε (no steps recorded when σ = 0).
    ``not_private`` (:class:`~dplib.training.release.NotPrivate`) holds the diagnostics computed
    from the data WITHOUT noise — the realised batch sizes, the share of clipped gradients, the
    training loss per history entry: fine for studying the algorithm, not covered by ε, do not
    publish them with the model. ``seed`` is the random seed the batches and the noise were
    drawn from (fresh OS entropy unless one was passed): keep it secret like the noise itself.
    ``privacy_unit`` is "record" (add/remove one record) or "user" (add/remove all of one user's
    records: a run with ``user_ids``, :mod:`dplib.training.user_level`), ``records_per_user`` the
    contribution bound of a user-level run (None: none, or a record-level run), ``config`` the
    run's :class:`~dplib.training.config.RunConfig` as the caller gave it (its ``seed`` is None
    unless the caller fixed one; None from trainers that do not record it).
    Every field's kind (public, noised, secret, not covered) is declared in
    :mod:`dplib.training.release`; :func:`~dplib.training.release.publishable` keeps the first two.
    """
    model: nn.Module
    noise_multiplier: float
    sample_rate: float
    steps: int
    delta: float
    epsilon: float
    history: list[dict] = field(default_factory=list)
    accountant: Any = None
    max_grad_norm: float = 1.0
    not_private: NotPrivate = field(default_factory=NotPrivate)
    seed: int | None = None
    privacy_unit: str = "record"
    records_per_user: int | None = None
    config: RunConfig | None = None

    @unconstrained("forwards the public facts to dplib.reporting.privacy_report, which checks "
                   "them")
    def privacy_report(self, **public_facts: object) -> "PrivacyReport":
        """This run's complete privacy statement, read from the run:
        :func:`dplib.reporting.privacy_report` (``public_facts``: only what the run cannot know,
        e.g. ``privacy_unit="user"`` for a record-level run where a person has many records)."""
        from ..reporting import privacy_report
        return privacy_report(self, **public_facts)


@constrained(kind=ACCOUNTANT)
def make_accountant(kind: str):
    """A fresh accountant from the registry of :mod:`dplib.accounting` ("rdp", "pld", …)."""
    return _registry_accountant(kind)


def _as_tensor(name: str, value: object) -> torch.Tensor:
    """A torch tensor or a numeric array with a batch dimension, as a tensor (no copy of a tensor)."""
    if isinstance(value, torch.Tensor):
        t = value
    else:
        arr = np.asarray(value)
        if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number)
                                       or arr.dtype == bool):
            raise ValueError(f"{name} must be a tensor or numeric array with a batch dimension, "
                             f"got {type(value).__name__} {shown(value)}"[:300])
        t = torch.as_tensor(arr)
    if t.dim() == 0:
        raise ValueError(f"{name} must have a batch dimension, got a scalar {shown(value)}")
    return t


@torch.no_grad()
@constrained(batch_size=COUNT)
def predict_logits(model: nn.Module, X: object, *, device=None,
                   batch_size: int = 1024) -> torch.Tensor:
    """The model's outputs on X, in batches of ``batch_size`` (eval mode), returned on the CPU."""
    dev = as_device(device)
    bs = batch_size
    x = _as_tensor("X", X)
    if x.is_floating_point():
        x = x.float()
    was_training = model.training
    model.eval()
    model.to(dev)
    outs = [model(x[i:i + bs].to(dev)).cpu() for i in range(0, x.shape[0], bs)]
    model.train(was_training)
    return torch.cat(outs) if outs else torch.empty(0)


@constrained(batch_size=COUNT)
def evaluate(model: nn.Module, X: object, y: object, *, device=None,
             batch_size: int = 1024) -> float:
    """Accuracy of argmax(model(X)) against y, in [0, 1]."""
    yt = _as_tensor("y", y)
    logits = predict_logits(model, X, device=device, batch_size=batch_size)
    if logits.shape[0] != yt.shape[0] or yt.shape[0] == 0:
        raise ValueError(f"X and y must hold the same positive number of examples, got "
                         f"{logits.shape[0]} and {yt.shape[0]}")
    return float((logits.argmax(1) == yt.long()).float().mean())


@constrained(max_grad_norm=MAX_GRAD_NORM, noise_multiplier=NOISE_MULTIPLIER0,
             expected_batch_size=POSITIVE, noise=Options(*NOISE_SOURCES))
def noisy_gradient(model: nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor, *,
                   max_grad_norm: float, noise_multiplier: float, expected_batch_size: float,
                   generator: torch.Generator | None = None, ghost: bool = False,
                   virtual_batch_size: int | None = None, noise: str = "float",
                   snapshot: StateSnapshot | None = None
                   ) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """One DP-SGD gradient: (Σ_i ḡ_i + N(0, σ²C² I)) / ``expected_batch_size``.

    ḡ_i = g_i·min(1, C/‖g_i‖) over the examples of (x, y) (one Poisson batch; it may be empty),
    by ``vmap`` (in chunks of ``virtual_batch_size``) or by ghost norms. The noise is drawn from
    ``generator`` on the generator's device and moved to the parameters' device (σ = 0: none);
    ``generator=None`` (the default) draws it from a generator seeded with fresh OS entropy
    (:func:`dplib.device.release_generator`), never from torch's global generator.
    Returns (gradient per trainable parameter name, per-example norms, per-example losses).
    This is the step :func:`train` takes; the benchmarks time it. The model must not change its
    parameters, buffers or attributes during the forward pass (an un-noised release of data):
    :func:`~dplib.training.models.forward_must_not_mutate` refuses it. An example whose gradient
    is not finite adds nothing (:func:`~dplib.training.grads.clip_factors`).

    Checks: :func:`~dplib.training.models.check_dp_compatible` on every call (a walk over the
    modules, microseconds; refuses batch normalisation, which mixes the batch). Not run here:
    the batch-independence probe :func:`~dplib.training.models.check_examples_independent`
    (nine forward passes on a fresh probe of eight examples, eighteen with ``layers=True``, as
    the ghost path needs: 0.7 and 1.8 ms on the speed benchmark's MLP on one CPU thread, 8% and
    20% of its ghost step at batch 256), which :func:`train` runs once before training — a direct
    caller must run it once too, and check its records as :func:`train` does
    (:func:`check_every_record_runs`).

    Float noise by default: ``torch.randn`` draws floating-point Gaussians, as every DP-SGD
    library does, which the floating-point attack of Mironov 2012 can see through; ``noise=
    "secure"`` adds exact discrete Gaussian noise on a lattice instead
    (:func:`dplib.mechanisms.secure_noise.secure_add_noise`; ``train(noise="secure")`` accounts
    for its rounding). The clipped sum never refuses a batch
    (:func:`~dplib.training.clipped_sum.private_clipped_sum`).

    ``snapshot``: a :class:`~dplib.training.clipped_sum.StateSnapshot` of ``model`` kept by the
    caller across its steps, as :func:`train` keeps one for its run — refreshed here (its value
    buffers are reused, and the walk over the modules is skipped while the model's structure is
    unchanged), with the same checks as a fresh one. None (default): one is taken at every call.
    A snapshot of another model is refused (``ValueError``).
    """
    check_dp_compatible(model)
    c, sigma, denom = max_grad_norm, noise_multiplier, expected_batch_size
    if math.isinf(c) and sigma > 0:
        raise ValueError(f"max_grad_norm=inf allows only noise_multiplier=0, got {sigma:g}")
    total, norms, losses = private_clipped_sum(model, loss_fn, x, y, c, ghost=ghost,
                                               chunk_size=virtual_batch_size,
                                               snapshot=snapshot)
    numel = sum(g.numel() for g in total.values())
    noisy, _ = GaussianPrivatizer(sigma, c, source=noise,
                                  numel=numel if noise == "secure" else None
                                  ).add_noise(total, generator)
    return {k: g.div_(denom) for k, g in noisy.items()}, norms, losses   # ours: fresh tensors


@constrained(noise_device=Options("cpu", "device"), ema_decay=optional(DECAY), progress=Flag(),
             eval_every=optional(COUNT), loss_fn=LOSS_FN, records_per_user=optional(COUNT))
def train(model: nn.Module, train_data: object, config: RunConfig | None = None, *,
          sample_rate: float | None = None, lr: float | None = None,
          epochs: float | None = None, steps: int | None = None,
          noise_multiplier: float | None = None, target_epsilon: float | None = None,
          max_grad_norm: float = 1.0, delta: float = 1e-5, optimizer: str = "sgd",
          momentum: float = 0.0, weight_decay: float = 0.0, accountant: str = "rdp",
          virtual_batch_size: int | None = None, ghost: bool = False,
          device=None, seed: int | None = None, betas: tuple[float, float] = (0.9, 0.999),
          expected_batch_size: float | None = None, noise: str = "float",
          eval_data: object = None, eval_every: int | None = None,
          loss_fn: Callable | None = None, progress: bool = False,
          noise_device: str = "cpu", ema_decay: float | None = None,
          noise_correlation: str = "independent", bands: int | None = None,
          user_ids: object = None, records_per_user: int | None = None) -> TrainResult:
    """Train ``model`` in place with DP-SGD (``optimizer="sgd"``) or DP-Adam (``"adam"``).

    The run's public settings are a :class:`~dplib.training.config.RunConfig`: pass one as
    ``config``, or its fields as keywords (``sample_rate``, ``lr``, ``epochs`` or ``steps``,
    ``noise_multiplier`` or ``target_epsilon``, ``max_grad_norm`` = 1, ``delta`` = 1e-5,
    ``optimizer`` = "sgd", ``momentum``, ``weight_decay``, ``betas``, ``accountant`` = "rdp",
    ``expected_batch_size``, ``ghost``, ``virtual_batch_size``, ``noise`` = "float", ``seed``,
    ``device``, with RunConfig's defaults) — not both (with ``config``, leave them at their
    defaults). See the module
    docstring for the algorithm, the privacy conventions (Poisson sampling at rate q, add/remove
    adjacency, noise N(0, σ²C²) on the clipped sum, division by the expected batch size) and
    the reproducibility across devices.

    ``expected_batch_size`` B: the public divisor of the noisy sum. ``None`` uses q·n, which
    treats the data-set size n as public (as Opacus does); under add/remove adjacency n changes
    between neighbours, so pass a data-independent B when n must stay private. σ = 0 with
    ``max_grad_norm=math.inf`` is ordinary (non-private) minibatch training on the same Poisson
    batches, with ε = ∞. ``virtual_batch_size`` processes a Poisson batch in chunks of that many
    examples (less memory, same update); ``ghost=True`` computes the clipped sum by ghost norms
    (:mod:`dplib.training.ghost`). ``noise="secure"`` draws the noise from a CSPRNG-seeded source
    hardened against the floating-point attack (:mod:`dplib.mechanisms.secure_noise`).
    ``loss_fn(logits, targets)`` returns the batch mean (default cross-entropy). ``eval_every``
    (steps; default one epoch ≈ 1/q) sets how often ``history`` gets an entry (the last step
    always does).

    Before step 1 the pre-flight (:func:`~dplib.training.preflight.preflight`) may refuse the
    model or the data as a whole: ``train_data`` must be finite, the model must not mix examples,
    and the model and the loss must run on every record (an exception raised only in a step that
    samples a record would itself reveal that record's membership). After it, nothing a step
    does depends on whether a batch passed a fast path's checks
    (:mod:`dplib.training.clipped_sum`).

    ``seed``: None (default) draws 63 fresh bits of OS entropy for the batches and the noise,
    recorded in :attr:`TrainResult.seed`. An integer makes the run reproducible — for
    experiments, never for a release (module docstring).

    ``ema_decay`` β in (0, 1): parameter averaging (De et al. 2022). An exponential moving
    average θ̄_t = β θ̄_{t−1} + (1 − β) θ_t of the iterates is kept and copied into the model at
    the end (:class:`~dplib.training.recipes.ExponentialAverage`); ``history`` still evaluates the
    raw iterates. The average is a function of the released iterates: post-processing, so ε is
    unchanged. ``None`` (default): the last iterate.

    ``noise_correlation`` (default "independent": DP-SGD as above) chooses a matrix-factorisation
    mechanism instead — "tree", "sqrt", "optimal" (cyclic batches: the records split once into
    G = round(1/q) groups, step t takes group t mod G; no amplification) or "banded" with
    ``bands`` b (cyclic Poisson batches: b groups, each Poisson-sampled at q·b). Only the
    batches and the privatizer stage change (:mod:`dplib.training.correlated`); the accountant
    sees :class:`~dplib.accounting.MatrixMechanismEvent` or
    :class:`~dplib.accounting.BandedMatrixMechanismEvent`.

    ``user_ids`` (one non-negative integer per record; default None: record-level DP): a
    user-level run (:mod:`dplib.training.user_level`; Charles et al. 2024, user-level sampling;
    McMahan et al. 2018, Alg. 1). Each user keeps at most ``records_per_user`` of its records
    (None: all), a uniformly random subset drawn from the run's seed before training; users are
    Poisson-sampled at rate q = ``sample_rate``; a sampled user's gradient is the mean over its
    kept records, clipped to C as one vector; the noisy sum is divided by the expected number of
    users (``expected_batch_size``, default q·m for m users). ε is then a guarantee for adding or
    removing one USER: the same DP-SGD event (σ, q, T) over users. ``history``'s epochs and
    ``not_private``'s batch sizes and clip fraction count users. Refused with ``user_ids``:
    ``ghost=True`` (ghost norms are per record) and a matrix mechanism (``noise_correlation``).
    """
    cfg = RunConfig.build(config, dict(
        sample_rate=sample_rate, lr=lr, epochs=epochs, steps=steps,
        noise_multiplier=noise_multiplier, target_epsilon=target_epsilon,
        max_grad_norm=max_grad_norm, delta=delta, optimizer=optimizer, momentum=momentum,
        weight_decay=weight_decay, betas=betas, accountant=accountant,
        expected_batch_size=expected_batch_size, ghost=ghost,
        virtual_batch_size=virtual_batch_size, noise=noise, seed=seed, device=device,
        noise_correlation=noise_correlation, bands=bands))
    check_dp_compatible(model)
    x, y = as_tensors(train_data, "train_data", finite=True)
    n, q, T, c = x.shape[0], cfg.sample_rate, cfg.num_steps, cfg.max_grad_norm
    users = _check_user_run(cfg, user_ids, records_per_user, n)
    sigma = cfg.sigma()
    every = max(1, int(round(1 / q))) if eval_every is None else eval_every
    loss = F.cross_entropy if loss_fn is None else loss_fn
    if eval_data is not None:
        x_ev, y_ev = as_tensors(eval_data, "eval_data")
    seed = release_seed(cfg.seed)
    if users is not None:    # the contribution bound: chosen before training, from the seed
        kept = cap_records(users, records_per_user, rng=np.random.default_rng([seed, 1]))
        index = UserIndex.build(users[kept])
        n = index.n_users                            # the sampled population: users
        kept_t = torch.from_numpy(kept)
    dev = as_device(cfg.device)
    model.to(dev)
    model.train()
    x_dev, y_dev = x.to(dev), y.to(dev)
    preflight(model, x_dev, y_dev, cfg, loss_fn=loss, sigma=sigma)

    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    opt = make_optimizer(cfg, params)
    ema = None
    if ema_decay is not None:
        from .recipes import ExponentialAverage   # a sibling module; imported where it is used
        ema = ExponentialAverage(params, ema_decay)
    batches = run_batches(cfg, n, seed)
    noise_gen = None          # "secure": fresh CSPRNG entropy for every draw, not the seed
    if cfg.noise == "float":
        noise_gen = torch.Generator(device="cpu" if noise_device == "cpu" else dev)
        noise_gen.manual_seed(seed)
    privatizer = make_privatizer(cfg, sigma, sum(p.numel() for p in params.values()))
    eps = EpsilonTracker(privatizer, q, T, cfg.delta, cfg.accountant)
    denom = cfg.divisor(n)
    history: list[dict] = []
    train_loss: list[float] = []
    tally = {"loss": 0.0, "count": 0, "clipped": 0, "seen": 0}
    bar = None
    if progress:
        from tqdm.auto import tqdm
        # no elapsed time, rate or ETA, and a redraw at every step (tqdm otherwise skips redraws
        # that come too soon): a step's duration depends on its batch (its size, the exact path
        # a failing batch takes), so timing in the text would be a release no noise covers
        bar = tqdm(total=T, desc="DP-SGD" if eps.private else "SGD",
                   bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt}{postfix}",
                   mininterval=0, maxinterval=math.inf, miniters=1)   # redraws: every step

    snapshot = StateSnapshot(model)       # one for the run: its buffers are allocated once

    def private_sum(idx: np.ndarray) -> tuple[dict, dict]:
        if users is not None:       # idx: sampled users; one clipped mean gradient per user
            rec, seg = index.records(idx)
            ii = kept_t[torch.from_numpy(rec)].to(dev)
            total, norms, losses = user_clipped_sum(
                model, loss, x_dev[ii], y_dev[ii], torch.from_numpy(seg).to(dev), idx.size, c,
                chunk_size=cfg.virtual_batch_size, snapshot=snapshot)
            return total, {"norms": norms, "losses": losses}
        ii = torch.from_numpy(idx).to(dev)
        total, norms, losses = private_clipped_sum(model, loss, x_dev[ii], y_dev[ii], c,
                                                   ghost=cfg.ghost,
                                                   chunk_size=cfg.virtual_batch_size,
                                                   snapshot=snapshot)
        return total, {"norms": norms, "losses": losses}

    def update(grads: dict, t: int) -> None:
        for k, p in params.items():
            p.grad = grads[k]
        opt.step()
        if ema is not None:
            ema.update(params)

    def on_step(t: int, info: dict) -> None:
        norms, losses = info["norms"], info["losses"]
        finite = torch.isfinite(losses)     # an example the exact path left out has NaN
        tally["loss"] += float(losses[finite].sum())
        tally["count"] += int(finite.sum())
        tally["seen"] += int(norms.numel())
        if math.isfinite(c):
            tally["clipped"] += int((norms > c).sum())
        if t % every == 0 or t == T:
            e = eps.at(t)
            acc_ev = evaluate(model, x_ev, y_ev, device=dev) if eval_data is not None else None
            model.train()
            history.append({"step": t, "epoch": t * q, "epsilon": e, "test_accuracy": acc_ev})
            train_loss.append(tally["loss"] / max(tally["count"], 1))
            tally["loss"], tally["count"] = 0.0, 0
            if bar is not None:      # ε and the held-out accuracy only: public or noised
                post = {"eps": f"{e:.3g}"}
                if acc_ev is not None:
                    post["acc"] = f"{acc_ev:.3f}"
                bar.set_postfix(post)
        if bar is not None:
            bar.update(1)

    dpsgd_loop(batches, private_sum, privatizer, noise_gen, denom, update, on_step)
    if bar is not None:
        bar.close()
    for p in params.values():
        p.grad = None
    if ema is not None:
        ema.copy_to(params)
    seen = tally["seen"]
    return TrainResult(model=model, noise_multiplier=sigma, sample_rate=q, steps=T,
                       delta=cfg.delta, epsilon=eps.final(), history=history,
                       accountant=eps.accountant, max_grad_norm=c, seed=seed,
                       not_private=NotPrivate(
                           batch_sizes=batch_sizes(batches), train_loss=train_loss,
                           clip_fraction=tally["clipped"] / seen if seen else float("nan")),
                       privacy_unit="record" if users is None else "user",
                       records_per_user=None if users is None else records_per_user,
                       config=cfg)


def _check_user_run(cfg: RunConfig, user_ids: object, records_per_user: object,
                    n: int) -> np.ndarray | None:
    """The validated user ids of a user-level run (None: record-level), refused before training
    with a ``ValueError`` naming the setting: ids (:func:`~dplib.training.user_level.check_user_ids`),
    ``records_per_user`` (an int >= 1, only with ``user_ids``), ghost norms, matrix mechanisms."""
    if user_ids is None:
        if records_per_user is not None:
            raise ValueError(f"records_per_user is for user-level runs (give user_ids), got "
                             f"records_per_user={shown(records_per_user)} without user_ids")
        return None
    ids = check_user_ids(user_ids, n)       # records_per_user: declared by train
    if cfg.ghost:
        raise ValueError("ghost=True computes per-record norms; a user-level run (user_ids) "
                         "clips each user's mean gradient: use ghost=False")
    if cfg.noise_correlation != "independent":
        raise ValueError(f"user_ids needs noise_correlation='independent' (Poisson sampling "
                         f"of users), got {shown(cfg.noise_correlation)}")
    return ids


@unconstrained("a stage builder the trainers call with their checked RunConfig (and values "
               "derived from it)")
def make_optimizer(config: RunConfig, params: dict[str, torch.Tensor]) -> torch.optim.Optimizer:
    """The updater stage: SGD (momentum, weight decay) or Adam over ``params``, as
    ``config`` says. It only ever sees the noisy gradient: post-processing."""
    if config.optimizer == "sgd":
        return torch.optim.SGD(params.values(), lr=config.lr, momentum=config.momentum,
                               weight_decay=config.weight_decay)
    return torch.optim.Adam(params.values(), lr=config.lr, betas=config.betas,
                            weight_decay=config.weight_decay)


@unconstrained("a stage builder the trainers call with their checked RunConfig (and values "
               "derived from it)")
def run_batches(config: RunConfig, n: int, seed: int) -> list[np.ndarray]:
    """The run's batches of record indices from ``seed``: Poisson batches at rate q (DP-SGD), or
    the cyclic (Poisson) batches of a matrix mechanism
    (:func:`~dplib.training.correlated.cyclic_batches`)."""
    rng = np.random.default_rng(seed)
    if config.noise_correlation == "independent":
        return poisson_batches(n, config.sample_rate, config.num_steps, rng=rng)
    groups, rate = run_groups(config.noise_correlation, config.sample_rate, config.num_steps,
                              config.bands)
    return cyclic_batches(n, groups, config.num_steps, rate, rng)


@unconstrained("a stage builder the trainers call with their checked RunConfig (and values "
               "derived from it)")
def make_privatizer(config: RunConfig, sigma: float, numel: int
                    ) -> GaussianPrivatizer | MatrixPrivatizer:
    """The privatizer stage for a run: N(0, σ²C²) from ``config.noise``'s source, on a sum of
    ``numel`` coordinates (the trainable parameters); for a matrix mechanism
    (``config.noise_correlation``), the correlated noise of its factorisation, scaled by the
    sensitivity under the run's participations (⌈T/G⌉ steps, G apart; the largest column norm
    for amplified banded MF)."""
    if config.noise_correlation != "independent":
        T = config.num_steps
        groups, rate = run_groups(config.noise_correlation, config.sample_rate, T, config.bands)
        fact = run_factorization(config.noise_correlation, T, momentum=config.momentum,
                                 bands=config.bands)
        if config.noise_correlation == "banded":
            return MatrixPrivatizer(fact, sigma, config.max_grad_norm, bands=groups,
                                    group_rate=rate)
        sens = mf_sensitivity(fact.C, participations=-(-T // groups), min_separation=groups)
        return MatrixPrivatizer(fact, sigma, config.max_grad_norm, sensitivity=sens)
    return GaussianPrivatizer(sigma, config.max_grad_norm, source=config.noise,
                              numel=numel if config.noise == "secure" else None)
