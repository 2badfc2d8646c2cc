"""The declared parameters shared by the DP-ICL functions (:mod:`dplib._constraints`).

One statement per kind of parameter; the ε, δ, rate and count statements are those of the
accountants (:mod:`dplib.accounting._params`), since the DP-ICL functions hand these values to
them unchanged. A function declares ``@constrained(epsilon=EPSILON_OR_INF, rng=RNG, ...)``; the
check, its error message and the bad-input sweep's values all come from here. (A template or a
data set is declared with its class: :mod:`dplib.icl._records`, which imports the modules that
declare with this one.)
"""
from __future__ import annotations

import math

from .._constraints import Custom, Integer, Interval, Options, RealArray
from .._validate import as_generator, check_finite_array, shown
from ..accounting import accountant_names
from ..accounting._params import COUNT, DELTA, POSITIVE, SAMPLE_RATE

__all__ = ["EPSILON_OR_INF", "EPSILON", "POSITIVE", "DELTA", "SAMPLE_RATE", "OPTIONAL_RATE",
           "COUNT", "OPTIONAL_COUNT", "SEED", "NONNEG", "NOISE_STD", "SENSITIVITY", "ACCOUNTANT",
           "SAMPLER", "RNG", "FINITE_ARRAY", "COUNTS", "TEXT", "OPTIONAL_CALLABLE"]

#: ε ∈ (0, ∞] of a DP-ICL release: ∞ is the non-private ensemble (no noise), the chapter's
#: "ε = ∞" column.
EPSILON_OR_INF = Interval(0.0, math.inf, closed="right", family="pos_noinf")
#: ε > 0, finite (a pure ε-DP selection per query: report-noisy-max, the joint exponential
#: mechanism, propose-test-release; their noise scale is 1/ε).
EPSILON = POSITIVE
#: A real ≥ 0 (a strength, a temperature; 0 switches the effect off).
NONNEG = Interval(0.0, math.inf, closed="left")
#: The standard deviation s ≥ 0 of Gaussian noise (0: the noiseless ensemble).
NOISE_STD = NONNEG
#: A sample rate q ∈ (0, 1], or None for the function's default rate.
OPTIONAL_RATE = Custom(lambda name, value: (None if value is None
                                             else SAMPLE_RATE.check(name, value)),
                       "None or a sample rate in (0, 1]",
                       [0.0, -0.1, 1.5, math.nan, "0.1", True])
#: A count ≥ 1, or None (a default that depends on the data: all queries, the largest subset).
OPTIONAL_COUNT = Custom(lambda name, value: None if value is None else COUNT.check(name, value),
                        "None or an integer >= 1", [0, -3, 2.5, math.nan, "3", True, 2.0])
#: A seed ≥ 0 of a public, reproducible construction (a data split, the book's corpus).
SEED = Integer(min=0)
#: An ℓ2 sensitivity Δ > 0 (√2 for vote histograms, 2 or 2/M for embeddings).
SENSITIVITY = POSITIVE
#: The accountant names :func:`dplib.accounting.make_accountant` knows (a registry: checked
#: against the names registered at call time).
ACCOUNTANT = Custom(lambda name, value: Options(*accountant_names()).check(name, value),
                    "the name of a registered accountant ('rdp', 'pld', ...)",
                    ["no-such-accountant", None, 3, ["rdp"]], family="choice", dynamic=True)
#: How :func:`~dplib.icl.aggregation.partition_exemplars` deals the exemplars into subsets.
SAMPLER = Options("poisson", "fixed")
#: A numpy ``Generator`` or a seed ≥ 0 (:func:`dplib._validate.as_generator`: ``None`` is refused,
#: no result depends on an unseeded global generator). The function receives a ``Generator``.
RNG = Custom(lambda name, value: as_generator(value),
             "a numpy Generator or a non-negative integer seed",
             [None, -1, "seed", 1.5, math.nan, True], family="rng")
#: A non-empty scalar or array of finite reals (vote histograms, embeddings, keyword counts):
#: :func:`dplib._validate.check_finite_array`, torch tensors read as their values.
FINITE_ARRAY = Custom(check_finite_array, "a non-empty array of finite reals",
                      [[], [math.nan], [1.0, math.inf], "abc", None, [True, False]],
                      family="array")
#: Keyword counts: a 1-D array of reals ≥ 0.
COUNTS = RealArray(0.0, math.inf, closed="left", max_ndim=1)
#: A string (a prefix, a reference text).
TEXT = Custom(lambda name, value: _instance(name, value, str, "a string"), "a string",
              [None, 1.0, b"text", ["a", "b"]])
#: None or a function (an embedder mapping a list of texts to an array).
OPTIONAL_CALLABLE = Custom(lambda name, value: _optional_callable(name, value),
                           "None or a function", [1.0, "f", [1.0]])


def _instance(name: str, value: object, cls: type, what: str) -> object:
    if not isinstance(value, cls):
        raise ValueError(f"{name} must be {what}, got {shown(value)}")
    return value


def _optional_callable(name: str, value: object) -> object:
    if value is not None and not callable(value):
        raise ValueError(f"{name} must be None or a function, got {shown(value)}")
    return value

