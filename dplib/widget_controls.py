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

from ._common_params import FLAG, TEXT_OR_NONE
from ._constraints import Custom, constrained, unconstrained
from ._validate import shown

__all__ = ["Control", "slider", "int_slider", "log_slider", "dropdown", "format_value",
           "CAPTION_CLASS", "CONTROLS_CLASS", "CONTROLS"]

#: HTML class of the caption under every widget's figure (the site checks look for it).
CAPTION_CLASS = "dpbook-widget-caption"
CONTROLS_CLASS = "dpbook-widget-controls"


@unconstrained("record built by slider/int_slider/log_slider/dropdown from their checked values")
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

    @unconstrained("the check of a value against this control's own range (it raises "
                   "ValueError naming the value and the range)")
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

    @unconstrained("called by Control.check and the panels with a value the control allowed")
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


_BAD_REAL = [float("nan"), float("inf"), -float("inf"), "0.5", None, True, [0.5]]
#: A slider's end or default value: a finite real, returned as given (an int stays an int).
_REAL = Custom(lambda name, value: _finite(name, value), "a finite number", _BAD_REAL)
#: An integer slider's end or default value: an integer, returned as given.
_WHOLE = Custom(lambda name, value: _finite(name, value, integer=True), "an integer",
                _BAD_REAL + [2.5, 1.0])


def _step(name: str, value: Any, integer: bool = False) -> Any:
    if value is not None and _finite(name, value, integer=integer) <= 0:
        raise ValueError(f"{name} must be > 0, got {shown(value)}")
    return value


def _log_end(name: str, value: Any) -> Any:
    if _finite(name, value) <= 0:
        raise ValueError(f"a log slider needs {name} > 0, got {name}={shown(value)}")
    return value


def _options(name: str, value: Any) -> Any:
    if not isinstance(value, (list, tuple)) or len(value) == 0:
        raise ValueError(f"{name} must be a non-empty list or tuple, got {shown(value)}")
    return value


def _controls(name: str, value: Any) -> Any:
    if (not isinstance(value, dict) or not value
            or not all(isinstance(c, Control) for c in value.values())):
        raise ValueError(f"{name} must be a non-empty dict of Control, got {shown(value)}")
    return value


#: A panel's controls: a non-empty dict name → :class:`Control` (returned as given).
CONTROLS = Custom(_controls, "a non-empty dict of Control",
                  [None, {}, {"x": 3}, 3, "x", [1]])


def _range(kind: str, lo: float, hi: float, value: float, label: str | None, step=None,
           integer: bool = False) -> Control:
    if not lo < hi or not lo <= value <= hi:
        raise ValueError(f"slider needs min < max and min <= value <= max, got min={shown(lo)}, "
                         f"max={shown(hi)}, value={shown(value)}")
    return Control(kind=kind, value=value, min=lo, max=hi, step=step, label=label,
                   integer=integer)


@constrained(min=_REAL, max=_REAL, value=_REAL,
             step=Custom(_step, "None or a finite number > 0", [0.0, -0.1, float("nan"), "x",
                                                                 float("inf"), True]),
             label=TEXT_OR_NONE)
def slider(min: float, max: float, value: float, *, step: float | None = None,
           label: str | None = None) -> Control:
    """A float slider on a linear scale (``step`` defaults to (max − min)/100)."""
    if step is None:
        step = (max - min) / 100 if max > min else None
    return _range("float", min, max, value, label, step)


@constrained(min=_WHOLE, max=_WHOLE, value=_WHOLE,
             step=Custom(lambda name, value: _step(name, _finite(name, value, integer=True),
                                                   integer=True), "an integer > 0",
                         [0, -1, 0.5, None, True, "1"]),
             label=TEXT_OR_NONE)
def int_slider(min: int, max: int, value: int, *, step: int = 1,
               label: str | None = None) -> Control:
    """An integer slider."""
    return _range("int", min, max, value, label, step)


@constrained(min=Custom(_log_end, "a finite number > 0", _BAD_REAL + [0.0, -1.0]),
             max=_REAL, value=_REAL, integer=FLAG, label=TEXT_OR_NONE)
def log_slider(min: float, max: float, value: float, *, integer: bool = False,
               label: str | None = None) -> Control:
    """A slider on a log₁₀ scale (for ε, δ, n, noise scales spanning decades).

    ``integer=True`` rounds the value for counts such as n.
    """
    return _range("log", min, max, value, label, integer=integer)


@constrained(options=Custom(_options, "a non-empty list or tuple", [[], None, "ab", 3, {}]),
             label=TEXT_OR_NONE)
def dropdown(options: list, value: Any, *, label: str | None = None) -> Control:
    """A choice among ``options`` (a non-empty list or tuple); ``value`` must be one of them."""
    if value not in options:
        raise ValueError(f"dropdown value must be one of {list(options)}, got {shown(value)}")
    return Control(kind="choice", value=value, options=tuple(options), label=label)


# --- readouts ------------------------------------------------------------------------------------

def _sci(value: float) -> str:
    """Compact scientific notation: 1e-5, 2.5e-7, 3e9 (three significant digits at most)."""
    mantissa, exponent = f"{value:.2e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


@unconstrained("formats any value for display (numbers with separators, dropdown options as "
               "their text): there is no bad input")
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
