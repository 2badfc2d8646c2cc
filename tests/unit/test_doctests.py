"""The examples in dplib's docstrings run and print what they say (``doctest.testmod``).

Every module under dplib/ whose source holds a ``>>>`` example is found by scanning the files,
imported with importlib and run; none is left out. A module whose optional dependency is
missing is reported as skipped with the reason; an example known to be broken in a module
owned elsewhere is a strict xfail (:data:`KNOWN_BROKEN`), so a fix shows up as XPASS and the
entry is removed.
"""
from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dplib"

#: Modules whose examples are known to fail, with the reason (reported to the module's owner).
KNOWN_BROKEN: dict[str, str] = {}


def modules_with_examples() -> list[str]:
    """Dotted names of the dplib modules whose source contains a ``>>>`` example."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>>" not in path.read_text(encoding="utf-8"):
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        out.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return out


MODULES = modules_with_examples()


def test_examples_are_found():
    assert "dplib.tables" in MODULES and "dplib.accounting.rdp" in MODULES
    assert set(KNOWN_BROKEN) <= set(MODULES), "KNOWN_BROKEN names a module without examples"


@pytest.mark.parametrize("name", [
    pytest.param(m, marks=pytest.mark.xfail(strict=True, reason=KNOWN_BROKEN[m]))
    if m in KNOWN_BROKEN else m for m in MODULES])
def test_docstring_examples(name):
    try:
        module = importlib.import_module(name)
    except ImportError as exc:          # an optional dependency (torch, transformers) is missing
        pytest.skip(f"{name} needs an optional dependency: {exc}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=True)
    assert result.attempted > 0, f"{name}: no example was collected"
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
