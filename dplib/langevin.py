"""Privacy dynamics of noisy gradient descent with hidden iterates (Chourasia, Ye & Shokri 2021).

The algorithm (``noisy_gd``): for a data set D = (x_1, …, x_n), a loss ℓ and a convex set C,

    θ_{k+1} = Π_C(θ_k − (η/n) g(θ_k; D) + √(2ησ²) N(0, I_d)),   g(θ; D) = Σ_i ∇ℓ(θ; x_i),

and only θ_K is released; θ_0 must be data-independent (a fixed point, or the Gaussian start of
the theorem — see :func:`privacy_dynamics_rdp`). Throughout, neighbouring data sets differ by **replacing one record**
(n stays fixed), and the *gradient sensitivity* is the one of the *summed* gradient,

    S_g = max_{D≃D'} sup_θ ‖g(θ; D) − g(θ; D')‖₂ = max_{x, x'} sup_θ ‖∇ℓ(θ; x) − ∇ℓ(θ; x')‖₂,

so a loss with ‖∇ℓ‖ ≤ L has S_g ≤ 2L. Privacy is Rényi DP of order α > 1 (Mironov 2017).

DP-SGLD, the minibatch version (Ryffel, Bach & Pointcheval 2022), lives in :mod:`dplib.sgld` and
is re-exported at the end of this module (``sgld_rdp``, ``dp_sgld``, …).

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
from typing import Callable

import numpy as np

from ._validate import (check_choice, check_int, check_positive, check_real, check_real_array,
                        check_step_counts)

__all__ = ["privacy_dynamics_rdp", "composition_rdp", "squared_loss_lower_bound",
           "exact_gaussian_renyi", "squared_loss_moments", "langevin_epsilon",
           "calibrate_sigma", "excess_risk_bound", "squared_loss_gradient", "noisy_gd"]

_ANALYSES = ("dynamics", "composition")


# --- input checks --------------------------------------------------------------------------------

def _out(x: np.ndarray) -> np.ndarray | float:
    return float(x) if np.ndim(x) == 0 else x


def _check_common(alpha, sensitivity, sigma, eta, n, K):
    a = check_real_array("alpha", alpha, low=1.0)
    s = check_positive("sensitivity", sensitivity)
    sg = check_positive("sigma", sigma)
    e = check_positive("eta", eta)
    nn = check_int("n", n, low=1)
    k = check_step_counts("K", K)
    return a, s, sg, e, nn, k


def _check_step_size(eta: float, lam: float, beta: float | None) -> None:
    """The theorem's precondition η ≤ 1/β; since β ≥ λ it implies η ≤ 1/λ, checked always."""
    if beta is not None:
        b = check_positive("beta", beta)
        if b < lam:
            raise ValueError(f"beta must be >= lam (a λ-strongly convex, β-smooth loss has "
                             f"β >= λ), got beta={beta!r} < lam={lam!r}")
        if eta > 1.0 / b:
            raise ValueError(f"eta must be in (0, 1/beta] = (0, {1.0 / b:g}] (the theorem "
                             f"needs η ≤ 1/β), got {eta!r}")
    if eta * lam > 1.0:
        raise ValueError(f"eta must be in (0, 1/lam] = (0, {1.0 / lam:g}] (η ≤ 1/β ≤ 1/λ), "
                         f"got {eta!r}")


# --- the three formulas and the exact value ------------------------------------------------------

def privacy_dynamics_rdp(alpha: float | np.ndarray, sensitivity: float, sigma: float,
                         eta: float, lam: float, n: int, K: int | np.ndarray, *,
                         beta: float | None = None) -> np.ndarray | float:
    """Rényi DP of order α of noisy GD releasing only θ_K (Chourasia, Ye & Shokri 2021).

    ε(α, K) = α S_g² / (λ σ² n²) · (1 − exp(−λ η K / 2)), for λ-strongly convex, β-smooth losses
    with η ≤ 1/β (main theorem of the paper, "Privacy Dynamics Bound"). It converges
    to α S_g²/(λσ²n²) as K → ∞. The start θ_0 must not depend on the data: the theorem takes
    θ_0 ∼ Π_C(N(0, 2σ²/λ I)), and a fixed point also satisfies the log-Sobolev condition its
    proof needs (with constant 0 ≤ 2σ²/λ); a start computed from the data does not. Replace-one adjacency; ``sensitivity`` is S_g of the summed
    gradient. ``beta`` (optional) is checked against η ≤ 1/β; η ≤ 1/λ is always required.
    Broadcasts over ``alpha`` and ``K``.
    """
    a, s, sg, e, nn, k = _check_common(alpha, sensitivity, sigma, eta, n, K)
    lm = check_positive("lam", lam)
    _check_step_size(e, lm, beta)
    return _out(a * s**2 / (lm * sg**2 * nn**2) * -np.expm1(-lm * e * k / 2.0))


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
    a, s, sg, e, nn, k = _check_common(alpha, sensitivity, sigma, eta, n, K)
    lm = check_positive("lam", lam)
    if beta is not None:
        _check_step_size(e, lm, beta)
    return _out(k * a * e * s**2 / (4.0 * sg**2 * nn**2))


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
    a, s, sg, e, nn, k = _check_common(alpha, sensitivity, sigma, eta, n, K)
    lm = check_positive("lam", lam)
    _check_step_size(e, lm, None)
    return _out(a * s**2 / (4.0 * lm * sg**2 * nn**2) * -np.expm1(-lm * e * k))


def _one_minus_power(lam_eta: float, k: np.ndarray, power: int = 1) -> np.ndarray:
    """1 − (1 − λη)^{power·k}, accurate for small λη; equals 1 for λη = 1, k ≥ 1 and 0 at k = 0."""
    if lam_eta == 1.0:
        return np.where(k == 0, 0.0, 1.0)
    return -np.expm1(power * k * math.log1p(-lam_eta))


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
    a, s, sg, e, nn, k = _check_common(alpha, sensitivity, sigma, eta, n, K)
    lm = check_positive("lam", lam)
    _check_step_size(e, lm, None)
    one_minus = _one_minus_power(lm * e, k)
    ratio = one_minus / (2.0 - one_minus)          # (1 − a^K)/(1 + a^K)
    return _out(a * s**2 * (2.0 - lm * e) / (4.0 * lm * sg**2 * nn**2) * ratio)


def squared_loss_moments(x_mean: float | np.ndarray, theta0: float | np.ndarray, sigma: float,
                         eta: float, K: int | np.ndarray, *,
                         lam: float = 1.0) -> tuple[np.ndarray | float, np.ndarray | float]:
    """Mean and per-coordinate variance of θ_K for noisy GD on (λ/2)‖θ − x‖², no projection.

    mean = a^K θ_0 + (1 − a^K) x̄,  var = 2ησ² (1 − a^{2K}) / (1 − a²),  a = 1 − λη
    (the linear recursion in :func:`exact_gaussian_renyi`). ``x_mean`` and ``theta0``
    broadcast with ``K`` (pass K[:, None] for vectors).
    """
    xm = np.asarray(check_real_array("x_mean", x_mean))
    t0 = np.asarray(check_real_array("theta0", theta0))
    sg = check_positive("sigma", sigma)
    e = check_positive("eta", eta)
    lm = check_positive("lam", lam)
    _check_step_size(e, lm, None)
    k = check_step_counts("K", K)
    one_minus = _one_minus_power(lm * e, k)
    mean = (1.0 - one_minus) * t0 + one_minus * xm
    var = 2.0 * e * sg**2 * _one_minus_power(lm * e, k, 2) / (lm * e * (2.0 - lm * e))
    return _out(mean), _out(var)


# --- (ε, δ), calibration and utility -------------------------------------------------------------

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
    from .accounting import DEFAULT_ORDERS, rdp_to_epsilon

    check_choice("analysis", analysis, _ANALYSES)
    k = check_int("K", K, low=0)
    orders = np.asarray(DEFAULT_ORDERS if orders is None else orders, dtype=float)
    fn = privacy_dynamics_rdp if analysis == "dynamics" else composition_rdp
    rdp = np.atleast_1d(fn(orders, sensitivity, sigma, eta, lam, n, k, beta=beta))
    return rdp_to_epsilon(orders, rdp, delta, method=method)


def calibrate_sigma(target_epsilon: float, delta: float, sensitivity: float, eta: float,
                    lam: float, n: int, K: int, *, analysis: str = "dynamics",
                    orders: object = None, beta: float | None = None,
                    method: str = "improved") -> float:
    """Smallest σ (to relative precision 1e-10) with :func:`langevin_epsilon` ≤ ``target_epsilon``.

    Bisection in log σ: both RDP curves are proportional to 1/σ², so ε is decreasing in σ.
    """
    eps_t = check_positive("target_epsilon", target_epsilon)
    check_int("K", K, low=1)

    def eps(log_s: float) -> float:
        return langevin_epsilon(delta, sensitivity, math.exp(log_s), eta, lam, n, K,
                                analysis=analysis, orders=orders, beta=beta, method=method)[0]

    lo, hi = math.log(1e-12), math.log(1e12)
    if eps(hi) > eps_t:
        raise ValueError(f"target_epsilon={target_epsilon!r} is below what any sigma <= 1e12 "
                         "reaches for this delta and order grid; raise it")
    while hi - lo > 1e-10:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if eps(mid) <= eps_t else (mid, hi)
    return math.exp(hi)


def excess_risk_bound(alpha: float, epsilon: float, beta: float, d: int, lipschitz: float,
                      lam: float, n: int) -> float:
    """The utility bound of Chourasia et al. (2021) (their utility theorem, "Utility").

    E[L_D(θ_{K*}) − L_D(θ*)] ≤ (α/ε) · β d L² / (λ² n²) for noisy GD on an L-Lipschitz,
    λ-strongly convex, β-smooth loss run to K* steps with σ set so that the dynamics bound
    equals (α, ε)-RDP. An order-of-magnitude guide (constants as stated in the talk of
    Chourasia, Ye & Shokri, ``ChourasiaYeShokri2021Talk``).
    """
    a = check_real("alpha", alpha, low=1.0)
    e = check_positive("epsilon", epsilon)
    b = check_positive("beta", beta)
    dd = check_int("d", d, low=1)
    lip = check_positive("lipschitz", lipschitz)
    lm = check_positive("lam", lam)
    nn = check_int("n", n, low=1)
    return a / e * b * dd * lip**2 / (lm**2 * nn**2)


# --- the algorithm in torch ----------------------------------------------------------------------

def squared_loss_gradient(data: object, lam: float = 1.0) -> Callable:
    """g(θ; D) = Σ_i ∇ℓ(θ; x_i) = λ(nθ − Σ_i x_i) for ℓ(θ; x) = (λ/2)‖θ − x‖²; for :func:`noisy_gd`.

    ``data`` has shape (n, d) (or (n,) for d = 1); θ may carry leading batch dimensions.
    """
    import torch

    lm = check_positive("lam", lam)
    x = torch.as_tensor(check_real_array("data", data)) if not torch.is_tensor(data) else data
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] == 0 or not torch.isfinite(x).all():
        raise ValueError(f"data must be a finite (n, d) array with n >= 1, got shape "
                         f"{tuple(x.shape)}")
    n, total = x.shape[0], x.sum(0)

    def grad(theta):
        return lm * (n * theta - total.to(theta.device, theta.dtype))

    return grad


def noisy_gd(grad_fn: Callable, theta0: object, *, n: int, eta: float, sigma: float, K: int,
             seed: int | None = None, radius: float | None = None, beta: float | None = None,
             device: object = None, dtype: object = None, trajectory: bool = False):
    """Projected noisy full-batch gradient descent (Chourasia et al. 2021, Algorithm 1), torch.

    θ_{k+1} = Π_C(θ_k − (η/n) g(θ_k; D) + √(2ησ²) N(0, I)), k = 0, …, K − 1, with
    ``grad_fn(θ)`` = g(θ; D), the **sum** of per-example gradients, and C the ℓ2 ball of
    ``radius`` (None: C = ℝ^d). ``theta0`` of shape (..., d) runs independent chains in
    parallel (batch them for simulations). Returns θ_K, or all iterates stacked (K + 1, ...)
    when ``trajectory``. ``device`` defaults to :func:`dplib.get_device`; ``dtype`` to float64
    (float32 on CUDA/MPS). The noise comes from a private ``torch.Generator`` seeded by
    ``seed``; ``None`` (default) draws 63 bits of fresh OS entropy
    (:func:`dplib.device.release_seed`), as a release must — noise computed from a known seed is
    a public function of public inputs, and two runs on neighbouring data sets that share it
    differ only through the data. A fixed seed is for reproducible experiments, never for a
    release.

    Float noise: drawn with floating-point samplers, not hardened against the floating-point
    attack of Mironov (2012) (exact samplers: :mod:`dplib.mechanisms.discrete`).
    """
    import torch

    from .device import as_device, release_seed

    if not callable(grad_fn):
        raise ValueError(f"grad_fn must be a callable theta -> g(theta; D), got {grad_fn!r}")
    nn = check_int("n", n, low=1)
    e = check_positive("eta", eta)
    sg = check_positive("sigma", sigma)
    k = check_int("K", K, low=0)
    s = release_seed(seed)
    if beta is not None and e > 1.0 / check_positive("beta", beta):
        raise ValueError(f"eta must be in (0, 1/beta] = (0, {1.0 / beta:g}], got {eta!r}")
    r = None if radius is None else check_positive("radius", radius)
    dev = as_device(device)
    if dtype is None:
        dtype = torch.float64 if dev.type == "cpu" else torch.float32
    theta = torch.as_tensor(check_real_array("theta0", theta0) if not torch.is_tensor(theta0)
                            else theta0).to(dev, dtype).clone()
    if theta.ndim == 0 or not torch.isfinite(theta).all():
        raise ValueError(f"theta0 must be a finite array of shape (..., d), got {theta0!r}")
    gen = torch.Generator(device=dev)
    gen.manual_seed(s)
    noise_std = math.sqrt(2.0 * e) * sg

    def project(t):
        if r is None:
            return t
        norm = t.norm(dim=-1, keepdim=True)
        return t * torch.clamp(r / norm.clamp_min(1e-300), max=1.0)

    theta = project(theta)
    path = [theta.clone()] if trajectory else None
    for step in range(k):
        g = grad_fn(theta)
        if g.shape != theta.shape:
            raise ValueError(f"grad_fn must return the shape of theta {tuple(theta.shape)}, "
                             f"got {tuple(g.shape)}")
        z = torch.randn(theta.shape, generator=gen, device=dev, dtype=dtype)
        theta = project(theta - (e / nn) * g + noise_std * z)
        if trajectory:
            path.append(theta.clone())
    if not torch.isfinite(theta).all():
        raise ValueError("noisy_gd diverged (non-finite iterate): check eta <= 1/beta and "
                         "the scale of grad_fn")
    return torch.stack(path) if trajectory else theta


# --- DP-SGLD (Ryffel, Bach & Pointcheval 2022): the stochastic version, in dplib.sgld ------------
# Re-exported here so that ``dplib.langevin.sgld_rdp`` and the rest of the DP-SGLD API sit next
# to the DP-GLD bounds they extend.
from .sgld import (constant_step_rdp, decreasing_step_rdp, decreasing_step_sizes,  # noqa: E402
                   dp_sgld, logistic_regression_constants, one_step_delta_lower_bound,
                   released_iterates_epsilon, sgld_calibrate_sigma, sgld_composition_rdp,
                   sgld_epsilon, sgld_rdp, sgld_rdp_limit)

__all__ += ["sgld_rdp", "constant_step_rdp", "decreasing_step_rdp", "decreasing_step_sizes",
            "sgld_rdp_limit", "sgld_composition_rdp", "sgld_epsilon", "sgld_calibrate_sigma",
            "released_iterates_epsilon", "one_step_delta_lower_bound", "dp_sgld",
            "logistic_regression_constants"]
