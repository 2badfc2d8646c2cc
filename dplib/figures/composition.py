"""Figures of the composition chapter: the privacy loss tail and the accountants compared.

* :func:`privacy_loss_tail_figure` — the privacy loss L ∼ N(μ²/2, μ²) of a Gaussian mechanism
  (Dong, Roth & Su 2022, Sec. 2; Balle & Wang 2018, Thm 8) with the two quantities a reader
  confuses: the tail probability P[L > ε], which bounds δ, and the exact
  δ(ε) = E[(1 − e^{ε−L})₊] (Balle & Wang 2018; Sommer, Meiser & Mohammadi 2019, Thm 1), which
  discounts every loss just above ε.
* :func:`accountants_figure` — k Gaussian steps accounted five ways (basic, advanced and optimal
  (ε, δ) composition, RDP, PLD) against the exact curve, and the composed privacy loss
  distribution computed by FFT (Koskela, Jälkö & Honkela 2020) against its exact law.

Every number drawn comes from :mod:`dplib.accounting` or :mod:`dplib.mechanisms`; only the normal
density and tail of the Gaussian privacy loss are evaluated here (with scipy).
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from scipy import stats

from .._common_params import FRACTION_OPEN, int_range
from .._constraints import Interval, constrained
from ..accounting import (DEFAULT_ORDERS, PLDAccountant, advanced_composition, compose,
                          gaussian_rdp, optimal_composition_epsilon, rdp_to_epsilon,
                          subsampled_gaussian_pld)
from ..mechanisms import gaussian_delta, gaussian_epsilon
from ..plotting import COLORS

__all__ = ["privacy_loss_tail_figure", "accountants_figure", "MAX_COMPOSITIONS"]

#: Largest k :func:`accountants_figure` draws (its cost grows with k).
MAX_COMPOSITIONS = 100_000


@constrained(mu=Interval(0.0, 20.0, closed="right"), epsilon=Interval(0.0, 100.0, closed="both"))
def privacy_loss_tail_figure(mu: float = 1.0, epsilon: float = 1.0) -> Figure:
    """Density of the Gaussian privacy loss L ∼ N(μ²/2, μ²), with P[L > ε] and δ(ε) shaded.

    μ = Δ/σ is the Gaussian mechanism's sensitivity over its noise standard deviation. The
    light area is the tail P[L > ε] = Φ̄((ε − μ²/2)/μ); the dark area is the integrand of
    δ(ε) = E[(1 − e^{ε−L})₊], the exact (Balle & Wang 2018, Thm 8) value taken from
    :func:`dplib.mechanisms.gaussian_delta` at σ/Δ = 1/μ. ``mu`` must be in (0, 20] and
    ``epsilon`` in [0, 100].
    """
    eps = epsilon
    mean, sd = mu**2 / 2, mu
    tail = float(stats.norm.sf(eps, mean, sd))
    delta = float(gaussian_delta(1.0 / mu, eps))
    lo = min(mean - 4.5 * sd, eps - 0.5 * sd)
    hi = max(mean + 4.5 * sd, eps + 2.5 * sd)
    x = np.linspace(lo, hi, 800)
    dens = stats.norm.pdf(x, mean, sd)
    weighted = np.where(x > eps, -np.expm1(np.minimum(eps - x, 0.0)), 0.0) * dens

    fig, ax = plt.subplots(figsize=(5.0, 3.6))
    ax.plot(x, dens, color=COLORS["truth"], lw=1.5, label="density of L")
    ax.fill_between(x, 0, dens, where=x > eps, color=COLORS["baseline"], alpha=0.35,
                    label=f"P[L > ε] = {tail:.3g}")
    ax.fill_between(x, 0, weighted, where=x > eps, color=COLORS["private"], alpha=0.8,
                    label=f"δ(ε) = E[(1 − e^(ε−L))₊] = {delta:.3g}")
    ax.axvline(eps, color=COLORS["warning"], ls="--", lw=1.5, label=f"ε = {eps:g}")
    ax.set_xlim(lo, hi)
    ax.set_ylim(0, dens.max() * 1.15)
    ax.set_xlabel("privacy loss L")
    ax.set_ylabel("density")
    ax.set_title(f"Gaussian mechanism, μ = Δ/σ = {mu:g}: tail vs exact δ")
    ax.legend(fontsize=10, loc="upper left")
    fig.tight_layout()
    return fig


@constrained(k=int_range(1, MAX_COMPOSITIONS),
             sigma=Interval(0.1, 1000.0, closed="both", family="pos"),
             delta=FRACTION_OPEN)
def accountants_figure(k: int, sigma: float, delta: float) -> Figure:
    """Two panels for k runs of a Gaussian mechanism (sensitivity 1, noise std ``sigma``).

    Top: total ε after j = 1 … k runs under basic composition, advanced composition (Dwork,
    Rothblum & Vadhan 2010) and the optimal (ε, δ) composition (Kairouz, Oh & Viswanath 2015),
    each from the exact per-run ε₀ at δ₀ = δ/j (basic) or δ/(2j); RDP with the improved conversion
    (Mironov 2017; Canonne, Kamath & Steinke 2020); the :class:`~dplib.accounting.PLDAccountant`
    at eight values of j; and the exact curve, one Gaussian with noise σ/√j (Dong, Roth & Su 2022,
    Cor. 3.3). For q = 1 the PLD accountant itself uses that closed form.

    Bottom: the privacy loss distribution of the k runs composed by FFT
    (:func:`dplib.accounting.compose` of :func:`dplib.accounting.subsampled_gaussian_pld` at
    q = 1) against the exact density N(kμ²/2, kμ²), μ = 1/σ, with the tail above the reported ε
    shaded and the FFT's δ at that ε in the legend.

    ``k`` must be an integer in [1, :data:`MAX_COMPOSITIONS`], ``sigma`` in [0.1, 1000] and
    ``delta`` in (0, 1).
    """
    js = np.unique(np.geomspace(1, k, 30).round().astype(int))
    exact = gaussian_epsilon(sigma / np.sqrt(js), delta)
    basic = js * gaussian_epsilon(sigma, delta / js)
    d0 = delta / (2 * js)
    e0 = gaussian_epsilon(sigma, d0)
    adv = [advanced_composition(e, d, int(j), delta / 2)[0] for e, d, j in zip(e0, d0, js)]
    opt = [optimal_composition_epsilon(e, d, int(j), delta) for e, d, j in zip(e0, d0, js)]
    rdp_1 = gaussian_rdp(DEFAULT_ORDERS, sigma)
    rdp_j = [rdp_to_epsilon(DEFAULT_ORDERS, j * rdp_1, delta)[0] for j in js]
    jp = np.unique(np.geomspace(1, k, 8).round().astype(int))
    pld_j = [PLDAccountant().step(noise_multiplier=sigma, sample_rate=1.0,
                                  num_steps=int(j)).get_epsilon(delta) for j in jp]

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(5.0, 7.6))
    for y, color, ls, name in ((basic, COLORS["baseline"], "-", "basic"),
                               (adv, COLORS["warning"], "-", "advanced (DRV)"),
                               (opt, COLORS["accent"], "--", "optimal (ε, δ) comp."),
                               (rdp_j, COLORS["alt"], "-", "RDP"),
                               (exact, COLORS["truth"], ":", "exact")):
        ax1.plot(js, y, ls, color=color, marker="s" if k == 1 else None,
                 label=f"{name}: ε = {y[-1]:.3g}")
    ax1.plot(jp, pld_j, "o", color=COLORS["private"], ms=6,
             label=f"PLD accountant: ε = {pld_j[-1]:.3g}")
    ax1.set_xscale("log")
    if min(min(basic), min(opt), min(rdp_j), min(exact), min(pld_j)) > 0:
        ax1.set_yscale("log")
    else:                         # ε = 0 is possible at large δ: keep it on the plot
        ax1.set_yscale("symlog", linthresh=1e-3)
    ax1.set_xlim(0.8, max(k, 2) * 1.2)
    ax1.set_xlabel("number of compositions j")
    ax1.set_ylabel("total ε")
    ax1.set_title(f"Gaussian mechanism, σ = {sigma:.3g}, δ = {delta:.1e}")
    ax1.legend(fontsize=10, loc="upper left")

    mean, sd = k / (2 * sigma**2), math.sqrt(k) / sigma
    # fine enough that the grid's pessimistic bias stays invisible at this scale
    h = min(sd / 400, 0.5 / (sigma * math.sqrt(k)))
    composed, above, _ = compose([subsampled_gaussian_pld(
        sigma, 1.0, value_discretization_interval=h)], [k])
    x, dens = composed.losses, composed.pmf / h
    keep = dens > dens.max() * 1e-13
    eps_k = pld_j[-1]
    delta_fft = composed.get_delta(eps_k) + above
    ax2.plot(x[keep], dens[keep], color=COLORS["private"], label="composed PLD (FFT)")
    ax2.plot(x, stats.norm.pdf(x, mean, sd), "--", color=COLORS["truth"], lw=1.2,
             label="exact N(kμ²/2, kμ²)")
    tail = keep & (x > eps_k)
    ax2.fill_between(x[tail], dens[tail], dens.max() * 1e-13, color=COLORS["warning"],
                     alpha=0.35, label=f"L > ε = {eps_k:.3g}: FFT δ = {delta_fft:.2g}")
    ax2.set_yscale("log")
    ax2.set_ylim(dens.max() * 1e-12, dens.max() * 3)
    ax2.set_xlim(mean - 5 * sd, max(mean + 6 * sd, eps_k + sd))
    ax2.set_xlabel(f"total privacy loss L after k = {k:,} runs")
    ax2.set_ylabel("density")
    ax2.set_title("Privacy loss distribution after k runs")
    ax2.legend(fontsize=10, loc="lower left")
    fig.tight_layout()
    return fig
