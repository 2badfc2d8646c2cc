"""Algorithm 1 of Nasr, Shokri & Houmansadr (2020), "DP discrete SGD", on top of dplib.training.

One step (what :func:`encoded_noisy_gradient` computes, then the optimiser applies):

1. Poisson batch B_t: each record independently with probability q (the paper samples "n
   instances" — a fixed-size batch, and its experiments sample with replacement; neither matches
   the q-mixture its Lemma 4 analyses. Poisson sampling does, so we use it, as DP-SGD does here);
2. micro-batches of size 1: per-example gradients ∇_i (:func:`dplib.training.per_example_grads`),
   flattened over all parameters (size 1 is what Lemma 5's proof needs: one record changes the
   sum by one encoded vector);
3. encoding (Algorithm 2, :func:`~dplib.encoding.codebook.encode`) and aggregation Σ_i enc(∇_i);
4. noise: + Z with i.i.d. coordinates from the chosen family;
5. error correction: ∇̂ = KS(∇̃, Z)·∇̃ (:func:`~dplib.encoding.denoise.ks_denoise`) — optional;
6. update θ ← θ − η·∇̂/(q n). Dividing by the expected batch size q·n (a public constant) keeps
   the learning rate comparable with :func:`dplib.training.train`; the paper divides by nothing.

Privacy of T steps: :class:`~dplib.encoding.accounting.EncodingAccountant` (Theorem 1).
Randomness: batches from a NumPy generator, noise from a CPU ``torch.Generator``, both seeded by
``seed`` — the same seed gives DP-SGD and Algorithm 1 the same batches. ``seed=None`` (the
default) draws 63 fresh bits of OS entropy (:func:`dplib.device.release_seed`), recorded in the
result; a fixed seed is for experiments, never for a release.

Hostile records: ``train_data`` must be finite, and an example whose gradient is still not finite
(an overflow inside the model) is replaced by the zero gradient, which the code book encodes as
zero — so it adds nothing, instead of an error or a NaN raised exactly when it is sampled. A
record the model or the loss raises on (a label or token id out of range) is refused before
step 1: :func:`train_encoded` runs them once over all the data
(:func:`dplib.training.trainer.check_every_record_runs`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .._constraints import Flag, Interval, IsCallable, constrained, unconstrained
from .._validate import shown
from ..accounting._params import COUNT, DELTA, SAMPLE_RATE
from ..device import release_generator
from ..samplers import poisson_batches
from ._params import (CODEBOOK, GRADS_2D, METHOD, NOISE, OPTIONAL_CALLABLE, OPTIONAL_COUNT,
                      OPTIONAL_POSITIVE, ORDERS_INT_OR_DEFAULT, STEP_SIZE)
from .accounting import EncodedStepEvent, EncodingAccountant
from .codebook import Codebook, encode
from .denoise import ks_denoise
from .noise import NoiseDistribution
from ..training.not_private import NotPrivate

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..reporting import PrivacyReport

__all__ = ["encoded_sum", "EncodingPrivatizer", "encoded_noisy_gradient", "train_encoded",
           "EncodedTrainResult", "flat_grads", "privatization_error"]


@unconstrained("reshapes the dict of per-example gradient tensors that dplib.training's "
               "per_example_grads returns; any such dict is valid")
def flat_grads(grads: dict) -> "torch.Tensor":  # noqa: F821
    """Concatenate per-example gradients {name: [B, *shape]} into one [B, d] tensor (in the
    dict's order, which is ``model.named_parameters()`` order)."""
    import torch
    return torch.cat([g.reshape(g.shape[0], -1) for g in grads.values()], dim=1)


def _unflatten(vec, like: dict) -> dict:
    out, start = {}, 0
    for k, p in like.items():
        n = p.numel()
        out[k] = vec[start:start + n].reshape(p.shape)
        start += n
    return out


@constrained(loss_fn=IsCallable("a loss function"), codebook=CODEBOOK,
             chunk_size=OPTIONAL_COUNT)
def encoded_sum(model, loss_fn: Callable, x, y, *, codebook: Codebook,
                chunk_size: int | None = None) -> tuple[dict, dict]:
    """Steps 2–3 of Algorithm 1: Σ_i enc(∇_i) over the batch (x, y), as one flat tensor under the
    key "flat" (the private sum of the engine), and info = {"clamped": fraction of coordinates
    the encoding changed, "batch_size": |B|}. ``chunk_size`` bounds memory: per-example
    gradients are formed and encoded that many examples at a time."""
    import torch
    from ..training.clipped_sum import private_per_example_grads
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    d = sum(p.numel() for p in params.values())
    if d != codebook.dim:
        raise ValueError(f"codebook.dim must equal the number of trainable parameters {d}, "
                         f"got {codebook.dim}")
    p0 = next(iter(params.values()))
    total = torch.zeros(d, device=p0.device, dtype=p0.dtype)
    b = int(x.shape[0])
    step = b if chunk_size is None else chunk_size
    changed = 0
    for s in range(0, b, max(step, 1)):           # chunks of examples, not single examples
        # never raises on a batch: a failing example gets NaN rows, zeroed just below
        g = flat_grads(private_per_example_grads(model, loss_fn, x[s:s + step], y[s:s + step]))
        g = torch.where(torch.isfinite(g).all(1, keepdim=True), g.detach(), torch.zeros_like(g))
        e = encode(g, codebook)
        changed += int((e != g).sum())
        total += e.sum(0)
    return {"flat": total}, {"clamped": changed / max(b * d, 1), "batch_size": b}


@dataclass(frozen=True)
@constrained(codebook=CODEBOOK, noise=NOISE, denoise=Flag(), method=METHOD)
class EncodingPrivatizer:
    """Steps 4–5 of Algorithm 1 as the engine's privatizer (:mod:`dplib.training.engine`):
    i.i.d. ``noise`` on the encoded sum, then optionally the KS correction, a function of the
    noisy sum alone. Its event is :class:`~dplib.encoding.accounting.EncodedStepEvent`."""

    codebook: Codebook
    noise: NoiseDistribution
    denoise: bool = True
    method: str = "auto"

    @unconstrained("the engine's hook (dplib.training.engine.dpsgd_loop), called once per step "
                   "with the private sum and the run's generator")
    def add_noise(self, total: dict, generator) -> tuple[dict, dict]:
        flat = total["flat"]
        if isinstance(generator, (list, tuple)):
            raise ValueError("generator must be one torch.Generator (or None) for the encoding "
                             f"privatizer, got a {type(generator).__name__} of them")
        generator = release_generator(generator, flat.device)   # None: fresh OS entropy
        z = self.noise.sample(tuple(flat.shape), generator=generator, device=generator.device,
                              dtype=flat.dtype).to(flat.device)
        noisy, factor = flat + z, 1.0
        if self.denoise:
            noisy, f = ks_denoise(noisy, self.noise)
            factor = float(f)
        return {"flat": noisy}, {"ks": factor}

    @constrained(sample_rate=SAMPLE_RATE, steps=COUNT)
    def event(self, sample_rate: float, steps: int):
        from ..accounting import SelfComposedEvent
        return SelfComposedEvent(EncodedStepEvent(self.codebook, self.noise, sample_rate,
                                                  method=self.method), steps)


@constrained(loss_fn=IsCallable("a loss function"), codebook=CODEBOOK, noise=NOISE,
             expected_batch_size=STEP_SIZE, denoise=Flag(), chunk_size=OPTIONAL_COUNT)
def encoded_noisy_gradient(model, loss_fn: Callable, x, y, *, codebook: Codebook,
                           noise: NoiseDistribution, expected_batch_size: float,
                           denoise: bool = True, generator=None,
                           chunk_size: int | None = None) -> tuple[dict, dict]:
    """Steps 2–5 of Algorithm 1 for one batch (x, y); returns (gradient per parameter name,
    info) with info = {"ks": KS factor (1.0 without denoising), "clamped": fraction of
    coordinates the encoding changed, "batch_size": |B|}.

    The gradient is (Σ_i enc(∇_i) + Z)·KS / ``expected_batch_size``: :func:`encoded_sum`, then
    :class:`EncodingPrivatizer`. Noise is drawn from ``generator`` on its device and moved to the
    parameters' device; ``generator=None`` (the default): a generator seeded with fresh OS
    entropy (:func:`dplib.device.release_generator`), never torch's global generator.

    Float noise: Z is drawn in floating point, not safe against Mironov's 2012 attack.
    """
    denom = expected_batch_size
    total, info = encoded_sum(model, loss_fn, x, y, codebook=codebook, chunk_size=chunk_size)
    noisy, extra = EncodingPrivatizer(codebook, noise, denoise).add_noise(total, generator)
    params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    return _unflatten(noisy["flat"] / denom, params), {**info, **extra}


@unconstrained("record built by train_encoded from its checked arguments")
@dataclass
class EncodedTrainResult:
    """What :func:`train_encoded` returns (mirrors :class:`dplib.training.TrainResult`).

    ``ks_factors`` (one per step) are functions of the noisy sums: covered by ε. ``not_private``
    holds what is computed from the data WITHOUT noise — the share of gradient coordinates the
    encoding changed (``clamped_fraction``) and the realised batch sizes: not covered by ε, do not
    publish them (:mod:`dplib.training.release` classifies every field)."""
    model: Any
    noise: NoiseDistribution
    sample_rate: float
    steps: int
    delta: float
    epsilon: float
    denoise: bool
    history: list[dict] = field(default_factory=list)
    accountant: Any = None
    ks_factors: np.ndarray | None = None
    not_private: NotPrivate = field(default_factory=NotPrivate)
    seed: int | None = None

    @unconstrained("forwards to dplib.reporting.privacy_report, which checks the facts")
    def privacy_report(self, **public_facts: object) -> "PrivacyReport":
        """This run's complete privacy statement, read from the run:
        :func:`dplib.reporting.privacy_report` (``public_facts``: only what the run cannot know)."""
        from ..reporting import privacy_report
        return privacy_report(self, **public_facts)


@constrained(codebook=CODEBOOK, noise=NOISE, sample_rate=SAMPLE_RATE, lr=STEP_SIZE,
             epochs=OPTIONAL_POSITIVE, steps=OPTIONAL_COUNT, denoise=Flag(), delta=DELTA,
             momentum=Interval(0.0, 1.0, closed="left"), eval_every=OPTIONAL_COUNT,
             loss_fn=OPTIONAL_CALLABLE, orders=ORDERS_INT_OR_DEFAULT, chunk_size=OPTIONAL_COUNT,
             accountant_method=METHOD, expected_batch_size=OPTIONAL_POSITIVE)
def train_encoded(model, train_data, *, codebook: Codebook, noise: NoiseDistribution,
                  sample_rate: float, lr: float, epochs: float | None = None,
                  steps: int | None = None, denoise: bool = True, delta: float = 1e-5,
                  momentum: float = 0.0, eval_data=None, eval_every: int | None = None,
                  loss_fn: Callable | None = None, device=None, seed: int | None = None,
                  orders: object = None, chunk_size: int | None = None,
                  accountant_method: str = "auto",
                  expected_batch_size: float | None = None) -> EncodedTrainResult:
    """Train ``model`` in place with Algorithm 1 (see the module docstring); SGD with optional
    momentum. Same conventions as :func:`dplib.training.train` (Poisson batches at rate q,
    ``epochs`` → round(epochs/q) steps, ``eval_every`` defaults to one epoch, loss = cross-entropy
    by default). ε is from :class:`~dplib.encoding.accounting.EncodingAccountant` over ``orders``.
    ``expected_batch_size``: the public divisor, q·n by default, which treats n as public (see
    :func:`dplib.training.train`). ``seed``: None (default) for fresh OS entropy, recorded in the
    result; an integer for a reproducible experiment, never for a release.

    Float noise: the noise is drawn in floating point (:meth:`NoiseDistribution.sample`), not safe
    against the floating-point attack of Mironov 2012 — like :func:`dplib.training.train`.
    """
    import torch
    import torch.nn.functional as F
    from ..device import as_device, release_seed
    from ..training import check_dp_compatible, evaluate, steps_for_epochs
    from ..training.engine import EpsilonTracker, batch_sizes, dpsgd_loop

    check_dp_compatible(model)
    q, mom = sample_rate, momentum
    seed = release_seed(seed)
    if (epochs is None) == (steps is None):
        raise ValueError(f"give exactly one of epochs and steps, got epochs={shown(epochs)}, "
                         f"steps={shown(steps)}")
    from ..training.preflight import (as_tensors, check_model_and_data, check_sum_range,
                                      narrowest_dtype)
    x, y = as_tensors(train_data, "train_data", finite=True)
    y = y.long()
    n = int(x.shape[0])
    T = steps_for_epochs(epochs, q) if steps is None else steps
    every = max(1, int(round(1 / q))) if eval_every is None else eval_every
    loss = F.cross_entropy if loss_fn is None else loss_fn
    dev = as_device(device)
    model.to(dev)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=lr, momentum=mom)
    privatizer = EncodingPrivatizer(codebook, noise, denoise, accountant_method)
    eps = EpsilonTracker(privatizer, q, T, delta,
                         lambda: EncodingAccountant(codebook, orders, method=accountant_method))
    x_dev, y_dev = x.to(dev), y.to(dev)
    # the pre-flight every trainer runs (dplib.training.preflight), before any randomness; the
    # encoded sum of up to n records is bounded by n·max‖ψ‖, which must not overflow
    check_model_and_data(model, x_dev, y_dev, loss_fn=loss,
                         chunk_size=min(chunk_size or 1024, 1024))
    check_sum_range(float(codebook.norms.max()), 0.0, n, narrowest_dtype(model))
    batches = poisson_batches(n, q, T, rng=np.random.default_rng(seed))
    denom = q * n if expected_batch_size is None else expected_batch_size
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    named = {k: p for k, p in model.named_parameters() if p.requires_grad}
    history, ks, clamped = [], np.empty(T), []

    def private_sum(idx):
        ii = torch.from_numpy(idx).to(dev)
        return encoded_sum(model, loss, x_dev[ii], y_dev[ii], codebook=codebook,
                           chunk_size=chunk_size)

    def update(grads: dict, t: int) -> None:
        for k, g in _unflatten(grads["flat"], named).items():
            named[k].grad = g
        opt.step()

    def on_step(t: int, info: dict) -> None:
        ks[t - 1] = info["ks"]
        if info["batch_size"]:
            clamped.append(info["clamped"])
        if t % every == 0 or t == T:
            acc_ev = None
            if eval_data is not None:
                acc_ev = evaluate(model, eval_data[0], eval_data[1], device=dev)
                model.train()
            history.append({"step": t, "epoch": t * q, "epsilon": eps.at(t),
                            "test_accuracy": acc_ev, "ks": float(ks[max(0, t - every):t].mean())})

    dpsgd_loop(batches, private_sum, privatizer, gen, denom, update, on_step)
    for p in params:
        p.grad = None
    return EncodedTrainResult(model=model, noise=noise, sample_rate=q, steps=T, delta=delta,
                              epsilon=eps.final(), denoise=denoise, history=history,
                              accountant=eps.accountant, ks_factors=ks,
                              seed=seed, not_private=NotPrivate(
                                  batch_sizes=batch_sizes(batches),
                                  clamped_fraction=float(np.mean(clamped)) if clamped
                                  else math.nan))


@constrained(grads=GRADS_2D, codebook=CODEBOOK, noise=NOISE, num_draws=COUNT)
def privatization_error(grads, codebook: Codebook, noise: NoiseDistribution, *,
                        num_draws: int = 20, generator=None) -> dict:
    """How far the privatised gradient is from the original one (the paper's Figure 6, ℓ1).

    ``grads``: per-example (micro-batch) gradients, a [B, d] tensor. With S = Σ_i ∇_i and
    S̃ = Σ_i enc(∇_i) + Z, returns the mean over ``num_draws`` noise draws of ‖S̃ − S‖₁ ("l1"),
    the encoding part ‖Σ enc − S‖₁ ("encoding_l1"), and d·E|Z| ("noise_l1", exact).
    """
    import torch
    m = num_draws
    s = grads.double().sum(0)
    e = encode(grads, codebook).double().sum(0)
    generator = release_generator(generator, grads.device)
    z = noise.sample((m, grads.shape[1]), generator=generator, device=generator.device,
                     dtype=torch.float64).to(grads.device)
    l1 = (e[None, :] + z - s[None, :]).abs().sum(1)
    return {"l1": float(l1.mean()), "l1_std": float(l1.std()) if m > 1 else math.nan,
            "encoding_l1": float((e - s).abs().sum()),
            "noise_l1": grads.shape[1] * noise.mean_abs}
