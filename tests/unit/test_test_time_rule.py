"""The rule of tests/conftest.py: a test over 20 s of CPU fails unless its docstring says why."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

_spec = importlib.util.spec_from_file_location(
    "tests_root_conftest", Path(__file__).resolve().parents[1] / "conftest.py")
rule = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rule)


@pytest.fixture(autouse=True)
def _no_time_log(monkeypatch):
    monkeypatch.delenv("DPBOOK_TEST_TIMES", raising=False)


def _judge(seconds: float, doc: str | None) -> SimpleNamespace:
    """Run the report hook on a passed test that took ``seconds`` of CPU."""
    def body():
        pass
    body.__doc__ = doc
    item = SimpleNamespace(cpu_seconds=seconds, function=body, nodeid="t.py::body")
    report = SimpleNamespace(passed=True, outcome="passed", longrepr=None)
    hook = rule.pytest_runtest_makereport.__wrapped__ if hasattr(
        rule.pytest_runtest_makereport, "__wrapped__") else rule.pytest_runtest_makereport
    gen = hook(item, SimpleNamespace(when="call"))
    next(gen)
    with pytest.raises(StopIteration):
        gen.send(SimpleNamespace(get_result=lambda: report))
    return report


def test_a_long_test_without_a_reason_fails():
    report = _judge(rule.LIMIT_S + 1, "Checks something.")
    assert report.outcome == "failed" and "docstring does not say why" in report.longrepr


def test_a_stated_reason_or_a_short_test_passes():
    assert _judge(rule.LIMIT_S + 1, "Slow: it trains 16 models.").outcome == "passed"
    assert _judge(rule.LIMIT_S - 1, None).outcome == "passed"
