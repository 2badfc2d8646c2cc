"""A one-step counterexample to Theorem 3.1 of Ryffel, Bach & Pointcheval (2022) for small batches.

Theorem 3.1 (:func:`dplib.langevin.sgld.sgld_rdp`) does not depend on the batch size m: the
paper's sensitivity lemma averages the drift over the batch draw. That is not how Rényi
divergence treats a mixture: when the differing record is drawn (probability m/n) the iterate
jumps by up to 2η_kL/m, and if that jump is large compared with the noise, an observer of θ_K
sees it. :func:`one_step_delta_lower_bound` computes, for a one-dimensional loss satisfying
every hypothesis of Theorem 3.1, an exact lower bound on δ after one step; for strongly convex
problems with tiny batches (e.g. λη = 1/2, m = 1, n = 1000) it exceeds the δ that Theorem 3.1
promises by orders of magnitude (tests/unit/test_sgld.py), so Theorem 3.1 cannot hold as stated
for every batch size. With full batches (m = n) the theorem is the DP-GLD bound and the check
passes. In the regime of the book's experiment (λη ≈ 0.03, n/m ≈ 5) the same check finds no
violation, but that is evidence, not a proof.

:func:`theorem_3_1_refutation` applies the bound to the step sizes of a whole run: the check
behind the opt-in ``accountant="theorem_3_1"`` of
:func:`dplib.langevin.sampler.train_dp_sgld_logistic`.
"""
from __future__ import annotations

import math

import numpy as np

from .._constraints import Flag, Integer, constrained, same_as
from .._validate import check_real_array, shown
from ..accounting._params import COUNT, EPSILON, POSITIVE

__all__ = ["one_step_delta_lower_bound", "theorem_3_1_refutation"]


@constrained(epsilon=EPSILON, lipschitz=POSITIVE, sigma=POSITIVE, lam=POSITIVE, eta=POSITIVE,
             n=COUNT, batch_size=COUNT, radius=POSITIVE, num_thresholds=Integer(min=3),
             return_threshold=Flag())
def one_step_delta_lower_bound(epsilon: float, *, lipschitz: float, sigma: float, lam: float,
                               eta: float, n: int, batch_size: int, radius: float,
                               num_thresholds: int = 801,
                               return_threshold: bool = False) -> float | tuple[float, float]:
    """A lower bound on δ for one DP-SGLD step on a 1-d problem that meets Theorem 3.1.

    The problem: C = [−r, r], ℓ(θ; x) = (λ/2)θ² + xθ with |x| ≤ a := L − λr (so ℓ is
    L-Lipschitz on C, λ-strongly convex and λ-smooth: β = λ, and η < 1/λ is required).
    D holds x_1 = a and n − 1 zeros, D' the same with x_1 = −a. θ_0 ∼ Π_C(N(0, 2σ²/λ)) as the
    theorem demands; one step with a batch of m = ``batch_size`` of the n records gives
    θ_1 = Π_C((1 − ηλ)θ_0 − η(x_1/m)·B + √(2η)σ Z) with B ∼ Bernoulli(m/n).

    For every threshold t ∈ (−r, r), (ε, δ)-DP requires δ ≥ P_D(θ_1 ≤ t) − e^ε P_D'(θ_1 ≤ t)
    (the projection of θ_1 does not change this event). Returns the largest value over a grid
    of thresholds (with ``return_threshold``: the pair (δ, t) of the best threshold, for a
    Monte Carlo check with :func:`dp_sgld`). The expectation over θ_0 is the Gaussian closed
    form for the unclipped normal, corrected for the clipping by moving its tails onto the
    atoms ±r (Gauss–Legendre). Derived for this book; any guarantee that claims a smaller δ at
    this ε for these parameters is false.
    """
    from scipy.special import ndtr

    eps, lip, sg, lm, e, nn, m, r = epsilon, lipschitz, sigma, lam, eta, n, batch_size, radius
    nt, ret = num_thresholds, return_threshold
    if m > nn:
        raise ValueError(f"batch_size must be in [1, n] = [1, {nn}], got {shown(batch_size)}")
    if e * lm >= 1.0:
        raise ValueError(f"eta must be in (0, 1/lam) = (0, {1 / lm:g}) (η < 1/β with β = λ), "
                         f"got {shown(eta)}")
    a = lip - lm * r
    if a <= 0:
        raise ValueError(f"lipschitz must exceed lam*radius = {lm * r:g} (the data term needs "
                         f"room), got {shown(lipschitz)}")
    gamma, c = m / nn, 1.0 - e * lm
    s0, s1, jump = sg * math.sqrt(2.0 / lm), sg * math.sqrt(2.0 * e), e * a / m
    spread = math.hypot(c * min(s0, r), s1)
    ts = np.linspace(-jump - 6.0 * spread, 6.0 * spread, nt)
    ts = ts[(ts > -r) & (ts < r)]
    if ts.size == 0:
        return (0.0, math.nan) if ret else 0.0

    def cdf(shift: float) -> np.ndarray:
        """P((1 − ηλ)θ_0 − shift + √(2η)σZ ≤ t) for every threshold t, θ_0 = clip(N(0, s0²))."""
        t = ts + shift
        out = ndtr(t / math.hypot(s1, c * s0))          # θ_0 unclipped: a Gaussian sum
        if r / s0 < 38.0:                                # else the clipped mass is < 1e-300
            nodes, weights = np.polynomial.legendre.leggauss(16)
            panels = int(min(4000, max(8, math.ceil(12.0 * s0 * c / s1))))
            edges = np.linspace(r, r + 12.0 * s0, panels + 1)
            mid, hw = 0.5 * (edges[1:] + edges[:-1]), 0.5 * np.diff(edges)
            u = (mid[:, None] + hw[:, None] * nodes[None, :]).ravel()
            w = (hw[:, None] * weights[None, :]).ravel() * np.exp(-u**2 / (2 * s0**2)) / (
                s0 * math.sqrt(2 * math.pi))
            atom = float(ndtr(-r / s0))
            for side in (1.0, -1.0):                     # move the tails onto the atoms ±r
                out = out - ndtr((t[:, None] - c * side * u[None, :]) / s1) @ w
                out = out + atom * ndtr((t - c * side * r) / s1)
        return out

    base = cdf(0.0)                                      # the record is not in the batch
    p_d = (1 - gamma) * base + gamma * cdf(jump)         # x_1 = +a pushes θ down by η a/m
    p_dprime = (1 - gamma) * base + gamma * cdf(-jump)
    gap = p_d - math.exp(eps) * p_dprime
    best = int(np.argmax(gap))
    delta = float(max(gap[best], 0.0))
    return (delta, float(ts[best])) if ret else delta



@constrained(**same_as(one_step_delta_lower_bound, "epsilon", "lipschitz", "sigma", "lam", "n",
                       "batch_size", "radius"))
def theorem_3_1_refutation(epsilon: float, *, lipschitz: float, sigma: float, lam: float,
                           n: int, batch_size: int, step_sizes: float | np.ndarray,
                           radius: float) -> float:
    """The largest :func:`one_step_delta_lower_bound` over the first and last step size.

    Theorem 3.1 grows with Σ η_k, so for the one-step run with any η_k of the schedule it
    promises at most the ε it promises for the whole run, with the same L, λ, σ, n, m. The
    one-dimensional problem of :func:`one_step_delta_lower_bound` meets its hypotheses with
    these constants (β = λ, η_k < 1/β since β ≥ λ). A value above the run's δ therefore shows
    that the theorem's (ε, δ) claim is false at these parameters. Requires L > λ·radius.
    ``step_sizes``: a constant η or the sequence (η_0, …, η_{K−1}) of the run.
    """
    eta = np.atleast_1d(check_real_array("step_sizes", step_sizes, low=0.0))
    if eta.ndim != 1 or eta.size == 0:
        raise ValueError(f"step_sizes must be a positive number or a non-empty 1-d sequence, "
                         f"got shape {np.shape(step_sizes)}")
    return max(one_step_delta_lower_bound(epsilon, lipschitz=lipschitz, sigma=sigma, lam=lam,
                                          eta=float(e), n=n, batch_size=batch_size,
                                          radius=radius)
               for e in {float(eta[0]), float(eta[-1])})
