"""DP-SGLD: noisy stochastic gradient descent with hidden iterates (Ryffel, Bach & Pointcheval
2022).

The algorithm (Algorithm 1 of the paper, implemented in
:func:`dplib.langevin.sampler.dp_sgld`): for k = 0, …, K − 1

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
* :func:`sgld_utility_bound` — the paper's utility theorems (4.1 constant step, 4.2 decreasing
  step): the σ and K they prescribe and the excess-risk bound.
* :func:`released_iterates_rdp`, :func:`released_iterates_epsilon`,
  :func:`released_iterates_calibrate_sigma` — what the same run costs when every iterate is
  released: per-step subsampled Gaussian (batches without replacement, replace-one; Wang, Balle
  & Kasiviswanathan 2019) composed over the steps.

The Theorem 3.1 functions evaluate the theorem as stated: a guarantee for full batches (m = n)
only. For m < n it is unproved, and :mod:`dplib.langevin.counterexample` refutes it for small
batches; the released-iterates accountant holds for every m, which is why
:func:`dplib.langevin.sampler.train_dp_sgld_logistic` uses it for minibatch runs.
"""
from __future__ import annotations

import math

import numpy as np

from .._constraints import Interval, Options, constrained, same_as
from .._validate import check_int, check_positive, check_real_array, check_step_counts
from ..accounting import DEFAULT_ORDERS
from ..accounting._params import CONVERSION, COUNT, DELTA, POSITIVE
from ._params import (BETA_OR_NONE, ORDER, ORDER_ARRAY, ORDERS_OR_NONE, STEP_COUNTS, STEPS,
                      optional)
from ._checks import as_output, zcdp_sigma_guess
from .._validate import shown

__all__ = ["sgld_rdp", "constant_step_rdp", "decreasing_step_rdp", "decreasing_step_sizes",
           "sgld_rdp_limit", "sgld_composition_rdp", "sgld_epsilon", "sgld_calibrate_sigma",
           "sgld_utility_bound", "released_iterates_rdp", "released_iterates_epsilon",
           "released_iterates_calibrate_sigma", "RELEASED_ORDERS"]

#: Rényi orders of the released-iterates accountant in
#: :func:`dplib.langevin.sampler.train_dp_sgld_logistic`: those of
#: :data:`dplib.accounting.DEFAULT_ORDERS` up to 64 (Opacus' grid). Fewer orders can only raise
#: ε (a valid bound); the Wang–Balle–Kasiviswanathan bound costs O(α_max²) high-precision
#: operations per noise level, and calibration evaluates it for a dozen levels or more.
RELEASED_ORDERS: np.ndarray = DEFAULT_ORDERS[DEFAULT_ORDERS <= 64]


# --- step sizes ----------------------------------------------------------------------------------

def _check_schedule(step_sizes: object, K: object) -> np.ndarray:
    """Σ η_k over the steps taken, as an array broadcastable like K (see :func:`sgld_rdp`)."""
    arr = np.asarray(step_sizes)
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number) or arr.ndim > 1:
        raise ValueError(f"step_sizes must be a positive number or a 1-d sequence of positive "
                         f"numbers, got {shown(step_sizes)}")
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
    b = beta
    if b < lam:
        raise ValueError(f"beta must be >= lam (a λ-strongly convex, β-smooth loss has β >= λ), "
                         f"got beta={shown(beta)} < lam={shown(lam)}")
    eta_max = float(np.max(np.asarray(step_sizes, dtype=float)))
    if eta_max >= 1.0 / b:
        raise ValueError(f"step_sizes must be in (0, 1/beta) = (0, {1.0 / b:g}) (Theorem 3.1 "
                         f"needs η_k < 1/β), got {shown(eta_max)}")


#: The parameters of Theorem 3.1's curve (each one alone; β ≥ λ and η_k < 1/β are relations).
_THM = dict(alpha=ORDER_ARRAY, lipschitz=POSITIVE, sigma=POSITIVE, lam=POSITIVE, n=COUNT)
#: K as a step count (or counts) ≥ 0, or None (every step size given).
_K_OR_NONE = optional(STEP_COUNTS, "None or an integer (or integer array) >= 0")
#: K of the (ε, δ) functions: None or a number of steps ≥ 0.
_K_SCALAR = optional(STEPS, "None or an integer >= 0")


@constrained(beta=POSITIVE, lam=POSITIVE, K=COUNT)
def decreasing_step_sizes(beta: float, lam: float, K: int) -> np.ndarray:
    """η_k = 1/(2β + λk/2) for k = 0, …, K − 1 (Ryffel et al. 2022, Corollary 3.3 and Section 4.2).

    η_0 = 1/(2β) < 1/β, so the schedule meets Theorem 3.1's condition. The paper indexes the
    schedule from k = 0 (Section 4.2, "k ≥ 0"); the array holds the K step sizes actually used.
    """
    b, lm, k = beta, lam, K
    if b < lm:
        raise ValueError(f"beta must be >= lam, got beta={shown(beta)} < lam={shown(lam)}")
    return 1.0 / (2.0 * b + lm * np.arange(k) / 2.0)


# --- Theorem 3.1 and its corollaries -------------------------------------------------------------

def _prefactor(alpha, lipschitz, sigma, lam, n):
    """4αL²/(λn²σ²) of Theorem 3.1, from checked (declared) values, and λ."""
    return np.asarray(alpha, dtype=float) * 4.0 * lipschitz**2 / (lam * n**2 * sigma**2), lam


@constrained(**_THM, K=_K_OR_NONE, beta=BETA_OR_NONE)
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
    return as_output(pre * -np.expm1(-lm * total / 2.0))


@constrained(**_THM, eta=POSITIVE, K=STEP_COUNTS, beta=BETA_OR_NONE)
def constant_step_rdp(alpha: float | np.ndarray, lipschitz: float, sigma: float, lam: float,
                      n: int, eta: float, K: int | np.ndarray, *,
                      beta: float | None = None) -> np.ndarray | float:
    """Corollary 3.2 of Ryffel et al. (2022): constant η < 1/β,
    ε(α) = 4αL²/(λn²σ²) · (1 − e^{−ληK/2}) (a guarantee for m = n only, see :func:`sgld_rdp`)."""
    pre, lm = _prefactor(alpha, lipschitz, sigma, lam, n)
    e, k = eta, K
    _check_beta(beta, lm, e)
    return as_output(pre * -np.expm1(-lm * e * k / 2.0))


@constrained(**_THM, beta=POSITIVE, K=STEP_COUNTS)
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
    b, k = beta, K
    if b < lm:
        raise ValueError(f"beta must be >= lam, got beta={shown(beta)} < lam={shown(lam)}")
    return as_output(pre * lm * k / (4.0 * b + lm * k))


@constrained(**_THM)
def sgld_rdp_limit(alpha: float | np.ndarray, lipschitz: float, sigma: float, lam: float,
                   n: int) -> np.ndarray | float:
    """The K → ∞ value of Theorem 3.1 when Σ η_k diverges: 4αL²/(λn²σ²) (Ryffel et al. 2022,
    Section 3.3)."""
    pre, _ = _prefactor(alpha, lipschitz, sigma, lam, n)
    return as_output(pre)


@constrained(alpha=ORDER_ARRAY, lipschitz=POSITIVE, sigma=POSITIVE, n=COUNT, K=_K_OR_NONE)
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
    total = _check_schedule(step_sizes, K)
    return as_output(np.asarray(alpha, dtype=float) * lipschitz**2 * total / (n**2 * sigma**2))


# --- (ε, δ) and calibration ----------------------------------------------------------------------

@constrained(delta=DELTA, lipschitz=POSITIVE, sigma=POSITIVE, lam=POSITIVE, n=COUNT,
             K=_K_SCALAR, orders=ORDERS_OR_NONE, method=CONVERSION)
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
    from ..accounting import rdp_to_epsilon

    orders = np.asarray(DEFAULT_ORDERS if orders is None else orders, dtype=float)
    rdp = np.atleast_1d(sgld_rdp(orders, lipschitz, sigma, lam, n, step_sizes, K=K))
    return rdp_to_epsilon(orders, rdp, delta, method=method)


@constrained(target_epsilon=POSITIVE,
             **same_as(sgld_epsilon, "delta", "lipschitz", "lam", "n", "K", "orders", "method"))
def sgld_calibrate_sigma(target_epsilon: float, delta: float, lipschitz: float, lam: float,
                         n: int, step_sizes: float | np.ndarray, *, K: int | None = None,
                         orders: object = None, method: str = "improved") -> float:
    """Smallest σ (relative precision 1e-10, rounded up) with :func:`sgld_epsilon` ≤
    ``target_epsilon``: the noise Theorem 3.1 claims suffices (proved for m = n only; see
    :func:`sgld_epsilon`).

    Theorem 3.1 is proportional to 1/σ², so ε decreases in σ; the root is found by Brent's method
    in log σ (:func:`dplib.accounting.calibrate.safe_log_root`, which returns it on the safe
    side), started from the σ at which the curve, read as ρ-zCDP, meets the target by
    ε = ρ + 2√(ρ log(1/δ)) (Bun & Steinke 2016, Prop. 1.3).
    """
    from ..accounting.calibrate import safe_log_root

    eps_t = target_epsilon

    def excess(s: float) -> float:
        return sgld_epsilon(delta, lipschitz, s, lam, n, step_sizes, K=K, orders=orders,
                            method=method)[0] - eps_t

    rho_1 = float(sgld_rdp(2.0, lipschitz, 1.0, lam, n, step_sizes, K=K)) / 2.0   # ρ at σ = 1
    guess = zcdp_sigma_guess(rho_1, target_epsilon, delta)
    return safe_log_root(excess, guess, guess, rtol=1e-10, floor=1e-12, ceiling=1e12,
                         too_large=f"target_epsilon={target_epsilon!r} is below what any sigma "
                                   "<= 1e12 reaches for this delta and order grid; raise it")


@constrained(alpha=ORDER, epsilon=POSITIVE, lipschitz=POSITIVE, lam=POSITIVE, beta=POSITIVE,
             n=COUNT, d=COUNT, schedule=Options("constant", "decreasing"),
             grad_second_moment=optional(Interval(0.0, math.inf, closed="left"),
                                         "None or a real in [0, inf)"))
def sgld_utility_bound(alpha: float, epsilon: float, lipschitz: float, lam: float, beta: float,
                       n: int, d: int, *, schedule: str = "constant",
                       grad_second_moment: float | None = None) -> dict:
    """The utility theorems of Ryffel, Bach & Pointcheval (2022): σ, K and the excess-risk bound.

    Both set σ² = 4αL²/(ελn²), the noise at which Theorem 3.1's limit equals ε (so the run is
    (α, ε)-RDP for every K by that theorem — proved for full batches only, see :func:`sgld_rdp`),
    and write r = εn²/(αd).

    * ``schedule="constant"`` — Theorem 4.1: η = 1/(2β), K = (2β/λ) ln r (needs r > 1), and
      E[ℒ_D(θ_K) − ℒ_D(θ*)] ≤ 6αβdL²/(ελ²n²) + ξ²/(4λ), where ξ² = E‖∇ℒ_B(θ*)‖² is the second
      moment of a batch gradient at the optimum (``grad_second_moment``; None uses ξ² ≤ L², the
      bound the paper uses; 0 for full batches with θ* inside C). The first term is the noise,
      the second the minibatch error.
    * ``schedule="decreasing"`` — Theorem 4.2: η_k = 1/(2β + λk/2),
      K = max((β/λ) r, (λ/β) r²), and the *average* excess risk of the iterates,
      E[(1/K) Σ_k ℒ_D(θ_k) − ℒ_D(θ*)] ≤ 18αdL²/(ελn²): no β/λ factor, no ξ² term.
      ``grad_second_moment`` is not used.

    The constants 6 and 18 are those of the paper's proofs. Both proofs use ∇ℒ_D(θ*) = 0, i.e.
    θ* is the unconstrained minimiser and lies in C. Returns {"sigma", "K" (real-valued; round
    up), "noise_term", "sgd_term", "bound", "r", "ratio"} with ratio = r/(β/λ)², the quantity
    of the paper's Table 4 (below 1, Theorem 4.2's K grows like n²; above 1, like n⁴).
    """
    a, e, lip, lm, b, nn, dd = alpha, epsilon, lipschitz, lam, beta, n, d
    if b < lm:
        raise ValueError(f"beta must be >= lam, got beta={shown(beta)} < lam={shown(lam)}")
    xi2 = lip**2 if grad_second_moment is None else grad_second_moment
    r = e * nn**2 / (a * dd)
    sigma = math.sqrt(4.0 * a * lip**2 / (e * lm * nn**2))
    if schedule == "constant":
        if r <= 1.0:
            raise ValueError(f"epsilon * n**2 / (alpha * d) must be > 1 for Theorem 4.1's "
                             f"K = (2 beta/lam) log(epsilon n^2/(alpha d)) to be positive, got "
                             f"{shown(r)}")
        K = 2.0 * b / lm * math.log(r)
        noise, sgd = 6.0 * a * b * dd * lip**2 / (e * lm**2 * nn**2), xi2 / (4.0 * lm)
    else:
        K = max(b / lm * r, lm / b * r**2)
        noise, sgd = 18.0 * a * dd * lip**2 / (e * lm * nn**2), 0.0
    return {"sigma": sigma, "K": K, "noise_term": noise, "sgd_term": sgd, "bound": noise + sgd,
            "r": r, "ratio": r / (b / lm) ** 2}


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
            raise ValueError(f"K must be integers >= 1, got {shown(K)}")
        return np.array([check_positive("step_sizes", float(eta))]), ks[:, None], scalar
    etas = check_real_array("step_sizes", eta, low=0.0)
    if etas.ndim != 1 or etas.size == 0:
        raise ValueError(f"step_sizes must be a positive number or a non-empty 1-d sequence, "
                         f"got shape {etas.shape}")
    ks = np.array([etas.size]) if K is None else np.atleast_1d(check_step_counts("K", K))
    if (ks < 1).any() or (ks > etas.size).any():
        raise ValueError(f"K must be in [1, len(step_sizes)] = [1, {etas.size}], got {shown(K)}")
    etas = etas[:int(ks.max())]
    grid = np.unique(etas)
    if grid.size > g:         # round η_k up to a geometric grid: a valid upper bound
        edges = np.geomspace(grid[0], grid[-1], g)
        etas = edges[np.minimum(np.searchsorted(edges, etas * (1 - 1e-12)), g - 1)]
    values, group = np.unique(etas, return_inverse=True)
    counts = np.zeros((etas.size + 1, values.size))
    counts[1:] = np.cumsum(np.eye(values.size)[group], axis=0)   # steps < k in each group
    return values, counts[ks], scalar


@constrained(lipschitz=POSITIVE, sigma=POSITIVE, n=COUNT, batch_size=COUNT,
             orders=ORDERS_OR_NONE)
def released_iterates_rdp(lipschitz: float, sigma: float, n: int, batch_size: int,
                          step_sizes: float | np.ndarray, *, K: int | np.ndarray | None = None,
                          orders: object = None,
                          max_groups: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """(orders, RDP) of DP-SGLD with every iterate released: one RDP curve per entry of ``K``.

    The accounting of :func:`released_iterates_epsilon` before the conversion to (ε, δ).
    Returns ``(orders, rdp)`` with ``rdp`` of shape (len(orders),) for a scalar/absent ``K`` and
    (len(K), len(orders)) for an array ``K``. For an array, the η_k are grouped once over the
    longest run, so a prefix may be rounded up on a coarser grid than its own call would use
    (still an upper bound).
    """
    from ..accounting import check_orders
    from ..accounting.subsampling import wor_gaussian_rdp

    lip, sg, nn, m = lipschitz, sigma, n, batch_size
    if m > nn:
        raise ValueError(f"batch_size must be in [1, n] = [1, {nn}], got {shown(batch_size)}")
    alphas = check_orders(DEFAULT_ORDERS) if orders is None else orders
    values, counts, scalar = _released_schedule(step_sizes, K, max_groups)
    # step k is the subsampled Gaussian with noise multiplier z_k = σm/(L√(2η_k))
    per_group = np.stack([wor_gaussian_rdp(alphas, sg * m / (lip * math.sqrt(2.0 * e)), m / nn)
                          for e in values])                   # (groups, orders)
    rdp = counts @ per_group                                  # (len(K), orders)
    return alphas, (rdp[0] if scalar else rdp)


@constrained(delta=DELTA, **same_as(released_iterates_rdp, "lipschitz", "sigma", "n", "batch_size",
                                     "orders"))
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
    from ..accounting import rdp_to_epsilon

    alphas, rdp = released_iterates_rdp(lipschitz, sigma, n, batch_size, step_sizes, K=K,
                                        orders=orders, max_groups=max_groups)
    if rdp.ndim == 1:
        return rdp_to_epsilon(alphas, rdp, delta)[0]
    return np.array([rdp_to_epsilon(alphas, r, delta)[0] for r in rdp])


@constrained(target_epsilon=POSITIVE, rtol=Interval(0.0, 0.1, closed="neither"),
             **same_as(released_iterates_epsilon, "delta", "lipschitz", "n", "batch_size",
                       "orders"))
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
    from ..accounting.calibrate import safe_log_root

    eps_t = target_epsilon
    if K is not None:
        K = check_int("K", K, low=1)

    def excess(s: float) -> float:
        return released_iterates_epsilon(delta, lipschitz, s, n, batch_size, step_sizes, K=K,
                                         orders=orders, max_groups=max_groups) - eps_t

    # start from the full-batch composition σ (ρ-zCDP with ρ = L²Ση_k/(n²σ²)); subsampling
    # changes it by a modest factor
    total = float(np.max(_check_schedule(step_sizes, K)))
    guess = zcdp_sigma_guess(lipschitz**2 * total / n**2, eps_t, delta)
    return safe_log_root(excess, guess, guess, rtol=rtol, floor=1e-12, ceiling=1e12,
                         too_large=f"target_epsilon={target_epsilon!r} needs sigma above 1e12 "
                                   "for these delta and orders; raise it")
