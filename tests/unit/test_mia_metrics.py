"""ROC metrics and membership scores (dplib.attacks.roc, dplib.attacks.scores).

Oracles: scikit-learn's roc_curve / roc_auc_score (ties included), brute-force counting for
TPR at a fixed FPR, PyTorch's cross-entropy and softmax, and randomized response for the DP
bound on the ROC curve (it attains the bound at its operating point).
"""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score
from sklearn.metrics import roc_curve as sk_roc_curve

from dplib.attacks import (attack_summary, confidence_scores, dp_tpr_bound,
                           logit_scaled_confidence, loss_scores, roc_auc, roc_curve,
                           score_examples, tpr_at_fpr)


def _data(seed, n=500, levels=None):
    g = np.random.default_rng(seed)
    y = g.random(n) < 0.4
    y[:2] = [True, False]
    s = g.normal(size=n) + 0.7 * y
    if levels is not None:                       # heavy ties
        s = np.round(s * levels) / levels
    return s, y


# --- against scikit-learn -----------------------------------------------------------------------

@pytest.mark.parametrize("levels", [None, 1, 4])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_roc_curve_matches_sklearn_with_ties(seed, levels):
    s, y = _data(seed, levels=levels)
    fpr, tpr, thr = roc_curve(s, y)
    f2, t2, th2 = sk_roc_curve(y, s, drop_intermediate=False)
    np.testing.assert_allclose(fpr, f2, rtol=0, atol=1e-15)
    np.testing.assert_allclose(tpr, t2, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(thr[1:], th2[1:])
    assert math.isinf(thr[0])
    assert roc_auc(s, y) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-3, 3), st.booleans()), min_size=2, max_size=40))
def test_auc_matches_sklearn_property(pairs):
    s = np.array([p[0] for p in pairs], float)
    y = np.array([p[1] for p in pairs])
    if y.all() or not y.any():
        with pytest.raises(ValueError, match="both members"):
            roc_auc(s, y)
        return
    assert roc_auc(s, y) == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    # Mann–Whitney form with ties counted one half
    d = s[y][:, None] - s[~y][None, :]
    assert roc_auc(s, y) == pytest.approx(((d > 0) + 0.5 * (d == 0)).mean(), abs=1e-12)


def _tpr_at_fpr_brute(s, y, a):
    best = 0.0
    for t in np.r_[np.inf, np.unique(s)]:
        pred = s >= t
        if pred[~y].mean() <= a:
            best = max(best, pred[y].mean())
    return best


@pytest.mark.parametrize("levels", [None, 2])
def test_tpr_at_fpr_brute_force(levels):
    s, y = _data(5, n=300, levels=levels)
    alphas = np.array([0.0, 0.001, 0.01, 0.05, 0.1, 0.5, 1.0])
    got = tpr_at_fpr(s, y, alphas)
    want = [_tpr_at_fpr_brute(s, y, a) for a in alphas]
    np.testing.assert_allclose(got, want, atol=0)
    assert isinstance(tpr_at_fpr(s, y, 0.01), float)


def test_attack_summary_values():
    s, y = _data(3, n=400)
    r = attack_summary(s, y, fprs=(0.01, 0.1))
    fpr, tpr, _ = sk_roc_curve(y, s, drop_intermediate=False)
    assert r["auc"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert r["advantage"] == pytest.approx(np.max(tpr - fpr), abs=1e-12)
    assert r["accuracy"] == pytest.approx((1 + r["advantage"]) / 2)
    assert r["tpr@0.01"] == _tpr_at_fpr_brute(s, y, 0.01)
    assert r["tpr@0.1"] == _tpr_at_fpr_brute(s, y, 0.1)
    assert (r["members"], r["non_members"]) == (int(y.sum()), int((~y).sum()))


def test_perfect_and_reversed_attacks():
    y = np.array([1, 1, 0, 0, 0])
    assert roc_auc([5, 4, 1, 2, 3], y) == 1.0
    assert roc_auc([1, 2, 5, 4, 3], y) == 0.0
    assert tpr_at_fpr([5, 4, 1, 2, 3], y, 0.0) == 1.0
    assert roc_auc([1, 1, 1, 1, 1], y) == 0.5            # all tied: the diagonal


def test_roc_bad_input():
    with pytest.raises(ValueError, match="both members"):
        roc_curve([1, 2, 3], [1, 1, 1])
    with pytest.raises(ValueError, match="NaN"):
        roc_curve([1, np.nan, 3], [1, 0, 1])
    with pytest.raises(ValueError, match="one entry per label"):
        roc_curve([1, 2], [1, 0, 1])
    with pytest.raises(ValueError, match="0/1"):
        roc_curve([1, 2, 3], [2, 0, 1])
    with pytest.raises(ValueError, match="fpr"):
        tpr_at_fpr([1, 2, 3], [1, 0, 1], 1.5)


# --- the DP bound on the ROC curve --------------------------------------------------------------

@pytest.mark.parametrize("eps", [0.1, 1.0, math.log(3), 4.0])
def test_randomized_response_attains_the_bound(eps):
    """RR keeps the bit with probability p = e^ε/(1+e^ε): the test "output = 1" has
    TPR = p, FPR = 1 − p = p·e^{−ε}, a point on the boundary TPR = e^ε·FPR."""
    p = math.exp(eps) / (1 + math.exp(eps))
    assert dp_tpr_bound(1 - p, eps) == pytest.approx(p, rel=1e-12)
    f = np.linspace(0, 1, 101)
    b = dp_tpr_bound(f, eps, 1e-3)
    assert np.all(b >= f) and np.all(b <= 1) and np.all(np.diff(b) >= -1e-15)
    # both inequalities of Kairouz et al. hold at the bound
    assert np.all(b <= math.exp(eps) * f + 1e-3 + 1e-12)
    assert np.all(1 - f <= math.exp(eps) * (1 - b) + 1e-3 + 1e-12)


def test_dp_bound_exact_values_on_both_branches():
    """Hand-computed values of min(e^ε·FPR + δ, 1 − e^{−ε}(1 − δ − FPR), 1): the event branch at
    small FPR, the complement branch at large FPR (Kairouz et al. 2015, Thm 2.1)."""
    eps, d = 1.0, 0.01
    e = math.exp(eps)
    # FPR = 0.05: e·0.05 + 0.01 = 0.14591 < 1 − 0.94/e = 0.65420 → the event branch
    assert dp_tpr_bound(0.05, eps, d) == pytest.approx(0.05 * e + 0.01, rel=1e-12)
    # FPR = 0.5: e·0.5 + 0.01 = 1.369 > 1 − 0.49/e = 0.81974 → the complement branch
    assert dp_tpr_bound(0.5, eps, d) == pytest.approx(1 - 0.49 / e, rel=1e-12)
    # the branches meet where e·f + δ = 1 − (1 − δ − f)/e, i.e. f = (1 − δ)/(1 + e)
    f_star = (1 - d) / (1 + e)
    assert dp_tpr_bound(f_star, eps, d) == pytest.approx(e * f_star + d, rel=1e-12)
    assert dp_tpr_bound(f_star, eps, d) == pytest.approx(1 - (1 - d - f_star) / e, rel=1e-12)
    # FPR = 1: the complement branch gives 1 + δ/e > 1, capped at 1
    assert dp_tpr_bound(1.0, eps, d) == 1.0


def test_dp_bound_limits_and_errors():
    assert dp_tpr_bound(0.3, 0.0) == pytest.approx(0.3)
    assert dp_tpr_bound(0.0, 2.0, 0.01) == pytest.approx(0.01)
    assert dp_tpr_bound(0.2, math.inf) == 1.0
    with pytest.raises(ValueError, match="epsilon"):
        dp_tpr_bound(0.1, -1.0)
    with pytest.raises(ValueError, match="fpr"):
        dp_tpr_bound(1.2, 1.0)
    with pytest.raises(ValueError, match="delta"):
        dp_tpr_bound(0.1, 1.0, 1.0)


# --- scores --------------------------------------------------------------------------------------

def test_scores_against_torch():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(3, 50, 7, generator=g, dtype=torch.float64) * 4
    y = torch.randint(0, 7, (50,), generator=g)
    ce = torch.nn.functional.cross_entropy(z.reshape(-1, 7), y.repeat(3),
                                           reduction="none").reshape(3, 50)
    np.testing.assert_allclose(loss_scores(z, y), ce.numpy(), rtol=1e-12, atol=1e-14)
    p = torch.softmax(z, -1).gather(-1, y.repeat(3, 1)[..., None])[..., 0].numpy()
    np.testing.assert_allclose(confidence_scores(z, y), p, rtol=1e-12)
    np.testing.assert_allclose(logit_scaled_confidence(z, y), np.log(p) - np.log1p(-p),
                               rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(score_examples(z, y, "loss"), -ce.numpy(), rtol=1e-12)
    np.testing.assert_allclose(score_examples(z.float(), y), logit_scaled_confidence(z, y),
                               rtol=1e-5, atol=1e-5)


def test_logit_scaled_confidence_is_exact_where_the_naive_formula_overflows():
    z = np.array([[0.0, 60.0], [0.0, 800.0], [5.0, 5.0 + 1e-3], [3.0, 1.0]])
    y = np.array([1, 1, 1, 0])
    phi = logit_scaled_confidence(z, y)
    np.testing.assert_allclose(phi, [60.0, 800.0, 1e-3, 2.0], rtol=1e-9)
    with np.errstate(divide="ignore"):
        p = confidence_scores(z, y)
        assert np.isinf(np.log(p[1]) - np.log1p(-p[1]))     # the naive form fails here
    # three classes: log p/(1-p) = z_y - logsumexp(other logits)
    z3 = np.array([[1.0, 2.0, 3.0]])
    assert logit_scaled_confidence(z3, [2])[0] == pytest.approx(3 - np.logaddexp(1, 2))
    # invariant to adding a constant to all logits
    np.testing.assert_allclose(logit_scaled_confidence(z + 17.0, y), phi, rtol=1e-9)


def test_score_bad_input():
    with pytest.raises(ValueError, match="C >= 2"):
        loss_scores(np.zeros((4, 1)), np.zeros(4, int))
    with pytest.raises(ValueError, match="labels must be in"):
        loss_scores(np.zeros((4, 3)), np.array([0, 1, 2, 3]))
    with pytest.raises(ValueError, match="finite"):
        loss_scores(np.array([[0.0, np.nan]]), [0])
    with pytest.raises(ValueError, match="kind"):
        score_examples(np.zeros((2, 2)), [0, 1], "hinge")
    with pytest.raises(ValueError, match="broadcast"):
        loss_scores(np.zeros((4, 3)), np.zeros(5, int))
