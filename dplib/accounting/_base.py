"""What every accountant shares: validated, chainable bookkeeping of the events a run composed.

An accountant is built with a neighbouring relation (``neighboring="add_remove"``, the default of
Opacus and dp-accounting, or ``"replace_one"``) and consumes :mod:`dplib.accounting.events` through
:meth:`Accountant.compose`. The flattened history (:attr:`Accountant.history`) is a list of
:class:`~dplib.accounting.events.Step` leaves; a subclass says which leaves it can bound
(:meth:`Accountant._check_supported`) and turns the history into (ε, δ).

``.step(noise_multiplier=σ, sample_rate=q, num_steps=T)`` is sugar for composing
:func:`~dplib.accounting.events.dpsgd_event` — T Gaussian steps with σ = noise std / clipping norm
on batches drawn by the accountant's ``sampling`` ("poisson" by default).
"""
from __future__ import annotations

import abc
import copy

import numpy as np

from .._constraints import constrained, same_as, unconstrained
from .._validate import shown
from ._params import (COUNT, DELTA, EPSILON, MAX_ORDER, NEIGHBORING, NEIGHBORINGS,
                      NOISE_MULTIPLIER_RANGE, SAMPLING, SAMPLINGS, check_orders)
from .events import (EVENT, DpEvent, SelfComposedEvent, Step, check_noise_multiplier,
                     dpsgd_event, flatten)

__all__ = ["Accountant", "NOISE_MULTIPLIER_RANGE", "check_noise_multiplier", "check_delta",
           "check_epsilon", "check_orders", "by_order_blocks", "MAX_ORDER", "SAMPLINGS",
           "NEIGHBORINGS"]

def check_delta(delta: object) -> float:
    """δ ∈ (0, 1) (the declaration :data:`~dplib.accounting._params.DELTA`)."""
    return DELTA.check("delta", delta)


def check_epsilon(epsilon: object) -> float:
    """ε ≥ 0 (the declaration :data:`~dplib.accounting._params.EPSILON`)."""
    return EPSILON.check("epsilon", epsilon)


#: Orders × terms per block of those sums (~30 bytes each): memory stays ~0.1 GB per block.
_ORDER_BLOCK = 1 << 22


def by_order_blocks(alpha: np.ndarray, fn) -> np.ndarray:
    """``fn`` applied to blocks of the orders (ascending), each block's (size × largest order)
    within :data:`_ORDER_BLOCK`, so that sums with one term per integer up to α never build an
    (all orders × largest order) matrix; the results are put back in the orders' places."""
    order = np.argsort(alpha, kind="stable")
    out = np.empty(alpha.shape)
    start = 0
    while start < alpha.size:
        stop = start + 1
        while stop < alpha.size and (stop + 1 - start) * alpha[order[stop]] <= _ORDER_BLOCK:
            stop += 1
        idx = order[start:stop]
        out[idx] = fn(alpha[idx])
        start = stop
    return out


class Accountant(abc.ABC):
    """Base class: validates and records the events; subclasses turn them into (ε, δ).

    ``neighboring`` is the adjacency the guarantee is stated for; ``sampling`` is only the
    sampler that the :meth:`step` shorthand describes (events name their own sampler).

    A new accountant is one subclass in one file: :meth:`_check_supported` (refuse the leaves it
    cannot bound, matching on their event class), :meth:`_add` (fold a leaf into its state),
    :meth:`get_epsilon` and :meth:`get_delta` (abstract), and ``@register_accountant("name")``
    (:mod:`.registry`). Everything else — :meth:`supports`, :meth:`epsilon_after`, calibration,
    the trainers' ε tracking — works through these."""

    @constrained(neighboring=NEIGHBORING, sampling=SAMPLING)
    def __init__(self, *, neighboring: str = "add_remove", sampling: str = "poisson") -> None:
        self.neighboring = neighboring
        self.sampling = sampling
        self.history: list[Step] = []
        self.events: list[DpEvent] = []

    @constrained(event=EVENT, count=COUNT)
    def compose(self, event: DpEvent, count: int = 1) -> "Accountant":
        """Record ``event`` (run ``count`` times); returns ``self`` so that calls chain.

        Raises ``ValueError`` before recording anything if a part of the event cannot be bounded
        by this accountant under its neighbouring relation."""
        if count != 1:
            event = SelfComposedEvent(event, count)
        leaves = list(flatten(event))
        for leaf in leaves:
            self._check_supported(leaf)
        for leaf in leaves:
            self._append_history(leaf)
            self._add(leaf)
        self.events.append(event)
        self._invalidate()
        return self

    @constrained(**same_as(dpsgd_event, "noise_multiplier", "sample_rate", "num_steps"))
    def step(self, *, noise_multiplier: float, sample_rate: float,
             num_steps: int = 1) -> "Accountant":
        """Record ``num_steps`` DP-SGD steps: Gaussian noise with multiplier σ (noise std /
        clipping norm, in every relation) on batches of rate q drawn by :attr:`sampling`.

        Returns ``self`` so that calls chain:
        ``acc.step(noise_multiplier=1.0, sample_rate=0.01, num_steps=500).get_epsilon(1e-5)``.
        Steps with different (σ, q) compose (the history is heterogeneous)."""
        return self.compose(dpsgd_event(noise_multiplier, sample_rate, num_steps,
                                        sampling=self.sampling))

    @abc.abstractmethod
    def get_epsilon(self, delta: float) -> float:
        """ε such that the composed history is (ε, δ)-DP."""

    @abc.abstractmethod
    def get_delta(self, epsilon: float) -> float:
        """δ such that the composed history is (ε, δ)-DP."""

    @unconstrained("asks whether compose (declared) would accept the event; never raises")
    def supports(self, event: DpEvent) -> bool:
        """Whether :meth:`compose` would accept ``event`` (every leaf of it) under this
        accountant's neighbouring relation — asked before a run, instead of catching a refusal."""
        try:
            for leaf in flatten(event):
                self._check_supported(leaf)
        except ValueError:
            return False
        return True

    @constrained(event=EVENT, count=COUNT, delta=DELTA)
    def epsilon_after(self, event: DpEvent, count: int, delta: float) -> float:
        """ε at ``delta`` if ``event`` were composed ``count`` more times; this accountant is
        left unchanged. Default: compose on a copy. Rényi accountants answer from one curve
        (:meth:`~dplib.accounting.RDPAccountant.epsilon_after`), which is what makes a trainer's
        ε after every step cheap."""
        trial = copy.deepcopy(self)
        return trial.compose(event, count).get_epsilon(delta)

    @classmethod
    @unconstrained("the hook calibrate (declared) calls with its checked arguments")
    def calibration_shortcut(cls, event_of, target_epsilon: float, delta: float, options: dict,
                             rtol: float, floor: float, ceiling: float, name: str
                             ) -> float | None:
        """A faster way for :func:`~dplib.accounting.calibrate` to find the scale for this
        accountant, or None (the default: a plain search). The PLD accountant starts from the
        RDP answer."""
        return None

    def _check_supported(self, leaf: Step) -> None:
        """Raise ``ValueError`` if this accountant cannot bound ``leaf`` (subclasses)."""
        if leaf.sampling == "without_replacement" and self.neighboring != "replace_one":
            self._refuse(leaf, "sampling without replacement keeps n fixed, so it is analysed "
                               "under replace-one adjacency: use neighboring='replace_one'")

    def _refuse(self, leaf: Step, why: str) -> None:
        what = leaf.curve if leaf.curve is not None else leaf
        raise ValueError(f"{type(self).__name__}(neighboring={shown(self.neighboring)}) cannot "
                         f"account {what}: {why}")

    def _append_history(self, leaf: Step) -> None:
        """Append ``leaf`` to :attr:`history`, merged into the last entry when it is the same
        mechanism with the same parameters (their counts add)."""
        last = self.history[-1] if self.history else None
        if last is not None and last.same_kind(leaf):
            self.history[-1] = Step(last.mechanism, last.noise_multiplier, last.sample_rate,
                                    last.sampling, last.count + leaf.count, last.curve)
        else:
            self.history.append(leaf)

    def _add(self, leaf: Step) -> None:  # subclasses fold a new leaf into their state here
        pass

    def _invalidate(self) -> None:  # subclasses drop their caches here
        pass

    def _require_history(self) -> None:
        if not self.history:
            raise ValueError("the accountant has no steps yet: call .step(noise_multiplier=..., "
                             "sample_rate=..., num_steps=...) or .compose(event) first")

    def __repr__(self) -> str:
        parts = ", ".join(
            f"({p.mechanism.__name__} σ={p.noise_multiplier:g}, q={p.sample_rate:g} {p.sampling}, "
            f"T={p.count})" if p.curve is None else f"({p.curve!r}, T={p.count})"
            for p in self.history)
        return f"{type(self).__name__}(neighboring={self.neighboring!r}, [{parts}])"
