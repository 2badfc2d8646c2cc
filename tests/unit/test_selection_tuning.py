"""Private hyper-parameter tuning: the laws of the number of runs, the RDP bounds of Papernot &
Steinke (2022) against their closed forms, Liu & Talwar's 3ε, and TunedRuns composing in the
RDP accountant like any event."""
import math

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from dplib.accounting import (DEFAULT_ORDERS, GaussianEvent, PLDAccountant, RDPAccountant,
                              dpsgd_event, rdp_to_delta)
from dplib.selection import (TunedRuns, num_runs_pmf, sample_num_runs, tnb_gamma, tnb_mean,
                             tuned_dpsgd_epsilon, tuned_epsilons, tuning_rdp)

LAWS = [("geometric", None), ("logarithmic", None), ("truncated_negative_binomial", 0.5),
        ("truncated_negative_binomial", -0.5), ("poisson", None)]


@pytest.mark.parametrize("law,eta", LAWS)
def test_pmf_sums_to_one_with_the_requested_mean(law, eta):
    k = np.arange(0, 40_000)
    p = num_runs_pmf(k, law, 10.0, eta=eta)
    assert p.sum() == pytest.approx(1.0, abs=1e-10)
    assert (k * p).sum() == pytest.approx(10.0, rel=1e-9)
    if law != "poisson":
        assert p[0] == 0.0


def test_pmf_special_cases_match_their_closed_forms():
    k = np.arange(1, 50)
    g = tnb_gamma(1.0, 8.0)
    np.testing.assert_allclose(num_runs_pmf(k, "geometric", 8.0), g * (1 - g) ** (k - 1),
                               rtol=1e-12)
    g0 = tnb_gamma(0.0, 8.0)
    np.testing.assert_allclose(num_runs_pmf(k, "logarithmic", 8.0),
                               stats.logser.pmf(k, 1 - g0), rtol=1e-10)
    np.testing.assert_allclose(num_runs_pmf(k, "poisson", 8.0), stats.poisson.pmf(k, 8.0),
                               rtol=1e-10)
    # η > 0: the negative binomial NB(η, γ) conditioned on K ≥ 1
    g5 = tnb_gamma(0.5, 8.0)
    nb = stats.nbinom(0.5, g5)
    np.testing.assert_allclose(num_runs_pmf(k, "truncated_negative_binomial", 8.0, eta=0.5),
                               nb.pmf(k) / nb.sf(0), rtol=1e-10)


def test_mean_formula_and_its_inverse():
    assert tnb_mean(1.0, 0.1) == pytest.approx(10.0)
    assert tnb_mean(0.0, 0.1) == pytest.approx(9 / math.log(10))
    for eta in (-0.7, 0.0, 0.3, 2.0):
        assert tnb_mean(eta, tnb_gamma(eta, 25.0)) == pytest.approx(25.0, rel=1e-10)


@pytest.mark.parametrize("law,eta", LAWS)
def test_sampler_follows_the_pmf(law, eta):
    s = sample_num_runs(law, 5.0, eta=eta, size=100_000, rng=3)
    k = np.arange(0, 31)
    p = num_runs_pmf(k, law, 5.0, eta=eta)
    obs = np.bincount(np.minimum(s, 30), minlength=31)
    expected = np.r_[p[:30], 1 - p[:30].sum()] * s.size
    keep = expected > 5
    assert stats.chisquare(obs[keep], expected[keep] * obs[keep].sum() / expected[keep].sum()
                           ).pvalue > 1e-4


def test_theorem2_gaussian_closed_form():
    # Base: Gaussian, ε(λ) = λ/(2σ²). The λ̂ term (1+η)[(1−1/λ̂)λ̂/(2σ²) + log(1/γ)/λ̂] is
    # minimised at λ̂* = σ√(2 log 1/γ): (1+η)[√(2 log(1/γ))/σ − 1/(2σ²)] (Papernot & Steinke
    # 2022, Thm 2 with a dense grid of λ̂).
    sigma, eta, mean = 3.0, 1.0, 20.0
    orders = np.linspace(1.01, 200, 200_000)
    g = tnb_gamma(eta, mean)
    got = tuning_rdp(orders, orders / (2 * sigma**2), "geometric", mean)
    lg = math.log(1 / g)
    closed = (orders / (2 * sigma**2) + (1 + eta) * (math.sqrt(2 * lg) / sigma - 1 / (2 * sigma**2))
              + math.log(mean) / (orders - 1))
    np.testing.assert_allclose(got, closed, rtol=1e-6)


def test_liu_talwar_three_epsilon_in_the_limit():
    # A pure ε-DP base has ε(λ) ≤ ε at every order; geometric tuning: as λ, λ̂ → ∞ the bound tends
    # to 3ε (Papernot & Steinke 2022, Thm 2 recovers Liu & Talwar 2019's 3ε).
    eps = 0.5
    orders = np.geomspace(1.5, 1e9, 400)
    r = tuning_rdp(orders, np.full(orders.size, eps), "geometric", 10.0)
    assert r[-1] == pytest.approx(3 * eps, abs=1e-3)
    assert (r >= 3 * eps - 1e-12).all()


def test_poisson_bound_uses_delta_hat_at_the_right_epsilon_hat():
    sigma, mu = 2.0, 10.0
    orders = DEFAULT_ORDERS
    base = orders / (2 * sigma**2)
    got = tuning_rdp(orders, base, "poisson", mu)
    lam = 8.0
    i = int(np.flatnonzero(orders == lam)[0])
    d_hat = rdp_to_delta(orders, base, math.log1p(1 / (lam - 1)))[0]
    assert got[i] == pytest.approx(base[i] + mu * d_hat + math.log(mu) / (lam - 1), rel=1e-9)


def test_tuned_runs_event_composes_like_any_other():
    run = dpsgd_event(1.1, 256 / 60000, 1000)
    ev = TunedRuns(run, "geometric", 10)
    acc = RDPAccountant().compose(ev).compose(GaussianEvent(5.0))
    by_hand = tuning_rdp(DEFAULT_ORDERS, RDPAccountant().compose(run).rdp, "geometric", 10.0)
    np.testing.assert_allclose(acc.rdp, by_hand + DEFAULT_ORDERS / 50.0, rtol=1e-12)
    assert RDPAccountant().supports(ev)
    assert not PLDAccountant().supports(ev)          # only Rényi accountants consume a curve
    assert RDPAccountant().compose(ev, 2).get_epsilon(1e-5) > acc.get_epsilon(1e-5)


def test_tuned_dpsgd_epsilon_orders_the_three_answers():
    out = tuned_dpsgd_epsilon(1.1, 256 / 60000, 1000, 10, 1e-5)
    assert out["reported"] < out["tuned"] < out["composed"]
    one = RDPAccountant().compose(dpsgd_event(1.1, 256 / 60000, 1000)).get_epsilon(1e-5)
    assert out["reported"] == pytest.approx(one)
    solo = tuned_dpsgd_epsilon(1.1, 256 / 60000, 1000, 1, 1e-5)
    assert solo["reported"] == solo["composed"] == solo["tuned"]


def test_tuned_epsilons_matches_the_event_in_the_accountant():
    run = dpsgd_event(3.0, 1.0, 20)
    means = [2.0, 10.0, 100.0]
    for law, eta in (("geometric", None), ("poisson", None), ("truncated_negative_binomial", 0.5)):
        got = tuned_epsilons(run, means, 1e-5, distribution=law, eta=eta)
        want = [RDPAccountant().compose(TunedRuns(run, law, m, eta)).get_epsilon(1e-5)
                for m in means]
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert np.all(np.diff(tuned_epsilons(run, means, 1e-5)) > 0)       # more runs cost more


@pytest.mark.parametrize("law,eta", LAWS)
def test_bound_is_above_the_exact_rdp_of_a_tuned_randomized_response(law, eta):
    # Base: randomized response, P[1] = p on D, q on D' (ε0-DP). "Best of K" with 1 > 0 outputs
    # 1 iff some run does: P[1] = 1 − E[(1−p)^K]; with K = 0 (Poisson) it outputs nothing.
    # Its exact Rényi divergence, both directions, must lie below the theorem's bound.
    eps0, mean = 1.0, 8.0
    p, q = math.exp(eps0) / (1 + math.exp(eps0)), 1 / (1 + math.exp(eps0))
    k = np.arange(0, 20_000)
    pmf = num_runs_pmf(k, law, mean, eta=eta)

    def law_of(prob):
        none = pmf[0]
        one = 1 - (pmf * (1 - prob) ** k).sum()
        return np.array([none, 1 - one - none, one])

    P, Q = law_of(p), law_of(q)
    orders = DEFAULT_ORDERS

    def renyi(a, b):
        keep = (a > 0) & (b > 0)                  # the two laws share their support here
        a, b = a[keep], b[keep]
        terms = orders[:, None] * np.log(a)[None, :] + (1 - orders[:, None]) * np.log(b)[None, :]
        return logsumexp(terms, axis=1) / (orders - 1)
    exact = np.maximum(renyi(P, Q), renyi(Q, P))
    base = np.maximum(renyi(np.array([0, 1 - p, p]), np.array([0, 1 - q, q])),
                      renyi(np.array([0, 1 - q, q]), np.array([0, 1 - p, p])))
    bound = tuning_rdp(orders, base, law, mean, eta=eta)
    assert (exact <= bound + 1e-9).all()
    assert exact.max() > 0.5 * eps0                                  # an informative pair
