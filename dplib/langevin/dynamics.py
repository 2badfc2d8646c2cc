"""Privacy dynamics of noisy gradient descent with hidden iterates (Chourasia, Ye & Shokri 2021).

The algorithm (``noisy_gd``): for a data set D = (x_1, …, x_n), a loss ℓ and a convex set C,

    θ_{k+1} = Π_C(θ_k − (η/n) g(θ_k; D) + √(2ησ²) N(0, I_d)),   g(θ; D) = Σ_i ∇ℓ(θ; x_i),

and only θ_K is released; θ_0 must be data-independent (a fixed point, or the Gaussian start of
the theorem — see :func:`privacy_dynamics_rdp`). Throughout, neighbouring data sets differ by
**replacing one record** (n stays fixed), and the *gradient sensitivity* is the one of the
*summed* gradient,

    S_g = max_{D≃D'} sup_θ ‖g(θ; D) − g(θ; D')‖₂ = max_{x, x'} sup_θ ‖∇ℓ(θ; x) − ∇ℓ(θ; x')‖₂,

so a loss with ‖∇ℓ‖ ≤ L has S_g ≤ 2L. Privacy is Rényi DP of order α > 1 (Mironov 2017).

The algorithm itself is :func:`dplib.langevin.gradient_descent.noisy_gd`; DP-SGLD, the minibatch
version (Ryffel, Bach & Pointcheval 2022), is :mod:`dplib.langevin.sgld`.

Formulas (all vectorised over ``alpha`` and ``K`` with numpy broadcasting):

* :func:`privacy_dynamics_rdp` — the privacy-dynamics upper bound for λ-strongly convex,
  β-smooth losses with η ≤ 1/β (Chourasia et al. 2021, main theorem, "Privacy
  Dynamics Bound"): ε = α S_g² / (λσ²n²) · (1 − e^{−ληK/2}).
* :func:`composition_rdp` — the baseline for the same algorithm: each step is a Gaussian
  mechanism on the gradient (shift ηS_g/n, noise std √(2η)σ, RDP α η S_g²/(4σ²n²) by Mironov 2017,
  Prop. 7), composed over K steps (Mironov 2017, Prop. 1): ε = K α η S_g² / (4σ²n²).
* :func:`squared_loss_lower_bound` — the lower bound for ℓ(θ; x) = ‖θ − x‖²/2 (Chourasia et al.
  2021, lower-bound theorem, "Our Privacy Analysis is Tight"):
  ε ≥ α S_g² / (4σ²n²) · (1 − e^{−ηK}).
* :func:`exact_gaussian_renyi` — the exact Rényi divergence for that loss without projection,
  derived in closed form here (the iterates are Gaussian); it lies between the two bounds.

(ε, δ) guarantees come from :func:`dplib.accounting.rdp_to_epsilon` (:func:`langevin_epsilon`).
"""
from __future__ import annotations

import math

import numpy as np

from .._constraints import constrained, same_as
from ..accounting._params import CONVERSION, COUNT, DELTA, POSITIVE
from ._checks import as_output, zcdp_sigma_guess
from ._params import (ANALYSIS, BETA_OR_NONE, ORDER, ORDER_ARRAY, ORDERS_OR_NONE, REAL_ARRAY,
                      STEP_COUNTS, STEPS)
from .._validate import shown

__all__ = ["privacy_dynamics_rdp", "composition_rdp", "squared_loss_lower_bound",
           "exact_gaussian_renyi", "squared_loss_moments", "langevin_epsilon",
           "calibrate_sigma", "excess_risk_bound"]

# --- input checks --------------------------------------------------------------------------------

#: The parameters of every RDP formula of noisy GD (each one alone; the step-size relations are
#: checked by :func:`_check_step_size`).
_COMMON = dict(alpha=ORDER_ARRAY, sensitivity=POSITIVE, sigma=POSITIVE, eta=POSITIVE, n=COUNT,
               K=STEP_COUNTS, lam=POSITIVE, beta=BETA_OR_NONE)


def _check_step_size(eta: float, lam: float, beta: float | None) -> None:
    """The theorem's precondition η ≤ 1/β; since β ≥ λ it implies η ≤ 1/λ, checked always."""
    if beta is not None:
        b = beta
        if b < lam:
            raise ValueError(f"beta must be >= lam (a λ-strongly convex, β-smooth loss has "
                             f"β >= λ), got beta={shown(beta)} < lam={shown(lam)}")
        if eta > 1.0 / b:
            raise ValueError(f"eta must be in (0, 1/beta] = (0, {1.0 / b:g}] (the theorem "
                             f"needs η ≤ 1/β), got {shown(eta)}")
    if eta * lam > 1.0:
        raise ValueError(f"eta must be in (0, 1/lam] = (0, {1.0 / lam:g}] (η ≤ 1/β ≤ 1/λ), "
                         f"got {shown(eta)}")


# --- the three formulas and the exact value ------------------------------------------------------

@constrained(**_COMMON)
def privacy_dynamics_rdp(alpha: float | np.ndarray, sensitivity: float, sigma: float,
                         eta: float, lam: float, n: int, K: int | np.ndarray, *,
                         beta: float | None = None) -> np.ndarray | float:
    """Rényi DP of order α of noisy GD releasing only θ_K (Chourasia, Ye & Shokri 2021).

    ε(α, K) = α S_g² / (λ σ² n²) · (1 − exp(−λ η K / 2)), for λ-strongly convex, β-smooth losses
    with η ≤ 1/β (main theorem of the paper, "Privacy Dynamics Bound"). It converges
    to α S_g²/(λσ²n²) as K → ∞. The start θ_0 must not depend on the data: the theorem takes
    θ_0 ∼ Π_C(N(0, 2σ²/λ I)), and a fixed point also satisfies the log-Sobolev condition its
    proof needs (with constant 0 ≤ 2σ²/λ); a start computed from the data does not. Replace-one
    adjacency; ``sensitivity`` is S_g of the summed gradient. ``beta`` (optional) is checked
    against η ≤ 1/β; η ≤ 1/λ is always required. Broadcasts over ``alpha`` and ``K``.
    """
    a, k = np.asarray(alpha, dtype=float), np.asarray(K)
    _check_step_size(eta, lam, beta)
    return as_output(a * sensitivity**2 / (lam * sigma**2 * n**2)
                     * -np.expm1(-lam * eta * k / 2.0))


@constrained(**_COMMON)
def composition_rdp(alpha: float | np.ndarray, sensitivity: float, sigma: float, eta: float,
                    lam: float, n: int, K: int | np.ndarray, *,
                    beta: float | None = None) -> np.ndarray | float:
    """Rényi DP of the same noisy GD by composition over all K steps (iterates released).

    One step is a Gaussian mechanism: the update moves by at most η S_g / n between neighbours
    and the noise has std √(2η) σ, so its RDP is α (ηS_g/n)² / (2 · 2ησ²) = α η S_g²/(4σ²n²)
    (Mironov 2017, Prop. 7); projection is post-processing and RDP adds over steps (Prop. 1):
    ε(α, K) = K α η S_g² / (4 σ² n²). ``lam`` and ``beta`` are accepted for a signature equal to
    :func:`privacy_dynamics_rdp` and validated, but the bound needs no convexity.
    """
    a, k = np.asarray(alpha, dtype=float), np.asarray(K)
    if beta is not None:
        _check_step_size(eta, lam, beta)
    return as_output(k * a * eta * sensitivity**2 / (4.0 * sigma**2 * n**2))


@constrained(**{k: v for k, v in _COMMON.items() if k != "beta"})
def squared_loss_lower_bound(alpha: float | np.ndarray, sensitivity: float, sigma: float,
                             eta: float, n: int, K: int | np.ndarray, *,
                             lam: float = 1.0) -> np.ndarray | float:
    """Lower bound on the Rényi privacy loss of noisy GD for ℓ(θ; x) = (λ/2)‖θ − x‖².

    ε ≥ α S_g² / (4 λ σ² n²) · (1 − exp(−λ η K)). At λ = 1 this is the paper's lower bound
    (Chourasia et al. 2021, lower-bound theorem, "Our Privacy Analysis is Tight").
    It is a simplification of :func:`exact_gaussian_renyi`: writing t = ληK, the exact value is
    ≈ α S_g²/(2λσ²n²) · (1 − e^{−t})/(1 + e^{−t}) and 1/(1 + e^{−t}) ≥ 1/2 was dropped, so the
    bound is tight for small K and a factor ≈ 2 below the exact value as K → ∞. The λ ≠ 1 case
    follows by the same computation (derived here). Requires λη ≤ 1 (η ≤ 1/β with β = λ).
    """
    a, k = np.asarray(alpha, dtype=float), np.asarray(K)
    _check_step_size(eta, lam, None)
    return as_output(a * sensitivity**2 / (4.0 * lam * sigma**2 * n**2)
                     * -np.expm1(-lam * eta * k))


def _one_minus_power(lam_eta: float, k: np.ndarray, power: int = 1) -> np.ndarray:
    """1 − (1 − λη)^{power·k}, accurate for small λη; equals 1 for λη = 1, k ≥ 1 and 0 at k = 0."""
    if lam_eta == 1.0:
        return np.where(k == 0, 0.0, 1.0)
    return -np.expm1(power * k * math.log1p(-lam_eta))


@constrained(**{k: v for k, v in _COMMON.items() if k != "beta"})
def exact_gaussian_renyi(alpha: float | np.ndarray, sensitivity: float, sigma: float,
                         eta: float, n: int, K: int | np.ndarray, *,
                         lam: float = 1.0) -> np.ndarray | float:
    """Exact R_α(θ_K ‖ θ'_K) of noisy GD on ℓ(θ; x) = (λ/2)‖θ − x‖², no projection (C = ℝ^d).

    Here g(θ; D) = λ(nθ − Σ x_i), so θ_{k+1} = aθ_k + λη x̄_D + √(2ησ²) Z with a = 1 − λη, and
    from a fixed θ_0 both runs are Gaussian with the same covariance s² I,
    s² = 2ησ² (1 − a^{2K})/(1 − a²), and means differing by (1 − a^K)(x̄_D − x̄_D'). Replacing one
    record moves x̄ by at most S_g/(λn) (S_g = λ max‖x − x'‖). With R_α = α‖m‖²/(2s²) for
    equal-covariance Gaussians (Gil et al. 2013; Mironov 2017, Prop. 7) this gives

        R_α = α S_g² (2 − λη) / (4 λ σ² n²) · (1 − a^K) / (1 + a^K),

    attained by the worst pair of records. Derived here; at K = 1 it equals the one-step
    :func:`composition_rdp`, and it lies between :func:`squared_loss_lower_bound` and
    :func:`privacy_dynamics_rdp` (tested). Requires λη ≤ 1.
    """
    a, s, sg, e, nn, k = (np.asarray(alpha, dtype=float), sensitivity, sigma, eta, n,
                          np.asarray(K))
    lm = lam
    _check_step_size(e, lm, None)
    one_minus = _one_minus_power(lm * e, k)
    ratio = one_minus / (2.0 - one_minus)          # (1 − a^K)/(1 + a^K)
    return as_output(a * s**2 * (2.0 - lm * e) / (4.0 * lm * sg**2 * nn**2) * ratio)


@constrained(x_mean=REAL_ARRAY, theta0=REAL_ARRAY, sigma=POSITIVE, eta=POSITIVE, K=STEP_COUNTS,
             lam=POSITIVE)
def squared_loss_moments(x_mean: float | np.ndarray, theta0: float | np.ndarray, sigma: float,
                         eta: float, K: int | np.ndarray, *,
                         lam: float = 1.0) -> tuple[np.ndarray | float, np.ndarray | float]:
    """Mean and per-coordinate variance of θ_K for noisy GD on (λ/2)‖θ − x‖², no projection.

    mean = a^K θ_0 + (1 − a^K) x̄,  var = 2ησ² (1 − a^{2K}) / (1 − a²),  a = 1 − λη
    (the linear recursion in :func:`exact_gaussian_renyi`). ``x_mean`` and ``theta0``
    broadcast with ``K`` (pass K[:, None] for vectors).
    """
    xm, t0 = np.asarray(x_mean, dtype=float), np.asarray(theta0, dtype=float)
    sg, e, lm = sigma, eta, lam
    _check_step_size(e, lm, None)
    k = np.asarray(K, dtype=np.int64)
    one_minus = _one_minus_power(lm * e, k)
    mean = (1.0 - one_minus) * t0 + one_minus * xm
    var = 2.0 * e * sg**2 * _one_minus_power(lm * e, k, 2) / (lm * e * (2.0 - lm * e))
    return as_output(mean), as_output(var)


# --- (ε, δ), calibration and utility -------------------------------------------------------------

@constrained(delta=DELTA, sensitivity=POSITIVE, sigma=POSITIVE, eta=POSITIVE, lam=POSITIVE,
             n=COUNT, K=STEPS, analysis=ANALYSIS, orders=ORDERS_OR_NONE, beta=BETA_OR_NONE,
             method=CONVERSION)
def langevin_epsilon(delta: float, sensitivity: float, sigma: float, eta: float, lam: float,
                     n: int, K: int, *, analysis: str = "dynamics", orders: object = None,
                     beta: float | None = None, method: str = "improved") -> tuple[float, float]:
    """(ε, best α) such that noisy GD is (ε, δ)-DP, from the RDP curve of ``analysis``.

    ``analysis="dynamics"`` uses :func:`privacy_dynamics_rdp` (only θ_K released),
    ``"composition"`` uses :func:`composition_rdp`. The conversion, minimised over ``orders``
    (default :data:`dplib.accounting.DEFAULT_ORDERS`), is :func:`dplib.accounting.rdp_to_epsilon`
    (``method="classic"``: Mironov 2017, Prop. 3; ``"improved"``: Canonne, Kamath & Steinke
    2020, Prop. 12). Scalar K.
    """
    from ..accounting import DEFAULT_ORDERS, rdp_to_epsilon

    orders = np.asarray(DEFAULT_ORDERS if orders is None else orders, dtype=float)
    fn = privacy_dynamics_rdp if analysis == "dynamics" else composition_rdp
    rdp = np.atleast_1d(fn(orders, sensitivity, sigma, eta, lam, n, K, beta=beta))
    return rdp_to_epsilon(orders, rdp, delta, method=method)


@constrained(target_epsilon=POSITIVE, K=COUNT,
             **same_as(langevin_epsilon, "delta", "sensitivity", "eta", "lam", "n", "analysis",
                       "orders", "beta", "method"))
def calibrate_sigma(target_epsilon: float, delta: float, sensitivity: float, eta: float,
                    lam: float, n: int, K: int, *, analysis: str = "dynamics",
                    orders: object = None, beta: float | None = None,
                    method: str = "improved") -> float:
    """Smallest σ (to relative precision 1e-10, rounded up) with :func:`langevin_epsilon` ≤
    ``target_epsilon``.

    Both RDP curves are proportional to 1/σ², so ε decreases in σ; the root is found by Brent's
    method in log σ (:func:`dplib.accounting.calibrate.safe_log_root`, which returns it on the
    safe side), started from the σ at which the curve, read as ρ-zCDP, meets the target by
    ε = ρ + 2√(ρ log(1/δ)) (Bun & Steinke 2016, Prop. 1.3).
    """
    from ..accounting.calibrate import safe_log_root

    eps_t = target_epsilon

    def excess(s: float) -> float:
        return langevin_epsilon(delta, sensitivity, s, eta, lam, n, K, analysis=analysis,
                                orders=orders, beta=beta, method=method)[0] - eps_t

    fn = privacy_dynamics_rdp if analysis == "dynamics" else composition_rdp
    rho_1 = float(fn(2.0, sensitivity, 1.0, eta, lam, n, K, beta=beta)) / 2.0   # ρ at σ = 1
    guess = zcdp_sigma_guess(rho_1, target_epsilon, delta)
    return safe_log_root(excess, guess, guess, rtol=1e-10, floor=1e-12, ceiling=1e12,
                         too_large=f"target_epsilon={target_epsilon!r} is below what any sigma "
                                   "<= 1e12 reaches for this delta and order grid; raise it")


@constrained(alpha=ORDER, epsilon=POSITIVE, beta=POSITIVE, d=COUNT, lipschitz=POSITIVE,
             lam=POSITIVE, n=COUNT)
def excess_risk_bound(alpha: float, epsilon: float, beta: float, d: int, lipschitz: float,
                      lam: float, n: int) -> float:
    """The utility bound of Chourasia et al. (2021) (their utility theorem, "Utility").

    E[L_D(θ_{K*}) − L_D(θ*)] ≤ (α/ε) · β d L² / (λ² n²) for noisy GD on an L-Lipschitz,
    λ-strongly convex, β-smooth loss run to K* steps with σ set so that the dynamics bound
    equals (α, ε)-RDP. An order-of-magnitude guide (constants as stated in the talk of
    Chourasia, Ye & Shokri, ``ChourasiaYeShokri2021Talk``).
    """
    return alpha / epsilon * beta * d * lipschitz**2 / (lam**2 * n**2)
