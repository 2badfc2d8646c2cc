"""Every test's time is measured: a test that takes more than 20 s must say why.

A test's own run (its body, not its fixtures) is timed in CPU seconds of its process
(``time.process_time``: what the test costs, whatever else the machine is doing; wall time on a
shared two-core machine measures the neighbours). Over :data:`LIMIT_S`, the test fails unless its
docstring says why it is slow, in a sentence starting with :data:`REASON` ("Slow: it trains 16
models to estimate a distribution"): a long test is either a measurement that belongs in
``benchmarks/`` or a check whose cost is worth stating. Work done in other processes (kernels,
Chromium, worker ranks) is not counted here; those tests are marked ``slow``.

``DPBOOK_TEST_TIMES=path`` appends each test's CPU seconds to ``path`` (a tab-separated table) to
find the expensive ones; ``tools/slow_tests.py`` turns such a log into ``tests/slow_tests.txt``,
the tests of 0.5 s or more, which are marked ``slow`` here (``make test-fast`` leaves them out).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

#: CPU seconds a test may take without a stated reason.
LIMIT_S = 20.0
#: How a docstring states the reason.
REASON = "Slow:"
#: The tests measured at 0.5 s of CPU or more (tools/slow_tests.py).
SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def pytest_collection_modifyitems(config, items):
    slow = {line.strip() for line in SLOW_LIST.read_text().splitlines()
            if line.strip() and not line.startswith("#")}
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    start = time.process_time()
    yield
    item.cpu_seconds = time.process_time() - start


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    spent = getattr(item, "cpu_seconds", None)
    if call.when != "call" or spent is None:
        return
    log = os.environ.get("DPBOOK_TEST_TIMES")
    if log:
        with open(log, "a") as f:
            f.write(f"{spent:.3f}\t{item.nodeid}\n")
    doc = getattr(getattr(item, "function", None), "__doc__", None) or ""
    if report.passed and spent > LIMIT_S and REASON not in doc:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} took {spent:.1f} s of CPU (more than {LIMIT_S:g} s) "
                           f"and its docstring does not say why: make it faster, move the "
                           f"measurement to benchmarks/, or state the reason ('{REASON} ...').")
