"""Fixed-size batches drawn without replacement, replace-one adjacency: a PLD upper bound.

Setting: each step draws m of the n records uniformly without replacement (γ = m/n, drawn afresh
every step), sums their gradients clipped to ℓ2 norm C and adds N(0, σ²C²) noise; neighbouring
datasets have the same n and differ in one record (replace-one). Replacing a record moves a
clipped gradient by up to 2C, so in units of C the base mechanism's worst pair is
P = N(2, σ²), Q = N(0, σ²).

The one-step bound (hockey-stick divergence H_α(U‖V) = ∫(u − αv)_+, α = e^ε):

* α ≥ 1: H_α(M(D)‖M(D')) ≤ H_α(A‖B) with A = (1−γ)·Q + γ·P, B = Q — the dominating pair of
  Zhu, Dong & Wang 2022 ("Optimal Accounting of Differential Privacy via Characteristic
  Function", AISTATS) for sampling without replacement under replace-one. It follows from the
  advanced joint convexity of Balle, Barthe & Gaboardi 2018 ("Privacy Amplification by
  Subsampling", NeurIPS, Thm 2) with the couplings of their Thm 9, and it is attained: a record
  whose clipped gradient is +C·e in D and −C·e in D', all others −C·e, gives exactly (A, B).
* α < 1: replace-one is symmetric, and H_α(U‖V) = 1 − α + α·H_{1/α}(V‖U) for every pair, so
  H_α(M(D)‖M(D')) ≤ H_α(B‖A).

A training loop may meet both orientations (the gradients change from step to step), so the pair
to compose is the *symmetric* pair S whose privacy profile is H(A‖B) for ε ≥ 0 and H(B‖A) for
ε < 0 — in f-DP terms the trade-off min{f_γ, f_γ⁻¹}** of Dong, Roth & Su 2022 ("Gaussian
Differential Privacy", JRSS-B, Thm 4.2), with f_γ = γ·G_{2/σ} + (1 − γ)·Id. Its PLD ω_S is the
PLD ω of (A, B) on losses L > 0, mirrored as ω_S(−L) = e^{−L}·ω(L) (a PLD with this symmetry is
the PLD of a symmetric pair), plus the remaining mass at L = 0. T steps are dominated by the
T-fold composition of S (Zhu, Dong & Wang 2022, Thm 10), computed by FFT.

Composing (A, B) alone T times, as a Poisson add/remove accountant would with sensitivity 2, gives
the exact ε of the fixed pair of datasets above — a *lower* bound on the worst case here, not an
upper bound (the trap described by Lebeda, Regehr, Kamath & Steinke 2024).

Pessimism: ω on the loss grid {k·h} comes from :func:`dplib.accounting.pld.subsampled_gaussian_pld`
(connect-the-dots, exact at grid points and above the true δ(ε) in between, for every ε ≥ 0); the
mirror keeps the identity δ_S(ε) = 1 − e^ε + e^ε·δ_S(−ε), so the grid profile of S is above the
true one for every ε; :func:`dplib.accounting.pld.compose` bounds the mass outside its FFT window;
and FFT round-off is added to δ as slack (as in :class:`dplib.accounting.PLDAccountant`).
"""
from __future__ import annotations

import math

import numpy as np

from .._validate import check_int, check_positive, check_probability, check_real_array
from .pld import DiscretePLD, compose, subsampled_gaussian_pld

__all__ = ["wor_gaussian_pld", "wor_gaussian_epsilon"]

#: Mass allowed outside the FFT window (added to δ), at most this and 1/1000 of the smallest δ.
_WINDOW_TAIL = 1e-15
#: Largest composed grid (points); beyond it h is coarsened (still an upper bound, less tight).
MAX_GRID_SIZE = 1 << 22
_CHERNOFF_T = np.geomspace(1e-2, 1e3, 16)


def wor_gaussian_pld(noise_multiplier: float, sample_rate: float, *,
                     value_discretization_interval: float = 1e-3) -> DiscretePLD:
    """Pessimistic one-step PLD of the symmetric pair S that dominates a Gaussian step on a batch
    drawn without replacement, under replace-one adjacency (see the module docstring).

    Units: ``noise_multiplier`` σ = noise std / clipping norm C (the replace-one sensitivity 2C is
    built in, as in ``PLDAccountant(neighboring="replace_one")``); ``sample_rate`` γ = m/n.
    """
    sigma = check_positive("noise_multiplier", noise_multiplier)
    gamma = check_probability("sample_rate", sample_rate, low_open=True)
    h = check_positive("value_discretization_interval", value_discretization_interval)
    # (A, B) with sensitivity 2 and std σ is (A, B) with sensitivity 1 and std σ/2.
    pair = subsampled_gaussian_pld(sigma / 2.0, gamma, direction="remove",
                                   value_discretization_interval=h)
    k = pair.offset + np.arange(pair.pmf.size)
    pos = k > 0
    k_pos, p_pos = k[pos], pair.pmf[pos]
    top = int(k_pos.max()) if k_pos.size else 0
    mirrored = p_pos * np.exp(-k_pos * h)
    zero = 1.0 - pair.infinity_mass - float(np.sum(p_pos) + np.sum(mirrored))
    if zero < -1e-12:   # a symmetric pair needs A(L > 0) + B(L > 0) ≤ 1, true for every σ, γ
        raise ValueError(f"value_discretization_interval={h:g} is too coarse for "
                         f"noise_multiplier={sigma:g}, sample_rate={gamma:g}: the mirrored PLD "
                         f"has mass {1.0 - zero:.6g} > 1; use a smaller interval")
    pmf = np.zeros(2 * top + 1)
    pmf[top + k_pos] = p_pos
    pmf[top - k_pos] = mirrored
    pmf[top] = max(zero, 0.0)     # |zero| < 1e-12 here is round-off of an exact 0
    return DiscretePLD(pmf=pmf, offset=-top, h=h, infinity_mass=pair.infinity_mass)


def _window_points(step: DiscretePLD, steps: int, tail: float) -> float:
    """Grid points of the FFT window that :func:`dplib.accounting.pld.compose` will use: the
    Chernoff bounds P(S > b) ≤ e^{−tb}·M(t)^T and P(S < a) ≤ e^{ta}·M(−t)^T set to ``tail``."""
    keep = step.pmf > 0
    lv, p = step.losses[keep], step.pmf[keep]
    t = np.concatenate([_CHERNOFF_T, -_CHERNOFF_T])[:, None]
    ref = np.where(t > 0, lv[-1], lv[0])
    log_m = np.log(np.exp(t * lv - t * ref) @ p) + t[:, 0] * ref[:, 0]
    bounds = (steps * log_m - math.log(tail)) / t[:, 0]
    n = _CHERNOFF_T.size
    full = step.losses
    width = (min(float(bounds[:n].min()), steps * full[-1])
             - max(float(bounds[n:].max()), steps * full[0]))
    return width / step.h


def _delta_at_grid(pld: DiscretePLD, slack: float, nu: float) -> tuple[np.ndarray, np.ndarray]:
    """Grid losses L_j ≥ 0 and an upper bound on δ(L_j) = Σ_{L > L_j} p(L)(1 − e^{L_j − L}) + p(∞)
    (reverse cumulative sums), plus the outside-window mass and ν per grid point above L_j."""
    keep = pld.losses >= 0
    lv, p = pld.losses[keep], np.maximum(pld.pmf[keep], 0.0)
    if lv.size == 0:
        return np.zeros(1), np.array([pld.infinity_mass + slack])
    s0 = np.concatenate([np.cumsum(p[::-1])[::-1][1:], [0.0]])
    with np.errstate(divide="ignore"):
        log_w = np.log(p) - lv
    log_s1 = np.concatenate([np.logaddexp.accumulate(log_w[::-1])[::-1][1:], [-np.inf]])
    delta = s0 - np.exp(lv + log_s1) + pld.infinity_mass + slack
    return lv, delta + nu * np.arange(lv.size - 1, -1, -1)


def wor_gaussian_epsilon(noise_multiplier: float, sample_rate: float, num_steps: int,
                         delta: object, *,
                         value_discretization_interval: float = 1e-3) -> float | np.ndarray:
    """Upper bound on ε at each δ for ``num_steps`` Gaussian steps on fixed-size batches drawn
    without replacement, replace-one adjacency: the ``num_steps``-fold composition of
    :func:`wor_gaussian_pld` (Zhu, Dong & Wang 2022, Thm 10), by FFT.

    ``delta`` may be a scalar (returns a float) or an array (returns an array of the same shape).
    Same units as :func:`wor_gaussian_pld`. ε = inf where δ is below the infinite-loss mass.
    """
    sigma = check_positive("noise_multiplier", noise_multiplier)
    gamma = check_probability("sample_rate", sample_rate, low_open=True)
    steps = check_int("num_steps", num_steps)
    h = check_positive("value_discretization_interval", value_discretization_interval)
    d = check_real_array("delta", delta, low=0.0, high=1.0)
    if d.size == 0:
        raise ValueError("delta must be a number or a non-empty array in (0, 1), got an empty array")
    tail = min(_WINDOW_TAIL, 10.0 ** math.floor(math.log10(float(d.min()) * 1e-3)))
    for _ in range(3):
        step = wor_gaussian_pld(sigma, gamma, value_discretization_interval=h)
        points = _window_points(step, steps, tail)
        if points < MAX_GRID_SIZE:
            break
        # ε in the hundreds and more: a coarser grid keeps the FFT small (still an upper bound).
        h *= math.ceil(points / MAX_GRID_SIZE * 1.05)
    pld, up, down = compose([step], [steps], tail_mass=tail)
    # FFT round-off: negative masses are pure error; 4× the largest (at least 1e-16 of the largest
    # mass) is taken per grid point, as in PLDAccountant.
    nu = max(4.0 * max(-float(pld.pmf.min()), 0.0), 1e-16 * float(pld.pmf.max()))
    lv, dl = _delta_at_grid(pld, up + (down if pld.offset > 0 else 0.0), nu)
    # Last grid point with δ above the target, made robust to round-off wiggles by a reverse
    # running maximum; between grid points the grid δ(ε) is linear in e^ε (Doroshenko et al.
    # 2022), so ε is solved exactly there.
    rising = np.maximum.accumulate(dl[::-1])       # the running maximum, read from the top
    # first index with δ ≤ target = number of grid points whose running maximum exceeds it
    j = lv.size - np.searchsorted(rising, d.ravel(), side="right")
    eps = np.full(d.size, np.inf)
    ok = j < lv.size
    at_zero = ok & (j == 0)
    eps[at_zero] = lv[0]
    mid = ok & (j > 0)
    jm = j[mid]
    d0, d1 = dl[jm - 1], dl[jm]
    y1 = np.exp(lv[jm] - lv[jm - 1])
    y = 1.0 + (d0 - d.ravel()[mid]) * (y1 - 1.0) / np.maximum(d0 - d1, 1e-300)
    eps[mid] = lv[jm - 1] + np.log(np.minimum(y, y1))
    eps = eps.reshape(d.shape)
    return float(eps) if eps.ndim == 0 else eps
