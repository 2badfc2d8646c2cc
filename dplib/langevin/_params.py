"""The declared parameters shared by the modules of :mod:`dplib.langevin`
(:mod:`dplib._constraints`).

One statement per kind of parameter of the Langevin bounds and samplers: Rényi orders,
regularisation and smoothness constants, step sizes, the step schedule. The privacy parameters
(ε, δ, σ, q, counts) are those of :mod:`dplib.accounting._params`.
"""
from __future__ import annotations

import math

import numpy as np

from .._constraints import Constraint, Custom, Integer, Interval, Options
from .._validate import check_int, check_real_array, check_step_counts
from ..accounting._params import POSITIVE, check_orders

__all__ = ["ORDER", "SEED_OR_NONE", "optional", "ORDER_ARRAY", "STEP_COUNTS", "STEPS",
           "REAL_ARRAY", "BETA_OR_NONE", "RADIUS_OR_NONE", "ANALYSES", "ANALYSIS",
           "ORDERS_OR_NONE"]

#: One Rényi order α ∈ (1, ∞).
ORDER = Interval(1.0, math.inf, closed="neither")


def _seed_or_none(name: str, value: object) -> int | None:
    return None if value is None else check_int(name, value, low=0)


#: A run's seed: None (fresh OS entropy, :func:`dplib.device.release_seed`) or an
#: integer ≥ 0 (a reproducible experiment, never a release).
SEED_OR_NONE = Custom(_seed_or_none, "None or an integer >= 0",
                      [-1, -3, 0.5, 0.0, math.nan, "2", True, [0, 0]], family="seed")


def optional(constraint: Constraint, what: str) -> Custom:
    """``constraint`` or None (an optional bound: β, a radius)."""
    return Custom(lambda name, value: None if value is None else constraint.check(name, value),
                  what, [v for v in constraint.bad_values() if v is not None],
                  family=None)


#: Rényi orders α > 1, a scalar or an array (the formulas broadcast over them).
ORDER_ARRAY = Custom(lambda name, value: check_real_array(name, value, low=1.0),
                     "a real or an array of reals in (1, inf)",
                     [1.0, 0.5, math.nan, math.inf, "abc", None, [2.0, 0.5], True])
#: Numbers of steps K ≥ 0, an integer or an integer array (the formulas broadcast over them).
STEP_COUNTS = Custom(check_step_counts, "an integer or an integer array >= 0",
                     [-1, [3, -1], 2.5, math.nan, "3", None, True, [True]], family="int0")
#: A number of steps K ≥ 0.
STEPS = Integer(min=0)
#: A real or an array of reals (a data mean, a starting point).
REAL_ARRAY = Custom(lambda name, value: check_real_array(name, value),
                    "a real or an array of reals", [math.nan, "abc", None, [1.0, math.nan],
                                                   [True]])
#: β > 0 of a β-smooth loss, or None (not checked against the step size).
BETA_OR_NONE = optional(POSITIVE, "None or a real in (0, inf)")
#: The radius of the ℓ2 ball iterates are projected on, or None (no projection).
RADIUS_OR_NONE = optional(POSITIVE, "None or a real in (0, inf)")
#: Which RDP curve of noisy GD to use: the privacy dynamics or composition over steps.
ANALYSES = ("dynamics", "composition")
ANALYSIS = Options(*ANALYSES)


def _orders_or_none(name: str, value: object) -> np.ndarray | None:
    return None if value is None else check_orders(value)


#: None (the default orders) or Rényi orders α > 1.
ORDERS_OR_NONE = Custom(_orders_or_none, "None or orders in (1, inf)",
                        [[0.5, 2.0], [1.0], [math.nan], [], "abc", [2.0, math.inf], True])
