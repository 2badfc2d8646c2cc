"""Figures for the membership-inference chapter: how precise an attack's TPR at a low FPR is,
and how LiRA's power grows with the number of shadow models.

Both figures draw numbers computed elsewhere in ``dplib``: the operating points of
:func:`dplib.attacks.roc.operating_point` (counts and Clopper–Pearson intervals) and the curve
of :func:`dplib.experiments.attacks.lira_by_shadow_count`. Nothing is recomputed here.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from .._common_params import optional
from .._constraints import Custom, Interval, constrained
from .._validate import shown
from ..plotting import COLORS

__all__ = ["ATTACK_LABELS", "ATTACK_COLORS", "operating_points_figure", "shadow_count_figure"]

#: Display names of the attacks of :func:`dplib.experiments.attacks.run_attacks`.
ATTACK_LABELS = {"loss": "loss threshold", "shadow": "shadow models (Shokri)",
                 "lira_offline": "LiRA offline", "lira_offline_fixed": "LiRA offline, fixed var.",
                 "lira_online": "LiRA online", "lira_online_fixed": "LiRA online, fixed var."}
#: One colour per attack, the same in every figure of the chapter.
ATTACK_COLORS = {"loss": COLORS["neutral"], "shadow": COLORS["alt"],
                 "lira_offline": COLORS["baseline"], "lira_offline_fixed": COLORS["accent"],
                 "lira_online": COLORS["warning"], "lira_online_fixed": COLORS["private"]}
_SETTING_COLORS = (COLORS["warning"], COLORS["baseline"], COLORS["alt"], COLORS["private"],
                   COLORS["accent"], COLORS["truth"])
_POINT_KEYS = ("tp", "fp", "members", "non_members", "tpr", "fpr", "tpr_ci", "fpr_ci",
               "confidence")


def _check_points(points) -> list[tuple[str, list[tuple[str, dict]]]]:
    if not isinstance(points, Mapping) or not points:
        raise ValueError("points must be a non-empty mapping {setting: {attack: operating "
                         f"point}}, got {type(points).__name__}")
    if len(points) > len(_SETTING_COLORS):
        raise ValueError(f"points must hold at most {len(_SETTING_COLORS)} settings, got "
                         f"{len(points)}")
    out, attacks = [], None
    for setting, row in points.items():
        if not isinstance(row, Mapping) or not row:
            raise ValueError(f"points[{shown(setting)}] must be a non-empty mapping {{attack: "
                             "operating point}}")
        if attacks is None:
            attacks = list(row)
        elif list(row) != attacks:
            raise ValueError(f"points[{shown(setting)}] must list the same attacks as the first "
                             f"setting {attacks}, got {list(row)}")
        for a, op in row.items():
            if not isinstance(op, Mapping) or any(k not in op for k in _POINT_KEYS):
                raise ValueError(f"points[{shown(setting)}][{shown(a)}] must be a result of "
                                 "dplib.attacks.roc.operating_point (keys "
                                 f"{list(_POINT_KEYS)})")
        out.append((str(setting), list(row.items())))
    return out


def _check_curve(name: str, value: object) -> object:
    from ..experiments.attacks import ShadowCountCurve
    if not isinstance(value, ShadowCountCurve):
        raise ValueError(f"{name} must be a ShadowCountCurve (from lira_by_shadow_count), got "
                         f"{type(value).__name__}")
    return value


def _points(name: str, value: object) -> object:
    _check_points(value)
    return value


@constrained(points=Custom(_points,
                           "a non-empty mapping {setting: {attack: operating point}}",
                           [None, {}, 3, "abc", {"a": {}}, {"a": {"loss": {}}}]),
             fpr=optional(Interval(0.0, 1.0, closed="right")))
def operating_points_figure(points, *, fpr: float | None = None) -> Figure:
    """Each attack's TPR at a low FPR with its 95% interval, for several settings at once.

    ``points`` maps a setting (a legend label, e.g. ``"non-private"``, ``"ε = 8"``) to a mapping
    from attack name (a key of :data:`ATTACK_LABELS`, or any label) to the dict returned by
    :func:`dplib.attacks.roc.operating_point`. Rows are the attacks, one marker per setting with
    its Clopper–Pearson interval (as computed there) on a log axis; the grey band is the
    interval of the false-positive rate actually reached (the union over all points). A TPR
    whose interval reaches into the band is not clearly separated from chance (TPR = FPR) at
    this operating point. ``fpr`` (the requested FPR, for the title) defaults to the largest
    achieved FPR.
    """
    rows = _check_points(points)
    attacks = [a for a, _ in rows[0][1]]
    ops = [op for _, row in rows for _, op in row]
    floor = 0.5 / max(op["members"] for op in ops)
    fig = Figure(figsize=(5.0, 1.4 + 0.62 * len(attacks) + 0.12 * len(rows) * len(attacks)))
    ax = fig.subplots()
    f_lo = min(op["fpr_ci"][0] for op in ops)
    f_hi = max(op["fpr_ci"][1] for op in ops)
    fps = sorted({(op["fp"], op["non_members"]) for op in ops})
    fp_text = ", ".join(f"{fp} of {n:,}" for fp, n in fps)
    ax.axvspan(max(f_lo, floor), f_hi, color=COLORS["neutral"], alpha=0.25, lw=0,
               label="FPR reached")
    n = len(rows)
    offsets = (np.arange(n) - (n - 1) / 2) * (0.7 / max(n, 1))
    for j, (setting, row) in enumerate(rows):
        y = np.arange(len(attacks)) + offsets[j]
        tpr = np.array([max(op["tpr"], floor) for _, op in row])
        lo = np.array([max(op["tpr_ci"][0], floor) for _, op in row])
        hi = np.array([max(op["tpr_ci"][1], floor) for _, op in row])
        ax.errorbar(tpr, y, xerr=[tpr - lo, hi - tpr], fmt="o", ms=5, capsize=3, lw=1.4,
                    color=_SETTING_COLORS[j], label=setting)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{100 * v:g}%"))
    ax.set_yticks(np.arange(len(attacks)),
                  [ATTACK_LABELS.get(a, str(a)).replace(", ", ",\n") for a in attacks])
    ax.set_ylim(len(attacks) - 0.5, -0.5)
    top = max(max(op["tpr_ci"][1] for op in ops), f_hi)
    ax.set_xlim(floor, min(1.0, 10 ** (np.ceil(np.log10(top)) + 0.3)))
    ax.set_xlabel("true-positive rate (members accused)")
    shown = max(op["fpr"] for op in ops) if fpr is None else fpr
    levels = sorted({f"{100 * op['confidence']:g}%" for op in ops})
    ax.set_title(f"TPR at FPR ≤ {100 * shown:.2g}%, {'/'.join(levels)} intervals\n"
                 f"(grey: the FPR reached,\n{fp_text} non-members accused)", fontsize=11)
    ax.grid(axis="y", alpha=0)
    ax.legend(loc="upper center", bbox_to_anchor=(0.3, -0.13), ncol=2,
              framealpha=0.95, columnspacing=1.0, handletextpad=0.4)
    fig.tight_layout()
    return fig


@constrained(curve=Custom(_check_curve, "a ShadowCountCurve (from lira_by_shadow_count)",
                          [None, 3, "curve", {}]))
def shadow_count_figure(curve) -> Figure:
    """LiRA's TPR at a low FPR (top) and AUC (bottom) against the number of shadow models.

    ``curve`` is a :class:`dplib.experiments.attacks.ShadowCountCurve`. Lines are the means over
    the disjoint groups of shadows at each count, small dots the single groups; the dotted line
    in the top panel is chance (TPR = FPR). The x-axis counts shadow models per example, half
    IN and half OUT, as in Carlini et al. (2022, Fig. 9).
    """
    k = np.asarray(curve.counts)
    fig = Figure(figsize=(5.0, 6.2))
    ax_t, ax_a = fig.subplots(2, 1, sharex=True)
    for a in curve.tpr:
        col = ATTACK_COLORS.get(a, COLORS["truth"])
        for ax, mean, groups, scale in ((ax_t, curve.tpr[a], curve.tpr_groups[a], 100.0),
                                        (ax_a, curve.auc[a], curve.auc_groups[a], 1.0)):
            for kk, g in zip(k, groups):
                ax.plot(np.full(len(g), kk), scale * np.asarray(g), ".", color=col, alpha=0.45,
                        ms=5)
            ax.plot(k, scale * np.asarray(mean), "o-", color=col, lw=2, ms=6,
                    label=ATTACK_LABELS.get(a, str(a)))
    ax_t.axhline(100 * curve.fpr, ls=":", color="#999999", lw=1.2, label="chance (TPR = FPR)")
    ax_t.set_ylabel(f"TPR at FPR {100 * curve.fpr:g}% (%)")
    ax_t.set_ylim(bottom=0)
    ax_t.legend(loc="upper left")
    ax_t.set_title("LiRA with fewer shadow models (no retraining)", fontsize=11)
    ax_a.set_ylabel("AUC")
    ax_a.set_xscale("log", base=2)
    ax_a.set_xticks(k, [str(int(v)) for v in k])
    ax_a.minorticks_off()
    ax_a.set_xlabel("shadow models per example\n(half IN, half OUT)")
    fig.tight_layout()
    return fig
