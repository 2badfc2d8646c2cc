"""Exact discrete samplers (Canonne, Kamath & Steinke 2020): χ² goodness of fit against the pmf,
with a power check, Bernoulli(exp(−γ)) frequencies, the (ε, δ) of the discrete Gaussian, and bad
input. Fixed seeds; level 1e-4.
"""
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dplib.mechanisms import (bernoulli_exp, discrete_gaussian, discrete_gaussian_delta,
                              discrete_gaussian_mechanism, discrete_gaussian_pmf,
                              discrete_laplace, discrete_laplace_mechanism, discrete_laplace_pmf,
                              gaussian_delta)

N = 100_000


def _chi2_pvalue(samples, pmf, lo, hi):
    """χ² test on cells lo..hi plus the two tails (each cell has expected count ≥ 5)."""
    ks = np.arange(lo, hi + 1)
    observed = np.concatenate([[np.sum(samples < lo)], [np.sum(samples == k) for k in ks],
                               [np.sum(samples > hi)]])
    p_mid = pmf(ks)
    p_lo = pmf(np.arange(lo - 2000, lo)).sum()
    p_hi = pmf(np.arange(hi + 1, hi + 2001)).sum()
    expected = len(samples) * np.concatenate([[p_lo], p_mid, [p_hi]])
    assert expected.min() >= 5
    return stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue


@pytest.mark.parametrize("gamma", [Fraction(1, 3), 1, Fraction(5, 2), 0.75])
def test_bernoulli_exp_frequency(gamma):
    draws = bernoulli_exp(gamma, N, rng=3)
    assert stats.binomtest(int(draws.sum()), N, math.exp(-float(gamma))).pvalue > 1e-4


@pytest.mark.parametrize("scale", [1, Fraction(5, 2), 0.5, 7])
def test_discrete_laplace_matches_pmf(scale):
    x = discrete_laplace(scale, N, rng=1)
    b = float(scale)
    hi = max(2, int(4 * b))
    assert _chi2_pvalue(x, lambda k: discrete_laplace_pmf(k, b), -hi, hi) > 1e-4


@pytest.mark.parametrize("s2", [Fraction(1, 3), 1, 4, 25, 2.5])
def test_discrete_gaussian_matches_pmf(s2):
    x = discrete_gaussian(s2, N, rng=2)
    hi = max(1, int(3 * math.sqrt(float(s2))))
    assert _chi2_pvalue(x, lambda k: discrete_gaussian_pmf(k, float(s2)), -hi, hi) > 1e-4


def test_chi2_detects_wrong_scale():
    # Power: discrete Gaussian draws with σ² = 4 against the pmf of σ² = 4.4 (5% larger σ) fail.
    x = discrete_gaussian(4, N, rng=2)
    assert _chi2_pvalue(x, lambda k: discrete_gaussian_pmf(k, 4.4), -6, 6) < 1e-4
    y = discrete_laplace(3, N, rng=1)
    assert _chi2_pvalue(y, lambda k: discrete_laplace_pmf(k, 3.3), -12, 12) < 1e-4


def test_pmfs_sum_to_one():
    k = np.arange(-3000, 3001)
    assert discrete_laplace_pmf(k, 4.0).sum() == pytest.approx(1.0, abs=1e-12)
    assert discrete_gaussian_pmf(k, 9.0).sum() == pytest.approx(1.0, abs=1e-12)


def test_discrete_gaussian_delta_close_to_continuous_for_large_sigma():
    # CKS 2020, §1: for σ ≳ 1 the discrete Gaussian's δ(ε) is close to (and at most about) the
    # continuous one; at σ = 10 they agree to within a few percent.
    eps = np.array([0.05, 0.1, 0.2])
    dd, dc = discrete_gaussian_delta(100, eps), gaussian_delta(10.0, eps)
    np.testing.assert_allclose(dd, dc, rtol=0.05)


def test_mechanisms_on_integer_queries():
    out = discrete_laplace_mechanism(np.array([10, 20, 30]), 1.0, rng=0)
    assert out.dtype == np.int64 and out.shape == (3,)
    assert isinstance(discrete_gaussian_mechanism(5, 4, rng=0), int)
    a = discrete_laplace_mechanism(np.zeros(N, dtype=int), Fraction(1, 2), 1, rng=9)
    assert _chi2_pvalue(a, lambda k: discrete_laplace_pmf(k, 2.0), -8, 8) > 1e-4


@pytest.mark.parametrize("call, match", [
    (lambda: discrete_laplace(0, 10, rng=0), r"scale must be in \(0, inf\)"),
    (lambda: discrete_laplace(float("nan"), 10, rng=0), r"scale must be in \(0, inf\), got nan"),
    (lambda: discrete_laplace(-1.5, 10, rng=0), r"scale.*-1.5"),
    (lambda: discrete_gaussian("4", 10, rng=0), r"sigma_squared must be a positive rational"),
    (lambda: discrete_gaussian(0.1 + 0.2, 10, rng=0), r"sigma_squared.*2\*\*62"),
    (lambda: discrete_laplace_mechanism([1.5], 1.0, rng=0), r"value must be integers"),
    (lambda: discrete_laplace_mechanism([1], -1.0, rng=0), r"epsilon must be in \(0, inf\)"),
    (lambda: discrete_gaussian_delta(4, 1.0, sensitivity=0), r"sensitivity must be an integer"),
    (lambda: bernoulli_exp(1, 10, rng=None), r"rng"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
