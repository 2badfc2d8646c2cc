"""Figures for DP-SGD: the pipeline of one step, the per-example gradient norms against the
clipping norm, and the course of one training run.

* :func:`pipeline_figure` — one DP-SGD step as a diagram (Abadi et al. 2016, Algorithm 1, with
  Poisson batches and the noisy sum divided by the public expected batch size, as
  :func:`dplib.training.noisy_gradient` computes it), with the accountant beside the noise.
* :func:`gradient_norm_histogram` — histograms of per-example gradient norms (computed by
  :func:`dplib.training.per_example_grads` and ``flat_norms``, or ``ghost_norms``) on a log
  scale, the clipping norm C marked and the clipped share of each set in the legend
  (:func:`clipped_fraction`).
* :func:`training_run_figure` — ε spent and test accuracy of a :func:`dplib.training.train` run
  with the run stopped after a chosen number of epochs highlighted; the chapter's widget draws it.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from .._common_params import POSITIVE, PROBABILITY, int_range, optional
from .._constraints import Custom, Integer, Interval, constrained
from .._validate import check_real, shown
from ..plotting import COLORS
from ..widgets import format_value

__all__ = ["pipeline_figure", "clipped_fraction", "gradient_norm_histogram",
           "training_run_figure"]


# --- the pipeline of one step --------------------------------------------------------------------

@constrained(noise_multiplier=optional(POSITIVE), max_grad_norm=optional(POSITIVE),
             sample_rate=optional(Interval(0.0, 1.0, closed="right")),
             n=optional(Integer(min=1)))
def pipeline_figure(*, noise_multiplier: float | None = None, max_grad_norm: float | None = None,
                    sample_rate: float | None = None, n: int | None = None) -> Figure:
    """One step of DP-SGD as a diagram: batch → per-example gradients → clip → sum → noise →
    divide by the public expected batch size → optimizer step, with the accountant beside it.

    The steps are those of :func:`dplib.training.noisy_gradient` and :func:`dplib.training.train`
    (Abadi et al. 2016, Algorithm 1; Poisson batches as in their moments-accountant analysis):
    the steps above the noise read the private data and bound one record's influence on the sum
    by C (add/remove adjacency); the noise makes the sum a subsampled Gaussian mechanism with
    noise multiplier σ, which is all the accountant sees; everything after it is post-processing.

    Optional values are written into the boxes: ``noise_multiplier`` σ > 0, ``max_grad_norm``
    C > 0 (finite), ``sample_rate`` q in (0, 1], ``n`` the number of records (an integer ≥ 1;
    with q it gives the divisor qn).
    """
    sigma, c, q, size = noise_multiplier, max_grad_norm, sample_rate, n

    def val(text: str, value: float | None, name: str) -> str:
        return text if value is None else f"{text}, {name} = {value:g}"

    divisor = "public $qn$" if q is None or size is None else f"public $qn$ = {q * size:,.4g}"
    steps = [
        ("Poisson batch $B_t$", "each record joins w.p. $q$"
         + ("" if q is None else f" = {q:g}"), "data"),
        ("per-example gradients", r"$g_i = \nabla_\theta\, \ell(\theta_t; x_i)$, $i \in B_t$",
         "data"),
        ("clip each to norm $C$", val(r"$\bar g_i = g_i \min(1,\, C/\Vert g_i\Vert)$", c, "$C$"),
         "data"),
        ("sum", r"$\Sigma_{i \in B_t}\, \bar g_i$: one record moves it by $\leq C$", "data"),
        ("add Gaussian noise", r"$\mathcal{N}(0, \sigma^2 C^2 I)$"
         + ("" if sigma is None else f", σ = {sigma:.3g}"), "noise"),
        ("divide by", divisor, "post"),
        ("optimizer step", r"SGD, momentum, Adam $\to \theta_{t+1}$", "post"),
    ]
    fill = {"data": "#E8F1F8", "noise": "#FBE3D6", "post": "#EEEEEE"}
    edge = {"data": COLORS["private"], "noise": COLORS["warning"], "post": COLORS["neutral"]}

    fig = Figure(figsize=(5.2, 6.6))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.axis("off")
    x0, w, h = 0.16, 0.54, 0.105
    top, gap = 0.875, 0.135
    centres = []
    for k, (head, body, kind) in enumerate(steps):
        yc = top - k * gap
        centres.append(yc)
        ax.add_patch(FancyBboxPatch((x0, yc - h / 2), w, h, boxstyle="round,pad=0.006",
                                    fc=fill[kind], ec=edge[kind], lw=1.6))
        ax.text(x0 + w / 2, yc + 0.019, head, ha="center", va="center", fontsize=11.5,
                fontweight="bold")
        ax.text(x0 + w / 2, yc - 0.021, body, ha="center", va="center", fontsize=10.5)
        if k:
            ax.add_patch(FancyArrowPatch((x0 + w / 2, centres[k - 1] - h / 2 - 0.004),
                                         (x0 + w / 2, yc + h / 2 + 0.006),
                                         arrowstyle="-|>", mutation_scale=14, lw=1.4,
                                         color="#333333"))
    # the loop back to the next step
    xl = 0.085
    ax.plot([x0, xl, xl], [centres[-1], centres[-1], centres[0]], color=COLORS["neutral"],
            lw=1.3, ls="--")
    ax.add_patch(FancyArrowPatch((xl, centres[0]), (x0 - 0.004, centres[0]), arrowstyle="-|>",
                                 mutation_scale=14, lw=1.3, color=COLORS["neutral"]))
    ax.text(xl - 0.03, (centres[0] + centres[-1]) / 2, "next step ($T$ steps in all)",
            ha="center", va="center", fontsize=10.5, color="#555555", rotation=90)
    # brackets: what reads the data, what is free
    for kinds, label, colour in ((("data",), "reads the\nprivate data", COLORS["private"]),
                                 (("post",), "post-\nprocessing:\nfree", "#555555")):
        ys = [yc for yc, s in zip(centres, steps) if s[2] in kinds]
        lo, hi = min(ys) - h / 2, max(ys) + h / 2
        xb = x0 + w + 0.025
        ax.plot([xb, xb + 0.015, xb + 0.015, xb], [hi, hi, lo, lo], color=colour, lw=1.4)
        ax.text(xb + 0.03, (lo + hi) / 2, label, ha="left", va="center", fontsize=10.5,
                color=colour)
    # the accountant, beside the noise
    y_noise = centres[4]
    ax_x, ax_w, ax_h = 0.745, 0.245, 0.15
    y_acc = y_noise - 0.005
    ax.add_patch(FancyBboxPatch((ax_x, y_acc - ax_h / 2), ax_w, ax_h,
                                boxstyle="round,pad=0.006", fc="white", ec=COLORS["alt"],
                                lw=1.8))
    ax.text(ax_x + ax_w / 2, y_acc + 0.045, "accountant", ha="center", va="center",
            fontsize=11.5, fontweight="bold", color=COLORS["alt"])
    ax.text(ax_x + ax_w / 2, y_acc - 0.02, "sees only $(\\sigma, q)$\nper step;\n"
            "$\\varepsilon$ after $T$ steps", ha="center", va="center", fontsize=10.5,
            linespacing=1.25)
    ax.add_patch(FancyArrowPatch((x0 + w + 0.004, y_noise), (ax_x - 0.004, y_noise),
                                 arrowstyle="-|>", mutation_scale=14, lw=1.4,
                                 color=COLORS["alt"]))
    ax.text(0.5, 0.985, "One step $t$ of DP-SGD", ha="center", va="top", fontsize=12.5,
            fontweight="bold")
    return fig


# --- per-example gradient norms ------------------------------------------------------------------

def _as_norms(name: str, values: object) -> np.ndarray:
    """A non-empty 1-d array of finite norms ≥ 0 (a torch tensor is read as its values)."""
    if hasattr(values, "detach") and hasattr(values, "cpu"):
        values = values.detach().cpu().numpy()
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.size == 0 or arr.dtype == bool \
            or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must be a non-empty 1-d array of gradient norms >= 0, got "
                         f"{shown(values)}"[:300])
    arr = arr.astype(float)
    bad = ~np.isfinite(arr) | (arr < 0)
    if bad.any():
        raise ValueError(f"{name} must hold finite norms >= 0, got {shown(float(arr[bad][0]))}")
    return arr


def _norm_sets(name: str, value: object) -> object:
    if not isinstance(value, Mapping) or not 1 <= len(value) <= 4:
        raise ValueError(f"{name} must be a mapping of 1 to 4 labels to arrays of gradient "
                         f"norms, got {shown(value)}"[:300])
    for label, values in value.items():
        if not isinstance(label, str) or not label:
            raise ValueError(f"{name} must be keyed by non-empty string labels, got "
                             f"{shown(label)}")
        _as_norms(f"{name}[{label!r}]", values)
    return value


_BAD_NORMS = [[], [-1.0], [float("nan")], [float("inf")], "abc", None, [[1.0, 2.0]], [True]]


@constrained(norms=Custom(_as_norms, "a non-empty 1-d array of gradient norms >= 0",
                          _BAD_NORMS), max_grad_norm=POSITIVE)
def clipped_fraction(norms: object, max_grad_norm: float) -> float:
    """The share of per-example gradients that clipping to ``max_grad_norm`` C changes:
    those with norm > C (the count behind :attr:`dplib.training.release.NotPrivate.clip_fraction`).

    ``norms``: a non-empty 1-d array (or tensor) of norms ≥ 0; C > 0 and finite.
    """
    return float(np.mean(norms > max_grad_norm))


@constrained(norms=Custom(_norm_sets, "a mapping of 1 to 4 labels to arrays of gradient norms",
                          [None, {}, [1.0], {"": [1.0]}, {3: [1.0]}, {"a": [-1.0]},
                           {"a": []}, {"a": [float("nan")]}, "abc",
                           dict.fromkeys("abcde", [1.0])]),
             max_grad_norm=POSITIVE, bins=int_range(5, 200, family="int1"))
def gradient_norm_histogram(norms: Mapping[str, object], max_grad_norm: float, *,
                            bins: int = 40) -> Figure:
    """Histograms of per-example gradient norms on a log scale, with the clipping norm C marked.

    ``norms`` maps a label (say, "at initialisation") to a 1-d array or tensor of per-example
    norms, e.g. ``flat_norms(per_example_grads(model, loss, X, y))``; one to four sets. Each set
    is drawn as the share of its examples per bin (so sets of different sizes compare), over
    ``bins`` (an integer in [5, 200]) log-spaced bins covering every set and C; a norm of
    exactly 0 is counted in the first bin. The legend gives each set's clipped share
    (:func:`clipped_fraction`: norms above C, which clipping scales down to C). ``max_grad_norm``
    C > 0 and finite.
    """
    sets = {label: _as_norms(f"norms[{label!r}]", values) for label, values in norms.items()}
    c, nbins = max_grad_norm, bins
    positive = np.concatenate([v[v > 0] for v in sets.values()] + [np.array([c])])
    lo, hi = positive.min() / 1.5, max(positive.max(), c) * 1.5
    edges = np.geomspace(lo, hi, nbins + 1)
    k = len(sets)
    fig = Figure(figsize=(5.0, 1.0 + 2.1 * k))
    axes = np.atleast_1d(fig.subplots(k, 1, sharex=True))
    palette = ("neutral", "private", "alt", "accent")
    for ax, (label, v), colour in zip(axes, sets.items(), palette):
        share = clipped_fraction(v, c)
        ax.hist(np.maximum(v, lo), bins=edges, weights=np.full(v.size, 1.0 / v.size),
                color=COLORS[colour], alpha=0.6, edgecolor=COLORS[colour], lw=1.0)
        ax.axvline(c, color=COLORS["warning"], lw=2.2, ls="--")
        ax.text(c * 1.15, 0.95, f"C = {c:g}", transform=ax.get_xaxis_transform(), ha="left",
                va="top", fontsize=11, color=COLORS["warning"], fontweight="bold")
        ax.set_title(f"{label}: {100 * share:.0f}% above C, clipped", fontsize=11.5)
        ax.set_ylabel("share")
    axes[-1].set_xscale("log")
    axes[-1].set_xlabel("per-example gradient norm $\\Vert g_i \\Vert$ (log scale)")
    fig.tight_layout()
    return fig


# --- one training run ----------------------------------------------------------------------------

def _train_result(name: str, value: object) -> object:
    from ..training.trainer import TrainResult
    if not isinstance(value, TrainResult):
        raise ValueError(f"{name} must be a dplib.training.TrainResult, got "
                         f"{type(value).__name__}")
    return value


@constrained(result=Custom(_train_result, "a dplib.training.TrainResult", [None, 3, {}]),
             reference_accuracy=optional(PROBABILITY))
def training_run_figure(result: object, stop_epochs: float, *,
                        reference_accuracy: float | None = None) -> Figure:
    """ε spent and test accuracy of a :func:`dplib.training.train` run, stopped after
    ``stop_epochs`` epochs.

    ``result`` is a :class:`dplib.training.TrainResult` of a private run (σ > 0) trained with
    ``eval_data``; the whole run is drawn faintly and its first ``stop_epochs`` epochs
    (T = round(epochs/q) steps, :func:`dplib.training.steps_for_epochs`; at most the run's length)
    in full, with the values at the last history entry at or before step T in the titles. With
    a fixed seed and a fixed σ, stopping a run after T steps *is* the run of T steps (same
    batches, same noise draws), and its ε is the accountant's ε after T steps, which the history
    records. ``reference_accuracy`` in [0, 1] draws a dashed line (a non-private model).
    """
    from ..training.config import steps_for_epochs

    hist = result.history
    if not hist or any(h.get("test_accuracy") is None for h in hist) \
            or not math.isfinite(result.epsilon):
        raise ValueError("result must be a private run (noise_multiplier > 0) trained with "
                         "eval_data, so that its history holds ε and the test accuracy")
    top = result.steps * result.sample_rate
    e = check_real("stop_epochs", stop_epochs, low=0.0, high=top * (1 + 1e-9),
                   high_open=False)
    ref = reference_accuracy
    stop = min(steps_for_epochs(e, result.sample_rate), result.steps)
    upto = [h for h in hist if h["step"] <= stop] or hist[:1]
    at = upto[-1]
    ep_all = [h["epoch"] for h in hist]
    ep = [h["epoch"] for h in upto]
    blue = COLORS["private"]
    fig = Figure(figsize=(5.0, 5.8))
    axes = fig.subplots(2, 1, sharex=True)
    for ax, key in zip(axes, ("epsilon", "test_accuracy")):
        ax.plot(ep_all, [h[key] for h in hist], color=blue, alpha=0.25, lw=1.5)
        ax.plot(ep, [h[key] for h in upto], color=blue, lw=2.2)
        ax.plot([at["epoch"]], [at[key]], "o", color=blue, ms=7)
        ax.axvline(at["epoch"], color=COLORS["neutral"], ls=":", lw=1.2)
        ax.set_xlim(0, top * 1.02)
    axes[1].set_xlabel("epoch")
    axes[0].set_ylim(0, 1.08 * max(h["epsilon"] for h in hist))
    axes[0].set_ylabel(f"ε spent (δ = {format_value(result.delta)})")
    axes[0].set_title(f"σ = {result.noise_multiplier:.3g}, q = {result.sample_rate:g}: "
                      f"ε = {at['epsilon']:.3g} after {at['epoch']:.3g} epochs", fontsize=11.5)
    if ref is not None:
        axes[1].axhline(ref, color=COLORS["baseline"], ls="--", lw=1.6, label="non-private")
        axes[1].legend(loc="lower right", fontsize=10, frameon=False)
    axes[1].set_ylim(0, 1)
    axes[1].set_ylabel("test accuracy")
    share = result.not_private.clip_fraction
    clipped = f"; {100 * share:.0f}% clipped over the run" if math.isfinite(share) else ""
    axes[1].set_title(f"test accuracy {at['test_accuracy']:.3f} (C = {result.max_grad_norm:g}"
                      f"{clipped})", fontsize=11.5)
    fig.tight_layout()
    return fig
