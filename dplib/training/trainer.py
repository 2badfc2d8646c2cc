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
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .._validate import check_choice, check_int, check_positive, check_probability, check_real
from ..device import as_device, release_seed
from ..accounting import accountant_names, calibrate_noise, check_delta
from ..accounting import make_accountant as _registry_accountant
from ..samplers import poisson_batches
from .engine import EpsilonTracker, GaussianPrivatizer, batch_sizes, dpsgd_loop
from .clipped_sum import private_clipped_sum
from .release import NotPrivate
from .grads import check_batch, check_max_grad_norm, clipped_grad_sum, per_example_losses
from .models import check_dp_compatible, check_examples_independent, forward_must_not_mutate

__all__ = ["TrainResult", "train", "noisy_gradient", "evaluate", "predict_logits",
           "steps_for_epochs", "make_accountant"]


@dataclass
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


def steps_for_epochs(epochs: float, sample_rate: float) -> int:
    """T = round(epochs / q): an "epoch" of Poisson sampling is 1/q steps (n records seen in
    expectation). At least one step."""
    e = check_positive("epochs", epochs)
    q = check_probability("sample_rate", sample_rate, low_open=True)
    return max(1, int(round(e / q)))


def make_accountant(kind: str):
    """A fresh accountant from the registry of :mod:`dplib.accounting` ("rdp", "pld", …)."""
    return _registry_accountant(kind)


def resolve_noise_multiplier(noise_multiplier: float | None, target_epsilon: float | None,
                             max_grad_norm: float, delta: float, sample_rate: float, steps: int,
                             accountant: str) -> float:
    """σ of a run: ``noise_multiplier`` as given, or :func:`dplib.accounting.calibrate_noise`
    (target ε, δ, q, T, accountant) for ``target_epsilon`` (exactly one of the two).

    C = ∞ (no clipping) bounds no sensitivity: it allows only σ = 0 (non-private training).
    Shared by :func:`train` and the batched shadow-model trainer, so both spend the same noise.
    """
    if (noise_multiplier is None) == (target_epsilon is None):
        raise ValueError(f"give exactly one of noise_multiplier and target_epsilon, got "
                         f"noise_multiplier={noise_multiplier!r}, "
                         f"target_epsilon={target_epsilon!r}")
    if target_epsilon is not None:
        if math.isinf(max_grad_norm):
            raise ValueError("target_epsilon needs a finite max_grad_norm (clipping bounds the "
                             "sensitivity), got max_grad_norm=inf")
        return calibrate_noise(check_positive("target_epsilon", target_epsilon), delta,
                               sample_rate, steps, accountant)
    sigma = check_real("noise_multiplier", noise_multiplier, low=0.0, low_open=False)
    if math.isinf(max_grad_norm) and sigma > 0:
        raise ValueError(f"max_grad_norm=inf (no clipping) allows only noise_multiplier=0 "
                         f"(non-private training), got noise_multiplier={sigma:g}; noise "
                         "std σ·C would be infinite")
    return sigma


def check_run_settings(*, sample_rate: float, lr: float, max_grad_norm: float, delta: float,
                       optimizer: str, accountant: str, momentum: float, weight_decay: float,
                       epochs: float | None, steps: int | None) -> tuple:
    """The settings every DP-SGD run shares, checked: (q, lr, C, δ, momentum, weight decay, T).
    Shared by :func:`train` and the batched shadow-model trainer, so both accept the same runs."""
    q = check_probability("sample_rate", sample_rate, low_open=True)
    lr = check_positive("lr", lr)
    c = check_max_grad_norm(max_grad_norm)
    d = check_delta(delta)
    check_choice("optimizer", optimizer, ("sgd", "adam"))
    check_choice("accountant", accountant, accountant_names())
    mom = check_real("momentum", momentum, low=0.0, high=1.0, low_open=False)
    wd = check_real("weight_decay", weight_decay, low=0.0, low_open=False)
    if (epochs is None) == (steps is None):
        raise ValueError(f"give exactly one of epochs and steps, got epochs={epochs!r}, "
                         f"steps={steps!r}")
    T = steps_for_epochs(epochs, q) if steps is None else check_int("steps", steps)
    return q, lr, c, d, mom, wd, T


def check_sum_range(max_grad_norm: float, noise_multiplier: float, size: int,
                    dtype: torch.dtype = torch.float32) -> None:
    """Refuse a clipping norm so large that the noisy sum could overflow ``dtype``.

    Each coordinate of Σ_i ḡ_i + N(0, σ²C²) is at most size·C + |z|·σC, and |z| < 40 for every
    float Gaussian sampler. If that bound could exceed the dtype's largest number, whether the
    released update is finite would depend on how many large records were sampled — a membership
    signal. Checked before training, from public quantities (C, σ, the data-set size n).
    """
    max_grad_norm = check_max_grad_norm(max_grad_norm)
    noise_multiplier = check_real("noise_multiplier", noise_multiplier, low=0.0, low_open=False)
    size = check_int("size", size, low=0)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch dtype, got {dtype!r}")
    if not math.isfinite(max_grad_norm):
        return
    bound = max_grad_norm * (size + 40.0 * noise_multiplier)
    top = torch.finfo(dtype).max / 4
    if bound >= top:
        raise ValueError(f"max_grad_norm={max_grad_norm:g} is too large for {dtype}: the noisy "
                         f"sum of up to {size} clipped gradients could reach {bound:.3g}, beyond "
                         f"{top:.3g}, and overflow only for some batches; use max_grad_norm < "
                         f"{top / (size + 40.0 * noise_multiplier):.3g} (rescale the loss)")


def narrowest_dtype(model: nn.Module) -> torch.dtype:
    """The floating dtype, among ``model``'s trainable parameters, with the smallest largest
    value (``torch.finfo(dtype).max``): the dtype in which a clipped sum overflows first, so the
    one :func:`check_sum_range` must be given (float32 if there is none)."""
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    dtypes = {p.dtype for p in model.parameters() if p.requires_grad and p.is_floating_point()}
    return min(dtypes, key=lambda t: torch.finfo(t).max, default=torch.float32)


def check_every_record_runs(model: nn.Module, loss_fn: Callable, x: torch.Tensor,
                            y: torch.Tensor, *, name: str = "train_data",
                            chunk_size: int = 1024) -> None:
    """Refuse, with a ``ValueError``, training data on which the model or the loss raises.

    A record the model or the loss cannot take (a class label outside [0, K), a token id outside
    the vocabulary, …) makes training raise only in the first step whose Poisson batch contains
    it: whether, and when, a run stops would then be a release that no noise covers (a
    membership test). So every trainer runs the model — in the train/eval mode the caller has
    set, the mode it trains in; without gradients; on the device of its parameters — and the
    per-example loss (:func:`~dplib.training.grads.per_example_losses`) once over ALL of (x, y),
    ``chunk_size`` rows at a time, before the first step and before any noise is drawn; an
    exception becomes a ``ValueError`` naming the rows of the failing chunk. Cost: one forward
    pass over the n records without gradients (an epoch of DP-SGD takes a forward and a backward
    pass over n records in expectation). Non-finite losses are not refused: such an example gets
    clip factor 0 and adds nothing (:func:`~dplib.training.grads.clip_factors`). The pass leaves
    torch's CPU (and CUDA) random state as it found it (``fork_rng``: dropout in train mode
    draws from it) and must not change the model
    (:func:`~dplib.training.models.forward_must_not_mutate`).
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    check_batch(x, y)
    step = check_int("chunk_size", chunk_size)
    dev = next((p.device for p in model.parameters()), x.device)
    forked = [dev] if dev.type == "cuda" else []
    with torch.random.fork_rng(devices=forked), torch.no_grad(), forward_must_not_mutate(model):
        for s in range(0, x.shape[0], step):
            try:   # .item(): a CUDA kernel's error surfaces here, not in a later step
                per_example_losses(model, loss_fn, x[s:s + step].to(dev),
                                   y[s:s + step].to(dev)).sum().item()
            except Exception as exc:   # noqa: BLE001 - any failure is refused up front
                raise ValueError(
                    f"the model or the loss fails on some record of {name} rows {s} to "
                    f"{min(s + step, x.shape[0]) - 1} ({type(exc).__name__}: {exc})"[:400]
                    + ": such a record would stop training only in a step that samples it, a "
                    "membership test. Fix or remove it (e.g. labels in [0, classes), token ids "
                    "below the vocabulary size).") from exc


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


def _as_tensor(name: str, value: object) -> torch.Tensor:
    """A torch tensor or a numeric array with a batch dimension, as a tensor (no copy of a tensor)."""
    if isinstance(value, torch.Tensor):
        t = value
    else:
        arr = np.asarray(value)
        if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number)
                                       or arr.dtype == bool):
            raise ValueError(f"{name} must be a tensor or numeric array with a batch dimension, "
                             f"got {type(value).__name__} {value!r}"[:300])
        t = torch.as_tensor(arr)
    if t.dim() == 0:
        raise ValueError(f"{name} must have a batch dimension, got a scalar {value!r}")
    return t


@torch.no_grad()
def predict_logits(model: nn.Module, X: object, *, device=None,
                   batch_size: int = 1024) -> torch.Tensor:
    """The model's outputs on X, in batches of ``batch_size`` (eval mode), returned on the CPU."""
    dev = as_device(device)
    bs = check_int("batch_size", batch_size)
    x = _as_tensor("X", X)
    if x.is_floating_point():
        x = x.float()
    was_training = model.training
    model.eval()
    model.to(dev)
    outs = [model(x[i:i + bs].to(dev)).cpu() for i in range(0, x.shape[0], bs)]
    model.train(was_training)
    return torch.cat(outs) if outs else torch.empty(0)


def evaluate(model: nn.Module, X: object, y: object, *, device=None,
             batch_size: int = 1024) -> float:
    """Accuracy of argmax(model(X)) against y, in [0, 1]."""
    yt = _as_tensor("y", y)
    logits = predict_logits(model, X, device=device, batch_size=batch_size)
    if logits.shape[0] != yt.shape[0] or yt.shape[0] == 0:
        raise ValueError(f"X and y must hold the same positive number of examples, got "
                         f"{logits.shape[0]} and {yt.shape[0]}")
    return float((logits.argmax(1) == yt.long()).float().mean())


def noisy_gradient(model: nn.Module, loss_fn: Callable, x: torch.Tensor, y: torch.Tensor, *,
                   max_grad_norm: float, noise_multiplier: float, expected_batch_size: float,
                   generator: torch.Generator | None = None, ghost: bool = False,
                   virtual_batch_size: int | None = None
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

    Float noise: ``torch.randn`` draws floating-point Gaussians, as every DP-SGD library does; like
    them it is not hardened against the floating-point attack of Mironov 2012 (Opacus offers a
    ``secure_mode`` for that; dplib does not).
    """
    check_dp_compatible(model)
    c = check_max_grad_norm(max_grad_norm)
    sigma = check_real("noise_multiplier", noise_multiplier, low=0.0, low_open=False)
    denom = check_positive("expected_batch_size", expected_batch_size)
    if math.isinf(c) and sigma > 0:
        raise ValueError(f"max_grad_norm=inf allows only noise_multiplier=0, got {sigma:g}")
    total, norms, losses = private_clipped_sum(model, loss_fn, x, y, c, ghost=ghost,
                                               chunk_size=virtual_batch_size)
    noisy, _ = GaussianPrivatizer(sigma, c).add_noise(total, generator)
    return {k: g.div_(denom) for k, g in noisy.items()}, norms, losses   # ours: fresh tensors


def train(model: nn.Module, train_data: object, *, sample_rate: float, lr: float,
          epochs: float | None = None, steps: int | None = None,
          noise_multiplier: float | None = None, target_epsilon: float | None = None,
          max_grad_norm: float = 1.0, delta: float = 1e-5, optimizer: str = "sgd",
          momentum: float = 0.0, weight_decay: float = 0.0, accountant: str = "rdp",
          eval_data: object = None, eval_every: int | None = None,
          virtual_batch_size: int | None = None, ghost: bool = False,
          loss_fn: Callable | None = None, device=None, seed: int | None = None,
          progress: bool = False, betas: tuple[float, float] = (0.9, 0.999),
          noise_device: str = "cpu",
          expected_batch_size: float | None = None,
          ema_decay: float | None = None) -> TrainResult:
    """Train ``model`` in place with DP-SGD (``optimizer="sgd"``) or DP-Adam (``"adam"``).

    See the module docstring for the algorithm, the privacy conventions (Poisson sampling at rate
    q = ``sample_rate``, add/remove adjacency, noise N(0, σ²C²) on the clipped sum, division by the
    expected batch size) and the reproducibility across devices.

    ``expected_batch_size`` B: the public divisor of the noisy sum. ``None`` uses q·n, which
    treats the data-set size n as public (as Opacus does); under add/remove adjacency n changes
    between neighbours, so pass a data-independent B when n must stay private.

    Give the length as ``epochs`` (T = round(epochs/q) steps) or ``steps`` (exactly one), and the
    noise as ``noise_multiplier`` σ or ``target_epsilon`` (exactly one; σ is then
    :func:`dplib.accounting.calibrate_noise` (target ε, δ, q, T, accountant)). σ = 0 with
    ``max_grad_norm=math.inf`` is ordinary (non-private) minibatch training on the same Poisson
    batches, with ε = ∞. ``virtual_batch_size`` processes a Poisson batch in chunks of that many
    examples (less memory, same update); ``ghost=True`` computes the clipped sum by ghost norms
    (:mod:`dplib.training.ghost`). ``loss_fn(logits, targets)`` returns the batch mean
    (default cross-entropy). ``eval_every`` (steps; default one epoch ≈ 1/q) sets how often
    ``history`` gets an entry (the last step always does).

    ``seed``: None (default) draws 63 fresh bits of OS entropy for the batches and the noise,
    recorded in :attr:`TrainResult.seed`. An integer makes the run reproducible — for
    experiments, never for a release (module docstring). ``train_data`` must be finite, and the
    model and the loss must run on every record: before step 1 they are run once over all of it
    (no gradients, in train mode; :func:`check_every_record_runs`), since an exception raised
    only in a step that samples a record would itself reveal that record's membership.

    ``ema_decay`` β in (0, 1): parameter averaging (De et al. 2022). An exponential moving
    average θ̄_t = β θ̄_{t−1} + (1 − β) θ_t of the iterates is kept and copied into the model at
    the end (:class:`~dplib.training.recipes.ExponentialAverage`); ``history`` still evaluates the
    raw iterates. The average is a function of the released iterates: post-processing, so ε is
    unchanged. ``None`` (default): the last iterate.
    """
    check_dp_compatible(model)
    q, lr, c, d, mom, wd, T = check_run_settings(
        sample_rate=sample_rate, lr=lr, max_grad_norm=max_grad_norm, delta=delta,
        optimizer=optimizer, accountant=accountant, momentum=momentum,
        weight_decay=weight_decay, epochs=epochs, steps=steps)
    check_choice("noise_device", noise_device, ("cpu", "device"))
    seed = release_seed(seed)
    if ema_decay is not None:
        ema_decay = check_real("ema_decay", ema_decay, low=0.0, high=1.0)
    if not isinstance(ghost, bool) or not isinstance(progress, bool):
        raise ValueError(f"ghost and progress must be True or False, got {ghost!r}, {progress!r}")
    x, y = as_tensors(train_data, "train_data", finite=True)
    n = x.shape[0]
    check_examples_independent(model, x, layers=ghost)
    sigma = resolve_noise_multiplier(noise_multiplier, target_epsilon, c, d, q, T, accountant)
    check_sum_range(c, sigma, n, narrowest_dtype(model))
    vbs = None if virtual_batch_size is None else check_int("virtual_batch_size",
                                                            virtual_batch_size)
    every = max(1, int(round(1 / q))) if eval_every is None else check_int("eval_every",
                                                                           eval_every)
    loss = F.cross_entropy if loss_fn is None else loss_fn
    if eval_data is not None:
        x_ev, y_ev = as_tensors(eval_data, "eval_data")

    dev = as_device(device)
    model.to(dev)
    model.train()
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    if optimizer == "sgd":
        opt = torch.optim.SGD(params.values(), lr=lr, momentum=mom, weight_decay=wd)
    else:
        opt = torch.optim.Adam(params.values(), lr=lr, betas=betas, weight_decay=wd)
    ema = None
    if ema_decay is not None:
        from .recipes import ExponentialAverage   # a sibling module; imported where it is used
        ema = ExponentialAverage(params, ema_decay)
    x_dev, y_dev = x.to(dev), y.to(dev)
    check_every_record_runs(model, loss, x_dev, y_dev, chunk_size=min(vbs or 1024, 1024))
    batches = poisson_batches(n, q, T, rng=np.random.default_rng(seed))
    noise_gen = torch.Generator(device="cpu" if noise_device == "cpu" else dev)
    noise_gen.manual_seed(seed)
    privatizer = GaussianPrivatizer(sigma, c)
    eps = EpsilonTracker(privatizer, q, T, d, accountant)
    denom = q * n if expected_batch_size is None else check_positive("expected_batch_size",
                                                                      expected_batch_size)
    history: list[dict] = []
    train_loss: list[float] = []
    tally = {"loss": 0.0, "count": 0, "clipped": 0, "seen": 0}
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=T, desc="DP-SGD" if eps.private else "SGD")

    def private_sum(idx: np.ndarray) -> tuple[dict, dict]:
        ii = torch.from_numpy(idx).to(dev)
        total, norms, losses = private_clipped_sum(model, loss, x_dev[ii], y_dev[ii], c,
                                                   ghost=ghost, chunk_size=vbs)
        return total, {"norms": norms, "losses": losses}

    def update(grads: dict, t: int) -> None:
        for k, p in params.items():
            p.grad = grads[k]
        opt.step()
        if ema is not None:
            ema.update(params)

    def on_step(t: int, info: dict) -> None:
        norms, losses = info["norms"], info["losses"]
        tally["loss"] += float(losses.sum())
        tally["count"] += int(losses.numel())
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
            if bar is not None:
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
    return TrainResult(model=model, noise_multiplier=sigma, sample_rate=q, steps=T, delta=d,
                       epsilon=eps.final(), history=history, accountant=eps.accountant,
                       max_grad_norm=c, seed=seed, not_private=NotPrivate(
                           batch_sizes=batch_sizes(batches), train_loss=train_loss,
                           clip_fraction=tally["clipped"] / seen if seen else float("nan")))
