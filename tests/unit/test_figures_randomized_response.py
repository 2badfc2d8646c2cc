"""Chapter 1's figures and the posterior they draw: the numbers on the pictures are the numbers
dplib computes, the posterior is Bayes' rule (checked by simulation), and bad input is refused.
"""
import math

import numpy as np
import pytest
from matplotlib.figure import Figure

from dplib.attacks import dp_tpr_bound
from dplib.figures.randomized_response import (posterior_curves, probability_tree,
                                               tradeoff_region)
from dplib.mechanisms import (coin_flip_p_truth, randomized_response, rr_p_truth,
                              rr_posterior)

LN3 = math.log(3)


# ---- rr_posterior --------------------------------------------------------------------------

def test_posterior_worked_example():
    # prior 10% = odds 1/9; a "yes" at ε = ln 3 triples them (1/3 -> 25%), a "no" divides by 3
    assert rr_posterior(0.1, LN3) == pytest.approx(0.25, abs=1e-15)
    assert rr_posterior(0.1, LN3, report=0) == pytest.approx(1 / 28, abs=1e-15)
    assert rr_posterior(0.1, math.log(9)) == pytest.approx(0.5, abs=1e-15)


@pytest.mark.parametrize("eps", [1e-6, 0.1, 1.0, LN3, 5.0, 10.0])
@pytest.mark.parametrize("prior", [0.001, 0.1, 0.5, 0.9, 0.999])
def test_posterior_odds_are_prior_odds_times_likelihood_ratio(prior, eps):
    p = rr_p_truth(eps)
    for report, ratio in ((1, p / (1 - p)), (0, (1 - p) / p)):
        post = rr_posterior(prior, eps, report=report)
        assert post / (1 - post) == pytest.approx(ratio * prior / (1 - prior), rel=1e-7)
    # the "yes" posterior is the ε-DP bound e^ε π/(e^ε π + 1 − π)
    assert rr_posterior(prior, eps) == pytest.approx(
        math.exp(eps) * prior / (math.exp(eps) * prior + 1 - prior), rel=1e-12)


def test_posterior_edges_and_broadcasting():
    assert rr_posterior(0.0, 2.0) == 0.0 and rr_posterior(1.0, 2.0, report=0) == 1.0
    assert rr_posterior(0.3, 800.0) == 1.0 and rr_posterior(0.3, 800.0, report=0) == 0.0
    grid = rr_posterior(np.array([[0.1], [0.5]]), np.array([0.5, 1.0, 2.0]))
    assert grid.shape == (2, 3) and np.all(np.diff(grid, axis=1) > 0)


def test_posterior_matches_simulated_respondents():
    # Among many respondents with a 10% base rate, the share of true "yes" among the "yes"
    # reports is the posterior; 400,000 people give a standard error of about 0.0014.
    rng = np.random.default_rng(7)
    truth = (rng.random(400_000) < 0.1).astype(np.int8)
    reports = randomized_response(truth, LN3, rng=rng)
    prior = truth.mean()
    assert truth[reports == 1].mean() == pytest.approx(rr_posterior(prior, LN3), abs=0.006)
    assert truth[reports == 0].mean() == pytest.approx(rr_posterior(prior, LN3, report=0),
                                                       abs=0.002)


@pytest.mark.parametrize("kwargs, name", [
    (dict(prior=-0.1, epsilon=1.0), "prior"), (dict(prior=1.5, epsilon=1.0), "prior"),
    (dict(prior=float("nan"), epsilon=1.0), "prior"), (dict(prior="0.1", epsilon=1.0), "prior"),
    (dict(prior=0.1, epsilon=0.0), "epsilon"), (dict(prior=0.1, epsilon=-1.0), "epsilon"),
    (dict(prior=0.1, epsilon=float("inf")), "epsilon"),
    (dict(prior=0.1, epsilon=[1.0, -2.0]), "epsilon"),
    (dict(prior=0.1, epsilon=1.0, report=2), "report"),
    (dict(prior=0.1, epsilon=1.0, report=True), "report"),
    (dict(prior=0.1, epsilon=1.0, report="yes"), "report"),
])
def test_posterior_refuses_bad_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        rr_posterior(**kwargs)


# ---- figures -------------------------------------------------------------------------------

def _texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [t.get_text() for t in fig.texts]


def test_probability_tree_shows_the_fair_coin_probabilities():
    fig = probability_tree()
    assert isinstance(fig, Figure)
    texts = _texts(fig)
    # two subtrees: three leaves each, with path probabilities 1/2, 1/4, 1/4
    assert sum(t == "1/2" for t in texts) == 2 and sum(t == "1/4" for t in texts) == 4
    assert sum(t.startswith("say ") for t in texts) == 6
    footer = " ".join(fig.texts[i].get_text() for i in range(len(fig.texts)))
    assert "= 3/4" in footer and "= 1/4" in footer and "ratio 3" in footer and "1.10" in footer


def test_probability_tree_follows_a_biased_coin():
    fig = probability_tree(0.8)                      # p = 0.9, ratio 9, ε = ln 9 ≈ 2.20
    assert coin_flip_p_truth(0.8) == pytest.approx(0.9)
    footer = " ".join(t.get_text() for t in fig.texts)
    assert "9/10" in footer and "ratio 9" in footer and "2.20" in footer
    assert sum(t == "4/5" for t in _texts(fig)) >= 2          # the truthful paths
    assert sum(t == "1/10" for t in _texts(fig)) == 4         # the second coin's paths


def test_posterior_curves_draw_rr_posterior():
    eps = (0.5, LN3, 2.0)
    fig = posterior_curves(eps, prior=0.2)
    ax = fig.axes[0]
    curves = [ln for ln in ax.lines if ln.get_label().startswith("ε = ")]
    assert [ln.get_label() for ln in curves] == ["ε = 0.5", "ε = ln 3", "ε = 2"]
    for ln, e in zip(curves, eps):
        x, y = ln.get_data()
        assert np.allclose(y, rr_posterior(x, e))
    dots = [ln for ln in ax.lines if ln.get_marker() == "o"]
    assert [ln.get_ydata()[0] for ln in dots] == pytest.approx([rr_posterior(0.2, e) for e in eps])


def test_tradeoff_region_draws_the_dp_frontier_and_rr_corners():
    eps = (0.5, LN3)
    fig = tradeoff_region(eps, delta=0.01)
    ax = fig.axes[0]
    curves = [ln for ln in ax.lines if ln.get_label().startswith("ε = ")]
    assert len(curves) == 2
    for ln, e in zip(curves, eps):
        x, y = ln.get_data()
        assert np.allclose(y, dp_tpr_bound(x, e, 0.01))
    corners = [ln for ln in ax.lines if ln.get_marker() == "o" and len(ln.get_xdata())]
    for ln, e in zip(corners, eps):
        p = rr_p_truth(e)
        assert (ln.get_xdata()[0], ln.get_ydata()[0]) == pytest.approx((1 - p, p))
        assert dp_tpr_bound(1 - p, e) == pytest.approx(p)      # RR sits on the ε-DP frontier


@pytest.mark.parametrize("call, name", [
    (lambda: probability_tree(0.0), "heads"), (lambda: probability_tree(1.0), "heads"),
    (lambda: probability_tree(float("nan")), "heads"), (lambda: probability_tree("0.5"), "heads"),
    (lambda: posterior_curves([]), "epsilons"), (lambda: posterior_curves([1.0, 0.0]), "epsilons"),
    (lambda: posterior_curves([float("inf")]), "epsilons"),
    (lambda: posterior_curves([[1.0, 2.0]]), "epsilons"),
    (lambda: posterior_curves(list(range(1, 10))), "epsilons"),
    (lambda: posterior_curves(prior=0.0), "prior"), (lambda: posterior_curves(prior=1.2), "prior"),
    (lambda: tradeoff_region("1"), "epsilons"), (lambda: tradeoff_region(delta=1.0), "delta"),
    (lambda: tradeoff_region(delta=-0.1), "delta"),
])
def test_figures_refuse_bad_input(call, name):
    with pytest.raises(ValueError, match=name):
        call()
