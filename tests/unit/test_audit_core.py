"""Tests of the statistical core of auditing: dplib.attacks.audit_stats.

Oracles: scipy.stats.binomtest / scipy.stats.beta quantiles for Clopper–Pearson, exact binomial
coverage sums, closed-form (TPR, FPR) of randomized response and Laplace, and Monte Carlo
false-refutation rates with fixed seeds.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dplib.attacks import (audit_from_samples, clopper_pearson, epsilon_lower_bound,
                           epsilon_lower_bound_from_counts, max_certifiable_epsilon)

CASES = [(0, 1), (1, 1), (0, 10), (3, 10), (10, 10), (7, 50), (500, 1000), (1, 100000),
         (99999, 100000), (123, 4567)]


@pytest.mark.parametrize("k,n", CASES)
@pytest.mark.parametrize("conf", [0.8, 0.95, 0.999])
def test_clopper_pearson_matches_scipy_binomtest(k, n, conf):
    for alt in ("two-sided", "greater", "less"):
        ref = stats.binomtest(k, n, alternative=alt).proportion_ci(conf, method="exact")
        lo, hi = clopper_pearson(k, n, conf, alternative=alt)
        assert lo == pytest.approx(ref.low, abs=1e-12)
        assert hi == pytest.approx(ref.high, abs=1e-12)


def test_clopper_pearson_is_beta_quantiles_and_vectorised():
    k = np.array([0, 5, 17, 40])
    n = np.array([40, 40, 40, 40])
    lo, hi = clopper_pearson(k, n, 0.9)
    a = 0.1
    ref_lo = np.where(k == 0, 0.0, stats.beta.ppf(a / 2, np.maximum(k, 1), n - k + 1))
    ref_hi = np.where(k == n, 1.0, stats.beta.ppf(1 - a / 2, k + 1, np.maximum(n - k, 1)))
    np.testing.assert_allclose(lo, ref_lo, atol=1e-12)
    np.testing.assert_allclose(hi, ref_hi, atol=1e-12)
    assert lo.shape == (4,)


@pytest.mark.parametrize("n", [5, 30, 200])
def test_clopper_pearson_exact_coverage(n):
    """Coverage Σ_k Binom(k; n, p)·1[p ∈ CI(k)] ≥ confidence for every p on a fine grid."""
    ks = np.arange(n + 1)
    lo, hi = clopper_pearson(ks, n, 0.95)
    ps = np.linspace(0.001, 0.999, 997)
    pmf = stats.binom.pmf(ks[None, :], n, ps[:, None])
    inside = (lo[None, :] <= ps[:, None]) & (ps[:, None] <= hi[None, :])
    coverage = (pmf * inside).sum(axis=1)
    assert coverage.min() >= 0.95 - 1e-9
    # and it is not trivially conservative: some p has coverage below 0.99
    assert coverage.min() < 0.99


def test_epsilon_lower_bound_formula_by_hand():
    n, conf = 1000, 0.95
    tpr, fpr = 0.6, 0.2
    a = 1 - conf
    t_lo = stats.beta.ppf(a / 2, 600, 401)
    f_hi = stats.beta.ppf(1 - a / 2, 201, 800)
    expected = max(math.log(t_lo / f_hi), math.log((1 - f_hi) / (1 - t_lo)), 0.0)
    assert epsilon_lower_bound(tpr, fpr, n=n, confidence=conf) == pytest.approx(expected,
                                                                               rel=1e-10)
    # with δ: the first term becomes ln((TPR_lo − δ)/FPR_hi)
    d = 0.05
    expected_d = max(math.log((t_lo - d) / f_hi), math.log((1 - f_hi - d) / (1 - t_lo)))
    assert epsilon_lower_bound(tpr, fpr, n=n, delta=d) == pytest.approx(expected_d, rel=1e-10)


def test_epsilon_lower_bound_uses_the_complement():
    # TPR = 0.999, FPR = 0.9: ln(TPR/FPR) is tiny but the complement 0.1/0.001 is large.
    lb = epsilon_lower_bound(0.999, 0.9, n=100000)
    assert lb > 3.0
    # unequal trial counts: n = (n_pos, n_neg)
    assert epsilon_lower_bound(0.5, 0.25, n=(2000, 4000)) == pytest.approx(
        epsilon_lower_bound_from_counts(1000, 2000, 1000, 4000))


def test_epsilon_lower_bound_approaches_true_epsilon_for_rr():
    """Randomized response at ε: TPR = p, FPR = 1 − p exactly; with n → ∞ the bound → ε."""
    for eps in (0.5, 1.0, 2.0):
        p = 1 / (1 + math.exp(-eps))
        n = 10 ** 7
        k = round(p * n)
        lb = epsilon_lower_bound_from_counts(k, n, n - k, n)
        assert eps - 0.01 < lb < eps


def test_bound_is_zero_when_nothing_is_distinguished():
    assert epsilon_lower_bound(0.5, 0.5, n=100) == 0.0
    assert epsilon_lower_bound(0.0, 0.0, n=100) == 0.0
    assert epsilon_lower_bound(0.3, 0.6, n=100) == 0.0   # wrong orientation certifies nothing


def test_max_certifiable_epsilon():
    for n in (100, 10000, 10 ** 6):
        m = max_certifiable_epsilon(n)
        a = 0.025
        lo, hi = a ** (1 / n), 1 - a ** (1 / n)
        assert m == pytest.approx(math.log(lo / hi), rel=1e-9)
        assert abs(m - math.log(n / math.log(1 / a))) < 0.05


def test_false_refutation_rate_of_counts_bound():
    """RR at ε: over 20000 simulated audits (n = 300 per side) the bound exceeds ε in at most
    5% of them (union bound makes it smaller still)."""
    rng = np.random.default_rng(0)
    eps, n = 1.0, 300
    p = 1 / (1 + math.exp(-eps))
    kp = rng.binomial(n, p, 20000)
    kn = rng.binomial(n, 1 - p, 20000)
    lb = epsilon_lower_bound_from_counts(kp, n, kn, n)
    rate = np.mean(lb > eps)
    assert rate <= 0.05
    assert rate > 0.001   # the bound is not vacuous: it does reach ε now and then


def test_audit_from_samples_laplace_power_and_validity():
    rng = np.random.default_rng(1)
    n = 100000
    a = rng.laplace(0.0, 1.0, n)
    b = 1.0 + rng.laplace(0.0, 1.0, n)
    res = audit_from_samples(a, b)
    assert 0.9 < res.epsilon_lower <= 1.0
    assert res.positive == "D'"   # b is larger: {x ≥ t} is more likely under D'
    assert res.n_pos == res.n_neg == n // 2
    assert not res.refutes(1.0) and res.refutes(0.5)


def test_audit_from_samples_false_refutation_rate():
    """400 audits of an exact ε = 1 Laplace mechanism (n = 1000 per side): ≤ 5% refute ε = 1."""
    rng = np.random.default_rng(2)
    hits = 0
    for _ in range(400):
        a = rng.laplace(0.0, 1.0, 1000)
        b = 1.0 + rng.laplace(0.0, 1.0, 1000)
        hits += audit_from_samples(a, b, max_thresholds=200).epsilon_lower > 1.0
    assert hits / 400 <= 0.05


def test_selecting_on_the_evaluation_data_would_be_invalid():
    """Why the split: on identical distributions (ε = 0), the best of many thresholds scored on the
    same data certifies ε > 0 far more often than 5%; the held-out audit does not."""
    rng = np.random.default_rng(3)
    naive, held_out = 0, 0
    ts = np.linspace(-3, 3, 400)
    for _ in range(200):
        a, b = rng.normal(size=400), rng.normal(size=400)
        ka = (a[None, :] >= ts[:, None]).sum(1)
        kb = (b[None, :] >= ts[:, None]).sum(1)
        best = max(np.max(epsilon_lower_bound_from_counts(ka, 400, kb, 400, confidence=0.8)),
                   np.max(epsilon_lower_bound_from_counts(kb, 400, ka, 400, confidence=0.8)))
        naive += best > 0
        held_out += audit_from_samples(a, b, confidence=0.8).epsilon_lower > 0
    assert naive / 200 > 0.3
    assert held_out / 200 <= 0.2


@pytest.mark.parametrize("q", [0.3, 1.0])
def test_canary_loss_statistic_is_the_log_likelihood_ratio(q):
    """The all-iterates canary statistic Σ_t ln p_D(u_t)/p_D'(u_t) with u_t ~ (1−q)N(0, σ²) +
    qN(κ, σ²) under D (with the canary) and N(0, σ²) under D': checked against scipy densities."""
    from dplib.attacks.canary import _loss_statistic
    rng = np.random.default_rng(4)
    sigma, kappa = 0.8, 100 / math.sqrt(100 ** 2 + 1)
    u = rng.normal(0.3, 1.5, size=(5, 4))
    p_d = (1 - q) * stats.norm.pdf(u, 0.0, sigma) + q * stats.norm.pdf(u, kappa, sigma)
    expected = np.log(p_d / stats.norm.pdf(u, 0.0, sigma)).sum(axis=1)
    np.testing.assert_allclose(_loss_statistic(u, q, sigma, kappa), expected, rtol=1e-10)


@pytest.mark.parametrize("call,param", [
    (lambda: clopper_pearson(-1, 10), "k"),
    (lambda: clopper_pearson(11, 10), "k"),
    (lambda: clopper_pearson(1.5, 10), "k"),
    (lambda: clopper_pearson(1, 0), "n"),
    (lambda: clopper_pearson(1, 10, 1.0), "confidence"),
    (lambda: clopper_pearson(1, 10, float("nan")), "confidence"),
    (lambda: clopper_pearson(1, 10, alternative="up"), "alternative"),
    (lambda: epsilon_lower_bound(0.5, 0.1, n=0), "n"),
    (lambda: epsilon_lower_bound(0.5, 0.1, n=(10,)), "n"),
    (lambda: epsilon_lower_bound(1.5, 0.1, n=10), "tpr"),
    (lambda: epsilon_lower_bound(0.5, float("nan"), n=10), "fpr"),
    (lambda: epsilon_lower_bound(0.55, 0.1, n=10), "tpr"),      # not a count / n
    (lambda: epsilon_lower_bound(0.5, 0.1, n=10, delta=-0.1), "delta"),
    (lambda: epsilon_lower_bound(0.5, 0.1, n=10, confidence=0.0), "confidence"),
    (lambda: audit_from_samples([1.0, 2.0], [1.0, 2.0, 3.0, 4.0]), "samples_d"),
    (lambda: audit_from_samples(np.ones((5, 2)), np.ones(5)), "samples_d"),
    (lambda: audit_from_samples(np.ones(5), [1, 2, np.nan, 4, 5]), "samples_d_prime"),
    (lambda: audit_from_samples(np.ones(5), np.ones(5), selection_fraction=1.0),
     "selection_fraction"),
    (lambda: audit_from_samples(np.ones(5), np.ones(5), max_thresholds=1), "max_thresholds"),
])
def test_bad_input_names_the_parameter(call, param):
    with pytest.raises(ValueError, match=param):
        call()
