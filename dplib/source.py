"""dplib's code as a chapter shows it to a reader.

The chapters print the functions they teach (``print(source(laplace_mechanism))``). A public
function declares the allowed values of its parameters in a decorator
(``@constrained(epsilon=EPSILON, ...)``, :mod:`dplib._constraints`) whose argument names are the
library's internal ones; :func:`source` shows the code from its ``def`` line and states those
declarations above it in words, as comments, so the reader sees what is checked before the body
runs without reading the library's internals.
"""
from __future__ import annotations

import inspect
import textwrap
from typing import Callable

from ._constraints import Interval, IsCallable, constrained, constraints_of
from ._validate import shown

__all__ = ["source"]


def _declared_lines(obj: Callable) -> list[str]:
    declared = constraints_of(obj)
    if not declared:
        return []
    parts = [f"{name} in {c.describe()}" if isinstance(c, Interval) else
             f"{name}: {c.describe()}" for name, c in declared.items()]
    return ["# checked before the body runs (declared with @constrained):"] + [
        f"#   {p}" for p in parts]


@constrained(obj=IsCallable("a function, method or class of dplib"))
def source(obj: Callable) -> str:
    """The source of ``obj`` from its ``def``/``class`` line (dedented), preceded by its declared
    parameter checks as comments (one per parameter, in words), in place of its decorators."""
    try:
        text = inspect.getsource(obj)
    except (TypeError, OSError):
        raise ValueError(f"obj must be a function, method or class with Python source, got "
                         f"{shown(obj)}") from None
    lines = textwrap.dedent(text).splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines)
                  if line.lstrip().startswith(("def ", "async def ", "class "))), 0)
    head = "".join(line + "\n" for line in _declared_lines(obj))
    return head + "".join(lines[start:])
