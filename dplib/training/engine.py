"""The one DP-SGD engine: the loop every private trainer of dplib runs.

A step of DP-SGD (Abadi et al. 2016, Algorithm 1) splits into parts that change independently —
the split Opacus makes between its optimizer (clip, noise, scale) and its accountant:

1. a **batch** — Poisson indices drawn from a public rate q (:func:`dplib.samplers.poisson_batches`);
2. a **private sum** — the only data-dependent quantity, each record's contribution bounded
   (clipped per-example gradients; encoded gradients in :mod:`dplib.encoding`);
3. a **privatizer** — noise on that sum (and anything computed from the noisy sum alone);
4. the division by the public expected batch size and the **update** — post-processing;
5. the **accountant** — it sees only the privatizer's event (:mod:`dplib.accounting.events`).

:func:`dpsgd_loop` is steps 1–4 with the parts passed in, and :class:`EpsilonTracker` is step 5.
:func:`dplib.training.train` (one model, ``torch.optim``), :func:`dplib.encoding.train_encoded`
(the gradient-encoding privatizer), :func:`dplib.training.batched.train_models_batched` (a stack of
models under ``vmap``) and the canary audit (:mod:`dplib.attacks.canary`) all run this loop, so a
fix to the loop — or a new privatizer — reaches every trainer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterable, Protocol

import numpy as np
import torch

from .._constraints import Options, constrained, unconstrained
from .._validate import check_int
from ..mechanisms.secure_noise import secure_add_noise, secure_noise_multiplier
from ..device import release_generator
from ..accounting import DpEvent, dpsgd_event, make_accountant
from ._params import COUNT, MAX_GRAD_NORM, NOISE_MULTIPLIER0, NONNEG, optional

__all__ = ["Privatizer", "GaussianPrivatizer", "dpsgd_loop", "EpsilonTracker", "batch_sizes",
           "gaussian_noise"]


@unconstrained("a typing.Protocol: states the methods a privatizer has, no code")
class Privatizer(Protocol):
    """What the engine needs from a privatizer: noise on a private sum, and the event it is."""

    @unconstrained("a typing.Protocol's method: each privatizer declares its own")
    def add_noise(self, total: dict[str, torch.Tensor], generator: object
                  ) -> tuple[dict[str, torch.Tensor], dict]:
        """The noisy sum (and diagnostics computed from it)."""

    @unconstrained("a typing.Protocol's method: each privatizer declares its own")
    def event(self, sample_rate: float, steps: int) -> DpEvent | None:
        """The event ``steps`` steps at rate q are (None: not private)."""


@unconstrained("a step of the privatizers: called every step, per tensor, with the shape, "
               "dtype and device of the run's clipped sum (no check per step; a list of "
               "generators is checked against the stack in the body)")
def gaussian_noise(shape: tuple, generator: object, dtype: torch.dtype,
                   device: torch.device) -> torch.Tensor:
    """N(0, 1) of ``shape`` from ``generator`` — a ``torch.Generator``, or a list of them (one per
    model of a stack: ``shape[0]`` draws of ``shape[1:]``, model m from generator m, so a model's
    noise does not depend on how many models share the stack), or None: a generator seeded with
    fresh OS entropy (:func:`dplib.device.release_generator`; never torch's global generator,
    which the chapters seed with 0). Drawn on the generator's device and moved to ``device``.

    Float noise: ``torch.randn`` draws floating-point Gaussians, as every DP-SGD library does; it
    is not hardened against the floating-point attack of Mironov 2012."""
    if isinstance(generator, (list, tuple)):
        generator = release_generator(generator, device)     # each one seeded, not torch's default
        if len(generator) != shape[0]:
            raise ValueError(f"generator must hold one generator per model ({shape[0]}), got "
                             f"{len(generator)}")
        z = torch.stack([torch.randn(shape[1:], generator=g, dtype=dtype, device=g.device)
                         .to(device) for g in generator])
        return z
    generator = release_generator(generator, device)
    return torch.randn(shape, generator=generator, dtype=dtype, device=generator.device).to(device)


@dataclass(frozen=True)
@constrained(noise_multiplier=NOISE_MULTIPLIER0, max_grad_norm=MAX_GRAD_NORM, noise_scale=NONNEG,
             source=Options("float", "secure"), numel=optional(COUNT))
class GaussianPrivatizer:
    """N(0, σ²C²·I) on a sum of per-example gradients clipped to norm C = ``max_grad_norm``
    (σ = ``noise_multiplier``; σ = 0 is non-private training, ε = ∞). ``source``: "float"
    (``torch.randn`` from the run's generator, :func:`gaussian_noise`) or "secure": the sum is
    rounded to a lattice and exact discrete Gaussian noise added in integers, CSPRNG-seeded
    (:func:`dplib.mechanisms.secure_noise.secure_add_noise`), so no floating-point rounding
    depends on the data (the attack of Mironov 2012 fails). The rounding widens the sensitivity
    slightly, so the secure event carries σ̂ = :func:`~dplib.mechanisms.secure_noise.secure_noise_multiplier`
    (σ, C, ``numel``) < σ, ``numel`` being the number of noised coordinates (required for
    "secure"). That Rényi curve is a theorem for steps on every record (q = 1); with Poisson
    subsampling (q < 1) the subsampled-Gaussian bound at σ̂ is a close approximation for the
    subsampled discrete Gaussian, not a proof (see :mod:`dplib.mechanisms.secure_noise`).
    ``noise_scale`` ≠ 1 deliberately
    mis-scales the noise while the accountant still sees σ — only for testing that audits catch a
    broken trainer."""

    noise_multiplier: float
    max_grad_norm: float
    noise_scale: float = 1.0
    source: str = "float"
    numel: int | None = None

    def __post_init__(self) -> None:
        # each field alone: its declaration; here the relations
        if self.source == "secure":      # numel is required with "secure"
            object.__setattr__(self, "numel", check_int("numel", self.numel))
        if math.isinf(self.max_grad_norm) and self.noise_multiplier > 0:
            raise ValueError(f"max_grad_norm=inf allows only noise_multiplier=0, got "
                             f"{self.noise_multiplier:g}")

    @property
    def std(self) -> float:
        """The noise standard deviation σ·C (times ``noise_scale``)."""
        return self.noise_multiplier * self.max_grad_norm * self.noise_scale \
            if self.noise_multiplier > 0 else 0.0

    @unconstrained("a step of the engine: called by dpsgd_loop every step with the run's "
                   "clipped sum and generator (no check per step)")
    def add_noise(self, total: dict[str, torch.Tensor], generator: object
                  ) -> tuple[dict[str, torch.Tensor], dict]:
        if self.std == 0.0:
            return dict(total), {}
        if self.source == "secure":      # one draw for all tensors (several times faster)
            return secure_add_noise(dict(total), std=self.std, generator=generator), {}
        out = {}
        for k, g in total.items():       # one fused pass per tensor: g + std·z, written into z
            z = gaussian_noise(tuple(g.shape), generator, g.dtype, g.device)
            out[k] = torch.add(g, z, alpha=self.std, out=z)
        return out, {}

    @unconstrained("called by EpsilonTracker with the run's checked rate and step count; "
                   "dpsgd_event checks both")
    def event(self, sample_rate: float, steps: int) -> DpEvent | None:
        if self.noise_multiplier == 0:
            return None
        sigma = self.noise_multiplier
        if self.source == "secure":
            sigma = secure_noise_multiplier(sigma, self.max_grad_norm, self.numel)
        return dpsgd_event(sigma, sample_rate, steps)


def _scaled(g: torch.Tensor, denom: float | torch.Tensor) -> torch.Tensor:
    if isinstance(denom, torch.Tensor):            # one divisor per model of a stack
        return g / denom.view(-1, *([1] * (g.dim() - 1)))
    return g / denom


@unconstrained("the loop of train/train_encoded/the batched trainer, called with the stages "
               "they built from their checked settings")
def dpsgd_loop(batches: Iterable, private_sum: Callable[[object], tuple[dict, dict]],
               privatizer: Privatizer, generator: object, denom: float | torch.Tensor,
               update: Callable[[dict, int], None],
               on_step: Callable[[int, dict], None] | None = None) -> None:
    """Run DP-SGD: for each batch, ``private_sum(batch)`` → (sum per parameter, info), noise by
    ``privatizer`` (drawing from ``generator``), division by the public ``denom`` (a float, or a
    tensor with one divisor per model of a stack), then ``update(gradient, t)`` and
    ``on_step(t, info)`` (t = 1, 2, …). Everything after the noise is post-processing.

    torch's global random state (CPU and CUDA) is forked for the loop: what the steps draw from
    it (dropout, the exact path's per-example forward passes) depends on the batches, so the
    state the caller finds afterwards must not — it is the state the loop started from."""
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        for t, batch in enumerate(batches, start=1):
            total, info = private_sum(batch)
            noisy, extra = privatizer.add_noise(total, generator)
            update({k: _scaled(g, denom) for k, g in noisy.items()}, t)
            if on_step is not None:
                on_step(t, {**info, **extra})


@unconstrained("built by train/train_encoded/the batched trainer from their checked settings "
               "(the accountant refuses an event it cannot bound, before training)")
class EpsilonTracker:
    """ε after t of the run's T steps, from the privatizer's event and an accountant.

    ``accountant`` is a registry name (:func:`dplib.accounting.make_accountant`) or a factory.
    ε(t) for t < T is :meth:`~dplib.accounting.Accountant.epsilon_after` (t steps) on a fresh
    accountant — one curve for Rényi accountants, a composition for the others; the attached
    :attr:`accountant` records all T steps once :meth:`final` is called. An event the accountant
    cannot bound is refused when the tracker is built (before training)."""

    def __init__(self, privatizer: Privatizer, sample_rate: float, steps: int, delta: float,
                 accountant: object = "rdp") -> None:
        self.delta, self.sample_rate, self.steps = delta, sample_rate, steps
        self.privatizer = privatizer
        self._factory = (lambda: make_accountant(accountant)) if isinstance(accountant, str) \
            else accountant
        self.accountant = self._factory()
        self._one = privatizer.event(sample_rate, 1)
        # a privatizer whose steps are one mechanism (a matrix mechanism) states the event of t
        # steps itself instead of one step composed t times
        self._stepwise = getattr(privatizer, "per_step_events", True)
        self._fresh = self._factory()
        if self._one is not None and not self._fresh.supports(self._one):
            self._fresh.compose(self._one)     # raises the accountant's reason, by name

    @property
    def private(self) -> bool:
        return self._one is not None

    @unconstrained("called by the trainers' on_step with the step counter t")
    def at(self, t: int) -> float:
        """ε after t steps (∞ for a non-private run)."""
        if not self.private:
            return math.inf
        if t < self.steps and not self._stepwise:
            return float(self._factory().compose(self.privatizer.event(self.sample_rate, t))
                         .get_epsilon(self.delta))
        if t < self.steps:
            return float(self._fresh.epsilon_after(self._one, t, self.delta))
        return self.final()

    def final(self) -> float:
        """ε after all T steps, recorded in :attr:`accountant`."""
        if not self.private:
            return math.inf
        if not self.accountant.history:
            self.accountant.compose(self.privatizer.event(self.sample_rate, self.steps))
        return self.accountant.get_epsilon(self.delta)


@unconstrained("a diagnostic of the batches poisson_batches or cyclic_batches drew")
def batch_sizes(batches: list[np.ndarray]) -> np.ndarray:
    """The realised size of every batch (a diagnostic, not covered by ε)."""
    return np.array([b.size for b in batches])
