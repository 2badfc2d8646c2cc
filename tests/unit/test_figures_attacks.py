"""The membership-inference figures and the numbers they draw: operating points with
Clopper–Pearson intervals, LiRA with fewer shadow models, and the two figures."""
import math

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from dplib.attacks import clopper_pearson, membership_masks, tpr_at_fpr
from dplib.experiments.attacks import (Population, ShadowCountCurve, lira_by_shadow_count,
                                       run_attacks)
from dplib.attacks.roc import attack_summary, operating_point
from dplib.figures.attacks import operating_points_figure, shadow_count_figure


def _population(n_targets=2, n_shadows=16, n=300, classes=4, seed=0) -> Population:
    """Synthetic targets and shadows: training on a record raises its true-class logit by a
    record-specific amount, on top of a record-specific difficulty and model noise."""
    g = np.random.default_rng(seed)
    masks = np.vstack([membership_masks(n_targets, n, rng=g, design="fixed"),
                       membership_masks(n_shadows, n, rng=g, design="balanced")])
    labels = g.integers(0, classes, n)
    logits = g.normal(size=(n_targets + n_shadows, n, classes))
    boost = g.normal(0.5, 1.0, n) ** 2 + 0.2 * g.random((n_targets + n_shadows, 1))
    difficulty = g.normal(0, 2, n)
    rows = np.arange(n)
    logits[:, rows, labels] += difficulty + masks * boost
    acc = np.full(n_targets + n_shadows, 0.5)
    return Population(logits=torch.tensor(logits), labels=labels, masks=masks,
                      n_targets=n_targets, epsilon=math.inf, noise_multiplier=0.0, delta=1e-5,
                      train_accuracy=acc, test_accuracy=acc)


# ---- operating_point ----------------------------------------------------------------------------

def test_operating_point_counts_and_intervals():
    g = np.random.default_rng(1)
    y = g.random(4000) < 0.5
    s = g.normal(size=4000) + 0.8 * y
    op = operating_point(s, y, 1e-2)
    assert op["tpr"] == tpr_at_fpr(s, y, 1e-2)
    assert op["tp"] == int((s[y] >= op["threshold"]).sum())
    assert op["fp"] == int((s[~y] >= op["threshold"]).sum()) <= 1e-2 * (~y).sum()
    assert (op["members"], op["non_members"]) == (int(y.sum()), int((~y).sum()))
    assert op["tpr_ci"] == clopper_pearson(op["tp"], op["members"])
    assert op["fpr_ci"] == clopper_pearson(op["fp"], op["non_members"])
    assert op["tpr_ci"][0] <= op["tpr"] <= op["tpr_ci"][1]
    wide = operating_point(s, y, 1e-2, confidence=0.99)
    assert wide["tpr_ci"][0] < op["tpr_ci"][0] and wide["tpr_ci"][1] > op["tpr_ci"][1]


def test_operating_point_at_fpr_zero_accuses_no_non_member():
    y = np.array([True, True, False, False])
    op = operating_point([3.0, 1.0, 2.0, 0.0], y, 0.0)
    assert (op["tp"], op["fp"]) == (1, 0) and op["fpr_ci"][0] == 0.0


@pytest.mark.parametrize("kw", [dict(fpr=-0.1), dict(fpr=1.5), dict(fpr=float("nan")),
                                dict(fpr=0.1, confidence=1.0), dict(fpr=0.1, confidence=0)])
def test_operating_point_refuses_bad_input(kw):
    name = "confidence" if "confidence" in kw else "fpr"
    with pytest.raises(ValueError, match=name):
        operating_point([1.0, 0.0], [1, 0], **kw)


# ---- lira_by_shadow_count -----------------------------------------------------------------------

def test_all_the_shadows_reproduce_run_attacks():
    pop = _population()
    curve = lira_by_shadow_count(pop, [4, 8, 16], attacks=("lira_online", "lira_offline_fixed"))
    scores, member = run_attacks(pop, ("lira_online", "lira_offline_fixed"))
    assert list(curve.counts) == [4, 8, 16] and list(curve.groups) == [4, 2, 1]
    for a in ("lira_online", "lira_offline_fixed"):
        r = attack_summary(scores[a], member, fprs=(1e-3,))
        assert curve.tpr[a][-1] == r["tpr@0.001"] and curve.auc[a][-1] == r["auc"]
        assert [len(v) for v in curve.tpr_groups[a]] == [4, 2, 1]
        assert np.allclose(curve.auc[a], [v.mean() for v in curve.auc_groups[a]])


def test_as_many_shadows_as_the_population_has_is_one_group():
    # four shadows, used once each: the curve's single group is the attack itself
    pop = _population(n_shadows=4)
    curve = lira_by_shadow_count(pop, [4], attacks=("lira_online",))
    scores, member = run_attacks(pop, ("lira_online",))
    assert curve.auc["lira_online"][0] == attack_summary(scores["lira_online"], member)["auc"]


def test_more_shadows_help_the_per_record_variance():
    pop = _population(n_shadows=32, n=600)
    curve = lira_by_shadow_count(pop, [4, 32], attacks=("lira_online",))
    assert curve.auc["lira_online"][1] > curve.auc["lira_online"][0]


@pytest.mark.parametrize("kw", [dict(counts=[3]), dict(counts=[5]), dict(counts=[2]),
                                dict(counts=[4, 40]), dict(counts=[]), dict(counts=5),
                                dict(counts=[4.0]), dict(counts=[4], attacks=("loss",)),
                                dict(counts=[4], attacks="lira_online"),
                                dict(counts=[4], fpr=0.0), dict(counts=[4], fpr=1.0)])
def test_lira_by_shadow_count_refuses_bad_input(kw):
    name = "attacks" if "attacks" in kw else ("fpr" if "fpr" in kw else "counts")
    with pytest.raises(ValueError, match=name):
        lira_by_shadow_count(_population(), **kw)


def test_lira_by_shadow_count_needs_a_population():
    with pytest.raises(ValueError, match="pop"):
        lira_by_shadow_count({"masks": None}, [4])


# ---- the figures --------------------------------------------------------------------------------

def test_shadow_count_figure_draws_the_curve():
    curve = lira_by_shadow_count(_population(), [4, 8, 16])
    fig = shadow_count_figure(curve)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    top, bottom = fig.axes
    lines = {ln.get_label(): ln for ln in top.get_lines()}
    assert np.allclose(lines["LiRA online"].get_ydata(), 100 * curve.tpr["lira_online"])
    assert np.allclose(lines["LiRA online"].get_xdata(), curve.counts)
    auc = {ln.get_label(): ln for ln in bottom.get_lines()}
    assert np.allclose(auc["LiRA online, fixed var."].get_ydata(),
                       curve.auc["lira_online_fixed"])
    assert top.get_ylabel() and bottom.get_xlabel() and top.get_title()


def test_shadow_count_figure_refuses_other_objects():
    with pytest.raises(ValueError, match="curve"):
        shadow_count_figure({"counts": [4]})
    assert ShadowCountCurve  # the documented type


def _points():
    pop = _population()
    scores, member = run_attacks(pop, ("loss", "lira_online"))
    return {"non-private": {a: operating_point(scores[a], member, 1e-2) for a in scores},
            "other": {a: operating_point(scores[a][::-1].copy(), member, 1e-2) for a in scores}}


def test_operating_points_figure_draws_the_points_and_intervals():
    points = _points()
    fig = operating_points_figure(points, fpr=1e-2)
    ax = fig.axes[0]
    assert isinstance(fig, Figure) and ax.get_xscale() == "log"
    markers = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
    assert len(markers) == 2
    floor = 0.5 / max(op["members"] for row in points.values() for op in row.values())
    for ln, row in zip(markers, points.values()):
        assert np.allclose(ln.get_xdata(), [max(op["tpr"], floor) for op in row.values()])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["loss threshold", "LiRA online"]
    assert "FPR ≤ 1%" in ax.get_title()


@pytest.mark.parametrize("bad", [{}, [], {"a": {}}, {"a": {"loss": {"tp": 1}}},
                                 {str(i): {"loss": None} for i in range(7)}])
def test_operating_points_figure_refuses_bad_points(bad):
    with pytest.raises(ValueError, match="points"):
        operating_points_figure(bad)


def test_operating_points_figure_needs_the_same_attacks_everywhere():
    points = _points()
    points["other"] = {"loss": points["other"]["loss"]}
    with pytest.raises(ValueError, match="points"):
        operating_points_figure(points)
    with pytest.raises(ValueError, match="fpr"):
        operating_points_figure(_points(), fpr=2.0)


def test_tied_infinite_scores_move_together():
    # a member and a non-member both scored +inf: no threshold separates them, so at FPR 0
    # nobody can be accused (np.diff would see inf - inf = nan as a change of score)
    y = np.array([True, False, True, False])
    s = [np.inf, np.inf, 1.0, 0.0]
    op = operating_point(s, y, 0.0)
    assert (op["tp"], op["fp"], op["tpr"]) == (0, 0, 0.0) == (0, 0, tpr_at_fpr(s, y, 0.0))
    assert operating_point(s, y, 0.5)["tp"] == 2
