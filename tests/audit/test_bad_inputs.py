"""Bad-input sweep over every public function of dplib.

The table (dplib.testing.bad_inputs) gives, for each public callable found by walking the
package, a valid call and the kind of each parameter; every parameter is then given each bad
value of its kind (NaN, ±inf, negative, out of range, wrong type, empty or mismatched arrays,
a BatchNorm model for DP-SGD, …). Each must raise ValueError/TypeError naming the parameter.
A new public function that is neither in the table nor in the explicit exclusion list fails
``test_every_public_callable_is_swept_or_excluded``: the sweep grows with the library.
"""
from __future__ import annotations

import warnings

import matplotlib
import pytest

from dplib.testing import bad_inputs as T

matplotlib.use("Agg")
SPECS = T.all_specs()
CASES = T.cases(SPECS)


def test_every_public_callable_is_swept_or_excluded():
    found = T.public_callables()
    covered = {s.name for s in SPECS} | set(T.EXCLUDED)
    missing = sorted(n for n in found if n not in covered)
    assert not missing, ("public callables with no bad-input spec and no exclusion reason "
                         f"(add them to the table of dplib.testing.bad_inputs): {missing}")
    stale = sorted(n for n in covered if n not in found and "." in n
                   and n.rsplit(".", 1)[0] not in found)
    assert not stale, f"table entries for callables that no longer exist: {stale}"


def test_enough_bad_inputs():
    assert len(CASES) >= 200
    print(f"bad inputs tried: {len(CASES)} over {len(SPECS)} callables")


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_valid_call_works(spec):
    """The reference call of each spec succeeds (so each bad case differs in one value only)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        T.call_spec(spec)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_bad_inputs_are_refused_naming_the_parameter(spec):
    failures, fixed = [], []
    for case in T.cases([spec]):
        problem = T.check_case(case)
        if case.id in T.KNOWN_GAPS:
            if problem is None:
                fixed.append(case.id)
        elif problem is not None:
            failures.append(f"{case.id}: {problem}")
    assert not failures, "\n".join(failures)
    assert not fixed, f"now refused properly, remove from KNOWN_GAPS: {fixed}"
