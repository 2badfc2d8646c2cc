"""Privacy dynamics of noisy GD (dplib.langevin): Chourasia et al.'s numbers, the exact Rényi divergence
between the bounds, statistical tests of noisy GD against the closed form (with a power check),
(ε, δ) conversion, and bad input.

Statistical tests use fixed seeds and level 1e-4; the wrong-noise twin must fail at that level.
"""
import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from dplib.accounting import DEFAULT_ORDERS, rdp_to_epsilon
from dplib.langevin import (calibrate_sigma, composition_rdp, exact_gaussian_renyi,
                            excess_risk_bound, langevin_epsilon, noisy_gd, privacy_dynamics_rdp,
                            squared_loss_gradient, squared_loss_lower_bound, squared_loss_moments)

SEED = dict(alpha=30, sensitivity=4.0, sigma=0.02, eta=0.02, n=5000)   # Chourasia et al.'s figure
KS = np.array([0, 1, 10, 50, 100, 250, 1000, 5000])


# --- Chourasia et al.'s numbers --------------------------------------------------------------------------

def test_seed_figure_values():
    np.testing.assert_allclose(privacy_dynamics_rdp(lam=1.0, K=KS, **SEED),
                               0.048 * (1 - np.exp(-0.01 * KS)), rtol=1e-12, atol=0)
    np.testing.assert_allclose(composition_rdp(lam=1.0, K=KS, **SEED), 2.4e-4 * KS,
                               rtol=1e-12, atol=0)
    np.testing.assert_allclose(squared_loss_lower_bound(K=KS, **SEED),
                               0.012 * (1 - np.exp(-0.02 * KS)), rtol=1e-12, atol=0)
    assert privacy_dynamics_rdp(lam=1.0, K=10**7, **SEED) == pytest.approx(0.048, rel=1e-12)
    assert squared_loss_lower_bound(K=10**7, **SEED) == pytest.approx(0.012, rel=1e-12)
    # composition overtakes the converged bound after 200 steps
    assert composition_rdp(lam=1.0, K=200, **SEED) == pytest.approx(0.048, rel=1e-12)


def test_scalar_in_scalar_out_and_broadcasting():
    assert isinstance(privacy_dynamics_rdp(lam=1.0, K=10, **SEED), float)
    alphas = np.array([2.0, 8.0, 30.0])[:, None]
    out = privacy_dynamics_rdp(alphas, 4.0, 0.02, 0.02, 1.0, 5000, KS)
    assert out.shape == (3, KS.size)
    np.testing.assert_allclose(out / alphas, out[2] / 30.0 * np.ones((3, 1)), rtol=1e-12)


# --- the exact value lies between the bounds -----------------------------------------------------

@pytest.mark.parametrize("lam", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("eta_frac", [1e-4, 0.02, 0.5, 1.0])
def test_exact_between_lower_and_upper_bounds(lam, eta_frac):
    eta = eta_frac / lam                      # η ≤ 1/β with β = λ for the squared loss
    K = np.unique(np.geomspace(1, 1e6, 200).astype(np.int64))
    args = (30.0, 4.0, 0.02, eta, 5000, K)
    exact = exact_gaussian_renyi(*args, lam=lam)
    lower = squared_loss_lower_bound(*args, lam=lam)
    upper = privacy_dynamics_rdp(30.0, 4.0, 0.02, eta, lam, 5000, K, beta=lam)
    comp = composition_rdp(30.0, 4.0, 0.02, eta, lam, 5000, K)
    assert np.all(lower <= exact * (1 + 1e-12))
    assert np.all(exact <= upper)
    assert np.all(exact <= comp * (1 + 1e-12))
    assert np.all(upper <= 4 * lower * (1 + 1e-12))          # "tight within a factor 4"
    # one step is exactly one Gaussian mechanism
    assert exact[0] == pytest.approx(comp[0], rel=1e-12)


def test_exact_matches_recursion_and_numerical_renyi():
    eta, sigma, n, S, alpha, K = 0.05, 0.3, 50, 2.0, 3.5, 40
    a = 1 - eta
    m = v = 0.0                               # iterate the recursion by hand: mean gap, variance
    for _ in range(K):
        m, v = a * m + eta * S / n, a * a * v + 2 * eta * sigma**2
    # Rényi divergence of N(m, v) from N(0, v) by numerical integration (no closed form used)
    p = stats.norm(m, math.sqrt(v)).pdf
    q = stats.norm(0.0, math.sqrt(v)).pdf
    width = 12 * math.sqrt(v)
    val, _ = integrate.quad(lambda x: p(x) ** alpha * q(x) ** (1 - alpha), -width, width,
                            epsabs=0, epsrel=1e-12, limit=200)
    numeric = math.log(val) / (alpha - 1)
    assert exact_gaussian_renyi(alpha, S, sigma, eta, n, K) == pytest.approx(numeric, rel=1e-8)
    mean, var = squared_loss_moments(S / n, 0.0, sigma, eta, K)
    assert mean == pytest.approx(m, rel=1e-12) and var == pytest.approx(v, rel=1e-12)


def test_exact_at_eta_lam_equal_one_and_k_zero():
    # λη = 1: θ_1 = x̄ + noise, the chain forgets θ_0 at once; K = 0 releases θ_0 (no loss).
    r = exact_gaussian_renyi(2.0, 1.0, 1.0, 0.5, 10, np.array([0, 1, 5]), lam=2.0)
    np.testing.assert_allclose(r, [0.0, 2.0 * 1.0 / (4 * 2.0 * 100), 2.0 / 800], rtol=1e-12)


# --- noisy GD matches the closed form ------------------------------------------------------------

def _standardised_final(sigma_run, sigma_model, chains=20_000, seed=1):
    rng = np.random.default_rng(0)
    data = rng.normal(0.0, 1.0, size=(30, 2))
    eta, K = 0.1, 25
    theta0 = np.tile([1.5, -2.0], (chains, 1))
    out = noisy_gd(squared_loss_gradient(data), theta0, n=30, eta=eta, sigma=sigma_run, K=K,
                   seed=seed, device="cpu").numpy()
    mean, var = squared_loss_moments(data.mean(0), np.array([1.5, -2.0]), sigma_model, eta, K)
    return (out - mean) / np.sqrt(var)


def test_noisy_gd_matches_closed_form_mean_and_variance():
    z = _standardised_final(0.4, 0.4)
    for j in range(2):
        assert stats.kstest(z[:, j], "norm").pvalue > 1e-4
        # mean within 4.5 standard errors, variance within 4.5 SE of the sample variance
        assert abs(z[:, j].mean()) < 4.5 / math.sqrt(len(z))
        assert abs(z[:, j].var() - 1) < 4.5 * math.sqrt(2 / len(z))


def test_wrong_noise_scale_is_detected():
    # noise √(ησ²) instead of √(2ησ²) (σ/√2): the same test must reject it
    z = _standardised_final(0.4 / math.sqrt(2), 0.4)
    assert stats.kstest(z[:, 0], "norm").pvalue < 1e-4
    assert abs(z[:, 0].var() - 1) > 4.5 * math.sqrt(2 / len(z))


def test_noisy_gd_projection_seeding_trajectory_and_device():
    data = np.ones((10, 3))
    grad = squared_loss_gradient(data)
    th0 = np.zeros((100, 3))
    a = noisy_gd(grad, th0, n=10, eta=0.5, sigma=1.0, K=20, seed=3, device="cpu")
    b = noisy_gd(grad, th0, n=10, eta=0.5, sigma=1.0, K=20, seed=3, device="cpu")
    assert torch.equal(a, b)
    c = noisy_gd(grad, th0, n=10, eta=0.5, sigma=1.0, K=20, seed=3, radius=1e9, device="cpu")
    assert torch.equal(a, c)                         # a ball that never binds changes nothing
    p = noisy_gd(grad, th0, n=10, eta=0.5, sigma=1.0, K=20, seed=3, radius=0.5, device="cpu")
    assert p.norm(dim=-1).max() <= 0.5 + 1e-12
    path = noisy_gd(grad, th0, n=10, eta=0.5, sigma=1.0, K=20, seed=3, trajectory=True,
                    device="cpu")
    assert path.shape == (21, 100, 3) and torch.equal(path[-1], a)
    from dplib import get_device
    assert noisy_gd(grad, th0, n=10, eta=0.5, sigma=1.0, K=1, seed=0).device.type == \
        torch.device(get_device()).type


# --- (ε, δ), calibration, utility ----------------------------------------------------------------

def test_epsilon_conversion_uses_accounting():
    args = (1e-5, 4.0, 0.02, 0.02, 1.0, 5000, 1000)
    eps, order = langevin_epsilon(*args)
    rdp = privacy_dynamics_rdp(DEFAULT_ORDERS, 4.0, 0.02, 0.02, 1.0, 5000, 1000)
    assert (eps, order) == rdp_to_epsilon(DEFAULT_ORDERS, rdp, 1e-5)
    eps_c, _ = langevin_epsilon(*args, analysis="composition")
    assert eps < eps_c
    # for one step the dynamics bound is not better than composition (it is ≈ 2× larger)
    assert langevin_epsilon(*args[:-1], 1)[0] > langevin_epsilon(*args[:-1], 1,
                                                                 analysis="composition")[0]


@pytest.mark.parametrize("analysis", ["dynamics", "composition"])
def test_calibrate_sigma_meets_target(analysis):
    s = calibrate_sigma(1.0, 1e-5, 2.0, 0.5, 0.5, 1000, 300, analysis=analysis)
    args = (1e-5, 2.0, s, 0.5, 0.5, 1000, 300)
    assert langevin_epsilon(*args, analysis=analysis)[0] <= 1.0
    assert langevin_epsilon(1e-5, 2.0, s * 0.999, 0.5, 0.5, 1000, 300,
                            analysis=analysis)[0] > 1.0


def test_excess_risk_bound_formula():
    assert excess_risk_bound(30, 1.0, 2.0, 10, 1.0, 0.5, 1000) == pytest.approx(
        30 * 2 * 10 / (0.25 * 1e6), rel=1e-12)


# --- bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    (dict(alpha=1.0), r"alpha must be in \(1, inf\)"),
    (dict(sigma=0.0), r"sigma must be in \(0, inf\)"),
    (dict(sensitivity=-1.0), r"sensitivity"),
    (dict(n=0), r"n must be an integer >= 1"),
    (dict(K=-3), r"K must be an integer >= 0, got -3"),
    (dict(K=2.5), r"K must be an integer"),
    (dict(K=np.array([1.0, 2.0])), r"K must be an integer"),
    (dict(eta=0.5, beta=4.0), r"eta must be in \(0, 1/beta\] = \(0, 0.25\]"),
    (dict(beta=0.5), r"beta must be >= lam"),
    (dict(eta=2.0), r"eta must be in \(0, 1/lam\]"),
    (dict(lam=float("nan")), r"lam"),
])
def test_bad_input_raises(kwargs, match):
    base = dict(alpha=30, sensitivity=4.0, sigma=0.02, eta=0.02, lam=1.0, n=5000, K=10)
    with pytest.raises(ValueError, match=match):
        privacy_dynamics_rdp(**{**base, **kwargs})


def test_bad_input_other_functions():
    with pytest.raises(ValueError, match="eta must be in"):
        exact_gaussian_renyi(30, 4.0, 0.02, 0.6, 5000, 10, lam=2.0)
    with pytest.raises(ValueError, match="analysis must be one of"):
        langevin_epsilon(1e-5, 4.0, 0.02, 0.02, 1.0, 5000, 10, analysis="pld")
    with pytest.raises(ValueError, match="delta"):
        langevin_epsilon(1.5, 4.0, 0.02, 0.02, 1.0, 5000, 10)
    with pytest.raises(ValueError, match="grad_fn must return the shape"):
        noisy_gd(lambda t: t.sum(-1), np.zeros((4, 2)), n=1, eta=0.1, sigma=1.0, K=2, seed=0)
    with pytest.raises(ValueError, match="eta must be in"):
        noisy_gd(lambda t: t, np.zeros(2), n=1, eta=0.5, sigma=1.0, K=2, seed=0, beta=4.0)
    with pytest.raises(ValueError, match="diverged"):
        noisy_gd(lambda t: 1e3 * t, np.ones(2), n=1, eta=1.0, sigma=1.0, K=400, seed=0,
                 device="cpu")
    with pytest.raises(ValueError, match="data must be"):
        squared_loss_gradient(np.zeros((0, 2)))
