"""The machinery of the bad-input sweep: bad-value families, table entries and cases.

:class:`Spec` is one table entry (a public callable, a valid call, the kind of each parameter to
spoil); :func:`cases` turns entries into concrete calls with one bad value each — for a callable
whose parameters are declared (:func:`dplib._constraints.constrained`) the bad values of each
declared parameter come from its declaration (:func:`declared_bad_values`), and the entry's
``params`` only add the hostile values a declaration cannot state; :func:`check_case`
checks the contract on one (a ``ValueError``/``TypeError`` naming the parameter, never a returned
value); :func:`public_callables` finds what must be swept. The tables (``bad_inputs_*``) import
this module; :mod:`dplib.testing.bad_inputs` gathers them.
"""
from __future__ import annotations

import importlib
import inspect
import re
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

import dplib
from dplib._constraints import Constraint, constraints_of

NAN, INF = float("nan"), float("inf")

# ---- families of bad values -------------------------------------------------------------------
# Each family is bad for *every* sensible meaning of the parameter kind it is named after.
BAD: dict[str, list] = {
    # a real > 0 (ε, σ, a scale, a sensitivity)
    "pos": [0.0, -1.0, NAN, INF, "1.0", None, [1.0, 2.0]],
    # a real > 0 of a vectorised function (an array of valid values is fine there)
    "pos_vec": [0.0, -1.0, NAN, INF, "1.0", None, [1.0, -2.0]],
    # a finite real > 0 where +inf could be argued for: leave inf out
    "pos_noinf": [0.0, -1.0, NAN, "1.0", None],
    # a real ≥ 0 (ε of a composition, δ of a pure mechanism, …)
    "nonneg": [-1e-9, -1.0, NAN, "0.1", None],
    # a finite real (a value to privatise, a threshold)
    "real": [NAN, INF, "x", None],
    # δ ∈ (0, 1)
    "delta": [0.0, 1.0, -0.1, 1.5, NAN, "1e-5", None],
    # δ ∈ [0, 1)
    "delta0": [1.0, -0.1, 1.5, NAN, "0", None],
    # a probability in [0, 1]
    "prob": [-0.1, 1.5, NAN, INF, "0.5", None],
    # a sample rate q ∈ (0, 1]
    "rate": [0.0, -0.1, 1.5, NAN, "0.1", None],
    # a fraction in (0, 1)
    "frac_open": [0.0, 1.0, -0.2, 1.2, NAN, "0.5", None],
    # a fraction in [0, 1)
    "frac0": [1.0, -0.2, 1.2, NAN, "0.5", None],
    # an integer ≥ 1 (n, k, T, a size)
    "int1": [0, -3, 2.5, NAN, "3", None, True],
    # an integer ≥ 0 (a seed)
    "int0": [-1, 2.5, NAN, "3", None, True],
    # a numpy Generator or a seed
    "rng": [None, -1, "seed", 1.5, NAN],
    # a private release's seed: None is valid (fresh OS entropy, dplib.device.release_seed)
    "seed": [-1, 2.5, NAN, "3", True],
    # the generator of a private release: None is valid (fresh OS entropy)
    "release_rng": [-1, "seed", 1.5, NAN],
    # True / False
    "bool": ["yes", None, 2, NAN],
    # a name from a fixed list
    "choice": ["no-such-option", None, 3],
    # a non-empty array of finite reals
    "array": [[], [NAN], [1.0, INF], "abc", None],
    # orders α > 1
    "orders": [[0.5, 2.0], [1.0], [NAN], [], "abc", None],
    # an array of probabilities
    "prob_array": [[-0.1], [1.5], [NAN], "abc", None],
    # an array of reals ≥ 0
    "nonneg_array": [[-1.0], [NAN], "abc", None],
    # 0/1 answers
    "binary": [[0, 2], [], ["a", "b"], [0.5], None],
}


@dataclass
class Spec:
    """A public callable, how to call it validly, and the kind of each parameter to spoil."""
    name: str                         # qualified name, as public_callables() reports it
    target: Callable[[], Callable]    # returns the callable (fresh object for methods)
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    params: dict = field(default_factory=dict)   # param -> family name or explicit list
    # how a bad value must be named in the message, when not the parameter name itself
    names: dict = field(default_factory=dict)
    # take the bad values of the callable's declared parameters from their declarations
    derive: bool = True
    # the declarations, once read (reading them builds the target once)
    _declared: dict | None = field(default=None, init=False, repr=False, compare=False)


def call_spec(spec: Spec, param: str | None = None, value: Any = None) -> Any:
    """Call ``spec``'s callable with its valid arguments, ``param`` (when given) set to
    ``value``: the one call a bad-input case makes."""
    fn = spec.target()
    sig = inspect.signature(fn)
    bound = sig.bind_partial(*spec.args, **spec.kwargs)
    if param is not None:
        if param in sig.parameters and sig.parameters[param].kind == inspect.Parameter.VAR_KEYWORD:
            raise AssertionError("cannot spoil **kwargs")
        bound.arguments[param] = value
    return fn(*bound.args, **bound.kwargs)


@dataclass
class Case:
    spec: Spec
    param: str
    value: Any

    @property
    def id(self) -> str:
        v = self.value
        if isinstance(v, np.ndarray):
            text = f"array{v.shape}"
        elif hasattr(v, "shape") and not isinstance(v, str):
            text = f"{type(v).__name__}{tuple(v.shape)}"
        elif isinstance(v, dict):
            text = "{" + ", ".join(f"{k}: {getattr(x, 'shape', x)!s}" for k, x in v.items()) + "}"
        elif callable(v) and not isinstance(v, type):
            text = getattr(v, "__name__", type(v).__name__)
        else:
            text = repr(v)
        if len(text) > 30:
            text = text[:27] + "..."
        return f"{self.spec.name}[{self.param}={text}]"

    def run(self) -> Any:
        return call_spec(self.spec, self.param, self.value)

    def valid(self) -> Any:
        return call_spec(self.spec, None, None)

    def expected_name(self) -> str:
        return self.spec.names.get(self.param, self.param)


def _key(value: Any) -> tuple:
    return type(value).__name__, repr(value)


def declared_bad_values(constraint: Constraint) -> list:
    """The values a declared parameter must refuse: the declaration's own
    (:meth:`~dplib._constraints.Constraint.bad_values`) and those of the family it names."""
    values = list(constraint.bad_values())
    if constraint.family is not None:
        values += BAD[constraint.family]
    seen, out = set(), []
    for v in values:
        if _key(v) not in seen:
            seen.add(_key(v))
            out.append(v)
    return out


def declared(spec: Spec) -> dict[str, Constraint]:
    """The declared constraints of the spec's callable (empty if none, or if the entry opts
    out with ``derive=False``)."""
    if not spec.derive:
        return {}
    if spec._declared is None:
        spec._declared = constraints_of(spec.target())
    return spec._declared


def cases(specs: list[Spec]) -> list[Case]:
    """One case per (parameter, bad value): the declared parameters' bad values
    (:func:`declared_bad_values`) and the entry's ``params``, without repeats."""
    out = []
    for s in specs:
        table: dict[str, list] = {p: declared_bad_values(c) for p, c in declared(s).items()}
        for param, kind in s.params.items():
            table.setdefault(param, [])
            table[param] = table[param] + list(BAD[kind] if isinstance(kind, str) else kind)
        for param, values in table.items():
            seen = set()
            for v in values:
                if _key(v) not in seen:
                    seen.add(_key(v))
                    out.append(Case(s, param, v))
    return out


def check_case(case: Case) -> str | None:
    """None if the bad input is refused properly, else a description of what went wrong."""
    try:
        with np.errstate(all="ignore"):
            result = case.run()
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        name = case.expected_name()
        alternatives = "|".join(re.escape(n) for n in name.split("|"))
        if not re.search(rf"\b({alternatives})\b", msg, flags=re.IGNORECASE):
            return f"{type(exc).__name__} does not name {name!r}: {msg[:160]}"
        return None
    except Exception as exc:   # noqa: BLE001 - any other exception is a finding
        return f"raised {type(exc).__name__} (not ValueError/TypeError): {str(exc)[:160]}"
    return f"returned {type(result).__name__} {str(result)[:80]!r} instead of raising"


# ---- discovery ------------------------------------------------------------------------------

def public_callables() -> dict[str, object]:
    """Every public function and class defined in a public dplib module (dplib.testing
    aside), by qualified name."""
    found: dict[str, object] = {}
    for info in pkgutil.walk_packages(dplib.__path__, "dplib."):
        if any(part.startswith("_") for part in info.name.split(".")) or \
                info.name.startswith("dplib.testing"):    # the checks, not the library
            continue
        try:
            mod = importlib.import_module(info.name)
        except ImportError:      # optional dependency missing: nothing public to check there
            continue
        for attr, obj in vars(mod).items():
            if hasattr(obj, "__wrapped__") and not inspect.isclass(obj):
                obj = inspect.unwrap(obj)               # functools.lru_cache and friends
            if attr.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            module = getattr(obj, "__module__", "") or ""
            if not module.startswith("dplib.") or any(p.startswith("_")
                                                      for p in module.split(".")):
                continue
            found.setdefault(f"{module}.{obj.__qualname__}", obj)
    return found
