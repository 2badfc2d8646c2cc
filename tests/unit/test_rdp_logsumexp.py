"""The RDP accountant's row-wise log-sum-exp gives scipy's bits, and the RDP curves built with it
match an independent sum.

``_logsumexp_rows`` replaces ``scipy.special.logsumexp(a, axis=1)`` in the subsampled Gaussian's
series (a faster copy of the same operations); a mismatch in one bit would change calibrated noise
multipliers that stored tables and chapters compare with ``==``.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import logsumexp

from dplib.accounting.rdp import _logsumexp_rows, subsampled_gaussian_rdp


def _cases(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        n, c = int(rng.integers(1, 60)), int(rng.integers(1, 3000))
        a = (rng.normal(scale=rng.choice([1.0, 30.0, 700.0]), size=(n, c))
             + rng.choice([0.0, -800.0, 700.0]))
        if rng.random() < 0.5:                      # many -inf entries (masked terms)
            a[rng.random((n, c)) < rng.random()] = -np.inf
        if rng.random() < 0.3:                      # a row with nothing in it
            a[rng.integers(0, n)] = -np.inf
        if rng.random() < 0.1:                      # an infinite term
            a[rng.integers(0, n), rng.integers(0, c)] = np.inf
        if rng.random() < 0.3:                      # ties at the maximum
            a = np.round(a)
        yield a


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_same_bits_as_scipy(seed):
    for a in _cases(seed, 300):
        with np.errstate(all="ignore"):
            want = logsumexp(a, axis=1)
        assert np.array_equal(_logsumexp_rows(a), want, equal_nan=True)


def test_detects_a_different_sum():
    a = np.array([[0.0, -1.0, -2.0], [5.0, 5.0, -np.inf]])
    got = _logsumexp_rows(a)
    assert got[0] == pytest.approx(math.log(1 + math.exp(-1) + math.exp(-2)), rel=1e-15)
    assert got[1] == pytest.approx(5.0 + math.log(2.0), rel=1e-15)
    assert not np.array_equal(got, _logsumexp_rows(a[:, :2]))


@pytest.mark.parametrize("q, sigma", [(0.5, 1.52), (0.125, 0.95), (0.01, 1.0), (0.25, 3.14)])
def test_rdp_matches_direct_sum(q, sigma):
    """Integer orders: A_α = Σ_i C(α,i)(1−q)^{α−i} q^i e^{(i²−i)/(2σ²)} (Mironov, Talwar & Zhang
    2019, §3.3) summed with math.fsum; fractional orders: between the integer neighbours
    (RDP is non-decreasing in α, van Erven & Harremoës 2014, Thm 3)."""
    ints = np.arange(2.0, 16.0)
    got = subsampled_gaussian_rdp(ints, sigma, q)
    for a, r in zip(ints.astype(int), got):
        terms = [math.comb(a, i) * (1 - q) ** (a - i) * q ** i * math.exp((i * i - i) / (2 * sigma**2))
                 for i in range(a + 1)]
        assert r == pytest.approx(math.log(math.fsum(terms)) / (a - 1), rel=1e-10)
    frac = np.arange(2.5, 15.0, 1.0)
    rf = subsampled_gaussian_rdp(frac, sigma, q)
    assert np.all(rf >= got[:-1] * (1 - 1e-12)) and np.all(rf <= got[1:] * (1 + 1e-12))
