"""Every dplib error message prints numbers as a reader writes them: ``2.0``, never
``np.float64(2.0)``.

The sweep reuses the bad-input table (dplib.testing.bad_inputs): each bad value is passed as it
is and, when it is a Python number, as its numpy twin (``np.float64``/``np.int64``), which is what
values computed inside the library are. Every message raised must be free of numpy's scalar
reprs. Messages format values with ``dplib._validate.shown``.
"""
from __future__ import annotations

import re
import warnings

import matplotlib
import numpy as np
import pytest

from dplib._validate import check_real, shown
from dplib.testing import bad_inputs as T

matplotlib.use("Agg")

#: numpy's reprs of scalars (numpy >= 2): np.float64(2.0), np.int64(3), np.bool_(True), ...
NUMPY_REPR = re.compile(r"\bnp\.(?:float|int|uint|bool|complex|str|longdouble|clongdouble)\w*\(")


def _twin(value: object) -> object | None:
    """The numpy scalar of a Python number (None for anything else, bools included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return np.float64(value) if isinstance(value, float) else np.int64(value)


def _message(spec: T.Spec, param: str, value: object) -> str | None:
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            T.call_spec(spec, param, value)
    except Exception as exc:   # noqa: BLE001 - every message counts, whatever the type
        return str(exc)
    return None


def test_shown_prints_numpy_scalars_as_numbers():
    assert shown(np.float64(2.0)) == "2.0" and shown(np.int64(-3)) == "-3"
    assert shown([np.float32(0.5), (np.int8(1), np.bool_(True))]) == "[0.5, (1, True)]"
    assert shown("rdp") == "'rdp'" and shown(None) == "None"
    assert NUMPY_REPR.search(repr(np.float64(2.0))), "control: numpy's own repr has the type"
    with pytest.raises(ValueError, match=r"got 2\.0$"):
        check_real("epsilon", np.float64(2.0), high=1.0)


@pytest.mark.parametrize("spec", T.all_specs(), ids=lambda s: s.name)
def test_no_error_message_prints_a_numpy_repr(spec):
    bad, tried = [], 0
    for case in T.cases([spec]):
        for value in (case.value, _twin(case.value)):
            if value is None:
                continue
            tried += 1
            message = _message(spec, case.param, value)
            if message is not None and NUMPY_REPR.search(message):
                bad.append(f"{case.id} ({type(value).__name__}): {message[:160]}")
    assert not bad, "numpy reprs in error messages:\n  " + "\n  ".join(bad)
