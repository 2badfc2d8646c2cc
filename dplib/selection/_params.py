"""The declared parameters shared by the modules of :mod:`dplib.selection`
(:mod:`dplib._constraints`).

The generator of a private release, a data range's ends, the laws of the number of tuning runs
and their parameters. The privacy parameters (ε, δ, σ, counts) are those of
:mod:`dplib.accounting._params`.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _common_params as _common
from .._constraints import Custom, Integer, Interval, Options
from ..device import release_seed

__all__ = ["RELEASE_RNG", "make_release_rng", "REAL", "DELTA_OR_ZERO", "DISTRIBUTIONS",
           "DISTRIBUTION", "MEAN_RANGE", "MEAN", "ETA", "ETA_OR_NONE", "GAMMA", "SIZE_OR_NONE",
           "SEED_OR_NONE", "RNG", "POSITIVE_OR_NONE", "ORDERS_OR_NONE"]


def make_release_rng(rng: object = None, name: str = "rng") -> np.random.Generator:
    """The generator a private release draws from: a numpy ``Generator`` as it is, an int seed
    ≥ 0 (reproducible, for experiments), or ``None`` — 63 fresh bits of OS entropy
    (:func:`dplib.device.release_seed`)."""
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(release_seed(rng, name))


#: The randomness of a private release: None (fresh OS entropy), a numpy Generator or a seed
#: ≥ 0; the function receives a Generator.
RELEASE_RNG = Custom(lambda name, value: make_release_rng(value, name),
                     "None, a numpy Generator or an integer seed >= 0",
                     [-1, "seed", 1.5, math.nan, True, [1, 2]], family="release_rng")
#: A finite real (an end of a public data range, a threshold).
REAL = Interval(-math.inf, math.inf)
#: δ ∈ [0, 1): 0 asks for pure ε-DP.
DELTA_OR_ZERO = Interval(0.0, 1.0, closed="left")

#: The laws of the number of runs K of private tuning (Papernot & Steinke 2022).
DISTRIBUTIONS = ("geometric", "logarithmic", "truncated_negative_binomial", "poisson")
DISTRIBUTION = Options(*DISTRIBUTIONS)
#: Means E[K] accepted, (1, 1e6]: E[K] = 1 is a single run (no tuning: compose the run itself;
#: the truncated laws degenerate there, γ = 1); 1e6 runs is beyond any tuning.
MEAN_RANGE = (1.0, 1e6)
MEAN = Interval(*MEAN_RANGE, closed="right")
#: η of the truncated negative binomial D_{η,γ}: η > −1 (Papernot & Steinke 2022, §3), at most
#: 1e3 (beyond, the law is a point mass for any mean).
ETA = Interval(-1.0, 1e3, closed="neither")
#: None (the η the law's name fixes) or η as :data:`ETA`.
ETA_OR_NONE = Custom(lambda name, value: None if value is None else ETA.check(name, value),
                     "None or a real in (-1, 1000)",
                     [v for v in ETA.bad_values() if v is not None])
#: γ ∈ (0, 1) of D_{η,γ}.
GAMMA = Interval(0.0, 1.0, closed="neither", family="frac_open")


def _size_or_none(name: str, value: object) -> int | None:
    return None if value is None else Integer(min=1).check(name, value)


#: None (one release) or the number of independent releases ≥ 1.
SIZE_OR_NONE = Custom(_size_or_none, "None or an integer >= 1",
                      [0, -3, 2.5, math.nan, "3", True, 1.0])


# None or a seed ≥ 0, and a numpy Generator or a seed ≥ 0 (for a public random choice, such as
# a split of the records; the function receives a Generator): the library-wide declarations.
SEED_OR_NONE, RNG = _common.SEED_OR_NONE, _common.RNG


#: None or a real > 0 (the noise of one of two mechanisms, the other given).
POSITIVE_OR_NONE = Custom(
    lambda name, value: None if value is None else Interval(0.0, math.inf).check(name, value),
    "None or a real in (0, inf)", [0.0, -1.0, math.nan, math.inf, "1.0", True])


def _orders_or_none(name: str, value: object) -> np.ndarray | None:
    from ..accounting import check_orders
    return None if value is None else check_orders(value)


#: None (the default orders) or Rényi orders α > 1, a scalar or a 1-D array.
ORDERS_OR_NONE = Custom(_orders_or_none, "None or orders in (1, inf)",
                        [[0.5, 2.0], [1.0], [math.nan], [], "abc", [2.0, math.inf], True],
                        family=None)
