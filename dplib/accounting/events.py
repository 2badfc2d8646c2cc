"""What a private computation does, described as events that every accountant consumes.

In the style of Google's dp-accounting ``DpEvent``: an event says *which* randomised mechanism ran
and on *which* sample of the data, not how to account it. The neighbouring relation is a property
of the accountant (``neighboring="add_remove"`` or ``"replace_one"``), so the same event means the
same physical computation under every accountant and relation.

**One unit.** ``noise_multiplier`` is always the noise scale divided by the bound C on one
record's contribution (its clipping norm): the ℓ2 norm for :class:`GaussianEvent` (noise
N(0, (σC)²·I) on a sum of vectors of norm ≤ C), the ℓ1 norm for :class:`LaplaceEvent` (Laplace
noise of scale σC). That is the sensitivity of the sum under add/remove; under replace-one one
record can move the sum by up to 2C, and the accountants convert internally — no caller ever
divides by two. (Some libraries, dp-accounting's RDP accountant among them, take
std/(replace-one sensitivity) for sampling without replacement; the same number then meant two
different runs. Here it cannot.)

Events:

* :class:`GaussianEvent`, :class:`LaplaceEvent` — one release of the noisy sum of all records;
* :class:`PoissonSampledEvent` — the inner event on a Poisson sample (each record kept
  independently with probability q; Abadi et al. 2016, Opacus);
* :class:`SampledWithoutReplacementEvent` — the inner event on a batch of fixed size m drawn
  uniformly without replacement from n records, ``sample_rate`` γ = m/n (analysed under
  replace-one: n is public);
* :class:`SelfComposedEvent`, :class:`ComposedEvent` — sequential (adaptive) composition;
* :class:`RDPCurveEvent` — a mechanism that states its own Rényi-DP curve (e.g. the gradient
  encoding of :mod:`dplib.encoding`); only Rényi accountants can consume it;
* :class:`ZCDPEvent` — a mechanism that is ρ-zCDP (Bun & Steinke 2016, Def. 1.1) under a stated
  relation; the Rényi accountant composes it exactly (ε(α) = αρ), nobody subsamples it;
* :class:`EquivalentEvent` — a mechanism whose privacy a theorem reduces to another event:
  :class:`MatrixMechanismEvent` (a matrix-factorisation mechanism, one Gaussian release) and
  :class:`BandedMatrixMechanismEvent` (banded MF with cyclic Poisson sampling, Choquette-Choo et
  al. 2023, Thm 4); every accountant consumes them through the event they reduce to.

>>> from dplib.accounting import RDPAccountant
>>> run = SelfComposedEvent(PoissonSampledEvent(256 / 60000, GaussianEvent(1.1)), 14062)
>>> round(RDPAccountant().compose(run).get_epsilon(1e-5), 2)
2.6
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from .._constraints import Custom, InstanceOf, Options, constrained, unconstrained
from .._validate import shown
from ._params import (COUNT, NOISE_MULTIPLIER, NOISE_MULTIPLIER_RANGE, SAMPLE_RATE, SAMPLING,
                      SCALE)

__all__ = ["DpEvent", "GaussianEvent", "LaplaceEvent", "SampledEvent", "PoissonSampledEvent",
           "SampledWithoutReplacementEvent", "SelfComposedEvent", "ComposedEvent",
           "RDPCurveEvent", "ZCDPEvent", "EquivalentEvent", "MatrixMechanismEvent",
           "BandedMatrixMechanismEvent", "Step", "dpsgd_event", "flatten", "NOISE_MULTIPLIER_RANGE",
           "check_noise_multiplier", "EVENT"]

@unconstrained("a validator: it is the declaration NOISE_MULTIPLIER's check")
def check_noise_multiplier(value: object) -> float:
    """σ in [1e-100, 1e100] (:data:`NOISE_MULTIPLIER_RANGE`; the declaration
    :data:`~dplib.accounting._params.NOISE_MULTIPLIER`)."""
    return NOISE_MULTIPLIER.check("noise_multiplier", value)


class DpEvent:
    """Base class of the events (frozen dataclasses); validated when built."""


#: A :class:`DpEvent` (the declaration of every ``event`` parameter).
EVENT = InstanceOf(DpEvent, "a DpEvent (e.g. GaussianEvent(noise_multiplier=1.0))",
                   bad=(None, 1.0, "gaussian", "gauss"))


@dataclass(frozen=True)
@constrained(noise_multiplier=NOISE_MULTIPLIER)
class GaussianEvent(DpEvent):
    """Gaussian noise N(0, (σC)²·I) added to a sum of per-record vectors of ℓ2 norm ≤ C;
    ``noise_multiplier`` σ = noise std / C."""

    noise_multiplier: float


@dataclass(frozen=True)
@constrained(noise_multiplier=NOISE_MULTIPLIER)
class LaplaceEvent(DpEvent):
    """Laplace noise of scale σC (each coordinate) added to a sum of per-record vectors of ℓ1
    norm ≤ C; ``noise_multiplier`` σ = scale / C (ε = 1/σ under add/remove; Dwork & Roth 2014,
    Thm 3.6)."""

    noise_multiplier: float


@dataclass(frozen=True)
@constrained(sample_rate=SAMPLE_RATE, event=EVENT)
class SampledEvent(DpEvent):
    """``event`` run on a random sample of the records at ``sample_rate`` ∈ (0, 1]; the
    subclasses say how the sample is drawn."""

    sample_rate: float
    event: DpEvent

    def __post_init__(self) -> None:     # sample_rate and event: declared (checked before)
        if isinstance(self.event, ZCDPEvent):
            raise ValueError(f"event: {self.event!r} cannot be subsampled: a generic ρ-zCDP "
                             "guarantee has no amplification-by-subsampling theorem (Bun, "
                             "Dwork, Rothblum & Steinke 2018 introduce truncated CDP because "
                             "zCDP lacks one). Sample the mechanism itself (e.g. a "
                             "GaussianEvent) so that the accountant can amplify it, or compose "
                             "the ZCDPEvent without sampling")


@dataclass(frozen=True)
class PoissonSampledEvent(SampledEvent):
    """``event`` run on a Poisson sample: every record kept independently with probability
    ``sample_rate`` q ∈ (0, 1]."""


@dataclass(frozen=True)
class SampledWithoutReplacementEvent(SampledEvent):
    """``event`` run on m of the n records drawn uniformly without replacement,
    ``sample_rate`` γ = m/n ∈ (0, 1] (accounted under replace-one: n is public)."""


@dataclass(frozen=True)
@constrained(event=EVENT, count=COUNT)
class SelfComposedEvent(DpEvent):
    """``event`` run ``count`` times in sequence (each run may depend on the earlier outputs)."""

    event: DpEvent
    count: int


def _check_events(name: str, value: object) -> tuple:
    events = tuple(value) if isinstance(value, (list, tuple)) else None
    if not events:
        raise ValueError(f"{name} must be a non-empty list of DpEvents, got {shown(value)}")
    for i, e in enumerate(events):
        EVENT.check(f"{name}[{i}]", e)
    return events


@dataclass(frozen=True)
@constrained(events=Custom(_check_events, "a non-empty list of DpEvents",
                           [[], None, "ab", 1.0, [None], [GaussianEvent(1.0), 2.0]]))
class ComposedEvent(DpEvent):
    """The ``events`` run in sequence (adaptively)."""

    events: tuple


@unconstrained("abstract base class: each subclass states its curve")
class RDPCurveEvent(DpEvent):
    """A mechanism that knows its own Rényi-DP curve. Subclasses implement
    :meth:`rdp` (one step, at the given orders, under the given relation) and may refuse a
    relation with ``ValueError``; accountants that are not Rényi accountants refuse the event."""

    @unconstrained("abstract: each subclass states its curve")
    def rdp(self, orders: np.ndarray, neighboring: str) -> np.ndarray:  # pragma: no cover
        raise NotImplementedError


#: The relations a :class:`ZCDPEvent` can be stated for (those of the accountants).
ZCDP_RELATIONS = ("add_remove", "replace_one")


@dataclass(frozen=True)
@constrained(rho=SCALE, neighboring=Options(*ZCDP_RELATIONS))
class ZCDPEvent(RDPCurveEvent):
    """A mechanism that is ρ-zero-concentrated DP: D_α(M(D) ‖ M(D')) ≤ αρ for every order
    α > 1 and every pair of neighbours (Bun & Steinke 2016, Def. 1.1). A claim, not a mechanism:
    the caller states ρ and the neighbouring relation the claim was proved for (``neighboring``,
    "add_remove" by default) — zCDP as defined is for the relation of the mechanism that claims
    it. The Gaussian mechanism with noise multiplier σ (noise std / ℓ2 sensitivity) is
    1/(2σ²)-zCDP (Bun & Steinke 2016, Prop. 1.6; :func:`dplib.accounting.zcdp.gaussian_rho`).

    Accounting (events say what ran; accountants decide how to account it):

    * a Rényi accountant composes it exactly, r(α) = αρ at every order (Def. 1.1; RDP and zCDP
      both add up under composition: Mironov 2017, Prop. 1; Bun & Steinke 2016, Lemma 1.7);
    * under the relation it was stated for it costs ρ. A claim for add/remove also bounds a
      replace-one accountant, with 4ρ: replacing one record is removing one and adding one, a
      group of two, and ρ-zCDP gives k²ρ-zCDP for groups of k (Bun & Steinke 2016, Prop. 1.9;
      its proof walks a chain of k neighbours, here remove then add). A replace-one claim says
      nothing about add/remove and is refused there;
    * it cannot be subsampled (:class:`PoissonSampledEvent` refuses it when built): a generic
      ρ-zCDP mechanism has no amplification-by-subsampling theorem;
    * the PLD accountant refuses it: a ρ-zCDP claim fixes a bound on the Rényi curve, not a
      privacy-loss distribution.
    """

    rho: float
    neighboring: str = "add_remove"

    @unconstrained("asked by the accountants with their own checked relation")
    def rho_under(self, neighboring: str) -> float:
        """ρ of this mechanism under the accountant's relation ``neighboring``: ρ under the
        stated relation, 4ρ for replace-one from an add/remove claim (Bun & Steinke 2016,
        Prop. 1.9, groups of 2); ``ValueError`` for add/remove from a replace-one claim."""
        if neighboring == self.neighboring:
            return self.rho
        if self.neighboring == "add_remove" and neighboring == "replace_one":
            return 4.0 * self.rho
        raise ValueError(f"neighboring: {self!r} is stated under replace-one adjacency, which "
                         f"bounds nothing under {shown(neighboring)}; account it with "
                         "neighboring='replace_one'")

    @unconstrained("the curve the Rényi accountant asks for at its checked orders")
    def rdp(self, orders: np.ndarray, neighboring: str) -> np.ndarray:
        """r(α) = αρ at every order (Bun & Steinke 2016, Def. 1.1), ρ from :meth:`rho_under`."""
        return np.asarray(orders, dtype=float) * self.rho_under(neighboring)


@unconstrained("abstract base class of the events equivalent to another")
class EquivalentEvent(DpEvent):
    """A mechanism whose privacy is, by a theorem, exactly that of another event: subclasses
    implement :meth:`equivalent`, and every accountant accounts the event it returns (the
    reduction is stated once, in the subclass, not in any accountant)."""

    def equivalent(self) -> DpEvent:  # pragma: no cover
        raise NotImplementedError


@dataclass(frozen=True)
@constrained(noise_multiplier=NOISE_MULTIPLIER, sensitivity=SCALE)
class MatrixMechanismEvent(EquivalentEvent):
    """One release of a matrix-factorisation mechanism B(Cx + z) (Li, Miklau, Hay, McGregor &
    Rastogi 2015; Denisov, McMahan, Rush, Smith & Thakurta 2022, Sec. 2): x stacks the n clipped
    gradient sums (each record contributes vectors of ℓ2 norm ≤ C_clip to the steps it takes
    part in), z ~ N(0, σ²C_clip²·I). Cx changes by at most ``sensitivity``·C_clip between
    neighbours (one record's contributions zeroed out, under the run's participation pattern:
    :func:`dplib.mechanisms.matrix_factorization.sensitivity`), so the whole sequence is ONE
    Gaussian mechanism with noise multiplier σ/``sensitivity``, and B(·) is post-processing
    (Denisov et al. 2022, Thm 2.1). No amplification: the batches may be fixed (cyclic).

    Adjacency: zero-out (a record replaced by one that contributes nothing), as the
    matrix-factorisation literature and jax-privacy state it. It is add/remove only when adding a
    record moves no other record between steps; the trainer's cyclic batches
    (:func:`dplib.training.correlated.cyclic_batches`, a permutation split into equal groups) do
    not promise that. For a Gaussian mechanism the ε is the same number either way."""

    noise_multiplier: float
    sensitivity: float = 1.0

    def equivalent(self) -> DpEvent:
        return GaussianEvent(self.noise_multiplier / self.sensitivity)


@dataclass(frozen=True)
@constrained(noise_multiplier=NOISE_MULTIPLIER, sample_rate=SAMPLE_RATE, num_steps=COUNT,
             bands=COUNT, sensitivity=SCALE)
class BandedMatrixMechanismEvent(EquivalentEvent):
    """``num_steps`` steps of a b-banded matrix mechanism (C lower-triangular with ``bands`` b
    nonzero diagonals, largest column norm ``sensitivity``) on cyclic Poisson batches: the records
    are split into b fixed groups, step t Poisson-samples group t mod b at rate ``sample_rate``
    q̂. By Choquette-Choo, Ganesh, McKenna, McMahan, Rush, Thakurta & Xu 2023 ("(Amplified)
    Banded Matrix Factorization", Thm 4) this is at least as private as ⌈num_steps/b⌉ DP-SGD
    steps with Poisson rate q̂ and noise multiplier σ/``sensitivity`` (it satisfies every guarantee
    they satisfy; zero-out adjacency, as :class:`MatrixMechanismEvent`; a record's
    participations are b steps apart, and the columns of C they touch are orthogonal). The expected
    batch size is q̂·N/b."""

    noise_multiplier: float
    sample_rate: float
    num_steps: int
    bands: int
    sensitivity: float = 1.0

    @property
    def participations(self) -> int:
        """⌈num_steps / b⌉: the most steps one record can take part in."""
        return -(-self.num_steps // self.bands)

    def equivalent(self) -> DpEvent:
        return SelfComposedEvent(PoissonSampledEvent(
            self.sample_rate, GaussianEvent(self.noise_multiplier / self.sensitivity)),
            self.participations)


@dataclass(frozen=True)
@unconstrained("record built by flatten from checked events")
class Step:
    """One leaf of a flattened event: ``count`` runs of the mechanism ``mechanism`` — an event
    class, :class:`GaussianEvent` or :class:`LaplaceEvent` with ``noise_multiplier``, on a
    ``sampling`` ("poisson" or "without_replacement") sample of rate ``sample_rate`` (1 = every
    record), or a subclass of :class:`RDPCurveEvent` (the event itself is ``curve``: it carries
    its own parameters). Accountants match on the class (``issubclass``), never on a name."""

    mechanism: type
    noise_multiplier: float
    sample_rate: float
    sampling: str
    count: int
    curve: RDPCurveEvent | None = None

    @property
    def num_steps(self) -> int:
        return self.count

    @unconstrained("compares two leaves built by flatten")
    def same_kind(self, other: "Step") -> bool:
        """True when the two leaves differ only in their count (they can be merged)."""
        return (self.mechanism, self.noise_multiplier, self.sample_rate, self.sampling,
                self.curve) == (other.mechanism, other.noise_multiplier, other.sample_rate,
                                other.sampling, other.curve)


@constrained(event=EVENT, count=COUNT)
def flatten(event: DpEvent, count: int = 1) -> Iterator[Step]:
    """The leaves of ``event`` in order, with their repetition counts multiplied out."""
    return _leaves(event, count)


def _leaves(event: DpEvent, count: int) -> Iterator[Step]:
    if isinstance(event, SelfComposedEvent):
        yield from _leaves(event.event, count * event.count)
    elif isinstance(event, ComposedEvent):
        for e in event.events:
            yield from _leaves(e, count)
    elif isinstance(event, SampledEvent):
        sampling = ("poisson" if isinstance(event, PoissonSampledEvent)
                    else "without_replacement")
        inner = event.event
        if not isinstance(inner, (GaussianEvent, LaplaceEvent)):
            raise ValueError(f"event: a sampled event must wrap a GaussianEvent or LaplaceEvent, "
                             f"got {type(inner).__name__}")
        yield Step(type(inner), inner.noise_multiplier, event.sample_rate, sampling, count)
    elif isinstance(event, (GaussianEvent, LaplaceEvent)):
        yield Step(type(event), event.noise_multiplier, 1.0, "poisson", count)
    elif isinstance(event, EquivalentEvent):
        yield from _leaves(event.equivalent(), count)
    elif isinstance(event, RDPCurveEvent):
        yield Step(type(event), 1.0, 1.0, "poisson", count, curve=event)
    else:
        raise ValueError(f"event: no accountant knows {type(event).__name__}")


@constrained(noise_multiplier=NOISE_MULTIPLIER, sample_rate=SAMPLE_RATE, num_steps=COUNT,
             sampling=SAMPLING)
def dpsgd_event(noise_multiplier: float, sample_rate: float, num_steps: int, *,
                sampling: str = "poisson") -> DpEvent:
    """``num_steps`` DP-SGD steps: a Gaussian on a sampled batch, repeated — the event that
    ``Accountant.step`` records. ``sampling`` is "poisson" or "without_replacement"."""
    sampled = PoissonSampledEvent if sampling == "poisson" else SampledWithoutReplacementEvent
    return SelfComposedEvent(sampled(sample_rate, GaussianEvent(noise_multiplier)), num_steps)
