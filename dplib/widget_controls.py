"""The controls of an interactive figure, and how their values are written for a reader.

A chapter declares each control of a panel (:mod:`dplib.widgets`) with :func:`slider`,
:func:`int_slider`, :func:`log_slider` or :func:`dropdown`: a :class:`Control` records its kind,
range and default. The Jupyter sliders (:mod:`dplib.widgets`) and the website's precomputed
frames (:mod:`dplib.widget_frames`) are both built from these records, and both write values with
:func:`format_value` (n = 10,000, δ = 1e-5). They live apart from both so that neither imports
the other's module.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any

from ._validate import shown

__all__ = ["Control", "slider", "int_slider", "log_slider", "dropdown", "format_value",
           "CAPTION_CLASS", "CONTROLS_CLASS"]

#: HTML class of the caption under every widget's figure (the site checks look for it).
CAPTION_CLASS = "dpbook-widget-caption"
CONTROLS_CLASS = "dpbook-widget-controls"


@dataclass(frozen=True)
class Control:
    """A declared control: its kind, range and default value."""
    kind: str                       # "float", "int", "log" or "choice"
    value: Any
    min: float | None = None
    max: float | None = None
    step: float | None = None
    options: tuple = field(default_factory=tuple)
    label: str | None = None
    integer: bool = False           # a log slider whose values are rounded to integers (n, k)

    def check(self, name: str, value: Any) -> Any:
        """Refuse a value this control could not produce."""
        if self.kind == "choice":
            if value not in self.options:
                raise ValueError(f"{name} must be one of {list(self.options)}, got {shown(value)}")
            return value
        if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
            raise ValueError(f"{name} must be a number in [{self.min}, {self.max}], got "
                             f"{shown(value)}")
        if not self.min <= value <= self.max:
            raise ValueError(f"{name} must be in [{self.min}, {self.max}], got {shown(value)}")
        return self.cast(value)

    def cast(self, value: Any) -> Any:
        """The value as the plotting function receives it (integers for int controls)."""
        return int(round(value)) if self.kind == "int" or self.integer else value


def _finite(name: str, value: Any, *, integer: bool = False) -> float:
    """A finite real (an int where ``integer``) for a slider end, value or step."""
    ok = isinstance(value, Integral) if integer else isinstance(value, Real)
    if not ok or isinstance(value, bool) or not math.isfinite(value):
        kind = "an integer" if integer else "a finite number"
        raise ValueError(f"{name} must be {kind}, got {shown(value)}")
    return value


def _range(kind: str, lo: float, hi: float, value: float, label: str | None, step=None,
           integer: bool = False) -> Control:
    whole = kind == "int"
    for name, v in (("min", lo), ("max", hi), ("value", value)):
        _finite(name, v, integer=whole)
    if step is not None and (_finite("step", step, integer=whole) <= 0):
        raise ValueError(f"step must be > 0, got {shown(step)}")
    if not isinstance(integer, bool):
        raise ValueError(f"integer must be True or False, got {shown(integer)}")
    if label is not None and not isinstance(label, str):
        raise ValueError(f"label must be a string or None, got {shown(label)}")
    if not lo < hi or not lo <= value <= hi:
        raise ValueError(f"slider needs min < max and min <= value <= max, got min={shown(lo)}, "
                         f"max={shown(hi)}, value={shown(value)}")
    if kind == "log" and lo <= 0:
        raise ValueError(f"a log slider needs min > 0, got min={shown(lo)}")
    return Control(kind=kind, value=value, min=lo, max=hi, step=step, label=label,
                   integer=integer)


def slider(min: float, max: float, value: float, *, step: float | None = None,
           label: str | None = None) -> Control:
    """A float slider on a linear scale (``step`` defaults to (max − min)/100)."""
    if step is None and all(isinstance(v, Real) and not isinstance(v, bool)
                            and math.isfinite(v) for v in (min, max)):
        step = (max - min) / 100 if max > min else None
    return _range("float", min, max, value, label, step)


def int_slider(min: int, max: int, value: int, *, step: int = 1,
               label: str | None = None) -> Control:
    """An integer slider."""
    _finite("step", step, integer=True)
    return _range("int", min, max, value, label, step)


def log_slider(min: float, max: float, value: float, *, integer: bool = False,
               label: str | None = None) -> Control:
    """A slider on a log₁₀ scale (for ε, δ, n, noise scales spanning decades).

    ``integer=True`` rounds the value for counts such as n.
    """
    return _range("log", min, max, value, label, integer=integer)


def dropdown(options: list, value: Any, *, label: str | None = None) -> Control:
    """A choice among ``options`` (a non-empty list or tuple)."""
    if not isinstance(options, (list, tuple)) or len(options) == 0:
        raise ValueError(f"options must be a non-empty list or tuple, got {shown(options)}")
    if value not in options:
        raise ValueError(f"dropdown value must be one of {list(options)}, got {shown(value)}")
    return Control(kind="choice", value=value, options=tuple(options), label=label)


# --- readouts ------------------------------------------------------------------------------------

def _sci(value: float) -> str:
    """Compact scientific notation: 1e-5, 2.5e-7, 3e9 (three significant digits at most)."""
    mantissa, exponent = f"{value:.2e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def format_value(value: Any) -> str:
    """A control value as a reader writes it: ``10,000``, ``0.5``, ``1.1``, ``1e-5``, ``3.2e-7``.

    Integers get thousands separators; floats three significant digits, in plain notation from
    0.001 up to 10⁹ (with separators from 1,000) and as compact scientific notation outside it;
    anything else (a dropdown option) its ``str``.
    """
    if isinstance(value, bool) or not isinstance(value, (Integral, Real)):
        return str(value)
    if isinstance(value, Integral):
        return f"{int(value):,}"
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    rounded = float(f"{value:.3g}")
    if not 1e-3 <= abs(rounded) < 1e9:
        return _sci(value)
    if abs(rounded) >= 1000:
        return f"{rounded:,.0f}"
    return f"{rounded:.3g}"
