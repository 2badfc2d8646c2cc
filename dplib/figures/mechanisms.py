"""Figures for the chapter on the Laplace, Gaussian and randomized-response mechanisms.

* :func:`neighbour_outputs_figure` — the output densities of the Laplace and/or Gaussian
  mechanism on two neighbouring data sets (f(D) = 0, f(D') = Δ) above their privacy loss
  L(o) = ln p_D(o)/p_D'(o): bounded by ε for Laplace (Dwork & Roth 2014, proof of Thm 3.6),
  a straight line that crosses every level for the Gaussian (Balle & Wang 2018, Lemma 3).
* :func:`local_vs_central_errors` and :func:`local_vs_central_figure` — the error of estimating
  a proportion of n bits with randomized response (local model; Warner 1965) and with the
  Laplace mechanism on the exact proportion (central model; Dwork et al. 2006): the exact
  standard deviations from ``dplib.mechanisms`` and simulated releases.

Every number drawn comes from ``dplib.mechanisms``; nothing here re-implements a mechanism.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from scipy import stats

from .._common_params import FRACTION_OPEN, POSITIVE, PROBABILITY, RNG, optional
from .._constraints import Custom, Integer, Options, constrained
from .._validate import check_choice, check_int
from ..mechanisms import (gaussian_privacy_loss, gaussian_sigma, laplace_mechanism,
                          laplace_privacy_loss, laplace_scale, rr_estimator_variance,
                          rr_simulate_estimates)
from ..plotting import COLORS
from .._validate import shown

__all__ = ["neighbour_outputs_figure", "local_vs_central_errors", "local_vs_central_figure"]

_MECHANISMS = ("laplace", "gaussian")


def _check_mechanisms(mechanisms: object) -> tuple[str, ...]:
    if isinstance(mechanisms, str) or not isinstance(mechanisms, Sequence) or not mechanisms:
        raise ValueError("mechanisms must be a non-empty sequence drawn from "
                         f"{list(_MECHANISMS)}, got {shown(mechanisms)}")
    chosen = tuple(check_choice("mechanisms", m, _MECHANISMS) for m in mechanisms)
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"mechanisms must not repeat an entry, got {shown(mechanisms)}")
    return chosen


def _n_values(name: str, value: object) -> np.ndarray:
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise ValueError(f"{name} must be a non-empty sequence of integers >= 1, "
                         f"got {shown(value)}")
    ns = np.array([check_int(name, n) for n in value], dtype=np.int64)
    if ns.size == 0:
        raise ValueError(f"{name} must be a non-empty sequence of integers >= 1, got []")
    return ns


_KEYS = ("n", "local_std", "central_std", "local_simulated", "central_simulated",
         "sampling_std")


def _errors(name: str, value: object) -> object:
    if not isinstance(value, Mapping) or any(k not in value for k in _KEYS):
        raise ValueError(f"{name} must be the dict returned by local_vs_central_errors, with "
                         f"keys {list(_KEYS)}, got {shown(value)[:80]}")
    arrays = {k: np.asarray(value[k], dtype=float) for k in _KEYS}
    size = arrays["n"].shape
    if len(size) != 1 or size[0] == 0 or any(a.shape != size for a in arrays.values()):
        raise ValueError(f"{name} must hold 1-d arrays of one common, non-zero length, got "
                         f"shapes {[arrays[k].shape for k in _KEYS]}")
    if not all(np.all(np.isfinite(a) & (a > 0)) for a in arrays.values()):
        raise ValueError(f"{name} must hold finite positive numbers only")
    return value


@constrained(epsilon=POSITIVE, sensitivity=POSITIVE, delta=optional(FRACTION_OPEN),
             mechanisms=Custom(lambda name, value: _check_mechanisms(value),
                               f"a non-empty sequence drawn from {list(_MECHANISMS)}",
                               [[], "laplace", None, ["nope"], ["laplace", "laplace"], 3]),
             gaussian_method=Options("analytic", "classic"))
def neighbour_outputs_figure(epsilon: float, sensitivity: float = 1.0, *,
                             delta: float | None = None,
                             mechanisms: Sequence[str] = _MECHANISMS,
                             gaussian_method: str = "analytic") -> Figure:
    """Output densities on neighbours f(D) = 0, f(D') = Δ (top) and the privacy loss L(o) (bottom).

    Laplace noise has scale b = Δ/ε (:func:`dplib.mechanisms.laplace_scale`); its loss
    (|o − Δ| − |o|)/b stays in [−ε, ε] (Dwork & Roth 2014, proof of Thm 3.6). Gaussian noise has
    the σ of :func:`dplib.mechanisms.gaussian_sigma` for (ε, ``delta``) and ``gaussian_method``
    ("classic" is refused for ε ≥ 1, as there); its loss (Δ² − 2Δo)/(2σ²) is a line
    (Balle & Wang 2018, Lemma 3), and the shaded outputs, where L > ε, carry probability
    P[L > ε] under D, printed in the legend.

    Parameters
    ----------
    epsilon : ε > 0.
    sensitivity : Δ > 0, the distance between the two neighbours' answers.
    delta : δ in (0, 1); required when "gaussian" is drawn.
    mechanisms : a non-empty selection of "laplace" and "gaussian", without repeats.
    gaussian_method : "analytic" (Balle & Wang 2018) or "classic" (Dwork & Roth 2014, Thm A.1).
    """
    eps, d, chosen = epsilon, sensitivity, mechanisms
    sig = None
    if "gaussian" in chosen:
        if delta is None:
            raise ValueError("delta must be a number in (0, 1) when mechanisms include "
                             "'gaussian', got None")
        dl = delta
        sig = float(gaussian_sigma(eps, dl, d, method=gaussian_method))
    b = float(laplace_scale(eps, d))
    width = 6 * b if "laplace" in chosen else 0.0
    if sig is not None:               # L = ε at distance εσ²/Δ below Δ/2: show that point
        width = max(width, 4 * sig, eps * sig**2 / d + sig)
    width += d
    o = np.union1d(np.linspace(-width, width, 1_001), [0.0, d])   # both peaks on the grid

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(5.0, 6.2), sharex=True)
    title = []
    if "laplace" in chosen:
        for centre, ls, name in ((0.0, "-", "D"), (d, "--", "D'")):
            top.plot(o, stats.laplace.pdf(o, centre, b), ls, color=COLORS["private"],
                     label=f"Laplace, data set {name}")
        bottom.plot(o, laplace_privacy_loss(o, b, d), color=COLORS["private"],
                    label="Laplace: bounded by ε")
        title.append(f"Laplace b = {b:.3g}")
    if sig is not None:
        for centre, ls, name in ((0.0, "-", "D"), (d, "--", "D'")):
            top.plot(o, stats.norm.pdf(o, centre, sig), ls, color=COLORS["alt"],
                     label=f"Gaussian, data set {name}")
        loss = gaussian_privacy_loss(o, sig, d)
        bottom.plot(o, loss, color=COLORS["alt"], label="Gaussian: a line, unbounded")
        # L(o) > ε exactly for o < Δ/2 − εσ²/Δ; its probability under D = N(0, σ²):
        tail = stats.norm.cdf(d / 2 - eps * sig**2 / d, 0.0, sig)
        bottom.fill_between(o, eps, loss, where=loss > eps, color=COLORS["warning"],
                            alpha=0.3, label=f"L > ε: probability {tail:.1e} under D")
        title.append(f"Gaussian σ = {sig:.3g} ({gaussian_method}, δ = {delta:g})")
    top.set_ylabel("density")
    top.set_title("Outputs on neighbours: f(D) = 0, f(D') = Δ")
    top.legend(fontsize=10, loc="upper right")
    for level in (eps, -eps):
        bottom.axhline(level, color=COLORS["truth"], lw=1, ls=":")
    bottom.plot([], [], color=COLORS["truth"], lw=1, ls=":", label="±ε")
    bottom.set_ylim(-3 * eps, 3 * eps)
    bottom.set_xlabel("output o")
    bottom.set_ylabel("privacy loss L(o)")
    bottom.set_title("Privacy loss L(o) = ln p_D(o) / p_D'(o)")
    bottom.legend(fontsize=10, loc="upper right")
    fig.suptitle(f"ε = {eps:g}, Δ = {d:g}:  " + "\n".join(title), fontsize=11)
    fig.tight_layout()
    return fig


@constrained(epsilon=POSITIVE,
             n_values=Custom(_n_values, "a non-empty sequence of integers >= 1",
                             [[], [0], [-5], [2.5], "abc", None, 3, [True]]),
             proportion=PROBABILITY, trials=Integer(min=2, family="int1"), rng=RNG)
def local_vs_central_errors(epsilon: float, n_values: Sequence[int], *,
                            proportion: float = 0.3, trials: int = 2_000,
                            rng: np.random.Generator | int) -> dict[str, np.ndarray]:
    """Error of an ε-DP proportion of n bits: randomized response (local) vs Laplace (central).

    The neighbouring relation is replace-one (one person's bit changes) in both models. For each
    n, exactly round(``proportion``·n) people hold a 1, and the error is measured against
    that true proportion, so only the mechanisms' noise counts.

    * ``local_std``: the standard deviation of the randomized-response estimator, the square
      root of the privacy term e^ε/(n(e^ε − 1)²) of Warner's variance — what
      :func:`dplib.mechanisms.rr_estimator_variance` returns at proportion 0, where the
      sampling term π(1 − π)/n vanishes — equal to 1/(2 sinh(ε/2) √n) ≈ 1/(ε√n).
    * ``central_std``: the standard deviation √2·b of Laplace noise with b = (1/n)/ε
      (:func:`dplib.mechanisms.laplace_scale`, sensitivity 1/n), ≈ 1.41/(εn).
    * ``local_simulated`` and ``central_simulated``: root-mean-square errors of ``trials``
      releases by :func:`dplib.mechanisms.rr_simulate_estimates` and
      :func:`dplib.mechanisms.laplace_mechanism`.
    * ``sampling_std``: √(π(1 − π)/n), the sampling error a survey of n people drawn from a
      population with yes-fraction π has before any privacy noise (for comparison).

    Returns a dict of float arrays with one entry per n (and ``n`` itself, as integers).
    """
    eps, ns, pi, gen = epsilon, n_values, proportion, rng
    out = {k: np.empty(ns.size) for k in ("local_std", "central_std", "local_simulated",
                                            "central_simulated", "sampling_std")}
    for i, n in enumerate(ns):
        n = int(n)
        truth = round(pi * n) / n
        out["local_std"][i] = np.sqrt(rr_estimator_variance(0.0, n, eps))
        out["central_std"][i] = np.sqrt(2.0) * laplace_scale(eps, 1.0 / n)
        local = rr_simulate_estimates(n, pi, eps, trials, rng=gen)
        central = laplace_mechanism(np.full(trials, truth), eps, 1.0 / n, rng=gen)
        out["local_simulated"][i] = np.sqrt(np.mean((local - truth) ** 2))
        out["central_simulated"][i] = np.sqrt(np.mean((central - truth) ** 2))
        out["sampling_std"][i] = np.sqrt(pi * (1 - pi) / n)
    out["n"] = ns
    return out


@constrained(errors=Custom(_errors, "the dict returned by local_vs_central_errors",
                           [None, {}, 3, "abc"]), epsilon=optional(POSITIVE))
def local_vs_central_figure(errors: Mapping[str, np.ndarray], *,
                            epsilon: float | None = None) -> Figure:
    """Log-log plot of the errors returned by :func:`local_vs_central_errors` against n.

    Lines: the exact standard deviations (local ∝ 1/√n, central ∝ 1/n) and, dotted, the
    sampling error of a survey; dots: the simulated releases. ``epsilon``, if given, goes in the
    title.
    """
    arrays = {k: np.asarray(errors[k], dtype=float) for k in _KEYS}
    n = arrays["n"]
    fig, ax = plt.subplots(figsize=(5.0, 3.8))
    ax.plot(n, arrays["local_std"], color=COLORS["baseline"],
            label="local: randomized response, ≈ 1/(ε√n)")
    ax.plot(n, arrays["local_simulated"], "o", color=COLORS["baseline"], ms=5)
    ax.plot(n, arrays["central_std"], color=COLORS["private"],
            label="central: Laplace mechanism, ≈ 1.4/(εn)")
    ax.plot(n, arrays["central_simulated"], "o", color=COLORS["private"], ms=5)
    ax.plot(n, arrays["sampling_std"], ":", color=COLORS["neutral"],
            label="sampling error of a survey (no privacy)")
    ax.plot([], [], "o", color=COLORS["truth"], ms=5, label="simulated releases")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of people n")
    ax.set_ylabel("error of the proportion (std)")
    where = "" if epsilon is None else f" at ε = {epsilon:g}"
    ax.set_title(f"Local vs central privacy{where}")
    ax.legend(fontsize=10)
    fig.tight_layout()
    return fig
