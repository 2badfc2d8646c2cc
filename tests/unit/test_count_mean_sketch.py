"""Apple's count-mean sketch (dplib.mechanisms.count_mean_sketch): the client's output law is
ε-LDP exactly, the server's estimates have the stated mean and variance (a statistical test over
repeated privatisations with the hashes fixed), and the estimate is unbiased over hash draws."""
from __future__ import annotations

import math

import numpy as np
import pytest

from dplib.mechanisms.count_mean_sketch import (CountMeanSketch, cms_client, cms_expected,
                                                cms_flip_probability, cms_frequencies,
                                                cms_sketch, cms_variance)

COUNTS = np.array([300, 200, 100, 50, 50, 20, 10, 5, 0, 0, 40, 25])


def _sketch(seed: int = 3, eps: float = 2.0) -> CountMeanSketch:
    return CountMeanSketch(epsilon=eps, rows=8, columns=16, domain_size=COUNTS.size,
                           hash_seed=seed)


def test_flip_probability_and_c_epsilon_closed_forms():
    for eps in (0.1, 1.0, 4.0, 8.0):
        assert cms_flip_probability(eps) == pytest.approx(1 / (1 + math.exp(eps / 2)), rel=1e-12)
        sk = CountMeanSketch(epsilon=eps, rows=2, columns=4, domain_size=3)
        e = math.exp(eps / 2)
        assert sk.c_epsilon == pytest.approx((e + 1) / (e - 1), rel=1e-12)
    assert cms_flip_probability(2000.0) == 0.0          # no overflow


def test_client_output_law_is_epsilon_ldp_exactly():
    """Pr[(j, ṽ) | d] = (1/k)·Π_c (1−p)^{[ṽ_c = v_c(d)]}·p^{[ṽ_c ≠ v_c(d)]}: over all pairs of
    values and all rows, the worst log-ratio over outputs is 2·log((1−p)/p) = ε when the two
    values hash apart, 0 when they collide."""
    sk = _sketch(eps=1.5)
    p = cms_flip_probability(sk.epsilon)
    worst = 0.0
    for j in range(sk.rows):
        for d in range(sk.domain_size):
            for e in range(sk.domain_size):
                differ = int(sk.hashes[j, d] != sk.hashes[j, e])      # coordinates that differ
                worst = max(worst, 2 * differ * math.log((1 - p) / p))
    assert worst == pytest.approx(sk.epsilon, rel=1e-12)


def test_client_flip_rate_and_row_choice_match_the_protocol():
    sk = _sketch()
    vals = np.repeat(np.arange(COUNTS.size), COUNTS)
    rows, vec = cms_client(vals, sk, rng=np.random.default_rng(7))
    truth = -np.ones_like(vec)
    truth[np.arange(vals.size), sk.hashes[rows, vals]] = 1
    flipped = (vec != truth).mean()
    p = cms_flip_probability(sk.epsilon)
    se = math.sqrt(p * (1 - p) / vec.size)
    assert abs(flipped - p) < 5 * se
    counts = np.bincount(rows, minlength=sk.rows)
    expected = vals.size / sk.rows
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 30.0                       # 7 d.o.f.: P(χ² > 30) ≈ 1e-4


def test_estimates_mean_and_variance_match_the_formulas():
    """R independent privatisations of the same data with the same public hashes: the mean of
    every item's estimate is within 5 standard errors of cms_expected, the sample variance
    within 5 standard deviations of cms_variance (relative s.d. √(2/(R−1)))."""
    sk = _sketch()
    vals = np.repeat(np.arange(COUNTS.size), COUNTS)
    rng = np.random.default_rng(2024)
    reps = 800
    est = np.array([cms_frequencies(*cms_client(vals, sk, rng=rng), sk) for _ in range(reps)])
    mean_f, var_f = cms_expected(COUNTS, sk), cms_variance(COUNTS, sk)
    z = (est.mean(axis=0) - mean_f) / np.sqrt(var_f / reps)
    assert np.abs(z).max() < 5.0, z
    rel = est.var(axis=0, ddof=1) / var_f - 1.0
    assert np.abs(rel).max() < 5 * math.sqrt(2 / (reps - 1)), rel
    # the expectation is not the truth for a fixed table (collisions bias it) ...
    assert np.abs(mean_f - COUNTS).max() > 1.0


def test_expected_estimate_is_unbiased_over_hash_draws():
    """Averaged over independently drawn hash tables, E[f̃ | h] is the true count (each other
    value collides with probability 1/m): the mean over 400 tables is within 5 standard errors."""
    diffs = np.array([cms_expected(COUNTS, _sketch(seed=s)) - COUNTS for s in range(400)])
    se = diffs.std(axis=0, ddof=1) / math.sqrt(len(diffs)) + 1e-12
    assert np.abs(diffs.mean(axis=0) / se).max() < 5.0


def test_variance_formula_no_collision_case():
    """A one-item dictionary (P = 1): E = n and Var = (m/(m−1))²·n·(c_ε² − 1)/4 by hand."""
    sk = CountMeanSketch(epsilon=3.0, rows=4, columns=2, domain_size=1)
    counts = np.array([10])
    c = sk.c_epsilon
    assert cms_variance(counts, sk)[0] == pytest.approx(4 * 10 * (c * c - 1) / 4, rel=1e-12)
    assert cms_expected(counts, sk)[0] == pytest.approx(10.0, rel=1e-12)


def test_server_sketch_adds_the_debiased_vectors():
    sk = _sketch()
    rows = np.array([0, 0, 5])
    vec = np.ones((3, sk.columns), dtype=np.int8)
    vec[1] = -1
    mat = cms_sketch(rows, vec, sk)
    c, k = sk.c_epsilon, sk.rows
    assert mat[0] == pytest.approx(np.full(sk.columns, k * (c / 2 + 0.5) + k * (-c / 2 + 0.5)))
    assert mat[5] == pytest.approx(np.full(sk.columns, k * (c / 2 + 0.5)))
    assert mat[1].sum() == 0.0


@pytest.mark.parametrize("bad", [[-1], [12], [], [1.5], "x", [[1, 2]]])
def test_bad_values_are_refused(bad):
    with pytest.raises(ValueError, match="values"):
        cms_client(bad, _sketch(), rng=0)


def test_bad_reports_and_counts_are_refused():
    sk = _sketch()
    with pytest.raises(ValueError, match="rows"):
        cms_sketch([8], np.ones((1, 16)), sk)
    with pytest.raises(ValueError, match="vectors"):
        cms_sketch([0], np.zeros((1, 16)), sk)
    with pytest.raises(ValueError, match="true_counts"):
        cms_expected([1, 2], sk)
    with pytest.raises(ValueError, match="sketch"):
        cms_frequencies([0], np.ones((1, 16)), "sketch")
    with pytest.raises(ValueError, match="columns"):
        CountMeanSketch(epsilon=1.0, rows=2, columns=1, domain_size=3)
