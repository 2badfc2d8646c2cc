"""The declared parameters shared by the mechanisms (:mod:`dplib._constraints`).

One statement per kind of parameter: ε, a sensitivity, a noise scale, the ``rng`` of a
mechanism, a query answer to privatise, the vectorised (array) forms, a rational parameter of
the exact discrete samplers, a workload or encoder matrix. A mechanism declares
``@constrained(epsilon=EPSILON, rng=RNG, ...)``; the check, its error message and the bad-input
sweep's values all come from here. What stays in a mechanism's body: the relations (a scale
Δ/ε that overflows, a value whose doubles are coarser than the sensitivity: Mironov 2012,
:mod:`dplib.mechanisms._checks`).
"""
from __future__ import annotations

import math
from fractions import Fraction
from numbers import Rational, Real

import numpy as np

from .._constraints import Custom, InstanceOf, Interval, RealArray
from .._validate import as_generator, check_finite_array, check_positive, shown

__all__ = ["EPSILON", "SENSITIVITY", "SCALE", "EPSILONS", "EPSILONS0", "DELTA", "DELTAS",
           "SCALES", "RNG", "VALUE",
           "RATIONAL", "INTEGER_POINTS", "MATRIX", "LOWER_SQUARE", "TEXT", "check_rational",
           "check_matrix", "INF"]

INF = math.inf

#: ε > 0 of a mechanism (finite: ε = inf would mean no noise at all).
EPSILON = Interval(0.0, INF)
#: A sensitivity Δ > 0 (ℓ1 or ℓ2, under the adjacency used; Δ = 0 needs no noise).
SENSITIVITY = Interval(0.0, INF)
#: A noise scale (Laplace b, Gaussian σ) > 0.
SCALE = Interval(0.0, INF)
#: ε > 0 of a vectorised function: a scalar or an array, every entry in (0, inf).
EPSILONS = RealArray(0.0, INF, closed="neither", nonempty=False, family="pos_vec")
#: ε ≥ 0 of a vectorised function (δ(ε) is defined at ε = 0).
EPSILONS0 = RealArray(0.0, INF, closed="left", nonempty=False, family="nonneg_array")
#: δ ∈ (0, 1) of an (ε, δ) guarantee asked for (the meaning of
#: :data:`dplib.accounting._params.DELTA`, stated here so that the mechanisms, which the
#: accountants import, do not import the accounting package).
DELTA = Interval(0.0, 1.0, closed="neither")
#: δ ∈ (0, 1) of a vectorised function: a scalar or an array.
DELTAS = RealArray(0.0, 1.0, closed="neither", nonempty=False, family="delta")
#: A noise scale of a vectorised function: a scalar or an array, every entry in (0, inf).
SCALES = RealArray(0.0, INF, closed="neither", nonempty=False, family="pos_vec")


def _generator(name: str, value: object) -> np.random.Generator:
    return as_generator(value)


#: The randomness of a mechanism: a numpy ``Generator`` or an integer seed ≥ 0; None is refused
#: (nothing draws from a hidden global generator; a release passes ``np.random.default_rng()``).
#: Handed to the function as a ``Generator``.
RNG = Custom(_generator, "a numpy Generator or an integer seed >= 0",
             [None, -1, "seed", 1.5, math.nan, True], family="rng")

#: A query answer to privatise: a scalar or non-empty array of finite reals (a torch tensor is
#: read as its values), handed on as a float array.
VALUE = Custom(check_finite_array, "finite real numbers (a scalar or a non-empty array)",
               [[], [math.nan], [1.0, math.inf], "abc", None, math.inf, math.nan, True],
               family="array")


def check_rational(name: str, value: object) -> Fraction:
    """A positive rational: an int, a Fraction, or a float read as its printed decimal (the
    exact samplers of Canonne, Kamath & Steinke 2020 compute with integers)."""
    if isinstance(value, bool) or not isinstance(value, (Real, np.integer, np.floating)):
        raise ValueError(f"{name} must be a positive rational number in (0, inf), got "
                         f"{shown(value)}")
    if isinstance(value, (Rational, np.integer)):
        frac = Fraction(int(value)) if isinstance(value, np.integer) else Fraction(value)
    else:
        check_positive(name, float(value))          # NaN / inf / ≤ 0 refused with the range
        frac = Fraction(repr(float(value)))
    if frac <= 0:
        raise ValueError(f"{name} must be in (0, inf), got {shown(value)}")
    return frac


#: A rational > 0 (int, Fraction, or float read as its decimal), handed on as a Fraction.
RATIONAL = Custom(check_rational, "a positive rational number in (0, inf)",
                  [0, -1, Fraction(-1, 2), 0.0, -1.5, math.nan, math.inf, "1", None, True,
                   [1.0]], family="pos")


def _integer_points(name: str, value: object) -> np.ndarray:
    """Integer-valued points of ℤ (ints, or floats that are whole numbers), as floats."""
    arr = np.asarray(value)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"{name} must be integers (points of Z), got {shown(value)}")
    arr = arr.astype(float)
    bad = ~np.isfinite(arr) | (arr != np.round(arr))
    if bad.any():
        raise ValueError(f"{name} must be integers (points of Z), got "
                         f"{shown(float(arr[bad].flat[0]))}")
    return arr


#: Points of ℤ where a pmf is evaluated (whole numbers, scalar or array), handed on as floats.
INTEGER_POINTS = Custom(_integer_points, "integers (points of Z)",
                        [0.5, [1, 2.5], math.nan, [math.inf], "1", None, True])


def check_matrix(name: str, value: object, *, square: bool = False,
                 lower: bool = False) -> np.ndarray:
    """A finite 2-D float array (square, lower-triangular with nonzero diagonal when asked)."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a 2-D array of finite reals, got {shown(value)}"[:300])
    if arr.ndim != 2 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 2-D array, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must hold finite reals, got a NaN or infinite entry")
    if square and arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name} must be square (n×n), got shape {arr.shape}")
    if lower:
        if np.any(np.triu(arr, 1) != 0):
            raise ValueError(f"{name} must be lower-triangular (step t may use only the first t "
                             f"inputs), got a nonzero entry above the diagonal")
        if np.any(np.diag(arr) == 0):
            raise ValueError(f"{name} must have a nonzero diagonal (invertible), got a zero at "
                             f"index {int(np.flatnonzero(np.diag(arr) == 0)[0])}")
    return arr


_BAD_MATRIX = [[], [1.0, 2.0], [[math.nan]], [[math.inf]], "abc", None, np.zeros((0, 3))]
#: A non-empty 2-D array of finite reals (a factor B or an encoder C), as float64.
MATRIX = Custom(check_matrix, "a non-empty 2-D array of finite reals", _BAD_MATRIX)
#: A workload: square, lower-triangular (online), nonzero diagonal, finite, as float64.
LOWER_SQUARE = Custom(lambda name, value: check_matrix(name, value, square=True, lower=True),
                      "a square lower-triangular 2-D array of finite reals with a nonzero "
                      "diagonal", _BAD_MATRIX + [np.ones((2, 3)), np.ones((2, 2)),
                                                 np.diag([1.0, 0.0])])
#: A name (for tables and legends).
TEXT = InstanceOf(str, "a string", bad=(None, 1.0, 3))
