"""Input checks shared by every public function.

Each check raises ``ValueError`` whose message names the parameter, the value it got and the range
it allows, so a reader who passes ``epsilon=-1`` learns at once what went wrong. Nothing here clips
or coerces a bad value into a good one.
"""
from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np


def shown(value: object) -> str:
    """``value`` as an error message prints it: its repr, with numpy scalars as plain numbers
    (``2.0``, not ``np.float64(2.0)``), also inside lists, tuples and dicts."""
    with np.printoptions(legacy="1.25"):
        return repr(value)


def _is_real(value: object) -> bool:
    return isinstance(value, (Real, np.floating, np.integer)) and not isinstance(value, bool)


def check_real(name: str, value: object, *, low: float = -math.inf, high: float = math.inf,
               low_open: bool = True, high_open: bool = True) -> float:
    """Return ``value`` as a float if it lies in the interval, else raise ``ValueError``.

    ``low_open``/``high_open`` say whether the bounds are excluded. NaN is always refused.
    """
    left = "(" if low_open else "["
    right = ")" if high_open else "]"
    allowed = f"{left}{low:g}, {high:g}{right}"
    if not _is_real(value):
        raise ValueError(f"{name} must be a real number in {allowed}, got {shown(value)}")
    x = float(value)
    too_low = x <= low if low_open else x < low
    too_high = x >= high if high_open else x > high
    if math.isnan(x) or too_low or too_high:
        raise ValueError(f"{name} must be in {allowed}, got {shown(value)}")
    return x


def check_positive(name: str, value: object) -> float:
    """A real number > 0 (e.g. ε, a noise scale, a sensitivity)."""
    return check_real(name, value, low=0.0)


def check_positive_array(name: str, value: object) -> np.ndarray:
    """A scalar or array of finite reals, all > 0 (vectorised ε, σ, …)."""
    return check_real_array(name, value, low=0.0)


def check_probability(name: str, value: object, *, low_open: bool = False,
                      high_open: bool = False) -> float:
    """A probability in [0, 1]; open ends as asked (δ is in (0, 1), q in (0, 1])."""
    return check_real(name, value, low=0.0, high=1.0, low_open=low_open, high_open=high_open)


def check_int(name: str, value: object, *, low: int = 1) -> int:
    """An integer ≥ ``low`` (counts: n, k, number of steps)."""
    if isinstance(value, bool) or not isinstance(value, (Integral, np.integer)):
        raise ValueError(f"{name} must be an integer >= {low}, got {shown(value)}")
    if int(value) < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {shown(value)}")
    return int(value)


def check_bool(name: str, value: object) -> bool:
    """A flag: ``True`` or ``False`` (numpy bools too); 0/1, strings and None are refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {shown(value)}")
    return bool(value)


def check_binary_array(name: str, values: object) -> np.ndarray:
    """A non-empty array of 0/1 (or bool) answers, returned as ``int8``."""
    arr = np.asarray(values)
    if arr.size == 0:
        raise ValueError(f"{name} must be a non-empty array of 0/1 answers, got an empty array")
    if arr.dtype == bool:
        return arr.astype(np.int8)
    if not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must hold only 0 and 1 (or booleans), got dtype {arr.dtype}")
    bad = ~np.isin(arr, (0, 1))
    if bad.any():
        raise ValueError(f"{name} must hold only 0 and 1 (or booleans), "
                         f"got {shown(arr[bad].flat[0])}")
    return arr.astype(np.int8)


def as_generator(rng: object) -> np.random.Generator:
    """Accept a numpy ``Generator`` or an integer seed; anything else is refused.

    Randomness is always explicit in dplib: ``None`` is refused so that no result in the book
    depends on an unseeded global generator.
    """
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (Integral, np.integer)) and not isinstance(rng, bool) and int(rng) >= 0:
        return np.random.default_rng(int(rng))
    raise ValueError(
        f"rng must be a numpy Generator or a non-negative integer seed, got {shown(rng)}; "
        "use rng=np.random.default_rng(seed)")


def check_real_array(name: str, value: object, *, low: float = -math.inf, high: float = math.inf,
                     low_open: bool = True, high_open: bool = True) -> np.ndarray:
    """A scalar or array of reals, every entry in the interval (NaN always refused); as floats.

    The vectorised twin of :func:`check_real`: the message names the parameter, the first bad
    value and the allowed interval.
    """
    left = "(" if low_open else "["
    right = ")" if high_open else "]"
    allowed = f"{left}{low:g}, {high:g}{right}"
    arr = np.asarray(value)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"{name} must be real numbers in {allowed}, got {shown(value)}")
    arr = arr.astype(float)
    too_low = arr <= low if low_open else arr < low
    too_high = arr >= high if high_open else arr > high
    bad = np.isnan(arr) | too_low | too_high
    if bad.any():
        raise ValueError(f"{name} must be in {allowed}, got {shown(float(arr[bad].flat[0]))}")
    return arr


def check_finite_array(name: str, value: object) -> np.ndarray:
    """A non-empty scalar or array of finite reals (a query answer to be privatised), as floats.
    A torch tensor is read as its values (detached, on the CPU)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"{name} must be finite real numbers, got {shown(value)}")
    arr = arr.astype(float)
    if arr.size == 0:
        raise ValueError(f"{name} must be non-empty, got an empty array")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(f"{name} must be finite real numbers in (-inf, inf), "
                         f"got {shown(float(arr[bad].flat[0]))}")
    return arr


def check_choice(name: str, value: object, options: tuple) -> object:
    """One of a fixed set of options (a method name, a noise family)."""
    if value not in options:
        raise ValueError(f"{name} must be one of {list(options)}, got {shown(value)}")
    return value


def check_step_counts(name: str, value: object) -> np.ndarray:
    """A non-negative integer or integer array (numbers of steps), as an int64 array."""
    arr = np.asarray(value)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"{name} must be an integer (or integer array) >= 0, "
                         f"got {shown(value)}")
    if (arr < 0).any():
        raise ValueError(f"{name} must be an integer >= 0, got {shown(int(arr[arr < 0].flat[0]))}")
    return arr.astype(np.int64)
