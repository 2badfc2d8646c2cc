"""Figures for the chapters on Langevin dynamics: two runs of noisy gradient descent coupled by
their noise, and the Rényi divergence between their laws.

* :func:`coupled_runs_figure` — the picture behind the proof of Chourasia, Ye & Shokri (2021):
  noisy GD on neighbouring data sets D and D', started at the same point and driven by the *same*
  noise, for the squared-norm loss ℓ(θ; x) = (λ/2)(θ − x)² in one dimension, where every law is
  Gaussian and known in closed form. The top panel shows coupled sample paths and the two laws
  (mean ± 2 standard deviations); the bottom panel the exact Rényi divergence between the laws,
  which rises and then plateaus, next to the privacy-dynamics bound and composition.

Every curve comes from :mod:`dplib.langevin` (``noisy_gd``, ``squared_loss_moments``,
``exact_gaussian_renyi``, ``privacy_dynamics_rdp``, ``composition_rdp``); the figure only draws.
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from .._common_params import POSITIVE, SEED_OR_NONE
from .._constraints import Integer, Interval, constrained
from .._validate import shown
from ..plotting import COLORS

__all__ = ["coupled_runs", "coupled_runs_figure"]


#: The parameters of :func:`coupled_runs` and :func:`coupled_runs_figure` (declared once).
_ARGS = dict(sensitivity=POSITIVE, sigma=POSITIVE, eta=POSITIVE,
             n=Integer(min=2, family="int1"), K=Integer(min=1), alpha=Interval(1.0, np.inf, family="pos"), lam=POSITIVE,
             paths=Integer(min=1),
             seed=SEED_OR_NONE)


@constrained(**_ARGS)
def coupled_runs(*, sensitivity: float = 4.0, sigma: float = 0.02, eta: float = 0.02,
                 n: int = 500, K: int = 400, alpha: float = 2.0, lam: float = 1.0,
                 paths: int = 3, seed: int | None = None) -> dict:
    """The numbers :func:`coupled_runs_figure` draws, as a dict of numpy arrays.

    Noisy GD (:func:`dplib.langevin.noisy_gd`, no projection) on ℓ(θ; x) = (λ/2)(θ − x)² over
    two neighbouring one-dimensional data sets of ``n`` records: D has one record at −a and
    n − 1 records at 0, D' replaces it by +a, with a = ``sensitivity``/(2λ), so that the summed
    gradients differ by exactly S_g = ``sensitivity`` at every θ (the worst pair). Both runs
    start at θ_0 = 0 and use the same ``seed``, hence the same noise: their difference is the
    drift's doing alone (for this linear loss it is deterministic).

    Returned keys: ``"k"`` (0, …, K), ``"paths_D"`` and ``"paths_D_prime"`` (shape (K + 1,
    paths)), ``"mean_D"``, ``"mean_D_prime"`` and ``"sd"`` (the exact Gaussian laws,
    :func:`dplib.langevin.squared_loss_moments`), ``"renyi"`` (exact R_α between the laws,
    :func:`dplib.langevin.exact_gaussian_renyi`; Chourasia, Ye & Shokri 2021 give the bounds),
    ``"bound"`` (:func:`dplib.langevin.privacy_dynamics_rdp`), ``"composition"``
    (:func:`dplib.langevin.composition_rdp`) and ``"limit"`` (the K → ∞ value of ``"renyi"``).
    ``seed`` (an integer ≥ 0) fixes the noise of the illustration so that a page can be
    reproduced; None (the default) draws fresh OS entropy, as :func:`dplib.langevin.noisy_gd`
    does.
    """
    from ..langevin import (composition_rdp, exact_gaussian_renyi, noisy_gd,
                            privacy_dynamics_rdp, squared_loss_gradient, squared_loss_moments)

    s, sg, e, nn, k, a, lm, p, sd = sensitivity, sigma, eta, n, K, alpha, lam, paths, seed
    if lm * e > 1.0:          # η ≤ 1/β, β = λ the smoothness of the squared loss
        raise ValueError(f"eta must be in (0, 1/lam] = (0, {1.0 / lm:g}] (η ≤ 1/β with β = λ "
                         f"for the squared loss), got {shown(eta)}")
    shift = s / (2.0 * lm)
    data = np.zeros(nn)
    data[0] = -shift
    data_prime = data.copy()
    data_prime[0] = shift
    runs = []
    for d in (data, data_prime):
        path = noisy_gd(squared_loss_gradient(d, lam=lm), np.zeros((p, 1)), n=nn, eta=e,
                        sigma=sg, K=k, seed=sd, device="cpu", trajectory=True)
        runs.append(path[..., 0].double().numpy())
    steps = np.arange(k + 1)
    mean_d, var = squared_loss_moments(data.mean(), 0.0, sg, e, steps, lam=lm)
    mean_dp, _ = squared_loss_moments(data_prime.mean(), 0.0, sg, e, steps, lam=lm)
    renyi = exact_gaussian_renyi(a, s, sg, e, nn, steps, lam=lm)
    return {"k": steps, "paths_D": runs[0], "paths_D_prime": runs[1],
            "mean_D": np.asarray(mean_d), "mean_D_prime": np.asarray(mean_dp),
            "sd": np.sqrt(var), "renyi": np.asarray(renyi),
            "bound": np.asarray(privacy_dynamics_rdp(a, s, sg, e, lm, nn, steps)),
            "composition": np.asarray(composition_rdp(a, s, sg, e, lm, nn, steps)),
            "limit": float(exact_gaussian_renyi(a, s, sg, e, nn, 10**9, lam=lm))}


@constrained(**_ARGS)
def coupled_runs_figure(*, sensitivity: float = 4.0, sigma: float = 0.02, eta: float = 0.02,
                        n: int = 500, K: int = 400, alpha: float = 2.0, lam: float = 1.0,
                        paths: int = 3, seed: int | None = None) -> Figure:
    """Two panels, stacked for narrow screens: coupled runs on D and D' (same start, same noise)
    with their Gaussian laws, and the Rényi divergence of order α between the laws.

    The numbers are those of :func:`coupled_runs` (same arguments, same validation: positive
    ``sensitivity``, ``sigma``, ``eta``, ``lam`` with λη ≤ 1, integers ``n`` ≥ 2, ``K`` ≥ 1,
    ``paths`` ≥ 1, ``seed`` None or ≥ 0, and ``alpha`` > 1). The exact divergence is the closed form
    derived in :func:`dplib.langevin.exact_gaussian_renyi`; the bound is the privacy-dynamics
    theorem of Chourasia, Ye & Shokri (2021), and composition is Mironov (2017). Returns the
    Figure (not shown, not closed).
    """
    r = coupled_runs(sensitivity=sensitivity, sigma=sigma, eta=eta, n=n, K=K, alpha=alpha,
                     lam=lam, paths=paths, seed=seed)
    k = r["k"]
    fig = Figure(figsize=(5.0, 7.0))
    ax1, ax2 = fig.subplots(2, 1)
    blue, red = COLORS["private"], COLORS["warning"]
    for mean, col, lab in ((r["mean_D"], blue, "D"), (r["mean_D_prime"], red, "D'")):
        ax1.fill_between(k, mean - 2 * r["sd"], mean + 2 * r["sd"], color=col, alpha=0.12,
                         lw=0)
        ax1.plot(k, mean, color=col, lw=2, label=f"law on {lab}: mean ± 2 sd")
    for j in range(r["paths_D"].shape[1]):
        ax1.plot(k, r["paths_D"][:, j], color=blue, lw=0.8, alpha=0.8,
                 label="runs on D" if j == 0 else None)
        ax1.plot(k, r["paths_D_prime"][:, j], color=red, lw=0.8, alpha=0.8, ls="--",
                 label="runs on D'" if j == 0 else None)
    ax1.set_xlabel("step k")
    ax1.set_ylabel(r"$\theta_k$")
    ax1.set_title("Same start, same noise, data D or D'")
    ax1.legend(loc="lower left", ncol=2, framealpha=0.9, columnspacing=0.8,
               handlelength=1.5)

    ax2.plot(k, r["composition"], color=COLORS["baseline"], label="composition")
    ax2.plot(k, r["bound"], color=COLORS["private"], label="dynamics bound")
    ax2.plot(k, r["renyi"], "--", color=COLORS["truth"], label="exact, between the laws")
    ax2.axhline(r["limit"], color=COLORS["neutral"], lw=1, ls=":", label="its limit")
    top = 1.15 * max(float(r["bound"][-1]), float(r["renyi"][-1]))
    ax2.set_ylim(0, top)
    ax2.set_xlabel("step k")
    ax2.set_ylabel(rf"$R_{{{alpha:g}}}(\theta_k \,\|\, \theta'_k)$")
    ax2.set_title("Divergence rises, then plateaus")
    ax2.legend(loc="lower right")
    fig.tight_layout()
    return fig
