"""Parameter constraints declared next to the function they constrain.

Why. A public function used to check its arguments in its body (``eps = check_positive(...)``)
while the bad-input sweep kept a second description of the same parameters in a table elsewhere
(``dplib/testing/bad_inputs_*.py``). The two drifted: a new parameter was checked but not swept,
or swept with the wrong family. Here the allowed values of a parameter are stated once, beside
the function, and both the check and the sweep's bad values come from that statement (the idea
of scikit-learn's ``validate_params``/``Interval``/``StrOptions``; this is dplib's own, with
dplib's error messages)::

    @constrained(epsilon=Interval(0, inf, closed="left"), delta=DELTA, k=Integer(min=1))
    def group_privacy(epsilon: float, delta: float, k: int) -> tuple[float, float]:
        ...   # epsilon, delta arrive as floats and k as an int, already checked

What the decorator does. On every call it checks each declared argument that the caller passed
(defaults are checked once, when the function is decorated: a declaration that refuses its own
default fails at import) and hands the function the checked value (a float, an int, an array),
as ``x = check_real(...)`` did. Errors are the ones of :mod:`dplib._validate`: a ``ValueError``
naming the parameter, the value (:func:`~dplib._validate.shown`) and the allowed range. (The
project's contract is ``ValueError`` for every refused value, wrong types included, so that one
``except ValueError`` catches them; the decorator keeps it.) The signature is kept
(:func:`functools.wraps`, ``inspect.signature`` sees the original), the parameter positions are
worked out once, and the declarations are exposed as ``fn.__dplib_constraints__`` (a read-only
mapping name → :class:`Constraint`). A frozen dataclass is declared by decorating the class:
``@constrained`` goes under ``@dataclass`` and gives the class a ``__post_init__`` that checks
the fields (and stores the checked values) before the class's own; subclasses inherit it.

What stays in the body: relations between parameters (``lo <= hi``, ``δ < 2Tq``, arrays of
matching length) and checks that need the computation (a grid too coarse for the tail mass).
A declaration states what one parameter may be on its own.

The sweep. Each constraint lists values it must refuse (:meth:`Constraint.bad_values`: the
boundaries and just past them, NaN, ±inf where not allowed, wrong types) and names the sweep's
family of bad values it stands for (:attr:`Constraint.family`, a key of
``dplib.testing._sweep.BAD``); the sweep tries both for every declared parameter, so a newly
declared function is swept without a table entry of parameter kinds. A table entry still gives
the valid call, and the hostile values a declaration cannot state (a value valid alone but not
with the others).

Where it stands. Every package of dplib declares this way: 503 public callables declare their
parameters and 250 say next to themselves why they have none (:func:`unconstrained`: records
built from checked values, hooks called with checked values, per-step work that must not pay a
check per call). The sweep went from 8,620 bad-input cases over 413 entries, from hand-written
tables, to 15,766 over 431 from the declarations; every earlier case is among them and still
refused (the values a declaration cannot state — δ too large for T·q, arrays of mismatched
shapes — stay as the entries' extras). The cost per call is a few microseconds (about 2-7 µs
for three checked arguments, measured; the body checks it replaced took longer, since they
formatted the allowed range before testing the value). tests/audit/test_constraints.py fails on
a public callable that does neither.

How to add a function: decorate it with ``@constrained(param=Constraint, ...)`` for each
parameter a caller can get wrong (reuse the shared declarations of the topic, e.g.
``dplib.accounting._params``), delete the body checks the declaration now does, and give the
sweep a valid call (a ``Spec`` with no ``params`` unless there are hostile extras). A callable
with nothing a caller can get wrong says why: ``@unconstrained("a record built by X from checked
values")``.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math
from types import MappingProxyType
from typing import Any, Callable

import numpy as np

from ._validate import check_bool, check_choice, check_int, check_real, shown

__all__ = ["Constraint", "Interval", "Integer", "Options", "Flag", "RealArray", "InstanceOf",
           "IsCallable", "Custom", "constrained", "constraints_of", "same_as", "unconstrained",
           "unconstrained_reason"]

INF, NAN = math.inf, math.nan


class Constraint:
    """What one parameter may be. Subclasses implement :meth:`check` (return the value as the
    function uses it, or raise ``ValueError``), :meth:`describe` and :meth:`bad_values`."""

    #: the sweep's family of bad values (a key of ``dplib.testing._sweep.BAD``) or None
    family: str | None = None

    def check(self, name: str, value: object) -> Any:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def bad_values(self) -> list:
        """Values every function with this constraint must refuse."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()})"


#: Types whose values are checked without building a message first (bool is not among them).
_FAST_INTS = frozenset({int, np.int64, np.int32})
_FAST_REALS = frozenset({float, np.float64, np.float32}) | _FAST_INTS

_CLOSED = {"neither": (True, True), "left": (False, True), "right": (True, False),
           "both": (False, False)}

#: (low, high, closed) of an interval → the sweep's family it stands for.
_INTERVAL_FAMILIES = {(0.0, INF, "neither"): "pos", (0.0, INF, "left"): "nonneg",
                      (0.0, 1.0, "neither"): "delta", (0.0, 1.0, "left"): "delta0",
                      (0.0, 1.0, "right"): "rate", (0.0, 1.0, "both"): "prob",
                      (-INF, INF, "neither"): "real"}


def _below(x: float) -> list[float]:
    """Values below ``x``: far, a little (1e-9 relative) and the next double."""
    return [x - max(1.0, abs(x)), x - 1e-9 * max(1.0, abs(x)), float(np.nextafter(x, -INF))]


def _above(x: float) -> list[float]:
    return [x + max(1.0, abs(x)), x + 1e-9 * max(1.0, abs(x)), float(np.nextafter(x, INF))]


class Interval(Constraint):
    """A real number in an interval; ``closed`` is "neither", "left", "right" or "both" (which
    ends belong to it). NaN and booleans are always refused; returns a float."""

    def __init__(self, low: float = -INF, high: float = INF, *, closed: str = "neither",
                 family: str | None = None) -> None:
        if closed not in _CLOSED or not low < high:
            raise ValueError(f"Interval({low!r}, {high!r}, closed={closed!r}) is not an interval")
        self.low, self.high, self.closed = float(low), float(high), closed
        self.low_open, self.high_open = _CLOSED[closed]
        self.family = family or _INTERVAL_FAMILIES.get((self.low, self.high, closed))

    def check(self, name: str, value: object) -> float:
        if type(value) in _FAST_REALS:          # the common case, without formatting a message
            x = float(value)
            if ((self.low < x if self.low_open else self.low <= x)
                    and (x < self.high if self.high_open else x <= self.high)):
                return x
        return check_real(name, value, low=self.low, high=self.high, low_open=self.low_open,
                          high_open=self.high_open)

    def describe(self) -> str:
        return (f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}"
                f"{')' if self.high_open else ']'}")

    def example(self) -> float:
        """A value inside the interval."""
        if math.isfinite(self.low) and math.isfinite(self.high):
            return (self.low + self.high) / 2
        if math.isfinite(self.low):
            return self.low + max(1.0, abs(self.low))
        return self.high - max(1.0, abs(self.high)) if math.isfinite(self.high) else 0.0

    def bad_values(self) -> list:
        ex = self.example()
        out: list = [NAN, None, str(ex), True, [ex, ex]]
        if self.low > -INF:
            out += _below(self.low) + ([self.low] if self.low_open else []) + [-INF]
        elif self.low_open:
            out.append(-INF)
        if self.high < INF:
            out += _above(self.high) + ([self.high] if self.high_open else []) + [INF]
        elif self.high_open:
            out.append(INF)
        return out


class Integer(Constraint):
    """An integer ≥ ``min`` (numpy integers too; booleans and integral floats refused);
    returns an int."""

    def __init__(self, *, min: int = 1, family: str | None = None) -> None:  # noqa: A002
        self.min = int(min)
        self.family = family or {1: "int1", 0: "int0"}.get(self.min)

    def check(self, name: str, value: object) -> int:
        if type(value) in _FAST_INTS and value >= self.min:        # the common case
            return int(value)
        return check_int(name, value, low=self.min)

    def describe(self) -> str:
        return f"integer >= {self.min}"

    def bad_values(self) -> list:
        return [self.min - 1, self.min - 3, self.min + 0.5, float(self.min), NAN,
                str(self.min + 2), None, True, [self.min, self.min]]


class Options(Constraint):
    """One of a fixed set of values (a method name, a relation)."""

    family = "choice"

    def __init__(self, *options: object) -> None:
        if not options:
            raise ValueError("Options needs at least one option")
        self.options = tuple(options)

    def check(self, name: str, value: object) -> object:
        try:
            return check_choice(name, value, self.options)
        except TypeError:       # an unhashable/uncomparable value (numpy arrays)
            raise ValueError(f"{name} must be one of {list(self.options)}, "
                             f"got {shown(value)}") from None

    def describe(self) -> str:
        return f"one of {list(self.options)}"

    def bad_values(self) -> list:
        first = self.options[0]
        return ["no-such-option", None, 3, list(self.options[:1]),
                first.upper() if isinstance(first, str) and first.upper() != first else 3.5]


class Flag(Constraint):
    """``True`` or ``False`` (numpy booleans too); returns a bool."""

    family = "bool"

    def check(self, name: str, value: object) -> bool:
        return check_bool(name, value)

    def describe(self) -> str:
        return "True or False"

    def bad_values(self) -> list:
        return ["yes", None, 0, 1, 2, NAN]


class RealArray(Constraint):
    """A scalar or array of reals, each in an interval (as :class:`Interval`); ``nonempty``
    refuses an empty array, ``max_ndim`` arrays of more dimensions. Returns a float array."""

    def __init__(self, low: float = -INF, high: float = INF, *, closed: str = "neither",
                 nonempty: bool = True, max_ndim: int | None = None,
                 family: str | None = None) -> None:
        self.interval = Interval(low, high, closed=closed)
        self.nonempty, self.max_ndim = nonempty, max_ndim
        key = (self.interval.low, self.interval.high, closed)
        self.family = family or {(0.0, INF, "left"): "nonneg_array",
                                 (0.0, 1.0, "both"): "prob_array",
                                 (0.0, INF, "neither"): "pos_vec"}.get(key)

    def describe(self) -> str:
        shape = "a number or a non-empty array" if self.nonempty else "a number or an array"
        if self.max_ndim == 1:
            shape = shape.replace("array", "1-D array")
        return f"{shape} of reals in {self.interval.describe()}"

    def check(self, name: str, value: object) -> np.ndarray:
        iv = self.interval
        try:
            arr = np.asarray(value)
        except ValueError:                  # ragged nested lists
            arr = np.asarray(None)
        if (arr.dtype == bool or not np.issubdtype(arr.dtype, np.number)
                or np.iscomplexobj(arr) or (self.nonempty and arr.size == 0)
                or (self.max_ndim is not None and arr.ndim > self.max_ndim)):
            raise ValueError(f"{name} must be {self.describe()}, got {shown(value)}")
        arr = arr.astype(float)
        too_low = arr <= iv.low if iv.low_open else arr < iv.low
        too_high = arr >= iv.high if iv.high_open else arr > iv.high
        bad = np.isnan(arr) | too_low | too_high
        if bad.any():
            raise ValueError(f"{name} must be in {iv.describe()}, "
                             f"got {shown(float(arr[bad].flat[0]))}")
        return arr

    def bad_values(self) -> list:
        iv = self.interval
        ex = iv.example()
        out: list = [[NAN], "abc", None, [ex, NAN], [True, False]]
        if iv.low > -INF:
            out += [[b] for b in _below(iv.low)] + ([[iv.low]] if iv.low_open else [])
        if iv.high < INF:
            out += [[b] for b in _above(iv.high)] + ([[iv.high]] if iv.high_open else [])
        if iv.high_open:
            out.append([ex, INF])
        if self.nonempty:
            out.append([])
        if self.max_ndim is not None:
            out.append(np.full((2,) * (self.max_ndim + 1), ex))
        return out


class InstanceOf(Constraint):
    """An instance of ``cls``; ``what`` says it in words ("a DpEvent (e.g. ...)")."""

    def __init__(self, cls: type, what: str, *, bad: tuple = (None, 1.0, "x")) -> None:
        self.cls, self.what, self.bad = cls, what, list(bad)

    def check(self, name: str, value: object) -> object:
        if not isinstance(value, self.cls):
            raise ValueError(f"{name} must be {self.what}, got {shown(value)}")
        return value

    def describe(self) -> str:
        return self.what

    def bad_values(self) -> list:
        return list(self.bad)


class IsCallable(Constraint):
    """A callable; ``what`` says which ("a function from a scale to a DpEvent")."""

    def __init__(self, what: str = "a function") -> None:
        self.what = what

    def check(self, name: str, value: object) -> object:
        if not callable(value):
            raise ValueError(f"{name} must be {self.what}, got {shown(value)}")
        return value

    def describe(self) -> str:
        return self.what

    def bad_values(self) -> list:
        return [None, 1.0, "f"]


class Custom(Constraint):
    """A checker written as a function ``check(name, value) -> value`` (for a shape no other
    constraint states, such as Rényi orders), with its description and bad values."""

    def __init__(self, check: Callable[[str, object], Any], describe: str, bad: list,
                 family: str | None = None, *, dynamic: bool = False) -> None:
        self._check, self._describe, self._bad, self.family = check, describe, list(bad), family
        #: the allowed set changes at run time (a registry): defaults are not checked at import
        self.dynamic = dynamic

    def check(self, name: str, value: object) -> Any:
        return self._check(name, value)

    def describe(self) -> str:
        return self._describe

    def bad_values(self) -> list:
        return list(self._bad)


# ---- the decorator ---------------------------------------------------------------------------

def _plan(sig: inspect.Signature, constraints: dict[str, Constraint], where: str
          ) -> tuple[tuple[str, int | None, Callable], ...]:
    """(name, position or None, check) per declared parameter; defaults checked here, once."""
    params = list(sig.parameters.values())
    plan = []
    for name, c in constraints.items():
        if not isinstance(c, Constraint):
            raise TypeError(f"{where}: the declaration of {name!r} is not a Constraint: {c!r}")
        p = sig.parameters.get(name)
        if p is None or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"{where} has no parameter {name!r} to constrain")
        if p.default is not p.empty and not getattr(c, "dynamic", False):
            c.check(name, p.default)     # a declaration must accept its own default
        pos = params.index(p) if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) else None
        plan.append((name, pos, c.check))
    return tuple(plan)


def _constrain_function(fn: Callable, constraints: dict[str, Constraint]) -> Callable:
    plan = _plan(inspect.signature(fn), constraints, fn.__qualname__)

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if args:
            args = list(args)
            n = len(args)
            for name, pos, check in plan:
                if pos is not None and pos < n:
                    args[pos] = check(name, args[pos])
                elif name in kwargs:
                    kwargs[name] = check(name, kwargs[name])
        else:
            for name, _, check in plan:
                if name in kwargs:
                    kwargs[name] = check(name, kwargs[name])
        return fn(*args, **kwargs)

    checked.__dplib_constraints__ = MappingProxyType(dict(constraints))
    return checked


def _constrain_dataclass(cls: type, constraints: dict[str, Constraint]) -> type:
    """Give the class (about to become a dataclass) a ``__post_init__`` that checks the fields
    and stores the checked values, then runs the class's own ``__post_init__``."""
    fields: dict = {}
    for klass in reversed(cls.__mro__):
        fields.update(vars(klass).get("__annotations__", {}))
    for name, c in constraints.items():
        if name not in fields or not isinstance(c, Constraint):
            raise TypeError(f"{cls.__qualname__}: cannot constrain {name!r} with {c!r}")
        default = getattr(cls, name, dataclasses.MISSING)
        if default is not dataclasses.MISSING:
            c.check(name, default)
    own = getattr(cls, "__post_init__", None)
    items = tuple((name, c.check) for name, c in constraints.items())

    def __post_init__(self: Any) -> None:
        for name, check in items:
            object.__setattr__(self, name, check(name, getattr(self, name)))
        if own is not None:
            own(self)

    cls.__post_init__ = __post_init__
    cls.__dplib_constraints__ = MappingProxyType(dict(constraints))
    return cls


def constrained(**constraints: Constraint) -> Callable:
    """Declare the allowed values of parameters: ``@constrained(epsilon=Interval(0, inf),
    k=Integer(min=1))`` on a function or method, or on a class for its dataclass fields (written
    *under* ``@dataclass``, so that the generated ``__init__`` calls the check). See the module
    docstring."""
    def declare(obj: Any) -> Any:
        if isinstance(obj, type):
            if "__dataclass_fields__" in vars(obj):
                raise TypeError(f"{obj.__qualname__}: write @constrained under @dataclass")
            return _constrain_dataclass(obj, constraints)
        return _constrain_function(obj, constraints)
    return declare


def constraints_of(obj: Any) -> dict[str, Constraint]:
    """The declared constraints of a function, method or class (its ``__init__``'s or, for a
    dataclass, its fields'); empty if none are declared."""
    found = getattr(obj, "__dplib_constraints__", None)
    if found is None and isinstance(obj, type):
        found = getattr(obj.__init__, "__dplib_constraints__", None)
    return dict(found or {})


def same_as(obj: Any, *names: str) -> dict[str, Constraint]:
    """The declarations of ``names`` on ``obj``, to declare a wrapper's parameters as those of
    the function it forwards to (one statement, two functions)."""
    declared = constraints_of(obj)
    return {name: declared[name] for name in names}


def unconstrained(reason: str) -> Callable:
    """Say, next to a public callable that takes parameters, why it declares none: ``@unconstrained(
    "a step of PLDAccountant, called with its checked grids")``. Nothing is wrapped (no cost per
    call); tests/audit/test_constraints.py accepts the reason in place of a declaration. For a
    class the reason covers the class only, not its subclasses or its methods."""
    if not isinstance(reason, str) or len(reason.strip()) < 10:
        raise ValueError(f"reason must say why in words (at least 10 characters), got "
                         f"{shown(reason)}")

    def mark(obj: Any) -> Any:
        target = obj.__func__ if isinstance(obj, (classmethod, staticmethod)) else obj
        target.__dplib_unconstrained__ = reason
        return obj
    return mark


def unconstrained_reason(obj: Any) -> str | None:
    """The reason given by :func:`unconstrained` for ``obj`` itself (a class's is not inherited
    by its subclasses), or None."""
    if isinstance(obj, type):
        return vars(obj).get("__dplib_unconstrained__")
    return getattr(obj, "__dplib_unconstrained__", None)
