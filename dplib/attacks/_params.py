"""The declared parameters shared by the attacks and audits (:mod:`dplib._constraints`).

One statement per kind of parameter: a seed, a confidence level, a false positive rate, None
or a count (the ``rng`` of a mechanism, :data:`dplib.mechanisms._params.RNG`, is reused). A
function declares ``@constrained(rng=RNG, ...)``; the check, its error message and the
bad-input sweep's values all come from here (ε, δ: reuse :mod:`dplib.accounting._params`).
"""
from __future__ import annotations

import math

from .._constraints import Custom, Integer, Interval
from .._validate import check_int, check_positive
from ..mechanisms._params import RNG   # a numpy Generator or an integer seed >= 0

__all__ = ["RNG", "SEED", "RELEASE_SEED", "CONFIDENCE", "FPR", "POSITIVE_OR_NONE",
           "COUNT_OR_NONE", "SAMPLE_RATE", "NOISE_MULTIPLIER", "NOISE_MULTIPLIER0", "POSITIVE",
           "COUNT", "DELTA", "DELTA0"]

#: An integer seed ≥ 0 of a tool's own randomness (an attacker's classifier, an experiment).
SEED = Integer(min=0, family="int0")
#: A seed for a run that may release something: None (fresh OS entropy,
#: :func:`dplib.device.release_seed`) or an integer ≥ 0.
RELEASE_SEED = Custom(lambda name, value: (None if value is None
                                           else check_int(name, value, low=0)),
                      "None or an integer seed >= 0", [-1, 2.5, math.nan, "3", True],
                      family="seed")
#: The confidence level of an interval or an audit, in (0, 1).
CONFIDENCE = Interval(0.0, 1.0, closed="neither", family="frac_open")
#: A false-positive rate at which an attack is measured, in (0, 1).
FPR = Interval(0.0, 1.0, closed="neither", family="frac_open")
#: None (no privacy: a non-private run) or a real ε > 0.
POSITIVE_OR_NONE = Custom(lambda name, value: (None if value is None
                                               else check_positive(name, value)),
                          "None or a real number in (0, inf)",
                          [0.0, -1.0, math.nan, math.inf, "1.0", [1.0]])
#: None (the default: all of them) or an integer ≥ 1.
COUNT_OR_NONE = Custom(lambda name, value: None if value is None else check_int(name, value),
                       "None or an integer >= 1", [0, -3, 2.5, math.nan, "3", True])
#: Poisson sampling rate q ∈ (0, 1] of the audited DP-SGD runs.
SAMPLE_RATE = Interval(0.0, 1.0, closed="right")
#: A noise multiplier σ > 0 (the accountant's ε is finite only for σ > 0).
NOISE_MULTIPLIER = Interval(0.0, math.inf)
#: A noise multiplier σ ≥ 0 (σ = 0: the non-private control run).
NOISE_MULTIPLIER0 = Interval(0.0, math.inf, closed="left")
#: A real > 0 (a clipping norm C, a learning rate, a canary's scale, κ).
POSITIVE = Interval(0.0, math.inf)
#: A count ≥ 1 (runs, steps, canaries, guesses).
COUNT = Integer(min=1)
#: δ ∈ (0, 1) at which an accountant's ε is stated.
DELTA = Interval(0.0, 1.0, closed="neither")
#: δ ∈ [0, 1) of the audited mechanism (δ = 0: pure DP).
DELTA0 = Interval(0.0, 1.0, closed="left")
