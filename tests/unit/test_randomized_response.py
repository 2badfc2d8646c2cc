"""Randomized response: exact formulas, statistical tests of the output, and bad input.

Statistical tests use fixed seeds and state their tolerance; each would fail if a constant in the
mechanism or the estimator were wrong (e.g. p = 1/(1+e^ε) or a variance without the (2p−1)² factor).
"""
import math

import numpy as np
import pytest
from scipy import stats

from dplib.mechanisms import (coin_flip_p_truth, randomized_response, rr_epsilon, rr_estimate,
                              rr_estimator_variance, rr_p_truth, rr_simulate_estimates)


def test_fair_coin_is_ln3_and_seed_estimator():
    # Seed 003: heads -> truth, tails -> fair random answer; p_T' = p_T/2 + 1/4.
    p = coin_flip_p_truth(0.5)
    assert p == 0.75
    assert rr_epsilon(p) == pytest.approx(math.log(3), abs=1e-15)
    for pi in (0.0, 0.1, 0.37, 1.0):
        reported = p * pi + (1 - p) * (1 - pi)
        assert reported == pytest.approx(pi / 2 + 0.25, abs=1e-15)
    # With p = 3/4 the estimator is p_T = 2 p_T' - 1/2, exactly.
    reports = np.array([1] * 30 + [0] * 70)
    assert rr_estimate(reports, math.log(3)) == pytest.approx(2 * 0.3 - 0.5, abs=1e-12)


@pytest.mark.parametrize("eps", [1e-6, 0.1, 1.0, math.log(3), 5.0, 50.0, 800.0])
def test_p_truth_and_epsilon_are_inverse(eps):
    p = rr_p_truth(eps)
    assert p == pytest.approx(math.exp(eps) / (1 + math.exp(eps)) if eps < 700 else 1.0, rel=1e-14)
    if p < 1.0:
        assert rr_epsilon(p) == pytest.approx(eps, rel=1e-6)


def test_privacy_ratio_is_e_to_epsilon():
    # For both outputs, P[report | truth=1] / P[report | truth=0] is e^{±ε}: the definition of ε-DP.
    eps = 0.8
    p = rr_p_truth(eps)
    assert p / (1 - p) == pytest.approx(math.exp(eps), rel=1e-12)


@pytest.mark.parametrize("eps", [0.25, 1.0, 3.0])
def test_output_frequencies_match_truth_probability(eps):
    rng = np.random.default_rng(12345)
    n = 200_000
    answers = np.tile([0, 1], n // 2)
    reports = randomized_response(answers, eps, rng=rng)
    kept = int(np.sum(reports == answers))
    # Two-sided exact binomial test at level 1e-4: fails if the keep probability is off.
    test = stats.binomtest(kept, n, rr_p_truth(eps))
    assert test.pvalue > 1e-4
    # Flips must not depend on the answer: compare keep rates for yes and no separately.
    for value in (0, 1):
        mask = answers == value
        kept_v = int(np.sum(reports[mask] == value))
        assert stats.binomtest(kept_v, int(mask.sum()), rr_p_truth(eps)).pvalue > 1e-4


def test_wrong_probability_would_be_detected():
    # Power check of the test above: reports drawn with p = 0.7 instead of e/(1+e) ≈ 0.731 fail.
    rng = np.random.default_rng(7)
    n = 200_000
    kept = int((rng.random(n) < 0.7).sum())
    assert stats.binomtest(kept, n, rr_p_truth(1.0)).pvalue < 1e-4


def test_estimator_unbiased_and_variance_matches_formula():
    rng = np.random.default_rng(2024)
    n, pi, eps, trials = 2_000, 0.3, 0.5, 4_000
    answers = np.zeros(n, dtype=np.int8)
    answers[: int(pi * n)] = 1
    reports = randomized_response(np.broadcast_to(answers, (trials, n)), eps, rng=rng)
    est = rr_estimate(reports, eps)          # one estimate per survey
    var = rr_estimator_variance(pi, n, eps)
    # Fixed population => the sampling term π(1−π)/n is absent; variance is only the mechanism's.
    p = rr_p_truth(eps)
    mech_var = (pi * p * (1 - p) + (1 - pi) * p * (1 - p)) / (n * (2 * p - 1) ** 2)
    assert mech_var == pytest.approx(p * (1 - p) / (n * (2 * p - 1) ** 2))
    # Mean within 4 standard errors of the truth.
    assert abs(est.mean() - pi) < 4 * math.sqrt(mech_var / trials)
    # Sample variance: chi-square 99.99% interval for the ratio s²/σ².
    lo, hi = stats.chi2.ppf([5e-5, 1 - 5e-5], trials - 1) / (trials - 1)
    assert lo < est.var(ddof=1) / mech_var < hi
    # Warner's full variance adds the population sampling term; check the identity π'(1−π')/(n(2p−1)²).
    reported = p * pi + (1 - p) * (1 - pi)
    assert var == pytest.approx(reported * (1 - reported) / (n * (2 * p - 1) ** 2), rel=1e-12)


def test_full_variance_with_population_sampling():
    # Each survey draws a fresh population from Bernoulli(π): Warner's formula is then exact.
    rng = np.random.default_rng(99)
    n, pi, eps, trials = 1_000, 0.2, 1.0, 4_000
    answers = (rng.random((trials, n)) < pi).astype(np.int8)
    est = rr_estimate(randomized_response(answers, eps, rng=rng), eps)
    lo, hi = stats.chi2.ppf([5e-5, 1 - 5e-5], trials - 1) / (trials - 1)
    assert lo < est.var(ddof=1) / rr_estimator_variance(pi, n, eps) < hi


def test_simulated_estimates_match_mechanism():
    # The binomial shortcut has the same law as running the mechanism: compare with a KS test.
    n, pi, eps = 500, 0.4, 0.7
    fast = rr_simulate_estimates(n, pi, eps, 3_000, rng=1)
    answers = np.zeros(n, dtype=np.int8)
    answers[: int(pi * n)] = 1
    slow = rr_estimate(randomized_response(np.broadcast_to(answers, (3_000, n)), eps, rng=2), eps)
    assert stats.ks_2samp(fast, slow).pvalue > 1e-3
    assert np.var(fast) == pytest.approx(rr_estimator_variance(pi, n, eps) - pi * (1 - pi) / n,
                                         rel=0.1)


def test_reproducible_with_seed():
    a = randomized_response([0, 1, 1, 0, 1], 1.0, rng=3)
    b = randomized_response([0, 1, 1, 0, 1], 1.0, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)


def test_accepts_booleans_and_keeps_shape():
    out = randomized_response(np.array([[True, False], [False, True]]), 2.0, rng=0)
    assert out.shape == (2, 2) and set(np.unique(out)) <= {0, 1}


@pytest.mark.parametrize("eps", [0, -1.0, float("nan"), float("inf"), "1", None, True])
def test_bad_epsilon(eps):
    with pytest.raises(ValueError, match="epsilon"):
        randomized_response([0, 1], eps, rng=0)


@pytest.mark.parametrize("answers", [[0, 2], [0.5, 1], ["yes", "no"], [], [-1, 0]])
def test_bad_answers(answers):
    with pytest.raises(ValueError, match="answers"):
        randomized_response(answers, 1.0, rng=0)


@pytest.mark.parametrize("rng", [None, -1, 1.5, "seed"])
def test_bad_rng(rng):
    with pytest.raises(ValueError, match="rng"):
        randomized_response([0, 1], 1.0, rng=rng)


@pytest.mark.parametrize("heads", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_bad_coin(heads):
    with pytest.raises(ValueError, match="heads"):
        coin_flip_p_truth(heads)


@pytest.mark.parametrize("p", [0.5, 0.3, 1.0, 1.2])
def test_bad_p_truth(p):
    with pytest.raises(ValueError, match=r"p_truth must be in \(0.5, 1\)"):
        rr_epsilon(p)


def test_bad_estimator_inputs():
    with pytest.raises(ValueError, match="reports"):
        rr_estimate([0, 3], 1.0)
    with pytest.raises(ValueError, match="proportion"):
        rr_estimator_variance(1.5, 10, 1.0)
    with pytest.raises(ValueError, match="n must be an integer >= 1"):
        rr_estimator_variance(0.5, 0, 1.0)
    with pytest.raises(ValueError, match="trials"):
        rr_simulate_estimates(10, 0.5, 1.0, 0, rng=0)


def test_sampled_population_variance_is_warner():
    n, pi, eps = 800, 0.1, math.log(3)
    est = rr_simulate_estimates(n, pi, eps, 20_000, rng=5, sample_population=True)
    lo, hi = stats.chi2.ppf([5e-5, 1 - 5e-5], 20_000 - 1) / (20_000 - 1)
    assert lo < est.var(ddof=1) / rr_estimator_variance(pi, n, eps) < hi
    assert abs(est.mean() - pi) < 4 * math.sqrt(rr_estimator_variance(pi, n, eps) / 20_000)


def test_small_epsilon_variance_is_stable():
    # p(1-p)/(2p-1)^2 = e^eps/(e^eps-1)^2 ~ 1/eps^2 as eps -> 0 (no cancellation in 2p-1).
    eps = 1e-7
    assert rr_estimator_variance(0.5, 1, eps) - 0.25 == pytest.approx(1 / eps**2, rel=1e-6)


def test_variance_vectorised_and_large_epsilon():
    eps = np.array([0.01, 1.0, 30.0, 800.0])
    v = rr_estimator_variance(0.3, 100, eps)
    expected = [rr_estimator_variance(0.3, 100, float(e)) for e in eps]
    np.testing.assert_allclose(v, expected, rtol=1e-14)
    assert np.all(np.isfinite(v))
    assert v[-1] == pytest.approx(0.3 * 0.7 / 100, rel=1e-12)  # ε → ∞: no privacy noise left
    with pytest.raises(ValueError, match="epsilon"):
        rr_estimator_variance(0.3, 100, np.array([1.0, -1.0]))
