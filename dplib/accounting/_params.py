"""The declared parameters shared by the accounting functions (:mod:`dplib._constraints`).

One statement per kind of parameter: σ, q, δ, ε, counts, Rényi orders, the relations and
samplers. A function declares ``@constrained(noise_multiplier=NOISE_MULTIPLIER, ...)``; the
check, its error message and the bad-input sweep's values all come from here.
"""
from __future__ import annotations

import math

import numpy as np

from .._constraints import Custom, Integer, Interval, Options
from .._validate import shown

__all__ = ["NOISE_MULTIPLIER_RANGE", "NOISE_MULTIPLIER", "SAMPLE_RATE", "DELTA", "DELTA0",
           "EPSILON", "POSITIVE", "COUNT", "NEIGHBORING", "SAMPLING", "MAX_ORDER", "ORDERS",
           "ORDERS_CAPPED", "ORDERS_OR_DEFAULT", "CONVERSION", "SCALE", "RTOL", "check_orders",
           "NEIGHBORINGS", "SAMPLINGS"]

#: The noise multipliers the accountants take. Outside it σ² or 1/σ² leaves the float range
#: (σ = 1e200 raised OverflowError, σ = 1e-200 divided by zero); the answers there would be
#: ε = ∞ (σ → 0) or ε = 0 (σ → ∞) anyway.
NOISE_MULTIPLIER_RANGE = (1e-100, 1e100)
#: σ = noise std / sensitivity, in :data:`NOISE_MULTIPLIER_RANGE` (the sweep also tries the
#: values bad for every positive real).
NOISE_MULTIPLIER = Interval(*NOISE_MULTIPLIER_RANGE, closed="both", family="pos")
#: A sample rate q ∈ (0, 1].
SAMPLE_RATE = Interval(0.0, 1.0, closed="right")
#: δ ∈ (0, 1) of a guarantee asked for.
DELTA = Interval(0.0, 1.0, closed="neither")
#: δ ∈ [0, 1) of a mechanism (δ = 0: pure DP).
DELTA0 = Interval(0.0, 1.0, closed="left")
#: ε ≥ 0 (ε = 0 is a legitimate question: how far is the mechanism from perfect privacy?).
EPSILON = Interval(0.0, math.inf, closed="left")
#: A real > 0 (a target ε, a grid step, μ).
POSITIVE = Interval(0.0, math.inf)
#: A scale in (0, 1e100] (a sensitivity, ρ): finite, so that σ/scale and α·ρ stay floats.
SCALE = Interval(0.0, 1e100, closed="right", family="pos")
#: A relative tolerance in (0, 1).
RTOL = Interval(0.0, 1.0, closed="neither", family="frac_open")
#: A number of steps or runs, ≥ 1.
COUNT = Integer(min=1)
#: The samplers and neighbouring relations the accountants understand.
SAMPLINGS = ("poisson", "without_replacement")
NEIGHBORINGS = ("add_remove", "replace_one")
NEIGHBORING = Options(*NEIGHBORINGS)
SAMPLING = Options(*SAMPLINGS)
#: The RDP → (ε, δ) conversions (Mironov 2017, Prop. 3; Canonne, Kamath & Steinke 2020, Prop. 12).
CONVERSION = Options("improved", "classic")

#: Largest Rényi order of the subsampled-Gaussian RDP (:class:`~dplib.accounting.RDPAccountant`,
#: :func:`~dplib.accounting.subsampled_gaussian_rdp`, :func:`~dplib.accounting.wor_gaussian_rdp`).
#: Their integer-order sums (MTZ 2019, §3.3; WBK 2019, Thm 27) have one term per integer up to α:
#: α = 1e6 takes ~0.5 s and ~0.2 GB (measured), α = 1e300 cannot be allocated. The cap costs little:
#: RDP is nondecreasing in α (van Erven & Harremoës 2014, Thm 3), so converting at α = 1e6
#: (Mironov 2017, Prop. 3: ε ≤ r(α) + log(1/δ)/(α − 1)) gives at most log(1/δ)/(1e6 − 1) more than
#: any larger order could: 1.2e-5 at δ = 1e-5.
MAX_ORDER = 1e6


def check_orders(orders: object, *, high: float = np.inf) -> np.ndarray:
    """Orders α: a scalar or 1-D array of finite reals, all in (1, ``high``]."""
    allowed = "(1, inf)" if high == np.inf else f"(1, {high:g}]"
    try:
        arr = (np.asarray(orders, dtype=float) if not isinstance(orders, bool)
               else np.asarray(np.nan))
    except (TypeError, ValueError):
        raise ValueError(f"orders must be a scalar or non-empty 1-D array of reals in {allowed}, "
                         f"got {shown(orders)}") from None
    if arr.ndim > 1 or arr.size == 0:
        raise ValueError(f"orders must be a scalar or non-empty 1-D array of reals in {allowed}, "
                         f"got {shown(orders)}")
    arr = np.atleast_1d(arr)
    bad = ~np.isfinite(arr) | (arr <= 1) | (arr > high)
    if bad.any():
        why = (" (the subsampled-Gaussian RDP sums one term per integer up to the order; see "
               "dplib.accounting._params.MAX_ORDER)" if high == MAX_ORDER else "")
        raise ValueError(f"orders must be in {allowed}, got {shown(float(arr[bad][0]))}{why}")
    return arr


_BAD_ORDERS = [[0.5, 2.0], [1.0], [np.nan], [], "abc", [2.0, np.inf], [[2.0, 3.0]], True]
#: Rényi orders α > 1 (a scalar or a 1-D array).
ORDERS = Custom(lambda name, value: check_orders(value), "orders in (1, inf)",
                _BAD_ORDERS, family="orders")
#: Rényi orders in (1, :data:`MAX_ORDER`] (the subsampled Gaussian's integer-order sums).
ORDERS_CAPPED = Custom(lambda name, value: check_orders(value, high=MAX_ORDER),
                       "orders in (1, 1e6]", _BAD_ORDERS + [[2.0, 1e300], [2.0, 2e6]],
                       family="orders")
#: As :data:`ORDERS_CAPPED`, or None for the accountant's default orders.
ORDERS_OR_DEFAULT = Custom(
    lambda name, value: None if value is None else check_orders(value, high=MAX_ORDER),
    "None or orders in (1, 1e6]", _BAD_ORDERS + [[2.0, 1e300], [2.0, 2e6]])
