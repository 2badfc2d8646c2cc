"""Figures for amplification by subsampling: the pair of output laws of one sampled Gaussian step,
and the amplified ε′(ε, q) of the generic theorem.

* :func:`draw_subsampled_pair` — one step of the Poisson-subsampled Gaussian mechanism in one
  dimension under add/remove adjacency: without the record the output is Q = N(0, σ²), with it
  P = (1 − q)·N(0, σ²) + q·N(1, σ²) (Mironov, Talwar & Zhang 2019, §3, the pair every accountant
  of :mod:`dplib.accounting` analyses; units of the clipping norm C).
* :func:`draw_amplification_curves` — ε′ = ln(1 + q(e^ε − 1)) against ε for several q (Balle,
  Barthe & Gaboardi 2018, Thm 8 for Poisson sampling, Thm 9 without replacement), from
  :func:`dplib.accounting.amplified_epsilon`, with the simple bound 2qε for ε ≤ 1 from
  :func:`dplib.accounting.amplified_epsilon_bound`.
* :func:`amplification_figure` — both panels, stacked so that they stay readable on a phone.
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from scipy.stats import norm

from .._common_params import AXES, FRACTION_OPEN
from .._constraints import Custom, Interval, constrained
from .._validate import check_probability, shown
from ..accounting import amplified_epsilon, amplified_epsilon_bound
from ..plotting import COLORS

__all__ = ["draw_subsampled_pair", "draw_amplification_curves", "amplification_figure"]

#: Colours of the ε′ curves, one per sample rate, in the order given.
_CURVE_COLORS = ("truth", "private", "alt", "baseline", "accent", "warning")


def _check_rates(sample_rates: object) -> tuple[float, ...]:
    try:
        rates = tuple(sample_rates)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"sample_rates must be a sequence of 1 to {len(_CURVE_COLORS)} rates "
                         f"in (0, 1], got {shown(sample_rates)}") from None
    if not 1 <= len(rates) <= len(_CURVE_COLORS):
        raise ValueError(f"sample_rates must hold 1 to {len(_CURVE_COLORS)} rates in (0, 1], "
                         f"got {len(rates)}")
    return tuple(check_probability("sample_rates", q, low_open=True) for q in rates)


#: σ in (0, 100], q in (0, 1), 1 to 6 rates in (0, 1], ε_max in (1, 50] (declared once for the
#: three functions).
_SIGMA = Interval(0.0, 100.0, closed="right", family="pos")
_RATES = Custom(lambda name, value: _check_rates(value),
                f"a sequence of 1 to {len(_CURVE_COLORS)} rates in (0, 1]",
                [[], [0.0], [1.5], [float("nan")], 0.5, None, "abc", [0.5] * 7, [True]])
_EPSILON_MAX = Interval(1.0, 50.0, closed="right")


@constrained(ax=AXES, noise_multiplier=_SIGMA, sample_rate=FRACTION_OPEN)
def draw_subsampled_pair(ax: Axes, noise_multiplier: float = 1.0,
                         sample_rate: float = 0.2) -> dict[str, np.ndarray]:
    """Draw the densities of one Poisson-subsampled Gaussian step on ``ax`` and return them.

    In units of the clipping norm, the released value is the record's contribution (1 when it is
    sampled, with probability q) plus N(0, σ²) noise; the other records add a known constant,
    taken as 0. Without the record (data set D) the output law is Q = N(0, σ²); with it (D′)
    P = (1 − q)·N(0, σ²) + q·N(1, σ²), the worst-case pair of Mironov, Talwar & Zhang 2019 (§3).
    The law N(1, σ²) of a step that always uses the record (q = 1) is drawn dashed for contrast.

    Parameters: ``noise_multiplier`` σ in (0, 100]; ``sample_rate`` q in (0, 1).
    Returns the grid ``"x"`` and the densities ``"Q"``, ``"P"`` and ``"full"`` (N(1, σ²)).
    """
    sigma, q = noise_multiplier, sample_rate
    x = np.linspace(-3.5 * sigma, 1.0 + 3.5 * sigma, 801)
    dens_q = norm.pdf(x, 0.0, sigma)
    full = norm.pdf(x, 1.0, sigma)
    dens_p = (1.0 - q) * dens_q + q * full
    ax.plot(x, dens_q, color=COLORS["neutral"], lw=3, label="Q: without x, N(0, σ²)")
    ax.plot(x, dens_p, color=COLORS["private"],
            label=f"P: with x, {1 - q:g}·N(0, σ²) + {q:g}·N(1, σ²)")
    ax.plot(x, full, "--", color=COLORS["warning"], lw=1.5, label="x always used: N(1, σ²)")
    ax.fill_between(x, dens_q, dens_p, color=COLORS["private"], alpha=0.25, lw=0)
    ax.set_xlabel("released value (units of C)")
    ax.set_ylabel("density")
    ax.set_title(f"(a) One step, σ = {sigma:g}, x sampled with prob. q = {q:g}")
    ax.set_ylim(0, 1.45 * max(dens_q.max(), full.max()))
    ax.legend(loc="upper left", fontsize=10, frameon=False)
    ax.tick_params(labelsize=11)
    return {"x": x, "Q": dens_q, "P": dens_p, "full": full}


@constrained(ax=AXES, sample_rates=_RATES, epsilon_max=_EPSILON_MAX)
def draw_amplification_curves(ax: Axes, sample_rates: object = (1.0, 0.1, 0.01, 0.001),
                              epsilon_max: float = 10.0) -> dict[float, np.ndarray]:
    """Draw ε′(ε, q) = ln(1 + q(e^ε − 1)) against ε on log–log axes, one curve per q, and return
    ``{q: ε′}`` (with the grid of ε under the key ``"epsilon"``).

    Balle, Barthe & Gaboardi 2018, Thm 8 (Poisson sampling, add/remove) and Thm 9 (m of n without
    replacement, q = m/n, replace-one); values from :func:`dplib.accounting.amplified_epsilon`.
    For q < 1 the simple bound 2qε (valid for ε ≤ 1, :func:`dplib.accounting.
    amplified_epsilon_bound`) is drawn dotted on [0.01, 1].

    Parameters: ``sample_rates``, 1 to 6 rates in (0, 1]; ``epsilon_max`` in (1, 50], the right
    end of the ε axis (which starts at 0.01).
    """
    rates, e_max = sample_rates, epsilon_max
    eps = np.geomspace(0.01, e_max, 200)
    small = np.geomspace(0.01, 1.0, 50)
    out: dict = {"epsilon": eps}
    for q, key in zip(rates, _CURVE_COLORS):
        e1 = np.asarray(amplified_epsilon(eps, q))
        out[q] = e1
        label = "q = 1 (no sampling)" if q == 1.0 else f"q = {q:g}"
        ax.plot(eps, e1, color=COLORS[key], label=label)
        if q < 1.0:
            ax.plot(small, np.asarray(amplified_epsilon_bound(small, q)), ":",
                    color=COLORS[key], lw=1.5)
    ax.plot([], [], ":", color=COLORS["neutral"], lw=1.5, label="2qε (for ε ≤ 1)")
    ax.axvline(1.0, color=COLORS["neutral"], lw=1, alpha=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(0.01, e_max)
    ax.set_ylim(max(0.5 * 0.01 * min(rates), 1e-6), 2 * e_max)
    ax.set_xlabel("ε of one step on its input")
    ax.set_ylabel("ε′ after subsampling")
    ax.set_title(r"(b) Amplification: $\varepsilon' = \ln(1 + q(e^{\varepsilon} - 1))$")
    ax.legend(loc="lower right", fontsize=10, frameon=False)
    ax.tick_params(labelsize=11)
    return out


@constrained(noise_multiplier=_SIGMA, sample_rate=FRACTION_OPEN, sample_rates=_RATES,
             epsilon_max=_EPSILON_MAX)
def amplification_figure(noise_multiplier: float = 1.0, sample_rate: float = 0.2,
                         sample_rates: object = (1.0, 0.1, 0.01, 0.001),
                         epsilon_max: float = 10.0) -> Figure:
    """Both panels stacked: (a) :func:`draw_subsampled_pair` with ``noise_multiplier`` and
    ``sample_rate``; (b) :func:`draw_amplification_curves` with ``sample_rates`` and
    ``epsilon_max`` (the same ranges as there). Returns a pyplot Figure, so that ``plt.show()``
    displays it in a notebook; the caller closes it. Bad input raises ``ValueError`` before any
    figure is created."""
    fig = plt.figure(figsize=(5.0, 7.4), layout="constrained")
    ax_a, ax_b = fig.subplots(2, 1)
    draw_subsampled_pair(ax_a, noise_multiplier, sample_rate)
    draw_amplification_curves(ax_b, sample_rates, epsilon_max)
    return fig
