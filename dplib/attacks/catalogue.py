"""The record of one audit of a mechanism: :class:`MechanismAudit`.

A :class:`MechanismAudit` runs one mechanism many times on a fixed, worst-case pair of
neighbouring inputs and audits the outputs with
:func:`~dplib.attacks.audit_stats.audit_from_samples` (Jagielski, Ullman & Oprea 2020; Nasr et
al. 2021); ``broken=True`` marks a mechanism with a deliberate bug, which a sound audit must
refute. The catalogue of audits of every mechanism in :mod:`dplib.mechanisms` is an experiment:
:func:`dplib.experiments.mechanism_audits.mechanism_audits` (run by tests/audit and
benchmarks/audit_mechanisms.py); :mod:`dplib.experiments.median_audits` and
:mod:`dplib.experiments.svt_audits` build audits of the same kind.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._constraints import Integer, constrained, same_as, unconstrained
from ._params import RNG
from .audit_stats import AuditResult, audit_from_samples

__all__ = ["MechanismAudit"]


@unconstrained("record of one mechanism's audit, built by dplib.experiments.mechanism_audits "
               "(its run() is declared)")
@dataclass(frozen=True)
class MechanismAudit:
    """One audit of a mechanism on a fixed, worst-case pair of neighbouring inputs.

    ``sample(n, rng)`` returns two 1-d arrays: one scalar statistic of each of n independent runs
    on D and on D'. ``claimed_epsilon`` is what the library claims at ``delta``; ``pair_epsilon``
    (when known in closed form) is the largest ε any event can show *for this pair* — the ceiling
    of the audit's power. ``broken=True`` marks a deliberately wrong mechanism that the audit
    must refute (a test of the audit itself).
    """

    name: str
    claimed_epsilon: float
    delta: float
    sample: object
    pair_epsilon: float | None = None
    broken: bool = False
    note: str = ""

    @constrained(n=Integer(min=4), rng=RNG, **same_as(audit_from_samples, "confidence",
                                                        "selection_fraction"))
    def run(self, n: int, *, rng: np.random.Generator | int, confidence: float = 0.95,
            selection_fraction: float = 0.5) -> AuditResult:
        """Run the mechanism n times on each input and audit it (:func:`audit_from_samples`)."""
        a, b = self.sample(n, rng)
        return audit_from_samples(a, b, delta=self.delta, confidence=confidence,
                                  selection_fraction=selection_fraction)
