"""Exponential mechanism and report-noisy-max: exact probabilities, sampled frequencies (χ²),
Gumbel-max equivalence, the privacy ratio, power, and bad input. Fixed seeds; level 1e-4.
"""
import math

import numpy as np
import pytest
from scipy import stats

from dplib.mechanisms import (exponential_mechanism, exponential_mechanism_probabilities,
                              report_noisy_max)

U = np.array([0.0, 1.0, 3.0, 3.5, -2.0])
N = 100_000


def test_probabilities_formula_and_stability():
    p = exponential_mechanism_probabilities(U, 1.0, 1.0)
    w = np.exp(U / 2)
    np.testing.assert_allclose(p, w / w.sum(), rtol=1e-12)
    big = exponential_mechanism_probabilities(U + 1e6, 1.0)      # log-sum-exp: no overflow
    np.testing.assert_allclose(big, p, rtol=1e-9)


def test_privacy_ratio_at_most_e_epsilon():
    # Neighbouring utilities: each moves by at most Δu = 1. P ratios stay within e^ε (Thm 3.10).
    eps = 0.9
    rng = np.random.default_rng(0)
    for _ in range(200):
        u = rng.normal(0, 3, 6)
        v = u + rng.uniform(-1, 1, 6)
        r = exponential_mechanism_probabilities(u, eps) / exponential_mechanism_probabilities(v, eps)
        assert np.all(np.abs(np.log(r)) <= eps + 1e-12)


def _counts(idx, k):
    return np.bincount(idx, minlength=k)


@pytest.mark.parametrize("sampler", ["exponential", "gumbel"])
def test_samples_match_probabilities(sampler):
    utils = np.broadcast_to(U, (N, U.size))
    if sampler == "exponential":
        idx = exponential_mechanism(utils, 1.0, rng=4)
    else:
        idx = report_noisy_max(utils, 1.0, noise="gumbel", rng=4)
    expected = N * exponential_mechanism_probabilities(U, 1.0)
    assert stats.chisquare(_counts(idx, U.size), expected).pvalue > 1e-4


def test_wrong_temperature_would_fail():
    # Power: choices made at ε = 1.2 do not pass as ε = 1 draws.
    idx = exponential_mechanism(np.broadcast_to(U, (N, U.size)), 1.2, rng=4)
    expected = N * exponential_mechanism_probabilities(U, 1.0)
    assert stats.chisquare(_counts(idx, U.size), expected).pvalue < 1e-4


def test_laplace_noisy_max_privacy_ratio_empirically():
    # Two neighbouring count vectors (monotone: one count moves by 1). Empirical log-ratio of the
    # winning-index frequencies stays below ε (up to ±0.05 at these counts).
    eps = 1.0
    a = np.broadcast_to([10.0, 10.0, 9.0], (400_000, 3))
    b = np.broadcast_to([11.0, 10.0, 9.0], (400_000, 3))
    ca = _counts(report_noisy_max(a, eps, noise="laplace", monotone=True, rng=1), 3)
    cb = _counts(report_noisy_max(b, eps, noise="laplace", monotone=True, rng=2), 3)
    assert np.max(np.abs(np.log(ca / cb))) < eps + 0.05


def test_scalar_and_batched_shapes():
    assert isinstance(exponential_mechanism(U, 1.0, rng=0), int)
    assert report_noisy_max(np.zeros((4, 7, 3)), 1.0, rng=0).shape == (4, 7)


@pytest.mark.parametrize("call, match", [
    (lambda: exponential_mechanism(U, 0.0, rng=0), r"epsilon must be in \(0, inf\), got 0.0"),
    (lambda: exponential_mechanism(U, 1.0, -1.0, rng=0), r"sensitivity must be in \(0, inf\)"),
    (lambda: exponential_mechanism([1.0, float("nan")], 1.0, rng=0), r"utilities must be finite"),
    (lambda: report_noisy_max(U, 1.0, noise="cauchy", rng=0), r"noise must be one of"),
    (lambda: report_noisy_max(U, 1.0, monotone=True, rng=0), r"monotone=True applies only"),
    (lambda: report_noisy_max(U, float("nan"), rng=0), r"epsilon.*nan"),
    (lambda: exponential_mechanism(np.zeros((3, 0)), 1.0, rng=0), r"non-empty|at least one candidate"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
