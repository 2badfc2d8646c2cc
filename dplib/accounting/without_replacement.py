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
true one for every ε. Composition, truncation and round-off are those of
:class:`dplib.accounting.PLDAccountant`, which consumes this step for every
:class:`~dplib.accounting.events.SampledWithoutReplacementEvent` under ``neighboring="replace_one"``.

Units: ``noise_multiplier`` σ = noise std / clipping norm C, as everywhere in
:mod:`dplib.accounting` (the replace-one sensitivity 2C is built into the pair).
"""
from __future__ import annotations

import numpy as np

from .._constraints import Interval, RealArray, constrained
from ._params import COUNT, POSITIVE, SAMPLE_RATE
from .events import GaussianEvent, SampledWithoutReplacementEvent, SelfComposedEvent
from .pld_grid import DiscretePLD, subsampled_gaussian_pld
# The PLD accountant is looked up by name: pld.py builds its fixed-size-batch steps from this
# module, so importing pld here would make the two modules a cycle.
from .registry import accountant_class

__all__ = ["wor_gaussian_pld", "wor_gaussian_epsilon"]


@constrained(noise_multiplier=POSITIVE, sample_rate=SAMPLE_RATE,
             value_discretization_interval=POSITIVE,
             tail_mass=Interval(0.0, 1.0, closed="neither"))
def wor_gaussian_pld(noise_multiplier: float, sample_rate: float, *,
                     value_discretization_interval: float = 1e-3,
                     tail_mass: float = 1e-30) -> DiscretePLD:
    """Pessimistic one-step PLD of the symmetric pair S that dominates a Gaussian step on a batch
    drawn without replacement, under replace-one adjacency (see the module docstring).

    Units: ``noise_multiplier`` σ = noise std / clipping norm C (the replace-one sensitivity 2C is
    built in); ``sample_rate`` γ = m/n. ``tail_mass`` as in
    :func:`~dplib.accounting.pld.subsampled_gaussian_pld` (mass of the pair beyond its grid).
    """
    sigma, gamma, h = noise_multiplier, sample_rate, value_discretization_interval  # declared
    # (A, B) with sensitivity 2 and std σ is (A, B) with sensitivity 1 and std σ/2.
    pair = subsampled_gaussian_pld(sigma / 2.0, gamma, direction="remove",
                                   value_discretization_interval=h, tail_mass=tail_mass)
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


@constrained(noise_multiplier=POSITIVE, sample_rate=SAMPLE_RATE, num_steps=COUNT,
             delta=RealArray(0.0, 1.0, closed="neither", family="delta"),
             value_discretization_interval=POSITIVE)
def wor_gaussian_epsilon(noise_multiplier: float, sample_rate: float, num_steps: int,
                         delta: object, *,
                         value_discretization_interval: float = 1e-3) -> float | np.ndarray:
    """Upper bound on ε at each δ for ``num_steps`` Gaussian steps on fixed-size batches drawn
    without replacement, replace-one adjacency: the ``num_steps``-fold composition of
    :func:`wor_gaussian_pld` (Zhu, Dong & Wang 2022, Thm 10) by
    ``PLDAccountant(neighboring="replace_one")`` (which reports the Rényi bound of Wang, Balle &
    Kasiviswanathan 2019 instead where that is smaller).

    ``delta`` may be a scalar (returns a float) or an array (returns an array of the same shape).
    Same units as :func:`wor_gaussian_pld`.
    """
    sigma, gamma, steps, h, d = (noise_multiplier, sample_rate, num_steps,
                                 value_discretization_interval, delta)      # declared
    acc = accountant_class("pld")(h, neighboring="replace_one").compose(
        SelfComposedEvent(SampledWithoutReplacementEvent(gamma, GaussianEvent(sigma)), steps))
    eps = np.array([acc.get_epsilon(float(x)) for x in d.ravel()]).reshape(d.shape)
    return float(eps) if eps.ndim == 0 else eps
