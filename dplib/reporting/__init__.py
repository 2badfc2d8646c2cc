"""A complete privacy statement for any private result of dplib, generated from the run itself.

Ponomareva et al. (2023, "How to DP-fy ML", Sec. 5, on reporting privacy guarantees) list what
a published DP guarantee must state: the privacy unit and the neighbouring relation, what the
guarantee covers (the final model or every iterate), the accounting (the accountant, its
version, its assumptions such as Poisson sampling), the (ε, δ) and its parameters, and what is
left out. :func:`privacy_report` fills every field of a :class:`PrivacyReport` from the result
(its accountant, its configuration, its recorded seed) or from the event a mechanism ran — a
caller types only facts the run cannot know (e.g. that a person has several records), and those
are echoed and flagged.

It refuses (``ValueError``) a report whose numbers do not come from one consistent run: a
result whose ε, σ, q or T differ from what its own accountant recorded, a Poisson-accounted run
whose batches were not Poisson (fixed-size, shuffled or cyclic batches: the amplification
behind its ε does not hold for them), and a Poisson-accounted history under a configuration of
cyclic batches.

>>> from dplib.accounting import GaussianEvent
>>> rep = privacy_report(GaussianEvent(2.0), delta=1e-5)
>>> rep.neighboring, rep.sampler
('add/remove one record', 'full batch (every record in every step)')
>>> round(rep.epsilon, 3), rep.rho
(2.166, 0.125)
"""
from __future__ import annotations

from .sources import privacy_report
from .statement import BATCHES, PRIVACY_UNITS, PURE_MECHANISMS, PrivacyReport, PureDPEvent

__all__ = ["PrivacyReport", "PureDPEvent", "privacy_report", "PRIVACY_UNITS", "BATCHES",
           "PURE_MECHANISMS"]
