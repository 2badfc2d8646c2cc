"""Declarations (:mod:`dplib._constraints`) shared by the book's support modules: seeds and
generators, flags, texts, bounded integers, files and matplotlib objects.

The figures, widgets, data loaders, tables and experiment drivers declare their parameters with
these, so that a seed, a label or an integer range means the same check (and the same message)
everywhere. Nothing here imports torch, scikit-learn or pyplot.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from numbers import Integral
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ._constraints import Constraint, Custom, Flag, Integer, Interval
from ._validate import as_generator, check_int, shown

__all__ = ["SEED", "SEED_OR_NONE", "RNG", "FLAG", "FLAG_OR_NONE", "TEXT", "TEXT_OR_NONE",
           "PATH", "PATH_OR_NONE", "DIRECTORY", "MAPPING", "MAPPING_OR_NONE", "FIGURE", "AXES",
           "int_range", "optional", "FRACTION_OPEN", "PROBABILITY", "POSITIVE", "NONNEGATIVE"]

NAN, INF = math.nan, math.inf

#: A seed: an integer ≥ 0.
SEED = Integer(min=0)
#: A probability in [0, 1].
PROBABILITY = Interval(0.0, 1.0, closed="both")
#: A fraction in (0, 1).
FRACTION_OPEN = Interval(0.0, 1.0, closed="neither")
#: A finite real > 0.
POSITIVE = Interval(0.0, INF)
#: A real ≥ 0.
NONNEGATIVE = Interval(0.0, INF, closed="left")
#: True or False.
FLAG = Flag()


def _seed_or_none(name: str, value: object) -> int | None:
    return None if value is None else check_int(name, value, low=0)


#: None or an integer seed ≥ 0 (None: a fresh seed, see :func:`dplib.device.release_seed`).
SEED_OR_NONE = Custom(_seed_or_none, "None or an integer >= 0",
                      [-1, -3, 0.5, 0.0, NAN, "2", True, [0, 0]], family="seed")


def _rng(name: str, value: object) -> np.random.Generator:
    try:
        return as_generator(value)
    except ValueError:
        raise ValueError(f"{name} must be a numpy Generator or a non-negative integer seed, got "
                         f"{shown(value)}; use {name}=np.random.default_rng(seed)") from None


#: A numpy ``Generator`` or an integer seed ≥ 0; the function receives a ``Generator``.
RNG = Custom(_rng, "a numpy Generator or an integer seed >= 0",
             [None, -1, "seed", 1.5, NAN, True, [1, 2]], family="rng")


def _flag_or_none(name: str, value: object) -> bool | None:
    return None if value is None else FLAG.check(name, value)


#: None (a default decided at run time) or True/False.
FLAG_OR_NONE = Custom(_flag_or_none, "None, True or False", ["yes", 0, 1, 2, NAN])


def _text(name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string, got {shown(value)}")
    return value


#: A non-empty string (a command, a name).
TEXT = Custom(_text, "a non-empty string", ["", None, 3, ["a"], b"abc"])


def _text_or_none(name: str, value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} must be a string or None, got {shown(value)}")
    return value


#: A string or None (a label, a caption).
TEXT_OR_NONE = Custom(_text_or_none, "a string or None", [3, ["a"], b"abc", 1.5])


def _path(name: str, value: object) -> str | Path:
    import os
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)) or value == "":
        raise ValueError(f"{name} must be a path (a str or os.PathLike), got {shown(value)}")
    return value


#: A path (str or ``os.PathLike``), returned as given.
PATH = Custom(_path, "a path (str or os.PathLike)", [None, 3, "", ["a"], True])
#: A path or None (a default location).
PATH_OR_NONE = Custom(lambda name, value: None if value is None else _path(name, value),
                      "None or a path (str or os.PathLike)", [3, "", ["a"], True, 1.5])


def _directory(name: str, value: object) -> str | Path:
    _path(name, value)
    if not Path(value).is_dir():
        raise ValueError(f"{name} must be an existing directory, got {shown(str(value))}")
    return value


#: An existing directory (str or ``os.PathLike``), returned as given.
DIRECTORY = Custom(_directory, "an existing directory",
                   [None, 3, "", "/no/such/dplib/directory", True])


def _mapping(name: str, value: object) -> Mapping:
    if not isinstance(value, Mapping):
        raise ValueError(f"{name} must be a dict, got {shown(value)}")
    return value


#: A dict (any Mapping), returned as given.
MAPPING = Custom(_mapping, "a dict", [None, 3, "abc", ["a"]])
#: A dict or None.
MAPPING_OR_NONE = Custom(lambda name, value: None if value is None else _mapping(name, value),
                         "a dict or None", [3, "abc", ["a"], 1.5])


def _figure(name: str, value: object) -> Any:
    from matplotlib.figure import Figure
    if not isinstance(value, Figure):
        raise ValueError(f"{name} must be a matplotlib Figure, got {type(value).__name__}")
    return value


def _axes(name: str, value: object) -> Any:
    from matplotlib.axes import Axes
    if not isinstance(value, Axes):
        raise ValueError(f"{name} must be a matplotlib Axes, got {type(value).__name__}")
    return value


#: A matplotlib ``Figure`` (matplotlib is imported when a value is checked, not here).
FIGURE = Custom(_figure, "a matplotlib Figure", [None, "fig", 3])
#: A matplotlib ``Axes``.
AXES = Custom(_axes, "a matplotlib Axes", [None, "ax", 3])


def int_range(low: int, high: int | None = None, *, what: str | None = None,
              family: str | None = None) -> Constraint:
    """An integer in [``low``, ``high``] (``high`` None: no upper end); booleans and integral
    floats refused; the function receives an ``int``. ``what`` replaces the range in the
    message (e.g. "a positive integer"); ``family`` names the sweep's family of bad values it
    also refuses (default: "int1"/"int0" for ``low`` 1/0)."""
    if high is None:
        return Integer(min=low, family=family)
    allowed = what or f"an integer in [{low}, {high}]"

    def check(name: str, value: object) -> int:
        if (isinstance(value, bool) or not isinstance(value, (Integral, np.integer))
                or not low <= int(value) <= high):
            raise ValueError(f"{name} must be {allowed}, got {shown(value)}")
        return int(value)
    family = family or {1: "int1", 0: "int0"}.get(low)
    return Custom(check, allowed, [low - 1, high + 1, low + 0.5, float(low), NAN, str(low),
                                   None, True, [low, low]], family=family)


def optional(constraint: Any, what: str | None = None) -> Custom:
    """``constraint`` or None (the parameter's default decided at run time)."""
    check: Callable = constraint.check

    def checked(name: str, value: object) -> Any:
        return None if value is None else check(name, value)
    bad = [v for v in constraint.bad_values() if v is not None]
    return Custom(checked, what or f"None or {constraint.describe()}", bad,
                  dynamic=getattr(constraint, "dynamic", False))
