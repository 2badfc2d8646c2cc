"""Declarations (:mod:`dplib._constraints`) shared by chapter 13's drivers
(:mod:`dplib.experiments.finetune`, :mod:`dplib.experiments.finetune_text`): ε of a run, the
list of ε of a table, the list of methods compared."""
from __future__ import annotations

import math

from .._common_params import POSITIVE, optional
from .._constraints import Custom
from .._validate import check_choice, shown

__all__ = ["EPSILON_OR_NONE", "epsilon_list", "method_list"]

#: ε of a run: > 0, or None for the same run without noise.
EPSILON_OR_NONE = optional(POSITIVE)


def epsilon_list(none_allowed: bool) -> Custom:
    """A non-empty tuple (or list) of ε > 0 (and None, the run without noise, where allowed)."""
    tail = " (or None)" if none_allowed else ""

    def check(name: str, value: object) -> object:
        eps = list(value) if isinstance(value, (tuple, list)) else None
        if not eps or any(not ((e is None and none_allowed)
                               or (isinstance(e, (int, float)) and not isinstance(e, bool)
                                   and math.isfinite(e) and e > 0)) for e in eps):
            raise ValueError(f"{name} must be a non-empty tuple of positive numbers{tail}, "
                             f"got {shown(value)}")
        return value
    return Custom(check, f"a non-empty tuple of positive numbers{tail}",
                  [(), [], (0.0,), (-1.0,), (float("nan"),), (float("inf"),), "abc", 3.0,
                   (True,)])


def method_list(allowed: tuple) -> Custom:
    """A non-empty tuple (or list) of method names from ``allowed``."""
    def check(name: str, value: object) -> object:
        if not isinstance(value, (tuple, list)) or not value:
            raise ValueError(f"{name} must be a non-empty tuple from {allowed}, got "
                             f"{shown(value)}")
        for m in value:
            check_choice(name, m, allowed)
        return value
    return Custom(check, f"a non-empty tuple from {allowed}", [(), "lora", ("nope",), None, 3])
