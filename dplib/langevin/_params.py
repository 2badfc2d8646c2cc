"""The declared parameters shared by the modules of :mod:`dplib.langevin`
(:mod:`dplib._constraints`).

One statement per kind of parameter of the Langevin bounds and samplers: Rényi orders,
regularisation and smoothness constants, step sizes, the step schedule. The privacy parameters
(ε, δ, σ, q, counts) are those of :mod:`dplib.accounting._params`.
"""
from __future__ import annotations

import math

from .._constraints import Custom, Interval
from .._validate import check_int

__all__ = ["ORDER", "SEED_OR_NONE"]

#: One Rényi order α ∈ (1, ∞).
ORDER = Interval(1.0, math.inf, closed="neither")


def _seed_or_none(name: str, value: object) -> int | None:
    return None if value is None else check_int(name, value, low=0)


#: The seed of a run: None (fresh OS entropy, :func:`dplib.device.release_seed`) or an
#: integer ≥ 0 (a reproducible experiment, never a release).
SEED_OR_NONE = Custom(_seed_or_none, "None or an integer >= 0",
                      [-1, -3, 0.5, 0.0, math.nan, "2", True, [0, 0]], family="seed")
