"""Shared settings of the reliability tests: a fixed hypothesis profile.

``derandomize=True`` makes every property test draw the same examples on every run (no flaky
failures, no example database), and ``max_examples`` bounds the time. The profile is registered
here and applied by the tests of tests/audit explicitly (``@settings(AUDIT_PROFILE, …)``), not
loaded globally, so hypothesis tests elsewhere in the same session keep their own settings.
"""
from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile("dplib-audit", derandomize=True, max_examples=40, deadline=None,
                          database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])


#: Statistical audits and stress grids: measurements that take seconds each, left out of
#: `make test-fast` (the bad-input sweep and the float-safety checks stay in it; the
#: error-message sweep reruns the bad-input table with numpy scalars, about 100 s).
SLOW_MODULES = {"test_accountant_stress.py", "test_audit_ladder.py", "test_dpsgd_audit.py",
                "test_mechanism_audits.py", "test_properties.py",
                "test_error_messages.py"}


def pytest_collection_modifyitems(config, items):
    import pytest
    for item in items:
        if item.path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
