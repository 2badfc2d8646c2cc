"""Figures of the randomized-response chapter: the coin-flip probability tree, and two readings
of ε (an attacker's largest posterior, and the largest power of any test).

Every number drawn comes from :mod:`dplib.mechanisms.randomized_response` (truth probabilities,
ε, Bayesian posteriors) or from :func:`dplib.attacks.roc.dp_tpr_bound` (the hypothesis-testing
region of Kairouz, Oh & Viswanath 2015, Theorem 2.1); nothing here is a second copy of them.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
from matplotlib.figure import Figure

from ..attacks.roc import dp_tpr_bound
from ..mechanisms.randomized_response import (coin_flip_p_truth, rr_epsilon, rr_p_truth,
                                              rr_posterior)
from ..plotting import COLORS
from .._common_params import FRACTION_OPEN
from .._constraints import Custom, Interval, constrained
from .._validate import check_real_array, shown

__all__ = ["probability_tree", "posterior_curves", "tradeoff_region"]

#: The ε values both ε figures draw by default; ln 3 is the fair-coin survey.
DEFAULT_EPSILONS = (0.5, float(np.log(3)), 2.0, 5.0)


def _fmt(x: float) -> str:
    """A probability as a short fraction when it is one (1/4), else with 3 significant digits."""
    f = Fraction(x).limit_denominator(64)
    if abs(float(f) - x) < 1e-12 and f.denominator > 1:
        return f"{f.numerator}/{f.denominator}"
    return f"{x:.3g}"


def _eps_label(eps: float) -> str:
    return "ln 3" if np.isclose(eps, np.log(3)) else f"{eps:g}"


def _check_epsilons(epsilons: object) -> np.ndarray:
    eps = check_real_array("epsilons", epsilons, low=0.0)   # finite and > 0
    if eps.ndim != 1 or not 1 <= eps.size <= 8:
        raise ValueError(f"epsilons must be a sequence of 1 to 8 values in (0, inf), "
                         f"got {shown(epsilons)}")
    return eps


#: 1 to 8 values of ε in (0, inf), one curve each.
_EPSILONS = Custom(lambda name, value: _check_epsilons(value),
                   "a sequence of 1 to 8 values in (0, inf)",
                   [[], [0.0], [-1.0], [float("nan")], [float("inf")], [1.0] * 9, "abc", None,
                    [[1.0, 2.0]], [True]])


@constrained(heads=FRACTION_OPEN)
def probability_tree(heads: float = 0.5) -> Figure:
    """The coin-flip survey as a probability tree, for a first coin with P(heads) = ``heads``.

    Each respondent flips the first coin: heads → report the true answer; tails → flip a fair
    second coin and report "yes" on heads, "no" on tails (the two-coin protocol of Dwork & Roth
    2014, §3.2, after Warner 1965). The tree is drawn twice, for a true "yes" and a true "no",
    with each branch's probability and each path's probability; the footer gives
    Pr[report yes | truth], their ratio and ε, from :func:`coin_flip_p_truth` and
    :func:`rr_epsilon`. ``heads`` ∈ (0, 1); the fair coin (0.5) gives 3/4, 1/4 and ε = ln 3.
    """
    h = heads
    p = coin_flip_p_truth(h)                 # Pr[report = truth]
    eps = rr_epsilon(p)
    fig = Figure(figsize=(6.4, 6.6))
    ax = fig.add_axes((0.0, 0.15, 1.0, 0.77))
    ax.set_xlim(-0.05, 5.25)
    ax.set_ylim(-1.0, 6.45)
    ax.axis("off")
    box = dict(boxstyle="round,pad=0.35", lw=1.3)
    node = dict(ha="center", va="center", fontsize=14)
    colour = {"yes": COLORS["private"], "no": COLORS["baseline"]}
    x_root, x_coin, x_leaf, x_prob = 0.4, 2.0, 3.95, 4.65

    def edge(x0, y0, x1, y1, label, gap0, gap1):
        # the arrow runs between the two boxes; its label sits on it, on a white patch
        t0, t1 = gap0 / (x1 - x0), 1 - gap1 / (x1 - x0)
        a = (x0 + t0 * (x1 - x0), y0 + t0 * (y1 - y0))
        b = (x0 + t1 * (x1 - x0), y0 + t1 * (y1 - y0))
        ax.annotate("", xy=b, xytext=a, arrowprops=dict(arrowstyle="-|>", lw=1.6,
                    color=COLORS["neutral"], shrinkA=0, shrinkB=0))
        ax.text((a[0] + b[0]) / 2, (a[1] + b[1]) / 2, label, ha="center", va="center",
                fontsize=13, bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none"))

    for top, truth in ((4.55, "yes"), (1.0, "no")):
        ys = (top + 0.95, top - 0.4, top - 1.6)          # leaves: truthful, 2nd heads, tails
        c2 = (ys[1] + ys[2]) / 2
        ax.text(x_root, top, f"truth\n{truth}", bbox=dict(box, fc="white", ec=colour[truth]),
                **node)
        ax.text(x_coin, c2, "2nd\ncoin", bbox=dict(box, fc="#f2f2f2", ec=COLORS["neutral"]),
                **node)
        edge(x_root, top, x_leaf, ys[0], f"heads {_fmt(h)}", 0.42, 0.5)
        edge(x_root, top, x_coin, c2, f"tails {_fmt(1 - h)}", 0.42, 0.38)
        edge(x_coin, c2, x_leaf, ys[1], "heads 1/2", 0.38, 0.5)
        edge(x_coin, c2, x_leaf, ys[2], "tails 1/2", 0.38, 0.5)
        paths = ((truth, h), ("yes", (1 - h) / 2), ("no", (1 - h) / 2))
        for y, (rep, prob) in zip(ys, paths):
            ax.text(x_leaf, y, f"say {rep}", bbox=dict(box, fc=colour[rep], ec=colour[rep],
                    alpha=0.25), **node)
            ax.text(x_prob, y, _fmt(prob), ha="left", va="center", fontsize=14)
    ax.text(x_prob + 0.15, 6.2, "path\nprob.", ha="center", va="center", fontsize=13,
            color=COLORS["neutral"])
    ratio = p / (1 - p)
    fig.text(0.03, 0.095, f"Pr[say yes | truth yes] = {_fmt(h)} + {_fmt((1 - h) / 2)} = "
             f"{_fmt(p)}", fontsize=13.5, ha="left")
    fig.text(0.03, 0.04, f"Pr[say yes | truth no] = {_fmt(1 - p)};  ratio {_fmt(ratio)}"
             f" = $e^{{\\varepsilon}}$,  ε = {eps:.2f}", fontsize=13.5, ha="left")
    fig.suptitle(f"The coin-flip survey: first coin heads with prob. {_fmt(h)}",
                 fontsize=14, y=0.985)
    return fig


def _curve_colours() -> list[str]:
    """One colour per ε curve (at most 8), in the same order in every figure of the chapter."""
    return [COLORS[k] for k in ("alt", "private", "baseline", "warning", "accent", "truth",
                                "neutral", "alt")]


@constrained(epsilons=_EPSILONS, prior=FRACTION_OPEN)
def posterior_curves(epsilons: object = DEFAULT_EPSILONS, *, prior: float = 0.1) -> Figure:
    """The largest belief an attacker can reach after one output of an ε-DP mechanism.

    For each ε, the curve is π₀ ↦ e^ε π₀ / (e^ε π₀ + 1 − π₀) (posterior odds ≤ e^ε × prior odds;
    Kasiviswanathan & Smith 2014), computed by :func:`rr_posterior` because randomized response
    meets the bound with equality on a "yes" report. The dashed diagonal is "no change"
    (ε → 0). The point at ``prior`` (∈ (0, 1)) is marked on every curve. ``epsilons``: 1 to 8
    values in (0, inf).
    """
    eps, pi0 = epsilons, prior
    grid = np.linspace(0.0, 1.0, 401)
    fig = Figure(figsize=(5.0, 4.0))
    ax = fig.add_subplot()
    ax.plot(grid, grid, ls="--", color=COLORS["neutral"], lw=1.5, label="no change (ε → 0)")
    colours = _curve_colours()
    for e, c in zip(eps, colours):
        ax.plot(grid, rr_posterior(grid, e), color=c, label=f"ε = {_eps_label(e)}")
        ax.plot([pi0], [rr_posterior(pi0, e)], "o", color=c, ms=6)
    ax.axvline(pi0, color=COLORS["neutral"], lw=1, ls=":")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("attacker's belief before (prior)")
    ax.set_ylabel("largest belief after (posterior)")
    ax.set_title("How far one output can move a belief")
    ax.legend(loc="lower right", fontsize=10.5)
    fig.tight_layout()
    return fig


@constrained(epsilons=_EPSILONS, delta=Interval(0.0, 1.0, closed="left"))
def tradeoff_region(epsilons: object = DEFAULT_EPSILONS[:3], *, delta: float = 0.0) -> Figure:
    """The (FPR, TPR) pairs that a test against an (ε, δ)-DP mechanism can reach.

    Every test of "Alice's answer is yes" against "no" (or "Alice is in" against "out") has
    TPR ≤ e^ε·FPR + δ and 1 − FPR ≤ e^ε·(1 − TPR) + δ (Wasserman & Zhou 2010; Kairouz, Oh &
    Viswanath 2015, Theorem 2.1); each curve is that frontier, from :func:`dp_tpr_bound`. The
    marked points are the test "accuse when the report is yes" against ε-randomized response,
    (1 − p, p) with p = :func:`rr_p_truth` (ε): it lies on the frontier's corner. ``epsilons``:
    1 to 8 values in (0, inf); ``delta`` ∈ [0, 1).
    """
    eps, d = epsilons, delta
    fpr = np.linspace(0.0, 1.0, 401)
    fig = Figure(figsize=(5.0, 4.0))
    ax = fig.add_subplot()
    ax.plot(fpr, fpr, ls="--", color=COLORS["neutral"], lw=1.5, label="guessing (ε = 0)")
    colours = _curve_colours()
    for e, c in zip(eps, colours):
        tpr = dp_tpr_bound(fpr, float(e), d)
        ax.plot(fpr, tpr, color=c, label=f"ε = {_eps_label(e)}" + (f", δ = {d:g}" if d else ""))
        ax.fill_between(fpr, fpr, tpr, color=c, alpha=0.08)
        p = rr_p_truth(float(e))
        ax.plot([1 - p], [p], "o", color=c, ms=7)
    ax.plot([], [], "o", color=COLORS["truth"], ms=7, label="randomized response")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.01)
    ax.set_aspect("equal")
    ax.set_xlabel("false-positive rate (FPR)")
    ax.set_ylabel("true-positive rate (TPR)")
    ax.set_title("Every test lies below its ε's curve")
    ax.legend(loc="lower right", fontsize=10.5)
    fig.tight_layout()
    return fig
