"""Floating-point safety (Mironov 2012): released values come from exact discrete samplers, or
the function that draws float noise says in its docstring that it is not safe against the attack.

* The discrete samplers use only integer randomness (their source calls no float sampler).
* Every public function whose code draws float noise (``.laplace(``, ``.normal(``,
  ``.gumbel(``, ``torch.randn`` …) mentions Mironov / floating point in its docstring — found
  by scanning the source of every public callable, so new ones are checked too.
* The attack itself: on the textbook float Laplace sampler, an output reachable from one input
  but not from its neighbour exists in most draws; on the discrete Laplace mechanism no such
  output can exist (every integer is reachable from every input).
"""
from __future__ import annotations

import inspect
import re
import warnings

import numpy as np
import pytest

from dplib import mechanisms as M
from dplib.mechanisms import discrete
from dplib.testing import bad_inputs as T

FLOAT_DRAW = re.compile(r"\.(laplace|normal|gumbel|standard_normal|exponential|randn|"
                        r"randn_like|normal_)\(")
NOTE = re.compile(r"Mironov|floating.point", re.IGNORECASE)

#: Float draws that release nothing private (no note needed), with the reason.
NOT_A_RELEASE = {
    "dplib.attacks.extraction.extract_logistic_regression":
        "the attacker's random queries, not a private release",
    "dplib.experiments.mechanism_audits.mechanism_audits": "test fixtures of the audits",
    "dplib.features.synthetic_features": "generates synthetic data, releases nothing",
    "dplib.training.erm.synthetic_logistic": "generates synthetic data, releases nothing",
    "dplib.encoding.codebook.build_codebook":
        "draws the data-independent code book (from N(0, 1) or public gradient values)",
    "dplib.experiments.encoding.encoding_throughput": "random inputs of a speed benchmark",
    "dplib.training.models.check_examples_independent":
        "a synthetic probe input of a structural check, never the data",
    "dplib.training.preflight.check_ghost_on_probe":
        "a synthetic probe input of the ghost path's pre-flight check, never the data",
}


def _code(obj) -> str:
    src = inspect.getsource(obj)
    doc = obj.__doc__ or ""
    return src.replace(doc, "") if doc else src


def _float_noise_functions() -> dict:
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = T.public_callables()
    for name, obj in found.items():
        if not inspect.isfunction(obj):
            continue
        try:
            if FLOAT_DRAW.search(_code(obj)):
                out[name] = obj
        except (OSError, TypeError):
            continue
    return out


def test_discrete_samplers_use_integer_randomness_only():
    src = inspect.getsource(discrete)
    assert not FLOAT_DRAW.search(src)
    assert ".random(" not in src          # no uniform doubles either: gen.integers only
    assert "gen.integers(" in src


def test_every_float_noise_function_documents_the_floating_point_caveat():
    funcs = _float_noise_functions()
    # the scan finds the known float mechanisms (so it is not vacuous)
    for name in ("dplib.mechanisms.laplace.laplace_mechanism",
                 "dplib.mechanisms.gaussian.gaussian_mechanism",
                 "dplib.mechanisms.exponential.report_noisy_max"):
        assert name in funcs
    missing = sorted(n for n, f in funcs.items()
                     if n not in NOT_A_RELEASE and not NOTE.search(f.__doc__ or ""))
    assert not missing, f"float noise without a Mironov/floating-point note: {missing}"
    stale = sorted(set(NOT_A_RELEASE) - set(funcs))
    assert not stale, f"NOT_A_RELEASE names functions that draw no float noise: {stale}"


def test_exponential_mechanism_documents_rounding():
    assert NOTE.search(M.exponential_mechanism.__doc__)


def test_the_attack_works_on_float_laplace_and_not_on_discrete_laplace():
    """Mironov's test "could this output have come from the neighbour?": for float Laplace most
    outputs from input 0 are impossible from input 1 — certain distinction; for the discrete
    mechanism every output is an integer, reachable from both inputs."""
    rng = np.random.default_rng(0)
    out = M.textbook_float_laplace(0.0, 1.0, 400, rng=rng)
    leaked = M.float_laplace_reachable(out, 0.0, 1.0) & ~M.float_laplace_reachable(out, 1.0, 1.0)
    assert M.float_laplace_reachable(out, 0.0, 1.0).all()
    assert leaked.mean() > 0.5
    d = M.discrete_laplace_mechanism(np.zeros(400, dtype=np.int64), 1.0, rng=rng)
    assert d.dtype.kind == "i"     # integers: P(o | 1) = P(o − 1 | 0) > 0 for every o
