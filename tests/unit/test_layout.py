"""The package's layout stays legible: no private name crosses a module boundary, modules stay
small, and the topic layer reaches the core only through public names."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dplib"
#: Modules allowed above :data:`MAX_LINES`, each with its reason.
LONG_MODULES = {
    "testing/accountant_stress.py": "a table of test cases and their checks, not library logic",
}
MAX_LINES = 520


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py"))


def _private_imports(path: Path, root: Path = PACKAGE) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    out.append(f"{path.relative_to(root)}:{node.lineno} imports "
                               f"{'.' * node.level}{node.module or ''}.{alias.name}")
    return out


def test_no_private_name_is_imported_across_modules():
    found = [hit for path in _modules() for hit in _private_imports(path)]
    assert not found, "\n".join(found)


def test_the_private_import_check_can_fail(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("from __future__ import annotations\nfrom .other import ok, _helper\n")
    assert _private_imports(bad, tmp_path) == ["m.py:2 imports .other._helper"]


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_stay_small(path):
    rel = str(path.relative_to(PACKAGE))
    lines = len(path.read_text(encoding="utf-8").splitlines())
    if rel in LONG_MODULES:
        return
    assert lines <= MAX_LINES, (f"{rel} has {lines} lines (> {MAX_LINES}): split it by concept, "
                                "or add it to LONG_MODULES with the reason")
