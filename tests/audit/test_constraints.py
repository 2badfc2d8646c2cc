"""Parameters are declared next to their function (:mod:`dplib._constraints`).

Every public function, class and public method of dplib that takes parameters has its
constraints declared (``@constrained``), or says next to itself why it has none
(``@unconstrained(reason)``): the checks and the bad-input sweep's values come from those
declarations, so a new function fails here until it declares (``-s`` prints the counts).
The decorator's own contract is tested here too: messages name parameter, value and range.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import sys
import timeit

import numpy as np
import pytest

from dplib._constraints import (Integer, Interval, Options, RealArray, constrained,
                                constraints_of, unconstrained, unconstrained_reason)
from dplib.testing._sweep import declared_bad_values, public_callables

#: Every package and top-level module of dplib.
PACKAGES = tuple(sorted({".".join(n.split(".")[:2]) for n in public_callables()}))


def _takes_parameters(fn) -> bool:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    return any(p.name not in ("self", "cls") for p in params)


def _in(name: str, packages) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _callables(packages) -> dict[str, object]:
    """Public functions, classes and the public methods (with parameters) of those classes."""
    out = {}
    for name, obj in public_callables().items():
        if not _in(name, packages):
            continue
        if inspect.isfunction(obj):     # public_callables unwraps: take the declared function
            obj = vars(sys.modules[obj.__module__]).get(obj.__name__, obj)
        out[name] = obj
        if inspect.isclass(obj):         # its public methods, inherited ones included
            for klass in reversed(obj.__mro__):
                if not klass.__module__.startswith("dplib."):
                    continue
                for attr, member in vars(klass).items():
                    fn = (member.__func__ if isinstance(member, (classmethod, staticmethod))
                          else member)
                    if (not attr.startswith("_") and inspect.isfunction(fn)
                            and _takes_parameters(fn)):
                        out[f"{name}.{attr}"] = fn
    return out


def undeclared(found: dict[str, object]) -> list[str]:
    """The callables with parameters, no declaration and no stated reason for none."""
    missing = []
    for name, obj in found.items():
        if (_takes_parameters(obj) and not constraints_of(obj)
                and not unconstrained_reason(obj)):
            missing.append(name)
    return sorted(missing)


@pytest.fixture(scope="module")
def found() -> dict[str, object]:
    return _callables(PACKAGES)


def test_every_public_callable_declares_its_parameters_or_why_not(found):
    missing = undeclared(found)
    assert not missing, ("public callables with no @constrained "
                         f"declaration and no @unconstrained(reason): {missing}")
    declared = [n for n in found if constraints_of(found[n])]
    reasons = [n for n in found if unconstrained_reason(found[n])]
    print(f"\n{len(declared)} declared callables in {len(PACKAGES)} packages; "
          f"{len(reasons)} with a reason for none")


def test_the_completeness_check_can_fail():
    def plain(epsilon: float) -> float:
        return epsilon

    @constrained(epsilon=Interval(0.0, math.inf))
    def declared_fn(epsilon: float) -> float:
        return epsilon

    @unconstrained("called only by declared_fn with its checked value")
    def excused(epsilon: float) -> float:
        return epsilon

    assert undeclared({"m.plain": plain, "m.declared_fn": declared_fn,
                       "m.excused": excused}) == ["m.plain"]


# ---- the decorator's contract ---------------------------------------------------------------

@constrained(epsilon=Interval(0.0, math.inf), delta=Interval(0.0, 1.0), steps=Integer(min=1),
             method=Options("a", "b"))
def _demo(epsilon: float, delta: float = 1e-5, *, steps: int = 1, method: str = "a") -> tuple:
    return epsilon, delta, steps, method


@pytest.mark.parametrize("call, pattern", [
    (lambda: _demo(-1.0), r"^epsilon must be in \(0, inf\), got -1\.0$"),
    (lambda: _demo(epsilon=float("nan")), r"^epsilon must be in \(0, inf\), got nan$"),
    (lambda: _demo(1.0, 1.0), r"^delta must be in \(0, 1\), got 1\.0$"),
    (lambda: _demo(1.0, delta="0.1"), r"^delta must be a real number in \(0, 1\), got '0\.1'$"),
    (lambda: _demo(1.0, steps=0), r"^steps must be an integer >= 1, got 0$"),
    (lambda: _demo(1.0, steps=True), r"^steps must be an integer >= 1, got True$"),
    (lambda: _demo(1.0, method="c"), r"^method must be one of \['a', 'b'\], got 'c'$"),
    (lambda: _demo(np.float64(-2.0)), r"^epsilon must be in \(0, inf\), got -2\.0$"),
])
def test_errors_name_parameter_value_and_range(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


def test_checked_values_reach_the_function_and_the_signature_is_kept():
    assert _demo(np.float64(2.0), np.float32(0.5), steps=np.int64(3)) == (2.0, 0.5, 3, "a")
    assert type(_demo(np.float64(2.0))[0]) is float
    assert str(inspect.signature(_demo)) == str(inspect.signature(_demo.__wrapped__))
    assert _demo.__name__ == "_demo" and set(_demo.__dplib_constraints__) == {
        "epsilon", "delta", "steps", "method"}
    with pytest.raises(TypeError):            # the mapping is read-only
        _demo.__dplib_constraints__["epsilon"] = None
    with pytest.raises(TypeError):            # a missing argument is still Python's TypeError
        _demo()


def test_declarations_are_checked_when_declared():
    with pytest.raises(ValueError, match="delta"):          # refuses its own default
        @constrained(delta=Interval(0.0, 1.0))
        def f(delta: float = 0.0) -> float:
            return delta
    with pytest.raises(TypeError, match="no parameter"):
        @constrained(eps=Interval(0.0, 1.0))
        def g(epsilon: float) -> float:
            return epsilon
    with pytest.raises(TypeError, match="under @dataclass"):
        @constrained(x=Interval())
        @dataclasses.dataclass
        class H:
            x: float


def test_dataclass_fields_are_checked_and_subclasses_inherit_the_check():
    @dataclasses.dataclass(frozen=True)
    @constrained(rate=Interval(0.0, 1.0, closed="right"))
    class Sampled:
        rate: float

    @dataclasses.dataclass(frozen=True)
    class Poisson(Sampled):
        pass

    assert Poisson(np.float64(1.0)).rate == 1.0 and type(Poisson(1).rate) is float
    for cls in (Sampled, Poisson):
        with pytest.raises(ValueError, match=r"^rate must be in \(0, 1\], got 0\.0$"):
            cls(0.0)


def test_without_a_declaration_the_bad_value_goes_through():
    """Control: the refusals above come from the declaration, not from Python."""
    assert _demo.__wrapped__(-1.0) == (-1.0, 1e-5, 1, "a")


@pytest.mark.parametrize("constraint", [
    Interval(0.0, math.inf), Interval(0.0, 1.0, closed="right"), Interval(1e-100, 1e100,
                                                                          closed="both"),
    Integer(min=0), Integer(min=1), Options("x", "y"),
    RealArray(0.0, 1.0, closed="both", max_ndim=1), RealArray(0.0, math.inf, closed="left")])
def test_every_bad_value_of_a_declaration_is_refused(constraint):
    assert len(declared_bad_values(constraint)) >= 5
    for value in declared_bad_values(constraint):
        with pytest.raises(ValueError, match="^p "):
            constraint.check("p", value)


def test_overhead_per_call_is_a_few_microseconds():
    def plain(epsilon, delta=1e-5, *, steps=1, method="a"):
        return epsilon, delta, steps, method

    n = 20000
    base = min(timeit.repeat(lambda: plain(1.0, 1e-5, steps=3), number=n, repeat=5)) / n
    checked = min(timeit.repeat(lambda: _demo(1.0, 1e-5, steps=3), number=n, repeat=5)) / n
    overhead_us = (checked - base) * 1e6
    print(f"\n@constrained overhead: {overhead_us:.2f} µs per call (3 checked arguments)")
    assert overhead_us < 100      # generous: the machine is shared; typical is a few µs
