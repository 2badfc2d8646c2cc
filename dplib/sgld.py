"""DP-SGLD: noisy stochastic gradient descent with hidden iterates (Ryffel, Bach & Pointcheval
2022).

The algorithm (Algorithm 1 of the paper, implemented in :func:`dp_sgld`): for k = 0, …, K − 1

    draw a batch B_k of m distinct records uniformly from the n records (fresh every step),
    θ_{k+1} = Π_C(θ_k − η_k ∇L_{B_k}(θ_k) + √(2η_k) N(0, σ² I_d)),  L_B = (1/m) Σ_{x∈B} ℓ(·; x),

started at θ_0 ∼ Π_C(N(0, (2σ²/λ) I_d)), releasing only θ_K. The paper calls the batch draw
"sampling with replacement": a batch is a subset of size m, put back before the next step, so a
record appears at most once per batch and batches are independent across steps.

Privacy (neighbouring data sets differ by replacing one record, RDP of order α > 1):

* :func:`sgld_rdp` — Theorem 3.1 of the paper: for an L-Lipschitz, λ-strongly convex, β-smooth
  loss and step sizes η_k < 1/β, ε(α) = 4αL²/(λn²σ²) · (1 − exp(−(λ/2) Σ_k η_k)).
  The batch size m does not appear (the paper's sensitivity lemma bounds the *expected* drift
  difference by (m/n)·(2L/m) = 2L/n). With m = n and a constant step it is exactly the DP-GLD
  bound of Chourasia, Ye & Shokri (2021) with S_g = 2L
  (:func:`dplib.langevin.privacy_dynamics_rdp`); with m = n and decreasing steps it is Ryffel
  et al.'s extension of that proof.
* :func:`constant_step_rdp`, :func:`decreasing_step_rdp` — Corollaries 3.2 and 3.3;
  :func:`decreasing_step_sizes` — η_k = 1/(2β + λk/2).
* :func:`sgld_epsilon`, :func:`sgld_calibrate_sigma` — the (ε, δ) Theorem 3.1 claims, through
  :func:`dplib.accounting.rdp_to_epsilon`, and the σ that meets a target ε by it.
* :func:`released_iterates_epsilon`, :func:`released_iterates_calibrate_sigma` — what the same
  run costs when every iterate is released: per-step subsampled Gaussian (batches without
  replacement, replace-one; Wang, Balle & Kasiviswanathan 2019) composed over the steps.

**A discrepancy found while checking the paper.** Averaging the drift over the batch draw is not
how Rényi divergence treats a mixture: when the differing record is drawn (probability m/n) the
iterate jumps by up to 2η_kL/m, and if that jump is large compared with the noise, an observer of
θ_K sees it. :func:`one_step_delta_lower_bound` computes, for a one-dimensional loss satisfying
every hypothesis of Theorem 3.1, an exact lower bound on δ after one step; for strongly convex
problems with tiny batches (e.g. λη = 1/2, m = 1, n = 1000) it exceeds the δ that Theorem 3.1
promises by orders of magnitude (tests/unit/test_sgld.py), so Theorem 3.1 cannot hold as stated
for every batch size. With full batches (m = n) the theorem is the DP-GLD bound and the check
passes. In the regime of the book's experiment (λη ≈ 0.03, n/m ≈ 5) the same check finds no
violation, but that is evidence, not a proof.

**Accounting policy.** :func:`train_dp_sgld_logistic` (and the experiments built on it) report
an ε only from a route that holds: Theorem 3.1 where it is proved (m = n), and the
released-iterates accountant otherwise (releasing θ_K alone is post-processing of releasing every
iterate, so that bound holds for every m). Theorem 3.1 for m < n is an explicit opt-in
(``accountant="theorem_3_1"``), refused where the one-step check refutes it at the run's own
parameters and flagged ``proved=False`` elsewhere. The formula functions above
(:func:`sgld_rdp`, :func:`sgld_epsilon`, …) evaluate the theorem as stated: they are a guarantee
for m = n only.

Randomness: the sampler and the trainer draw their noise from fresh OS entropy unless a seed is
passed; a fixed seed is for reproducible experiments, never for a release.

Regularised logistic regression (:func:`logistic_regression_constants`): the paper's Lemma
(Section 5.1) gives β = λ_max(XᵀX)/(2n) + λ for the softmax loss with an L2 penalty.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np

from ._validate import (check_bool, check_choice, check_int, check_positive, check_probability,
                        check_real, check_real_array, check_step_counts)
from .accounting import DEFAULT_ORDERS
from .device import as_device, release_seed

__all__ = ["sgld_rdp", "constant_step_rdp", "decreasing_step_rdp", "decreasing_step_sizes",
           "sgld_rdp_limit", "sgld_composition_rdp", "sgld_epsilon", "sgld_calibrate_sigma",
           "released_iterates_epsilon", "released_iterates_calibrate_sigma",
           "one_step_delta_lower_bound", "ACCOUNTANTS", "RELEASED_ORDERS",
           "LogisticConstants", "logistic_regression_constants", "logistic_regression_grad",
           "logistic_regression_loss", "logistic_regression_accuracy", "dp_sgld",
           "SGLDResult", "train_dp_sgld_logistic", "table4_diagnostics",
           "calibrate_noise_replace_one", "METHODS", "DEFAULT_METHODS", "compare_methods",
           "compare_on_digits", "scaling_study", "format_table"]


def _out(x: np.ndarray) -> np.ndarray | float:
    return float(x) if np.ndim(x) == 0 else x


# --- step sizes ----------------------------------------------------------------------------------

def _check_schedule(step_sizes: object, K: object) -> np.ndarray:
    """Σ η_k over the steps taken, as an array broadcastable like K (see :func:`sgld_rdp`)."""
    arr = np.asarray(step_sizes)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or arr.ndim > 1:
        raise ValueError(f"step_sizes must be a positive number or a 1-d sequence of positive "
                         f"numbers, got {step_sizes!r}")
    eta = check_real_array("step_sizes", arr, low=0.0, high=math.inf)
    if eta.ndim == 0:
        if K is None:
            raise ValueError("K must be given (an integer >= 0) when step_sizes is a constant")
        k = check_step_counts("K", K)
        return float(eta) * k
    if eta.size == 0:
        raise ValueError("step_sizes must be non-empty (one step size per step)")
    if K is None:
        return np.asarray(eta.sum())
    k = check_step_counts("K", K)
    if (k > eta.size).any():
        raise ValueError(f"K must be in [0, len(step_sizes)] = [0, {eta.size}], "
                         f"got {int(k.max())}")
    prefix = np.concatenate([[0.0], np.cumsum(eta)])
    return prefix[k]




def _check_beta(beta: float | None, lam: float, step_sizes: object) -> None:
    """Lemma 3.3 of Ryffel et al. (2022) needs η_k < 1/β for every k; β ≥ λ for a λ-strongly convex,
    β-smooth loss."""
    if beta is None:
        return
    b = check_positive("beta", beta)
    if b < lam:
        raise ValueError(f"beta must be >= lam (a λ-strongly convex, β-smooth loss has β >= λ), "
                         f"got beta={beta!r} < lam={lam!r}")
    eta_max = float(np.max(np.asarray(step_sizes, dtype=float)))
    if eta_max >= 1.0 / b:
        raise ValueError(f"step_sizes must be in (0, 1/beta) = (0, {1.0 / b:g}) (Theorem 3.1 "
                         f"needs η_k < 1/β), got {eta_max!r}")


def decreasing_step_sizes(beta: float, lam: float, K: int) -> np.ndarray:
    """η_k = 1/(2β + λk/2) for k = 0, …, K − 1 (Ryffel et al. 2022, Corollary 3.3 and Section 4.2).

    η_0 = 1/(2β) < 1/β, so the schedule meets Theorem 3.1's condition. The paper indexes the
    schedule from k = 0 (Section 4.2, "k ≥ 0"); the array holds the K step sizes actually used.
    """
    b = check_positive("beta", beta)
    lm = check_positive("lam", lam)
    if b < lm:
        raise ValueError(f"beta must be >= lam, got beta={beta!r} < lam={lam!r}")
    k = check_int("K", K, low=1)
    return 1.0 / (2.0 * b + lm * np.arange(k) / 2.0)


# --- Theorem 3.1 and its corollaries -------------------------------------------------------------

def _prefactor(alpha, lipschitz, sigma, lam, n):
    a = check_real_array("alpha", alpha, low=1.0)
    lip = check_positive("lipschitz", lipschitz)
    sg = check_positive("sigma", sigma)
    lm = check_positive("lam", lam)
    nn = check_int("n", n, low=1)
    return a * 4.0 * lip**2 / (lm * nn**2 * sg**2), lm


def sgld_rdp(alpha: float | np.ndarray, lipschitz: float, sigma: float, lam: float, n: int,
             step_sizes: float | np.ndarray, *, K: int | np.ndarray | None = None,
             beta: float | None = None) -> np.ndarray | float:
    """Rényi DP of order α of DP-SGLD releasing θ_K (Ryffel, Bach & Pointcheval 2022, Thm 3.1).

    ε(α) = 4 α L² / (λ n² σ²) · (1 − exp(−(λ/2) Σ_k η_k)),

    for an L-Lipschitz, λ-strongly convex, β-smooth loss on a closed convex set C, started at
    θ_0 ∼ Π_C(N(0, 2σ²/λ I)), with η_k < 1/β (checked when ``beta`` is given). Replace-one
    adjacency; L bounds ‖∇ℓ(θ; x)‖ on C, so one record moves the summed gradient by ≤ 2L.

    ``step_sizes``: a constant η (then ``K``, an integer or integer array, is the number of
    steps: Σ η_k = ηK, Corollary 3.2), or the sequence (η_0, …, η_{K−1}) of the steps taken
    (then ``K=None`` sums all of them, and an integer/array ``K`` ≤ len sums the first K,
    giving ε after each step). Broadcasts over ``alpha`` and ``K``.

    Index convention (the paper is ambiguous): Theorem 3.1 writes Σ_{k=1}^{K} η_k while
    Algorithm 1 uses η_0, …, η_{K−1}; in the proof step k → k + 1 lasts η_{k+1} in one line and
    η_k in the tracing diffusion (2). The contraction time is the total duration of the steps
    actually run, so we sum η_0 + … + η_{K−1}. For a constant step both readings agree; for a
    decreasing schedule ours is the larger (more conservative) value.

    A guarantee for full batches only: for m = n and a constant step it equals
    :func:`dplib.langevin.privacy_dynamics_rdp` with S_g = 2L (Chourasia, Ye & Shokri 2021);
    for m = n and varying steps it is Ryffel et al.'s extension of that proof.
    For m < n it is what Theorem 3.1 claims, unproved: the bound does not depend on the batch
    size, and :func:`one_step_delta_lower_bound` refutes it for small batches (module
    docstring). :func:`released_iterates_epsilon` holds for every m.
    """
    pre, lm = _prefactor(alpha, lipschitz, sigma, lam, n)
    total = _check_schedule(step_sizes, K)
    _check_beta(beta, lm, step_sizes)
    return _out(pre * -np.expm1(-lm * total / 2.0))


def constant_step_rdp(alpha: float | np.ndarray, lipschitz: float, sigma: float, lam: float,
                      n: int, eta: float, K: int | np.ndarray, *,
                      beta: float | None = None) -> np.ndarray | float:
    """Corollary 3.2 of Ryffel et al. (2022): constant η < 1/β,
    ε(α) = 4αL²/(λn²σ²) · (1 − e^{−ληK/2}) (a guarantee for m = n only, see :func:`sgld_rdp`)."""
    pre, lm = _prefactor(alpha, lipschitz, sigma, lam, n)
    e = check_positive("eta", eta)
    _check_beta(beta, lm, e)
    k = check_step_counts("K", K)
    return _out(pre * -np.expm1(-lm * e * k / 2.0))


def decreasing_step_rdp(alpha: float | np.ndarray, lipschitz: float, sigma: float, lam: float,
                        n: int, beta: float, K: int | np.ndarray) -> np.ndarray | float:
    """Corollary 3.3 of Ryffel et al. (2022): η_k = 1/(2β + λk/2),
    ε(α) = 4αL²/(λn²σ²) · λK/(4β + λK) (a guarantee for m = n only, see :func:`sgld_rdp`).

    The paper obtains it from Theorem 3.1 with (λ/2) Σ η_k replaced by log(1 + λK/(4β)), the
    integral ∫_0^K (λ/2) dt/(2β + λt/2). With a = 4β/λ, (λ/2) η_k = 1/(a + k), so the sum over
    k = 1..K (the theorem as printed) is below the integral and the sum over k = 0..K−1 (the
    steps actually taken, :func:`sgld_rdp`) is above it: this closed form lies between the two
    readings, which differ by at most 1/a − 1/(a + K) in the exponent (tested).
    """
    pre, lm = _prefactor(alpha, lipschitz, sigma, lam, n)
    b = check_positive("beta", beta)
    if b < lm:
        raise ValueError(f"beta must be >= lam, got beta={beta!r} < lam={lam!r}")
    k = check_step_counts("K", K)
    return _out(pre * lm * k / (4.0 * b + lm * k))


def sgld_rdp_limit(alpha: float | np.ndarray, lipschitz: float, sigma: float, lam: float,
                   n: int) -> np.ndarray | float:
    """The K → ∞ value of Theorem 3.1 when Σ η_k diverges: 4αL²/(λn²σ²) (Ryffel et al. 2022,
    Section 3.3)."""
    pre, _ = _prefactor(alpha, lipschitz, sigma, lam, n)
    return _out(pre)


def sgld_composition_rdp(alpha: float | np.ndarray, lipschitz: float, sigma: float, n: int,
                         step_sizes: float | np.ndarray, *,
                         K: int | np.ndarray | None = None) -> np.ndarray | float:
    """The composition baseline Ryffel et al. (2022) compare with (Section 3.3, "Discussion"):
    ε'(α) = α L² Σ_k η_k / (n² σ²).

    It is the full-batch composition of K Gaussian steps with drift difference 2η_kL/n and
    noise std √(2η_k)σ (Mironov 2017, Prop. 7 and Prop. 1), i.e.
    :func:`dplib.langevin.composition_rdp` with sensitivity 2L for a constant step. For
    K ≪ β/λ Theorem 3.1 is twice this value (the factor 2 of the paper; tested).
    """
    a = check_real_array("alpha", alpha, low=1.0)
    lip = check_positive("lipschitz", lipschitz)
    sg = check_positive("sigma", sigma)
    nn = check_int("n", n, low=1)
    total = _check_schedule(step_sizes, K)
    return _out(a * lip**2 * total / (nn**2 * sg**2))


# --- (ε, δ) and calibration ----------------------------------------------------------------------

def sgld_epsilon(delta: float, lipschitz: float, sigma: float, lam: float, n: int,
                 step_sizes: float | np.ndarray, *, K: int | None = None,
                 orders: object = None, method: str = "improved") -> tuple[float, float]:
    """(ε, best α): the (ε, δ) that Theorem 3.1 (:func:`sgld_rdp`) claims for DP-SGLD.

    A guarantee for full batches (m = n, the DP-GLD theorem); for m < n unproved and refuted
    for some parameters (see :func:`sgld_rdp`), so a run with minibatches is accounted by
    :func:`released_iterates_epsilon` (:func:`train_dp_sgld_logistic` does).

    The RDP curve is converted by :func:`dplib.accounting.rdp_to_epsilon` over ``orders``
    (default :data:`dplib.accounting.DEFAULT_ORDERS`); ``method`` as there ("improved":
    Canonne, Kamath & Steinke 2020, Prop. 12; "classic": Mironov 2017, Prop. 3). Scalar K.
    """
    from .accounting import DEFAULT_ORDERS, rdp_to_epsilon

    if K is not None:
        K = check_int("K", K, low=0)
    orders = np.asarray(DEFAULT_ORDERS if orders is None else orders, dtype=float)
    rdp = np.atleast_1d(sgld_rdp(orders, lipschitz, sigma, lam, n, step_sizes, K=K))
    return rdp_to_epsilon(orders, rdp, delta, method=method)


def sgld_calibrate_sigma(target_epsilon: float, delta: float, lipschitz: float, lam: float,
                         n: int, step_sizes: float | np.ndarray, *, K: int | None = None,
                         orders: object = None, method: str = "improved") -> float:
    """Smallest σ (relative precision 1e-10) with :func:`sgld_epsilon` ≤ ``target_epsilon``: the
    noise Theorem 3.1 claims suffices (proved for m = n only; see :func:`sgld_epsilon`).

    Theorem 3.1 is proportional to 1/σ², so ε decreases in σ and bisection in log σ finds it.
    """
    eps_t = check_positive("target_epsilon", target_epsilon)

    def eps(log_s: float) -> float:
        return sgld_epsilon(delta, lipschitz, math.exp(log_s), lam, n, step_sizes, K=K,
                            orders=orders, method=method)[0]

    lo, hi = math.log(1e-12), math.log(1e12)
    if eps(hi) > eps_t:
        raise ValueError(f"target_epsilon={target_epsilon!r} is below what any sigma <= 1e12 "
                         "reaches for this delta and order grid; raise it")
    if eps(lo) <= eps_t:
        return math.exp(lo)
    while hi - lo > 1e-10:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if eps(mid) <= eps_t else (mid, hi)
    return math.exp(hi)


def _released_schedule(step_sizes: object, K: object, max_groups: object) -> tuple:
    """(distinct step sizes, steps of each among the first k for every requested k, scalar K?)
    for :func:`released_iterates_epsilon`; η_k are rounded up to ≤ ``max_groups`` values."""
    eta = np.asarray(step_sizes, dtype=float)
    g = check_int("max_groups", max_groups, low=1)
    scalar = K is None or np.ndim(K) == 0
    if eta.ndim == 0:
        if K is None:
            raise ValueError("K must be given (an integer >= 1) when step_sizes is a constant")
        ks = np.atleast_1d(check_step_counts("K", K))
        if (ks < 1).any():
            raise ValueError(f"K must be integers >= 1, got {K!r}")
        return np.array([check_positive("step_sizes", float(eta))]), ks[:, None], scalar
    etas = check_real_array("step_sizes", eta, low=0.0)
    if etas.ndim != 1 or etas.size == 0:
        raise ValueError(f"step_sizes must be a positive number or a non-empty 1-d sequence, "
                         f"got shape {etas.shape}")
    ks = np.array([etas.size]) if K is None else np.atleast_1d(check_step_counts("K", K))
    if (ks < 1).any() or (ks > etas.size).any():
        raise ValueError(f"K must be in [1, len(step_sizes)] = [1, {etas.size}], got {K!r}")
    etas = etas[:int(ks.max())]
    grid = np.unique(etas)
    if grid.size > g:         # round η_k up to a geometric grid: a valid upper bound
        edges = np.geomspace(grid[0], grid[-1], g)
        etas = edges[np.minimum(np.searchsorted(edges, etas * (1 - 1e-12)), g - 1)]
    values, group = np.unique(etas, return_inverse=True)
    counts = np.zeros((etas.size + 1, values.size))
    counts[1:] = np.cumsum(np.eye(values.size)[group], axis=0)   # steps < k in each group
    return values, counts[ks], scalar


def _released_rdp(lipschitz: float, sigma: float, n: int, batch_size: int,
                          step_sizes: float | np.ndarray, *, K: int | np.ndarray | None = None,
                          orders: object = None, max_groups: int = 16) -> tuple:
    """(orders, RDP) of DP-SGLD with every iterate released: one RDP curve per entry of ``K``.

    The accounting of :func:`released_iterates_epsilon` before the conversion to (ε, δ).
    Returns ``(orders, rdp)`` with ``rdp`` of shape (len(orders),) for a scalar/absent ``K`` and
    (len(K), len(orders)) for an array ``K``. For an array, the η_k are grouped once over the
    longest run, so a prefix may be rounded up on a coarser grid than its own call would use
    (still an upper bound).
    """
    from .accounting import DEFAULT_ORDERS
    from .accounting._base import check_orders
    from .accounting.subsampling import wor_gaussian_rdp

    lip = check_positive("lipschitz", lipschitz)
    sg = check_positive("sigma", sigma)
    nn = check_int("n", n, low=1)
    m = check_int("batch_size", batch_size, low=1)
    if m > nn:
        raise ValueError(f"batch_size must be in [1, n] = [1, {nn}], got {batch_size!r}")
    alphas = check_orders(DEFAULT_ORDERS if orders is None else orders)
    values, counts, scalar = _released_schedule(step_sizes, K, max_groups)
    # step k is the subsampled Gaussian with noise multiplier z_k = σm/(L√(2η_k))
    per_group = np.stack([wor_gaussian_rdp(alphas, sg * m / (lip * math.sqrt(2.0 * e)), m / nn)
                          for e in values])                   # (groups, orders)
    rdp = counts @ per_group                                  # (len(K), orders)
    return alphas, (rdp[0] if scalar else rdp)


def released_iterates_epsilon(delta: float, lipschitz: float, sigma: float, n: int,
                              batch_size: int, step_sizes: float | np.ndarray, *,
                              K: int | np.ndarray | None = None, orders: object = None,
                              max_groups: int = 16) -> float | np.ndarray:
    """ε of the same DP-SGLD run if *every* iterate were released (no hidden state).

    Step k is a Gaussian mechanism on the batch-gradient sum: one replaced record moves it by
    ≤ 2L, the noise on it has std √(2η_k)σ·m/η_k, so the noise multiplier is
    z_k = σ m / (L √(2η_k)) (standard deviation over replace-one sensitivity). Batches are
    m of n records without replacement, fresh each step: Wang, Balle & Kasiviswanathan (2019),
    Thm 27 (:func:`dplib.accounting.subsampling.wor_gaussian_rdp`, the bound of
    :class:`dplib.accounting.RDPAccountant` with ``sampling="without_replacement"``,
    ``neighboring="replace_one"``), composed over steps (Mironov 2017, Prop. 1) and converted
    by :func:`dplib.accounting.rdp_to_epsilon`. Steps with equal η are grouped; with more than
    ``max_groups`` distinct values each η_k is rounded *up* to a geometric grid of that many
    values (a larger η means a smaller z_k and a larger RDP, so this is an upper bound).

    Releasing θ_K alone is post-processing of the released iterates, so this is a valid
    (ε, δ) for DP-SGLD with hidden iterates too, for *every* batch size m — the accountant
    :func:`train_dp_sgld_logistic` uses when Theorem 3.1 is not proved (m < n).
    ``K``: as in :func:`sgld_rdp`; an integer array returns ε after each of those steps.
    """
    from .accounting import rdp_to_epsilon

    alphas, rdp = _released_rdp(lipschitz, sigma, n, batch_size, step_sizes, K=K,
                                        orders=orders, max_groups=max_groups)
    if rdp.ndim == 1:
        return rdp_to_epsilon(alphas, rdp, delta)[0]
    return np.array([rdp_to_epsilon(alphas, r, delta)[0] for r in rdp])


def released_iterates_calibrate_sigma(target_epsilon: float, delta: float, lipschitz: float,
                                      n: int, batch_size: int,
                                      step_sizes: float | np.ndarray, *, K: int | None = None,
                                      orders: object = None, max_groups: int = 16,
                                      rtol: float = 1e-7) -> float:
    """Smallest σ (relative tolerance ``rtol``, rounded up) with
    :func:`released_iterates_epsilon` ≤ ``target_epsilon``: the noise that makes DP-SGLD
    (ε, δ)-DP for any batch size, hidden iterates or not.

    Every z_k grows with σ and the subsampled-Gaussian RDP decreases in z, so ε decreases in σ;
    the root is bracketed by factors of 4 and found by Brent's method in log σ
    (:func:`dplib.accounting.calibrate.safe_log_root`, which returns it on the safe side).
    """
    from .accounting.calibrate import safe_log_root

    eps_t = check_positive("target_epsilon", target_epsilon)
    check_probability("delta", delta, low_open=True, high_open=True)
    check_real("rtol", rtol, low=0.0, high=0.1)
    if K is not None:
        K = check_int("K", K, low=1)

    def excess(s: float) -> float:
        return released_iterates_epsilon(delta, lipschitz, s, n, batch_size, step_sizes, K=K,
                                         orders=orders, max_groups=max_groups) - eps_t

    # start from the full-batch composition σ (ε = ρ + 2√(ρ log(1/δ)) for ρ-zCDP, Bun & Steinke
    # 2016, Prop. 1.3, with ρ = L²Ση_k/(n²σ²)); subsampling changes it by a modest factor
    lg = math.log(1.0 / delta)
    rho = (math.sqrt(lg + eps_t) - math.sqrt(lg)) ** 2
    total = float(np.max(_check_schedule(step_sizes, K)))
    guess = check_positive("lipschitz", lipschitz) * math.sqrt(total / rho) / check_int(
        "n", n, low=1)
    return safe_log_root(excess, guess, guess, rtol=rtol, floor=1e-12, ceiling=1e12,
                         too_large=f"target_epsilon={target_epsilon!r} needs sigma above 1e12 "
                                   "for these delta and orders; raise it")


# --- the counterexample --------------------------------------------------------------------------

def one_step_delta_lower_bound(epsilon: float, *, lipschitz: float, sigma: float, lam: float,
                               eta: float, n: int, batch_size: int, radius: float,
                               num_thresholds: int = 801, return_threshold: bool = False):
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

    eps = check_real("epsilon", epsilon, low=0.0, low_open=False)
    lip = check_positive("lipschitz", lipschitz)
    sg = check_positive("sigma", sigma)
    lm = check_positive("lam", lam)
    e = check_positive("eta", eta)
    nn = check_int("n", n, low=1)
    m = check_int("batch_size", batch_size, low=1)
    r = check_positive("radius", radius)
    nt = check_int("num_thresholds", num_thresholds, low=3)
    ret = check_bool("return_threshold", return_threshold)
    if m > nn:
        raise ValueError(f"batch_size must be in [1, n] = [1, {nn}], got {batch_size!r}")
    if e * lm >= 1.0:
        raise ValueError(f"eta must be in (0, 1/lam) = (0, {1 / lm:g}) (η < 1/β with β = λ), "
                         f"got {eta!r}")
    a = lip - lm * r
    if a <= 0:
        raise ValueError(f"lipschitz must exceed lam*radius = {lm * r:g} (the data term needs "
                         f"room), got {lipschitz!r}")
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


# --- regularised logistic regression -------------------------------------------------------------

class LogisticConstants(NamedTuple):
    """(β, λ, L, radius) of L2-regularised logistic regression (see
    :func:`logistic_regression_constants`)."""
    beta: float
    lam: float
    lipschitz: float
    radius: float


def _features(X: object) -> np.ndarray:
    import torch

    x = X.detach().cpu().numpy() if torch.is_tensor(X) else np.asarray(X)
    if x.ndim != 2 or x.shape[0] == 0 or not np.issubdtype(x.dtype, np.number) \
            or not np.isfinite(x).all():
        raise ValueError(f"X must be a finite (n, p) array with n >= 1, got shape "
                         f"{getattr(x, 'shape', None)}")
    return x.astype(np.float64)


def logistic_regression_constants(X: object, lam: float, *, num_classes: int = 2,
                                  smoothness: str = "dataset",
                                  feature_bound: float | None = None) -> LogisticConstants:
    """Constants of ℓ(W; x, y) = −log softmax(Wx)_y + (λ/2)‖W‖²_F, W ∈ ℝ^{C×p} (Ryffel et al.
    2022, §5.1).

    * β (``smoothness="dataset"``, the paper's Lemma): the Hessian of the empirical loss is
      (1/n) Σ_j (diag(p_j) − p_j p_jᵀ) ⊗ x_j x_jᵀ + λI ⪯ ½(I − 11ᵀ/C) ⊗ XᵀX/n + λI
      (Böhning 1992), so β = λ_max(XᵀX)/(2n) + λ. The factor is ½ for the softmax with C ≥ 2
      weight vectors (λ_max(diag(p) − ppᵀ) ≤ ½, reached at p = (½, ½, 0, …)); a binary model
      with one weight vector and the sigmoid has p(1 − p) ≤ ¼ instead — not this model.
      ``smoothness="example"``: β = R²/2 + λ with R = max_i ‖x_i‖ (or ``feature_bound``),
      the smoothness of every per-example and minibatch loss. Theorem 3.1 and the utility
      lemmas assume ℓ(·; x) β-smooth *per example* (co-coercivity is used for L_B), which the
      dataset β does not guarantee; it is also a function of the private data. The example β
      with a public ``feature_bound`` is data-independent.
    * λ: the penalty. The paper writes the loss as log σ(Wx)_y + λ‖W‖² (sign flipped, and a
      Hessian 2λI); its proof uses λI, i.e. the penalty (λ/2)‖W‖² used here.
    * radius r = (2 L_D(0)/λ)^{1/2} = (2 log C / λ)^{1/2}: the regularised minimiser satisfies
      L_D(θ*) + (λ/2)‖θ*‖² ≤ L_D(0) = log C (the paper's §3.3), so projecting onto this ball keeps
      θ*. (The other bound, L/λ, is circular once L includes the penalty.)
    * L = √2·R + λr: ‖∇_W(−log softmax)‖_F = ‖p − e_y‖‖x‖ ≤ √2‖x‖ and the penalty adds λ‖W‖
      ≤ λr on the ball, so ℓ is L-Lipschitz on C (what the sensitivity lemma uses).

    ``X``: (n, p) features (append a constant column for a bias). Returns
    :class:`LogisticConstants` (β, λ, L, radius).
    """
    x = _features(X)
    lm = check_positive("lam", lam)
    c = check_int("num_classes", num_classes, low=2)
    check_choice("smoothness", smoothness, ("dataset", "example"))
    norms = np.linalg.norm(x, axis=1)
    if feature_bound is None:
        R = float(norms.max())
    else:
        R = check_positive("feature_bound", feature_bound)
        if norms.max() > R * (1 + 1e-9):
            raise ValueError(f"feature_bound must be >= max ||x_i|| = {norms.max():g}, "
                             f"got {feature_bound!r}")
    if smoothness == "dataset":
        beta = float(np.linalg.eigvalsh(x.T @ x / x.shape[0])[-1]) / 2.0 + lm
    else:
        beta = R**2 / 2.0 + lm
    radius = math.sqrt(2.0 * math.log(c) / lm)
    return LogisticConstants(beta, lm, math.sqrt(2.0) * R + lm * radius, radius)


def _as_tensors(X, y, device, dtype, num_classes: int | None = None):
    import torch

    x = _features(X)
    ya = y.detach().cpu().numpy() if torch.is_tensor(y) else np.asarray(y)
    if ya.dtype != bool and not np.issubdtype(ya.dtype, np.integer):
        raise ValueError(f"y must be an integer label vector, got dtype {ya.dtype}")
    if ya.ndim != 1 or ya.shape[0] != x.shape[0]:
        raise ValueError(f"y must be an integer label vector with one label per row of X "
                         f"({x.shape[0]}), got shape {ya.shape}")
    ya = ya.astype(np.int64)
    if num_classes is not None and (ya.max() >= num_classes or ya.min() < 0):
        raise ValueError(f"y must hold labels in [0, {num_classes - 1}], got "
                         f"{int(ya.min())}..{int(ya.max())}")
    return torch.as_tensor(x).to(device, dtype), torch.as_tensor(ya).to(device)


def _theta(theta: object, size: int):
    """θ as a finite (chains, size) float64 CPU tensor; ``size`` = C·p."""
    import torch

    t = theta.detach().cpu().numpy() if torch.is_tensor(theta) else np.asarray(theta)
    if t.dtype == bool or not np.issubdtype(t.dtype, np.number) or np.iscomplexobj(t):
        raise ValueError(f"theta must be an array of real numbers, got {theta!r}")
    if t.ndim not in (1, 2) or t.shape[-1] != size or t.size == 0:
        raise ValueError(f"theta must have shape (chains, {size}) or ({size},) "
                         f"(num_classes × features), got {t.shape}")
    if not np.all(np.isfinite(t)):
        raise ValueError("theta must hold finite numbers, got nan or inf")
    return torch.as_tensor(t.astype(np.float64)).reshape(-1, size)


def logistic_regression_grad(X: object, y: object, lam: float, num_classes: int, *,
                             device: object = None, dtype: object = None) -> Callable:
    """∇L_B for :func:`dp_sgld`: ``grad(theta, idx)`` with θ of shape (chains, C·p) and ``idx``
    (chains, m) batch indices (``None``: the full data set) returns
    (1/m) Σ_{i∈B} (p_i − e_{y_i}) x_iᵀ + λW per chain, batched with einsum (no loop)."""
    import torch

    lm = check_real("lam", lam, low=0.0, low_open=False)
    c = check_int("num_classes", num_classes, low=2)
    dev = as_device(device)
    dt = dtype or (torch.float64 if dev.type == "cpu" else torch.float32)
    Xt, yt = _as_tensors(X, y, dev, dt, c)
    p = Xt.shape[1]

    def grad(theta, idx=None):
        W = theta.reshape(theta.shape[0], c, p)
        if idx is None:
            xb, yb = Xt.expand(theta.shape[0], -1, -1), yt.expand(theta.shape[0], -1)
        else:
            xb, yb = Xt[idx], yt[idx]
        probs = torch.softmax(torch.einsum("bmp,bcp->bmc", xb, W), dim=-1)
        probs = probs - torch.nn.functional.one_hot(yb, c).to(probs.dtype)
        g = torch.einsum("bmc,bmp->bcp", probs, xb) / xb.shape[1] + lm * W
        return g.reshape(theta.shape)

    grad.num_features, grad.num_classes = p, c
    return grad


def logistic_regression_loss(theta: object, X: object, y: object, lam: float,
                             num_classes: int) -> np.ndarray:
    """Regularised empirical loss L_D(θ) + (λ/2)‖θ‖² per chain (θ: (chains, C·p) or (C·p,))."""
    import torch

    c = check_int("num_classes", num_classes, low=2)
    lm = check_real("lam", lam, low=0.0, low_open=False)
    Xt, yt = _as_tensors(X, y, "cpu", torch.float64, c)
    t = _theta(theta, c * Xt.shape[1])
    logits = torch.einsum("np,bcp->bnc", Xt, t.reshape(t.shape[0], c, -1))
    ce = torch.nn.functional.cross_entropy(logits.transpose(1, 2), yt.expand(t.shape[0], -1),
                                           reduction="none").mean(1)
    return (ce + lm / 2 * (t**2).sum(1)).numpy()


def logistic_regression_accuracy(theta: object, X: object, y: object,
                                 num_classes: int) -> np.ndarray:
    """Test accuracy per chain of the linear classifier argmax_c (Wx)_c."""
    import torch

    c = check_int("num_classes", num_classes, low=2)
    Xt, yt = _as_tensors(X, y, "cpu", torch.float64, c)
    t = _theta(theta, c * Xt.shape[1])
    pred = torch.einsum("np,bcp->bnc", Xt, t.reshape(t.shape[0], c, -1)).argmax(-1)
    return (pred == yt).double().mean(1).numpy()


# --- the algorithm in torch ----------------------------------------------------------------------

def dp_sgld(grad_fn: Callable, theta0: object = None, *, n: int, batch_size: int,
            step_sizes: float | np.ndarray, sigma: float, K: int | None = None,
            seed: int | None = None,
            radius: float | None = None, lam: float | None = None, shape: tuple | None = None,
            beta: float | None = None, device: object = None, dtype: object = None,
            trajectory: bool = False):
    """DP-SGLD (Ryffel, Bach & Pointcheval 2022, Algorithm 1) for several chains at once, in torch.

    θ_{k+1} = Π_C(θ_k − η_k ∇L_{B_k}(θ_k) + √(2η_k) σ Z_k), Z_k ∼ N(0, I_d), k = 0, …, K − 1.

    * ``grad_fn(theta, idx)``: the mean gradient over the batch, θ of shape (chains, d),
      ``idx`` a (chains, m) tensor of record indices, or ``None`` when ``batch_size == n``
      (full batch: DP-GLD, Chourasia et al. 2021). E.g. :func:`logistic_regression_grad`.
    * Batches: each step and each chain draws m = ``batch_size`` *distinct* indices uniformly
      (``torch.multinomial`` without replacement), independently of earlier steps — the paper's
      "sampling with replacement" of whole batches.
    * ``step_sizes``: a constant (with ``K``) or the sequence (η_0, …, η_{K−1}).
    * ``sigma`` ≥ 0; σ = 0 is plain projected SGD (no privacy) on the same schedule.
    * Start: ``theta0`` (chains, d) or, when ``None``, θ_0 ∼ Π_C(N(0, (2σ²/λ) I)) of ``shape``
      (the start Theorem 3.1 assumes; needs ``lam``).
    * C: the ℓ2 ball of ``radius`` per chain (None: ℝ^d).
    * ``beta``: when given, η_k < 1/β is checked (the theorem's condition).
    * ``seed``: ``None`` (default) seeds the private ``torch.Generator`` with 63 bits of fresh
      OS entropy (:func:`dplib.device.release_seed`), as a release must: noise computed from a
      known seed is a public function of public inputs, and two runs on neighbouring data sets
      that share it differ only through the data. A fixed integer is for experiments that must be
      reproducible, never for a release.

    Returns θ_K (chains, d), or all iterates (K + 1, chains, d) when ``trajectory``.
    ``device`` defaults to :func:`dplib.get_device`, ``dtype`` to float64 on CPU and float32
    elsewhere.

    Float noise: drawn with floating-point samplers, not hardened against the floating-point
    attack of Mironov (2012) (exact samplers: :mod:`dplib.mechanisms.discrete`).
    """
    import torch

    if not callable(grad_fn):
        raise ValueError(f"grad_fn must be callable, grad_fn(theta, idx) -> gradient, "
                         f"got {grad_fn!r}")
    nn = check_int("n", n, low=1)
    m = check_int("batch_size", batch_size, low=1)
    if m > nn:
        raise ValueError(f"batch_size must be in [1, n] = [1, {nn}], got {batch_size!r}")
    sg = check_real("sigma", sigma, low=0.0, low_open=False)
    s = release_seed(seed)
    traj = check_bool("trajectory", trajectory)
    eta = np.asarray(step_sizes)
    if eta.dtype == bool or not np.issubdtype(eta.dtype, np.number):
        raise ValueError(f"step_sizes must be a positive number or a sequence of positive "
                         f"numbers, got {step_sizes!r}")
    eta = eta.astype(float)
    if eta.ndim == 0:
        if K is None:
            raise ValueError("K must be given (an integer >= 0) when step_sizes is a constant")
        etas = np.full(check_int("K", K, low=0), check_positive("step_sizes", float(eta)))
    else:
        etas = check_real_array("step_sizes", eta, low=0.0)
        if etas.ndim != 1:
            raise ValueError(f"step_sizes must be 1-d, got shape {etas.shape}")
        if K is not None:
            k = check_int("K", K, low=0)
            if k > etas.size:
                raise ValueError(f"K must be in [0, len(step_sizes)] = [0, {etas.size}], got {K}")
            etas = etas[:k]
    if beta is not None and etas.size and etas.max() >= 1.0 / check_positive("beta", beta):
        raise ValueError(f"step_sizes must be in (0, 1/beta) = (0, {1.0 / beta:g}), "
                         f"got {etas.max()!r}")
    r = None if radius is None else check_positive("radius", radius)
    dev = as_device(device)
    if dtype is None:
        dtype = torch.float64 if dev.type == "cpu" else torch.float32
    gen = torch.Generator(device=dev)
    gen.manual_seed(s)

    def project(t):
        if r is None:
            return t
        return t * torch.clamp(r / t.norm(dim=-1, keepdim=True).clamp_min(1e-300), max=1.0)

    if theta0 is None:
        if lam is None or shape is None:
            raise ValueError("theta0=None samples θ_0 ∼ Π_C(N(0, 2σ²/λ I)): give lam and shape "
                             "(chains, d)")
        lm = check_positive("lam", lam)
        if len(shape) != 2 or not all(isinstance(v, int) and v >= 1 for v in shape):
            raise ValueError(f"shape must be (chains, d) with positive integers, got {shape!r}")
        theta = torch.randn(shape, generator=gen, device=dev, dtype=dtype) * (
            sg * math.sqrt(2.0 / lm))
    else:
        t0 = theta0.detach().cpu().numpy() if torch.is_tensor(theta0) else np.asarray(theta0)
        if t0.dtype == bool or not np.issubdtype(t0.dtype, np.number):
            raise ValueError(f"theta0 must be a finite (chains, d) array, got {theta0!r}")
        theta = torch.as_tensor(t0.astype(float)).to(dev, dtype).clone()
        if theta.ndim != 2 or not torch.isfinite(theta).all():
            raise ValueError(f"theta0 must be a finite (chains, d) array, got shape "
                             f"{tuple(theta.shape)}")
    theta = project(theta)
    chains = theta.shape[0]
    weights = torch.ones(chains, nn, device=dev) if 1 < m < nn else None
    path = [theta.clone()] if traj else None
    for e in etas.tolist():
        if m == nn:
            idx = None
        elif m == 1:      # one uniform record: the same law, without the (chains, n) weights
            idx = torch.randint(nn, (chains, 1), generator=gen, device=dev)
        else:
            idx = torch.multinomial(weights, m, replacement=False, generator=gen)
        g = grad_fn(theta, idx)
        if g.shape != theta.shape:
            raise ValueError(f"grad_fn must return the shape of theta {tuple(theta.shape)}, "
                             f"got {tuple(g.shape)}")
        theta = theta - e * g
        if sg > 0:
            theta = theta + math.sqrt(2.0 * e) * sg * torch.randn(
                theta.shape, generator=gen, device=dev, dtype=dtype)
        theta = project(theta)
        if traj:
            path.append(theta.clone())
    if not torch.isfinite(theta).all():
        raise ValueError("dp_sgld diverged (non-finite iterate): check step_sizes < 1/beta")
    return torch.stack(path) if traj else theta


# --- the experiment ------------------------------------------------------------------------------

@dataclass
class SGLDResult:
    """One DP-SGLD training run (several chains = independent runs of the same configuration).

    ``accountant`` names what produced ``epsilon``: "theorem_3_1" (Ryffel, Bach & Pointcheval
    2022, Thm 3.1), "released_iterates" (:func:`released_iterates_epsilon`) or "none" (σ = 0,
    ε = ∞). ``proved`` is False when ε rests on Theorem 3.1 with batches m < n, where it is
    unproved (the one-step check refutes it for some parameters; see the module docstring).
    ``seed`` is the seed the noise and batches were drawn with (fresh OS entropy unless one was
    passed).
    """
    theta: object                 # (chains, C·p) tensor on CPU
    sigma: float
    epsilon: float
    delta: float
    steps: int
    batch_size: int
    schedule: str
    step_sizes: np.ndarray
    constants: LogisticConstants
    test_accuracy: np.ndarray | None = None
    extra: dict = field(default_factory=dict)
    accountant: str = "none"
    proved: bool = True
    seed: int | None = None


#: Accountants of :func:`train_dp_sgld_logistic`.
ACCOUNTANTS = ("auto", "released_iterates", "theorem_3_1")

#: Rényi orders of the released-iterates accountant in :func:`train_dp_sgld_logistic`: those of
#: :data:`dplib.accounting.DEFAULT_ORDERS` up to 64 (Opacus' grid). Fewer orders can only raise
#: ε (a valid bound); the Wang–Balle–Kasiviswanathan bound costs O(α_max²) high-precision
#: operations per noise level, and calibration evaluates it for a dozen levels or more.
RELEASED_ORDERS: np.ndarray = DEFAULT_ORDERS[DEFAULT_ORDERS <= 64]


def _theorem_3_1_refutation(epsilon: float, *, lipschitz: float, sigma: float, lam: float,
                           n: int, batch_size: int, step_sizes: float | np.ndarray,
                           radius: float) -> float:
    """The largest :func:`one_step_delta_lower_bound` over the first and last step size.

    Theorem 3.1 grows with Σ η_k, so for the one-step run with any η_k of the schedule it
    promises at most the ε it promises for the whole run, with the same L, λ, σ, n, m. The
    one-dimensional problem of :func:`one_step_delta_lower_bound` meets its hypotheses with
    these constants (β = λ, η_k < 1/β since β ≥ λ). A value above the run's δ therefore shows
    that the theorem's (ε, δ) claim is false at these parameters. Requires L > λ·radius.
    """
    eta = np.atleast_1d(np.asarray(step_sizes, dtype=float))
    return max(one_step_delta_lower_bound(epsilon, lipschitz=lipschitz, sigma=sigma, lam=lam,
                                          eta=float(e), n=n, batch_size=batch_size,
                                          radius=radius)
               for e in {float(eta[0]), float(eta[-1])})


def _account(accountant: str, target_epsilon: float | None, delta: float,
             consts: LogisticConstants, n: int, m: int, etas: np.ndarray,
             orders: object) -> tuple[float, float, str, bool]:
    """(σ, ε, accountant used, proved) for :func:`train_dp_sgld_logistic`."""
    if target_epsilon is None:
        return 0.0, math.inf, "none", True
    route = accountant
    if route == "auto":
        route = "theorem_3_1" if m == n else "released_iterates"
    if route == "released_iterates":
        sigma = released_iterates_calibrate_sigma(target_epsilon, delta, consts.lipschitz, n, m,
                                                  etas, orders=orders)
        eps = released_iterates_epsilon(delta, consts.lipschitz, sigma, n, m, etas,
                                        orders=orders)
        return sigma, eps, route, True
    sigma = sgld_calibrate_sigma(target_epsilon, delta, consts.lipschitz, consts.lam, n, etas)
    eps = sgld_epsilon(delta, consts.lipschitz, sigma, consts.lam, n, etas)[0]
    if m < n:
        lb = _theorem_3_1_refutation(eps, lipschitz=consts.lipschitz, sigma=sigma, lam=consts.lam,
                                    n=n, batch_size=m, step_sizes=etas, radius=consts.radius)
        if lb > delta:
            raise ValueError(
                f"accountant='theorem_3_1' refused: at sigma={sigma:.4g}, batch_size={m} of "
                f"n={n}, Theorem 3.1 claims ({eps:.4g}, {delta:g})-DP, but "
                f"one_step_delta_lower_bound shows delta >= {lb:.3g} for one step with these "
                f"parameters; use accountant='auto' (released iterates, valid for any batch "
                f"size) or full batches")
    return sigma, eps, "theorem_3_1", m == n


def train_dp_sgld_logistic(X: object, y: object, *, num_classes: int, lam: float,
                           epochs: float, batch_size: int, target_epsilon: float | None = 1.0,
                           delta: float = 1e-5, schedule: str = "constant",
                           smoothness: str = "example", feature_bound: float | None = None,
                           chains: int = 1, accountant: str = "auto", orders: object = None,
                           seed: int | None = None, eval_data: tuple | None = None,
                           device: object = None) -> SGLDResult:
    """Private logistic regression by DP-SGLD, with an (ε, δ) that holds for its batch size.

    Constants from :func:`logistic_regression_constants` (β by ``smoothness``; the default
    "example" is the per-example smoothness the theorem needs). Step sizes η = 1/(2β)
    (``schedule="constant"``, Ryffel et al.'s §5.2) or η_k = 1/(2β + λk/2) ("decreasing"),
    K = ⌈epochs·n/m⌉ steps, σ calibrated to (``target_epsilon``, ``delta``) by ``accountant``:

    * "auto" (default): Theorem 3.1 (:func:`sgld_calibrate_sigma`) when m = n, where it is the
      DP-GLD theorem of Chourasia, Ye & Shokri (2021) with S_g = 2L (for a constant step; with
      decreasing steps, Ryffel et al.'s extension of its proof); otherwise the
      released-iterates accountant (:func:`released_iterates_calibrate_sigma`), valid for every
      batch size since releasing θ_K reveals no more than releasing every iterate.
    * "released_iterates": that accountant for any m (``orders``: its Rényi orders, default
      :data:`RELEASED_ORDERS`).
    * "theorem_3_1": Theorem 3.1 as stated, also for m < n, where it is *unproved*: refused
      (``ValueError``) when :func:`_theorem_3_1_refutation` at the run's own σ, η, λ, L, n, m and
      ε exceeds δ, and otherwise flagged ``proved=False`` in the result. An explicit opt-in, to
      reproduce the paper's accounting.

    ``target_epsilon=None`` runs the same schedule without noise (σ = 0, no DP). ``chains``
    independent runs in parallel. ``seed``: ``None`` (default) draws fresh OS entropy, as a
    release must; the seed used is recorded in :attr:`SGLDResult.seed`. A fixed seed is for
    reproducible experiments, never for a release (see :func:`dp_sgld`).
    """
    check_choice("schedule", schedule, ("constant", "decreasing"))
    check_choice("accountant", accountant, ACCOUNTANTS)
    c = check_int("num_classes", num_classes, low=2)
    x = _features(X)
    n = x.shape[0]
    m = check_int("batch_size", batch_size, low=1)
    if m > n:
        raise ValueError(f"batch_size must be in [1, n] = [1, {n}], got {batch_size!r}")
    ep = check_positive("epochs", epochs)
    ch = check_int("chains", chains, low=1)
    s = release_seed(seed)
    device = as_device(device)
    if eval_data is not None and (not isinstance(eval_data, (tuple, list))
                                  or len(eval_data) != 2):
        raise ValueError(f"eval_data must be None or a pair (X_eval, y_eval), got "
                         f"{type(eval_data).__name__}")
    consts = logistic_regression_constants(x, lam, num_classes=c, smoothness=smoothness,
                                           feature_bound=feature_bound)
    K = max(1, math.ceil(ep * n / m))
    etas = np.full(K, 1.0 / (2.0 * consts.beta)) if schedule == "constant" else \
        decreasing_step_sizes(consts.beta, consts.lam, K)
    sigma, eps, used, proved = _account(accountant, target_epsilon, delta, consts, n, m, etas,
                                        RELEASED_ORDERS if orders is None else orders)
    grad = logistic_regression_grad(x, y, consts.lam, c, device=device)
    d = c * x.shape[1]
    theta = dp_sgld(grad, None if sigma > 0 else np.zeros((ch, d)), n=n, batch_size=m,
                    step_sizes=etas, sigma=sigma, seed=s, radius=consts.radius,
                    lam=consts.lam, shape=(ch, d), beta=None, device=device).cpu()
    acc = None
    if eval_data is not None:
        try:
            acc = logistic_regression_accuracy(theta, eval_data[0], eval_data[1], c)
        except ValueError as exc:
            raise ValueError(f"eval_data (X_eval, y_eval): {exc}") from exc
    return SGLDResult(theta, sigma, eps, delta, K, m, schedule, etas, consts, acc,
                      accountant=used, proved=proved, seed=s)


def table4_diagnostics(beta: float, lam: float, epsilon_rdp: float, alpha: float, n: int,
                       d: int) -> dict:
    """The quantities of Table 4 of Ryffel et al. (2022): β, β/λ and (εn²/(αd)) / (β/λ)².

    The last one decides whether Theorem 4.2's step count K = max((β/λ)·εn²/(αd),
    (λ/β)(εn²/(αd))²) grows like n² (ratio < 1, the first term wins) or n⁴ (ratio > 1).
    ``epsilon_rdp`` and ``alpha`` are the RDP pair (ε at order α) of the run.
    """
    b = check_positive("beta", beta)
    lm = check_positive("lam", lam)
    e = check_positive("epsilon_rdp", epsilon_rdp)
    a = check_real("alpha", alpha, low=1.0)
    nn = check_int("n", n, low=1)
    dd = check_int("d", d, low=1)
    ratio = e * nn**2 / (a * dd)
    return {"beta": b, "beta_over_lam": b / lm, "ratio": ratio / (b / lm) ** 2,
            "K_theorem_4_2": max(b / lm * ratio, lm / b * ratio**2)}


# --- DP-SGD baseline under the same adjacency, and the comparison --------------------------------

def calibrate_noise_replace_one(target_epsilon: float, delta: float, sample_rate: float,
                                num_steps: int) -> float:
    """Noise multiplier σ making ``num_steps`` Poisson-subsampled Gaussian steps (DP-SGD)
    (ε, δ)-DP under *replace-one* adjacency, the relation of Theorem 3.1.

    :func:`dplib.accounting.calibrate_noise` (and :func:`dplib.training.train`) use add/remove,
    the convention of Opacus — which is also what the paper's DP-SGD baseline used. Replacing a
    record is a removal and an addition, so the same ε is a weaker promise under add/remove.
    Here ε(σ) is the PLD of :class:`dplib.accounting.PLDAccountant` with
    ``neighboring="replace_one"``, solved by Brent's method in log σ; the result satisfies
    ε(σ) ≤ target (checked).
    """
    from .accounting import PLDAccountant
    from .accounting.calibrate import safe_log_root

    eps_t = check_positive("target_epsilon", target_epsilon)
    q = check_probability("sample_rate", sample_rate, low_open=True)
    T = check_int("num_steps", num_steps, low=1)
    check_probability("delta", delta, low_open=True, high_open=True)

    def f(s: float) -> float:
        acc = PLDAccountant(neighboring="replace_one")
        return acc.step(noise_multiplier=s, sample_rate=q, num_steps=T).get_epsilon(delta) - eps_t

    return safe_log_root(f, 0.3, 3.0, rtol=2.5e-6, floor=1e-2, ceiling=1e4,
                         too_large=f"target_epsilon={target_epsilon!r} needs a noise multiplier "
                                   "above 1e4 for these delta, sample_rate, num_steps")


#: Rows of :func:`compare_methods`. The two "Thm 3.1 claim" rows account DP-SGLD by Theorem 3.1
#: for m < n (``accountant="theorem_3_1"``, flagged unproved); they are not in
#: :data:`DEFAULT_METHODS`.
METHODS = ("DP-SGLD constant", "DP-SGLD decreasing", "DP-SGLD constant, Thm 3.1 claim",
           "DP-SGLD decreasing, Thm 3.1 claim", "DP-GLD", "DP-SGD add/remove",
           "DP-SGD replace-one", "No DP constant", "No DP decreasing")
DEFAULT_METHODS = tuple(m for m in METHODS if "claim" not in m)

_ACCOUNTANT_LABEL = {"theorem_3_1": "Theorem 3.1", "released_iterates": "released iterates",
                     "none": "-"}


def _run_rdp_pair(res: SGLDResult, n: int) -> tuple[float, float]:
    """(RDP ε at the best order α, α) of a run, from the accountant that produced its ε."""
    from .accounting import rdp_to_epsilon

    c = res.constants
    if res.accountant == "theorem_3_1":
        _, alpha = sgld_epsilon(res.delta, c.lipschitz, res.sigma, c.lam, n, res.step_sizes)
        return float(sgld_rdp(alpha, c.lipschitz, res.sigma, c.lam, n, res.step_sizes)), alpha
    orders, rdp = _released_rdp(c.lipschitz, res.sigma, n, res.batch_size,
                                        res.step_sizes, orders=RELEASED_ORDERS)
    _, alpha = rdp_to_epsilon(orders, rdp, res.delta)
    return float(rdp[int(np.argmin(np.abs(orders - alpha)))]), alpha


def compare_methods(data: dict, *, seeds: int = 5, epochs: float = 30, batch_size: int = 200,
                    lam: float = 0.03, target_epsilon: float = 1.0, delta: float = 1e-5,
                    max_grad_norm: float = 1.0, methods: tuple = DEFAULT_METHODS,
                    seed: int | None = None, device: object = None) -> dict:
    """Ryffel et al.'s Tables 1–2 protocol on a data set of unit-norm features (see
    :func:`compare_on_digits`). ``data``: {"train": (X, y), "test": (X, y), "num_classes": C}
    with ‖x‖ ≤ 1 (a public bound). ``methods``: a subset of :data:`METHODS`.

    DP-SGLD rows use :func:`train_dp_sgld_logistic`'s default accountant (released iterates
    for m < n, Theorem 3.1 for the full-batch DP-GLD row); the "Thm 3.1 claim" rows opt in to
    Theorem 3.1 for m < n and carry ``proved=False``.

    Every run is seeded from ``seed`` (DP-SGLD: ``seed``; DP-SGD: ``seed``, …,
    ``seed + seeds − 1``): None (the default) draws 62 fresh bits of OS entropy, an integer makes
    the table reproducible — for experiments, never for a release (a fixed seed makes the noise
    a public function of public inputs).

    Returns ``{"rows": [...], "diagnostics": {...}, "seed": the seed used}``; each row has "key" (its name in
    :data:`METHODS`), "method", "schedule", "adjacency", "accountant", "proved", "epsilon",
    "sigma", "steps", "batch_size", "accuracy" (array over seeds). The diagnostics describe the
    constant-step DP-SGLD run: the quantities of :func:`table4_diagnostics` for the RDP pair of
    its accountant, its ε if every iterate were released, what Theorem 3.1 would claim at its σ
    ("theorem_3_1_epsilon", unproved for m < n) and the σ Theorem 3.1 claims suffices
    ("theorem_3_1_sigma").
    """
    import torch

    from .training import evaluate, make_logistic_regression, train

    s = check_int("seeds", seeds, low=1)
    from .device import release_seed
    s0 = release_seed(seed, bits=62)
    for mth in methods:
        check_choice("methods", mth, METHODS)
    (X, y), (Xt, yt), C = data["train"], data["test"], data["num_classes"]
    X = _features(X)
    n, p = X.shape
    m = check_int("batch_size", batch_size, low=1)
    rows = []

    def sgld(key, method, schedule, batch, target, ep, accountant="auto"):
        res = train_dp_sgld_logistic(X, y, num_classes=C, lam=lam, epochs=ep, batch_size=batch,
                                     target_epsilon=target, delta=delta, schedule=schedule,
                                     chains=s, accountant=accountant, seed=s0,
                                     eval_data=(Xt, yt), device=device, feature_bound=1.0)
        rows.append(dict(key=key, method=method, schedule=schedule,
                         adjacency="replace-one" if target else "-",
                         accountant=_ACCOUNTANT_LABEL[res.accountant], proved=res.proved,
                         epsilon=res.epsilon, sigma=res.sigma, steps=res.steps,
                         batch_size=batch, accuracy=res.test_accuracy))
        return res

    # the constant-step run always happens: it fixes η and K for the other rows
    const = sgld("DP-SGLD constant", "DP-SGLD", "constant", m, target_epsilon, epochs)
    if "DP-SGLD constant" not in methods:
        rows.pop()
    if "DP-SGLD decreasing" in methods:
        sgld("DP-SGLD decreasing", "DP-SGLD", "decreasing", m, target_epsilon, epochs)
    for schedule in ("constant", "decreasing"):
        key = f"DP-SGLD {schedule}, Thm 3.1 claim"
        if key in methods:
            sgld(key, "DP-SGLD", schedule, m, target_epsilon, epochs, "theorem_3_1")
    if "DP-GLD" in methods:       # full batches for the same number of steps
        sgld("DP-GLD", "DP-GLD (full batch)", "constant", n, target_epsilon, const.steps)
    q, lr = m / n, float(const.step_sizes[0])
    T = max(1, round(epochs / q))
    dpsgd = [(a, k) for a, k in (("add/remove", "DP-SGD add/remove"),
                                 ("replace-one", "DP-SGD replace-one")) if k in methods]
    if dpsgd:
        Xtt, ytt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(np.asarray(y))
        Xet = torch.as_tensor(_features(Xt), dtype=torch.float32)
        yet = torch.as_tensor(np.asarray(yt))
    for adjacency, key in dpsgd:
        kwargs = dict(target_epsilon=target_epsilon) if adjacency == "add/remove" else \
            dict(noise_multiplier=calibrate_noise_replace_one(target_epsilon, delta, q, T))
        accs = []
        for i in range(s):
            res = train(make_logistic_regression(p, C), (Xtt, ytt), sample_rate=q, lr=lr,
                        steps=T, max_grad_norm=max_grad_norm, delta=delta, seed=s0 + i,
                        device=device, **kwargs)
            accs.append(evaluate(res.model, Xet, yet, device=device))
        eps = target_epsilon if adjacency == "replace-one" else res.epsilon
        rows.append(dict(key=key, method="DP-SGD", schedule="constant", adjacency=adjacency,
                         accountant="PLD" if adjacency == "replace-one" else "RDP",
                         proved=True, epsilon=eps, sigma=res.noise_multiplier, steps=T,
                         batch_size=m, accuracy=np.array(accs)))
    if "No DP constant" in methods:
        sgld("No DP constant", "No DP", "constant", m, None, epochs)
    if "No DP decreasing" in methods:
        sgld("No DP decreasing", "No DP", "decreasing", m, None, epochs)

    c = const.constants
    eps_alpha, alpha = _run_rdp_pair(const, n)
    dataset_beta = logistic_regression_constants(X, lam, num_classes=C).beta
    diag = table4_diagnostics(c.beta, c.lam, eps_alpha, alpha, n, C * p)
    diag.update(epsilon_rdp=eps_alpha, beta_dataset=dataset_beta,
                beta_over_lam_dataset=dataset_beta / c.lam, lipschitz=c.lipschitz,
                radius=c.radius, alpha=alpha, n=n, d=C * p, sigma=const.sigma,
                step_size=lr, steps=const.steps, accountant=const.accountant,
                released_iterates_epsilon=released_iterates_epsilon(
                    delta, c.lipschitz, const.sigma, n, m, const.step_sizes,
                    orders=RELEASED_ORDERS),
                theorem_3_1_epsilon=sgld_epsilon(delta, c.lipschitz, const.sigma, c.lam, n,
                                                 const.step_sizes)[0],
                theorem_3_1_sigma=sgld_calibrate_sigma(target_epsilon, delta, c.lipschitz,
                                                       c.lam, n, const.step_sizes))
    return {"rows": rows, "diagnostics": diag, "seed": s0}


def compare_on_digits(*, seeds: int = 5, epochs: float = 30, batch_size: int = 200,
                      lam: float = 0.03, dim: int = 16, target_epsilon: float = 1.0,
                      delta: float = 1e-5, max_grad_norm: float = 1.0, data_seed: int = 0,
                      methods: tuple = DEFAULT_METHODS, seed: int | None = None,
                      device: object = None) -> dict:
    """The book's version of Ryffel et al.'s Tables 1–2: private logistic regression on public
    features.

    Data: :func:`dplib.features.digits_features` (features fitted on a public split). All
    methods take the same step size η = 1/(2β) (β per example, β = ½ + λ for unit features),
    the same epochs and batch size m (DP-SGD: Poisson rate m/n), no momentum — the paper's
    protocol (§5.2). Rows (test accuracy over ``seeds`` runs):

    * DP-SGLD, constant and decreasing step, m records per step, accounted as released
      iterates (valid for every batch size; replace-one);
    * optionally (``methods`` from :data:`METHODS`) the same at the σ Theorem 3.1 claims
      suffices — unproved for m < n, flagged ``proved=False``;
    * DP-GLD: full batches for the same number of steps (Theorem 3.1 with m = n is Chourasia
      et al.'s theorem, which the one-step check cannot fault);
    * DP-SGD (:func:`dplib.training.train`, logistic-regression model, clipping C =
      ``max_grad_norm``) at ε under add/remove (the library's and Opacus' convention) and under
      replace-one (:func:`calibrate_noise_replace_one`);
    * no DP: the same projected SGD schedule without noise (σ = 0).

    ``data_seed`` picks the public features; ``seed`` the runs' noise and batches (None: fresh
    OS entropy, recorded; an integer reproduces the table — for experiments, never for a
    release). Returns ``{"rows", "diagnostics", "seed", "config"}`` (see
    :func:`compare_methods`).
    """
    from .features import digits_features

    out = compare_methods(digits_features(seed=data_seed, dim=dim), seeds=seeds, epochs=epochs,
                          batch_size=batch_size, lam=lam, target_epsilon=target_epsilon,
                          delta=delta, max_grad_norm=max_grad_norm, methods=methods,
                          seed=seed, device=device)
    out["config"] = dict(seeds=seeds, epochs=epochs, batch_size=batch_size, lam=lam, dim=dim,
                         target_epsilon=target_epsilon, delta=delta,
                         max_grad_norm=max_grad_norm, data_seed=data_seed, seed=out["seed"],
                         step_size=out["diagnostics"]["step_size"])
    return out


def scaling_study(sizes: tuple = (500, 2000, 8000), *, seeds: int = 2, epochs: float = 30,
                  batch_fraction: float = 0.2, lam: float = 0.03, target_epsilon: float = 1.0,
                  delta: float = 1e-5, data_seed: int = 0,
                  methods: tuple = ("DP-SGLD decreasing", "DP-SGD replace-one",
                                    "No DP decreasing"),
                  seed: int | None = None, device: object = None) -> dict:
    """Accuracy against the training-set size n on synthetic unit-norm features
    (:func:`dplib.features.synthetic_features`, the same task for every n), for ``methods``
    (names from :data:`METHODS`; by default DP-SGLD with the decreasing step accounted as
    released iterates, DP-SGD replace-one and no DP), with the protocol of
    :func:`compare_methods` and batches of ``batch_fraction``·n. ``seed`` as in
    :func:`compare_methods` (None: fresh OS entropy, the same for every n). Returns {"sizes",
    "seed", method name: (len(sizes), seeds) array}.
    """
    from .device import release_seed
    from .features import synthetic_features

    seed = release_seed(seed, bits=62)
    frac = check_probability("batch_fraction", batch_fraction, low_open=True)
    acc = {k: [] for k in methods}
    for n in sizes:
        data = synthetic_features(check_int("n", n, low=10), n_test=2000, seed=data_seed)
        out = compare_methods(data, seeds=seeds, epochs=epochs,
                              batch_size=max(1, round(frac * n)), lam=lam,
                              target_epsilon=target_epsilon, delta=delta, methods=methods,
                              seed=seed, device=device)
        for row in out["rows"]:
            acc[row["key"]].append(np.asarray(row["accuracy"]))
    return {"sizes": np.asarray(sizes), "seed": seed,
            **{k: np.array(v) for k, v in acc.items()}}


def format_table(rows: list[dict]) -> str:
    """The rows of :func:`compare_on_digits` as a plain-text table (accuracy in %, mean ± std).

    ε resting on Theorem 3.1 with m < n is marked with * and a footnote."""
    head = f"{'method':<21} {'step':<10} {'adjacency':<11} {'accountant':<17} {'eps':>6}  " \
           f"{'sigma':>8} {'steps':>6}  {'accuracy (%)':>13}"
    lines = [head, "-" * len(head)]
    for r in rows:
        acc = 100 * np.asarray(r["accuracy"])
        eps = "-" if math.isinf(r["epsilon"]) else f"{r['epsilon']:.2f}"
        mark = " " if r.get("proved", True) else "*"
        lines.append(f"{r['method']:<21} {r['schedule']:<10} {r['adjacency']:<11} "
                     f"{r.get('accountant', ''):<17} {eps:>6}{mark} {r['sigma']:>8.4g} "
                     f"{r['steps']:>6}  {acc.mean():6.1f} ± {acc.std():4.1f}")
    if not all(r.get("proved", True) for r in rows):
        lines.append("* as Theorem 3.1 claims (unproved for batches m < n: "
                     "one_step_delta_lower_bound refutes it for some parameters)")
    return "\n".join(lines)
