"""How good is a membership-inference attack? ROC curves, AUC, and TPR at a fixed low FPR.

An attack outputs a score per example, larger meaning "more likely a member". Thresholding at
``t`` ("member iff score >= t") gives a true-positive rate (members caught) and a false-positive
rate (non-members accused); sweeping ``t`` traces the ROC curve.

Carlini et al. (2022, Sec. III) argue that the area under the curve and the balanced accuracy
average over thresholds where the attack is useless: an attack that identifies 1% of the members
with no false positives is a serious leak even if its AUC is 0.51. They report the TPR at a low
FPR (0.1%, 0.001%) and plot ROC curves on log-log axes, where this regime is visible. This module
computes both.

Conventions (the same as scikit-learn's ``roc_curve(..., drop_intermediate=False)``, which the
tests use as the oracle): the thresholds are the distinct scores in decreasing order, preceded by
``+inf`` (the point (0, 0)); tied scores move together, so a tie produces one diagonal segment.
"""
from __future__ import annotations

import numpy as np

from .._constraints import Custom, Flag, Interval, RealArray, constrained, unconstrained
from .._validate import check_probability, shown
from ..accounting._params import DELTA0
from ._params import CONFIDENCE, RNG
from .audit_stats import clopper_pearson

__all__ = ["roc_curve", "roc_auc", "tpr_at_fpr", "operating_point", "attack_summary", "plot_roc",
           "dp_tpr_bound", "check_membership_labels", "check_scores",
           "population_epsilon_lower_bound"]


@unconstrained("a validator: raising ValueError on bad labels is all it does (used by the "
               "declared functions of this module and dplib.experiments.attacks)")
def check_membership_labels(labels, *, name: str = "labels") -> np.ndarray:
    """A 1-D array of 0/1 membership labels containing both classes, as bool."""
    arr = np.asarray(labels)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of 0/1, got shape {arr.shape}")
    if arr.dtype != bool:
        if not np.issubdtype(arr.dtype, np.number) or not np.all(np.isin(arr, (0, 1))):
            raise ValueError(f"{name} must hold only 0/1 (non-member/member) or booleans")
        arr = arr.astype(bool)
    if arr.all() or not arr.any():
        raise ValueError(f"{name} must contain both members (1) and non-members (0), got "
                         f"{int(arr.sum())} members out of {arr.size}")
    return arr


@unconstrained("a validator: raising ValueError on bad scores is all it does; the number of "
               "scores is a relation with the labels (n)")
def check_scores(scores, n: int | None = None, *, name: str = "scores") -> np.ndarray:
    """A 1-D float array of scores without NaN (±inf allowed: a certain decision)."""
    if hasattr(scores, "detach"):
        scores = scores.detach().cpu().double().numpy()
    arr = np.asarray(scores)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"{name} must be real numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} must hold at least one score, got an empty array")
    if n is not None and arr.size != n:
        raise ValueError(f"{name} must have one entry per label ({n}), got {arr.size}")
    if np.isnan(arr).any():
        raise ValueError(f"{name} must not contain NaN (position {int(np.argmax(np.isnan(arr)))})")
    return arr


#: Membership labels: a non-empty 1-D array of 0/1 (or booleans) with both classes, as bool.
_LABELS = Custom(lambda name, value: check_membership_labels(value, name=name),
                "a non-empty 1-D array of 0/1 with both members and non-members",
                [[], [1, 1], [0, 0], [0, 2], [[0, 1]], ["a", "b"], None, [0.5, 1]],
                family="binary")
#: An FPR (or array of them) in [0, 1].
_FPRS = RealArray(0.0, 1.0, closed="both", nonempty=False, family="prob_array")


def _check_fprs(name: str, value: object) -> tuple:
    try:
        items = tuple(value)
    except TypeError:
        raise ValueError(f"{name} must be a list of rates in [0, 1], got {shown(value)}") from None
    return tuple(check_probability(name, a) for a in items)


@constrained(labels=_LABELS)
def roc_curve(scores, labels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ROC curve ``(fpr, tpr, thresholds)`` of the rule "member iff score >= threshold".

    ``thresholds`` are the distinct scores in decreasing order after a leading ``+inf``; point
    ``k`` counts the examples with score ``>= thresholds[k]``. Equal to scikit-learn's
    ``roc_curve(labels, scores, drop_intermediate=False)``. O(n log n), no loop over examples.
    """
    y = labels
    s = check_scores(scores, y.size)
    order = np.argsort(-s, kind="mergesort")
    s_sorted, y_sorted = s[order], y[order]
    # the last index of every run of tied scores: where the threshold can sit
    last_of_run = np.r_[np.flatnonzero(s_sorted[1:] != s_sorted[:-1]), s_sorted.size - 1]
    tp = np.cumsum(y_sorted)[last_of_run]
    fp = (last_of_run + 1) - tp
    tpr = np.r_[0.0, tp / y.sum()]
    fpr = np.r_[0.0, fp / (~y).sum()]
    thresholds = np.r_[np.inf, s_sorted[last_of_run]]
    return fpr, tpr, thresholds


@constrained(labels=_LABELS)
def roc_auc(scores, labels) -> float:
    """Area under the ROC curve by the trapezoidal rule (ties count one half).

    It equals the Mann–Whitney probability ``P(S_member > S_non) + P(S_member = S_non)/2`` and
    scikit-learn's ``roc_auc_score``.
    """
    fpr, tpr, _ = roc_curve(scores, labels)
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))


@constrained(labels=_LABELS, fpr=_FPRS)
def tpr_at_fpr(scores, labels, fpr) -> float | np.ndarray:
    """The largest TPR among ROC points whose FPR is at most ``fpr`` (no interpolation).

    This is the statistic of Carlini et al. (2022, Table 1): a threshold chosen so that at most a
    fraction ``fpr`` of the non-members are accused. With ``m`` non-members an FPR below ``1/m``
    can only be met by accusing no non-member at all, so quote TPR@0.1% only when ``m`` is well
    above 1000. ``fpr`` may be an array (the result has its shape).
    """
    target = fpr
    f, t, _ = roc_curve(scores, labels)
    idx = np.searchsorted(f, target, side="right") - 1     # f is non-decreasing, f[0] = 0
    out = t[idx]
    return float(out) if out.ndim == 0 else out


@constrained(labels=_LABELS, fpr=Interval(0.0, 1.0, closed="both"), confidence=CONFIDENCE)
def operating_point(scores, labels, fpr: float, *, confidence: float = 0.95) -> dict:
    """The ROC point of :func:`tpr_at_fpr` with its counts and exact binomial intervals.

    The threshold is the one that accuses the most members while accusing at most a fraction
    ``fpr`` of the non-members. Returned keys: ``threshold``, ``tp`` (members accused) of
    ``members``, ``fp`` (non-members accused) of ``non_members``, ``tpr = tp/members``, the
    achieved ``fpr = fp/non_members`` (at most the requested one), and two-sided
    Clopper–Pearson intervals ``tpr_ci`` and ``fpr_ci`` at level ``confidence`` (returned too;
    Clopper & Pearson 1934; :func:`dplib.attacks.audit_stats.clopper_pearson`).

    What the intervals mean: each is the exact interval for a binomial count, so it treats the
    scored examples as independent trials and the threshold as fixed. The threshold here is read
    off the same data, and (target model, example) pairs that share a target model are not
    independent, so the level is nominal. The intervals still show the point that matters
    at a low FPR: with ``m`` non-members, FPR ≤ ``fpr`` allows only ``⌊fpr·m⌋`` false positives,
    and a rate resting on a handful of counts is uncertain by a factor of several (Carlini et
    al. 2022, Sec. III, on reporting TPR at low FPR).
    """
    y, target, conf = labels, fpr, confidence
    s = check_scores(scores, y.size)
    f, t, thr = roc_curve(s, y)
    idx = int(np.searchsorted(f, target, side="right") - 1)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    tp, fp = int(round(t[idx] * n_pos)), int(round(f[idx] * n_neg))   # the counts of that point
    return {"threshold": float(thr[idx]), "tp": tp, "fp": fp, "members": n_pos,
            "non_members": n_neg,
            "tpr": tp / n_pos, "fpr": fp / n_neg,
            "tpr_ci": clopper_pearson(tp, n_pos, conf), "fpr_ci": clopper_pearson(fp, n_neg, conf),
            "confidence": conf}


@constrained(labels=_LABELS,
             fprs=Custom(_check_fprs, "a list of rates in [0, 1]",
                         [0.1, [1.5], [-0.1], [np.nan], ["0.1"], None]))
def attack_summary(scores, labels, fprs=(1e-3, 1e-2)) -> dict:
    """AUC, TPR at each FPR in ``fprs``, the membership advantage ``max(TPR - FPR)`` (Yeom et
    al. 2018, Def. 4) and the best balanced accuracy ``(1 + advantage)/2``.

    Keys: ``"auc"``, ``"advantage"``, ``"accuracy"``, ``"tpr@<fpr>"`` (e.g. ``"tpr@0.001"``),
    ``"members"``, ``"non_members"``.
    """
    y = labels
    f, t, _ = roc_curve(scores, y)
    adv = float(np.max(t - f))
    out = {"auc": float(np.sum(np.diff(f) * (t[1:] + t[:-1]) / 2)), "advantage": adv,
           "accuracy": (1 + adv) / 2, "members": int(y.sum()), "non_members": int((~y).sum())}
    for a in fprs:
        out[f"tpr@{a:g}"] = float(t[np.searchsorted(f, a, side="right") - 1])
    return out


@constrained(fpr=_FPRS, epsilon=Interval(0.0, np.inf, closed="both"),
             delta=DELTA0)
def dp_tpr_bound(fpr, epsilon: float, delta: float = 0.0) -> np.ndarray | float:
    """The largest TPR any test can reach at a given FPR against an (ε, δ)-DP mechanism.

    Kairouz, Oh & Viswanath (2015, Theorem 2.1): a mechanism is (ε, δ)-DP iff every test of
    "D" against "D'" (here: member against non-member) has

        TPR ≤ e^ε · FPR + δ   and   1 − FPR ≤ e^ε · (1 − TPR) + δ ,

    the second being the first for the complementary test with the roles of D and D' swapped.
    So TPR ≤ min(e^ε·FPR + δ, 1 − e^{−ε}(1 − δ − FPR)), capped at 1; ``epsilon=inf`` gives 1.
    Vectorised over ``fpr``.

    Adjacency: D and D' must be neighbours under the relation the guarantee was proved for —
    with add/remove, the training set with and without the target record; with replace-one, the
    target record against another record in its place (a fixed-size training set, as in the
    random-halves game of Carlini et al. 2022). Averaging over a random rest of the training
    set keeps the bound (both inequalities are linear in (FPR, TPR)).
    """
    f, d = fpr, delta
    if np.isinf(epsilon):
        out = np.ones_like(f)
    else:
        e = float(np.exp(epsilon))
        out = np.minimum(np.minimum(e * f + d, 1.0 - (1.0 - d - f) / e), 1.0)
    return float(out) if out.ndim == 0 else out


@constrained(labels=_LABELS, log=Flag(), diagonal=Flag())
def plot_roc(ax, scores, labels, *, label: str | None = None, log: bool = True,
             diagonal: bool = True, **plot_kwargs):
    """Draw the ROC curve on ``ax`` (log-log by default) and return the line.

    On log axes a point with FPR = 0 cannot be drawn: the curve starts at the first non-zero
    FPR, TPRs of 0 are drawn at the floor, and both axes start at ``1/m`` (m non-members), the
    smallest FPR these data can resolve (the smallest over repeated calls on the same axes).
    ``diagonal=True`` adds the chance line TPR = FPR once per axes.
    """
    y = labels
    f, t, _ = roc_curve(scores, y)
    floor = min(1.0 / (~y).sum(), getattr(ax, "_dpbook_floor", 1.0))
    ax._dpbook_floor = floor
    if log:
        keep = f > 0
        f, t = f[keep], np.maximum(t[keep], floor)
        ax.set_xscale("log")
        ax.set_yscale("log")
    (line,) = ax.plot(f, t, label=label, **plot_kwargs)
    if diagonal and not getattr(ax, "_dpbook_diagonal", False):
        grid = np.geomspace(floor, 1, 50) if log else np.array([0.0, 1.0])
        ax.plot(grid, grid, ls=":", color="#999999", lw=1, label="chance (TPR = FPR)")
        ax._dpbook_diagonal = True
    if log:
        ax.set_xlim(floor, 1.0)
        ax.set_ylim(floor, 1.0)
    ax.set_xlabel("false-positive rate")
    ax.set_ylabel("true-positive rate")
    return line


@constrained(membership=_LABELS, delta=DELTA0, confidence=CONFIDENCE, rng=RNG)
def population_epsilon_lower_bound(scores, membership, *, delta: float = 0.0,
                                   confidence: float = 0.95, rng):
    """ε lower bound from pooled (target, example) membership trials via
    :func:`dplib.attacks.audit_stats.audit_from_samples` (threshold chosen on a random half of
    the members and non-members, counted on the other half).

    NOMINAL confidence only: pooled trials that share target models are not independent
    (:func:`dplib.experiments.attacks.run_attacks` pools T targets; the Clopper–Pearson
    interval assumes independent trials, Jagielski et al. 2020, Sec. 3), so the interval's width
    is optimistic. Returns the :class:`~dplib.attacks.audit_stats.AuditResult`.
    """
    from .audit_stats import audit_from_samples
    lab, gen = membership, rng
    s = check_scores(scores, lab.size)
    return audit_from_samples(gen.permutation(s[lab]), gen.permutation(s[~lab]), delta=delta,
                              confidence=confidence)
