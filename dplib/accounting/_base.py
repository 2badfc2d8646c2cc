"""What both accountants share: validated, chainable bookkeeping of the training history.

A *phase* is ``num_steps`` applications of the Poisson-subsampled Gaussian mechanism with one
noise multiplier σ and one sample rate q. Each step samples every record independently with
probability q (Poisson subsampling), sums the (clipped, ℓ2-sensitivity-1) contributions and adds
N(0, σ²·I). Neighbouring datasets differ by adding or removing one record (add/remove adjacency).
These are the conventions of Opacus and of Google's dp-accounting (``ADD_OR_REMOVE_ONE``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import check_int, check_probability, check_real


@dataclass(frozen=True)
class Phase:
    """``num_steps`` steps of the Poisson-subsampled Gaussian mechanism with (σ, q)."""

    noise_multiplier: float
    sample_rate: float
    num_steps: int


#: The noise multipliers the accountants take. Outside it σ² or 1/σ² leaves the float range
#: (σ = 1e200 raised OverflowError, σ = 1e-200 divided by zero); the answers there would be
#: ε = ∞ (σ → 0) or ε = 0 (σ → ∞) anyway.
NOISE_MULTIPLIER_RANGE = (1e-100, 1e100)


def check_noise_multiplier(value: object) -> float:
    """σ in [1e-100, 1e100] (:data:`NOISE_MULTIPLIER_RANGE`)."""
    low, high = NOISE_MULTIPLIER_RANGE
    return check_real("noise_multiplier", value, low=low, high=high, low_open=False,
                      high_open=False)


def check_phase(noise_multiplier: object, sample_rate: object, num_steps: object) -> Phase:
    """Validate one phase: σ ∈ [1e-100, 1e100], q ∈ (0, 1], num_steps an integer ≥ 1."""
    return Phase(check_noise_multiplier(noise_multiplier),
                 check_probability("sample_rate", sample_rate, low_open=True),
                 check_int("num_steps", num_steps, low=1))


def check_delta(delta: object) -> float:
    """δ ∈ (0, 1)."""
    return check_probability("delta", delta, low_open=True, high_open=True)


def check_epsilon(epsilon: object) -> float:
    """ε ≥ 0 (ε = 0 is a legitimate question: how far is the mechanism from perfect privacy?)."""
    return check_real("epsilon", epsilon, low=0.0, low_open=False)


def check_orders(orders: object) -> np.ndarray:
    """Orders α: a scalar or 1-D array of finite reals, all > 1."""
    try:
        arr = (np.asarray(orders, dtype=float) if not isinstance(orders, bool)
               else np.asarray(np.nan))
    except (TypeError, ValueError):
        raise ValueError(f"orders must be a scalar or non-empty 1-D array of reals in (1, inf), "
                         f"got {orders!r}") from None
    if arr.ndim > 1 or arr.size == 0:
        raise ValueError(f"orders must be a scalar or non-empty 1-D array of reals in (1, inf), "
                         f"got {orders!r}")
    bad = ~np.isfinite(arr) | (arr <= 1)
    if bad.any():
        raise ValueError(f"orders must be in (1, inf), got {np.atleast_1d(arr)[np.atleast_1d(bad)][0]!r}")
    return np.atleast_1d(arr)


class Accountant:
    """Base class: keeps the list of phases; subclasses turn it into (ε, δ)."""

    def __init__(self) -> None:
        self.history: list[Phase] = []

    def step(self, *, noise_multiplier: float, sample_rate: float,
             num_steps: int = 1) -> "Accountant":
        """Record ``num_steps`` steps with noise multiplier σ and Poisson sample rate q.

        Returns ``self`` so that calls chain:
        ``acc.step(noise_multiplier=1.0, sample_rate=0.01, num_steps=500).get_epsilon(1e-5)``.
        Phases with different (σ, q) compose (the history is heterogeneous).
        """
        phase = check_phase(noise_multiplier, sample_rate, num_steps)
        if self.history and (self.history[-1].noise_multiplier, self.history[-1].sample_rate) == (
                phase.noise_multiplier, phase.sample_rate):
            last = self.history[-1]
            phase = Phase(last.noise_multiplier, last.sample_rate, last.num_steps + phase.num_steps)
            self.history[-1] = phase
        else:
            self.history.append(phase)
        self._invalidate()
        return self

    def _invalidate(self) -> None:  # subclasses drop their caches here
        pass

    def _require_history(self) -> None:
        if not self.history:
            raise ValueError("the accountant has no steps yet: call .step(noise_multiplier=..., "
                             "sample_rate=..., num_steps=...) first")

    def __repr__(self) -> str:
        phases = ", ".join(f"(σ={p.noise_multiplier:g}, q={p.sample_rate:g}, T={p.num_steps})"
                           for p in self.history)
        return f"{type(self).__name__}([{phases}])"
