"""DP-SGLD (dplib.langevin.sgld and its neighbours in dplib.langevin): Theorem 3.1 and its corollaries, the two
regimes, the logistic-regression constants against numerical Hessians, statistics of dp_sgld,
the one-step counterexample to Theorem 3.1 for small batches, the public feature map, bad input.

Statistical tests use fixed seeds and level 1e-4; a wrong-noise twin must fail at that level.
"""
import math

import numpy as np
import pytest
import torch
from scipy import stats

from dplib.accounting import DEFAULT_ORDERS, rdp_to_epsilon
from dplib.features import digits_features, fit_public_feature_map
from dplib.langevin import (RELEASED_ORDERS, composition_rdp, constant_step_rdp,
                            decreasing_step_rdp, decreasing_step_sizes, dp_sgld,
                            logistic_regression_accuracy, logistic_regression_constants,
                            logistic_regression_grad, logistic_regression_loss,
                            one_step_delta_lower_bound, privacy_dynamics_rdp,
                            released_iterates_calibrate_sigma, released_iterates_epsilon,
                            sgld_calibrate_sigma, sgld_composition_rdp, sgld_epsilon, sgld_rdp,
                            sgld_rdp_limit, squared_loss_moments, table4_diagnostics,
                            theorem_3_1_refutation, train_dp_sgld_logistic)

P = dict(lipschitz=1.5, sigma=0.3, lam=0.01, n=2000)
BETA = 0.8
KS = np.unique(np.logspace(0, 6, 40).astype(np.int64))
ALPHAS = np.array([1.5, 2.0, 10.0, 64.0])[:, None]


# --- Theorem 3.1, the corollaries and the regimes ------------------------------------------------

def test_constant_step_is_the_dp_gld_bound_with_twice_the_lipschitz_constant():
    """With m = n DP-SGLD is DP-GLD, and Thm 3.1 is Chourasia et al.'s bound with S_g = 2L."""
    eta = 1 / (2 * BETA)
    ours = sgld_rdp(ALPHAS, P["lipschitz"], P["sigma"], P["lam"], P["n"], eta, K=KS)
    ref = privacy_dynamics_rdp(ALPHAS, 2 * P["lipschitz"], P["sigma"], eta, P["lam"], P["n"], KS)
    np.testing.assert_allclose(ours, ref, rtol=1e-13, atol=0)
    assert ours.shape == (ALPHAS.size, KS.size)


@pytest.mark.parametrize("eta_frac", [0.01, 0.5, 0.99])
def test_corollary_3_2_is_theorem_3_1_with_a_constant_sequence(eta_frac):
    eta = eta_frac / BETA
    seq = np.full(KS.max(), eta)
    thm = sgld_rdp(ALPHAS, **P, step_sizes=seq, K=KS)
    cor = constant_step_rdp(ALPHAS, **P, eta=eta, K=KS, beta=BETA)
    np.testing.assert_allclose(thm, cor, rtol=1e-9, atol=0)
    # the sequence summed in full equals the last prefix
    assert sgld_rdp(10.0, **P, step_sizes=seq) == pytest.approx(cor[2, -1], rel=1e-9)


@pytest.mark.parametrize("beta", [0.02, 0.8, 50.0])
def test_corollary_3_3_lies_between_the_two_readings_of_theorem_3_1(beta):
    """(λ/2)η_k = 1/(a + k), a = 4β/λ: Σ_{k=1}^K ≤ log(1 + K/a) ≤ Σ_{k=0}^{K−1}, and the two sums
    differ by exactly 1/a − 1/(a + K)."""
    lam = P["lam"]
    kmax = int(KS.max())
    taken = decreasing_step_sizes(beta, lam, kmax + 1)       # η_0 … η_K
    thm_taken = sgld_rdp(ALPHAS, **P, step_sizes=taken[:-1], K=KS)
    thm_printed = sgld_rdp(ALPHAS, **P, step_sizes=taken[1:], K=KS)   # Σ_{k=1}^{K}
    cor = decreasing_step_rdp(ALPHAS, **P, beta=beta, K=KS)
    assert np.all(thm_printed <= cor * (1 + 1e-12))
    assert np.all(cor <= thm_taken * (1 + 1e-12))
    a = 4 * beta / lam
    gap = np.cumsum(taken)[KS - 1] - (np.cumsum(taken[1:])[KS - 1])
    np.testing.assert_allclose(gap * lam / 2, 1 / a - 1 / (a + KS), rtol=1e-9)
    # the closed form is 1 − exp(−log(1 + λK/4β)) written as a ratio
    np.testing.assert_allclose(cor / sgld_rdp_limit(ALPHAS, **P),
                               np.broadcast_to(-np.expm1(-np.log1p(lam * KS / (4 * beta))),
                                               cor.shape), rtol=1e-12)


@pytest.mark.parametrize("schedule", ["constant", "decreasing"])
def test_short_runs_are_composition_up_to_a_factor_two(schedule):
    """K ≪ β/λ: ε ≈ αL²K/(βn²σ²), twice the composition baseline αL²ηK/(n²σ²) at η = 1/(2β)
    (Ryffel et al.'s Discussion after Cor. 3.3); the relative error is below λK/β."""
    beta = 1e4 * P["lam"]                       # β/λ = 10⁴
    ks = np.array([1, 3, 10, 30, 100])
    if schedule == "constant":
        eps = constant_step_rdp(ALPHAS, **P, eta=1 / (2 * beta), K=ks)
    else:
        eps = decreasing_step_rdp(ALPHAS, **P, beta=beta, K=ks)
    approx = ALPHAS * P["lipschitz"]**2 * ks / (beta * P["n"]**2 * P["sigma"]**2)
    rel = np.abs(eps / approx - 1)
    assert np.all(rel <= P["lam"] * ks / beta)
    base = sgld_composition_rdp(ALPHAS, P["lipschitz"], P["sigma"], P["n"], 1 / (2 * beta), K=ks)
    np.testing.assert_allclose(approx / base, 2.0, rtol=1e-12)
    # the baseline is dplib.langevin.composition_rdp with sensitivity 2L
    np.testing.assert_allclose(base, composition_rdp(ALPHAS, 2 * P["lipschitz"], P["sigma"],
                                                     1 / (2 * beta), P["lam"], P["n"], ks),
                               rtol=1e-13)


def test_long_runs_converge_to_the_limit():
    """K ≫ β/λ: both schedules reach 4αL²/(λn²σ²); constant within e^{−λK/(4β)}, decreasing
    within 4β/(4β + λK)."""
    limit = sgld_rdp_limit(ALPHAS, **P)
    np.testing.assert_allclose(limit, 4 * ALPHAS * 1.5**2 / (0.01 * 2000**2 * 0.09), rtol=1e-13)
    ratio = BETA / P["lam"]                       # 80
    for K in (int(100 * ratio), int(1e4 * ratio)):
        c = constant_step_rdp(ALPHAS, **P, eta=1 / (2 * BETA), K=K)
        d = decreasing_step_rdp(ALPHAS, **P, beta=BETA, K=K)
        assert np.all(np.abs(c / limit - 1) <= math.exp(-P["lam"] * K / (4 * BETA)) * 1.0001)
        np.testing.assert_allclose(1 - d / limit, 4 * BETA / (4 * BETA + P["lam"] * K),
                                   rtol=1e-9)
    # monotone in K and never above the limit
    eps = sgld_rdp(30.0, **P, step_sizes=decreasing_step_sizes(BETA, P["lam"], 50_000),
                   K=np.arange(0, 50_001, 500))
    assert eps[0] == 0.0 and np.all(np.diff(eps) > 0) and np.all(eps < limit[3, 0])


def test_epsilon_delta_conversion_and_calibration():
    etas = decreasing_step_sizes(BETA, P["lam"], 3000)
    eps, alpha = sgld_epsilon(1e-5, P["lipschitz"], P["sigma"], P["lam"], P["n"], etas)
    rdp = sgld_rdp(DEFAULT_ORDERS, **P, step_sizes=etas)
    assert (eps, alpha) == rdp_to_epsilon(DEFAULT_ORDERS, rdp, 1e-5)
    for target in (0.3, 1.0, 8.0):
        s = sgld_calibrate_sigma(target, 1e-5, P["lipschitz"], P["lam"], P["n"], etas)
        assert sgld_epsilon(1e-5, P["lipschitz"], s, P["lam"], P["n"], etas)[0] <= target
        assert sgld_epsilon(1e-5, P["lipschitz"], s * (1 - 1e-6), P["lam"], P["n"],
                            etas)[0] > target
    # the classic conversion (Mironov 2017, Prop. 3) of a linear curve ρα: ρ + 2√(ρ log(1/δ))
    # at the continuous optimum; the grid optimum is within 1e-3 of it
    rho = sgld_rdp(2.0, **P, step_sizes=etas) / 2.0
    classic = sgld_epsilon(1e-5, P["lipschitz"], P["sigma"], P["lam"], P["n"], etas,
                           orders=np.linspace(1.01, 400, 40000), method="classic")[0]
    assert classic == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1e5)), rel=1e-3)


def test_released_iterates_full_batch_is_plain_composition():
    """m = n: each step is the Gaussian mechanism with noise multiplier σn/(L√(2η)), whose RDP
    α/(2z²) = αL²η/(n²σ²) is Ryffel et al.'s composition baseline."""
    eta, K = 0.4, 250
    eps = released_iterates_epsilon(1e-5, P["lipschitz"], P["sigma"], P["n"], P["n"], eta, K=K)
    base = sgld_composition_rdp(DEFAULT_ORDERS, P["lipschitz"], P["sigma"], P["n"], eta, K=K)
    assert eps == pytest.approx(rdp_to_epsilon(DEFAULT_ORDERS, base, 1e-5)[0], rel=1e-12)
    # DP-SGLD's noise does not grow with the batch, while one record moves a batch of m by 2ηL/m:
    # amplification by m/n does not pay for it, so released small batches cost more here.
    # A sequence with equal steps is the same run as the constant.
    small = released_iterates_epsilon(1e-5, P["lipschitz"], P["sigma"], P["n"], 20,
                                      np.full(K, eta))
    assert small > eps
    assert small == pytest.approx(released_iterates_epsilon(
        1e-5, P["lipschitz"], P["sigma"], P["n"], 20, eta, K=K), rel=1e-12)


def test_released_iterates_small_batches_use_replace_one_sensitivity_2L():
    """m < n: step k adds N(0, 2η_kσ²) to θ, i.e. noise of std √(2η_k)σ·m/η_k on the batch
    gradient SUM, whose replace-one sensitivity is 2L. The accountant takes that std over the
    per-record bound L (its noise-multiplier unit, noise std / clipping norm) and applies the
    sampling-without-replacement RDP bound (WBK 2019) to the std over 2L."""
    from dplib.accounting import RDPAccountant
    eta, K, m = 0.4, 300, 50
    std_sum = math.sqrt(2 * eta) * P["sigma"] * m / eta
    z = std_sum / P["lipschitz"]
    want = RDPAccountant(sampling="without_replacement", neighboring="replace_one").step(
        noise_multiplier=z, sample_rate=m / P["n"], num_steps=K).get_epsilon(1e-5)
    got = released_iterates_epsilon(1e-5, P["lipschitz"], P["sigma"], P["n"], m, eta, K=K)
    assert got == pytest.approx(want, rel=1e-12)


@pytest.mark.slow
def test_released_iterates_after_each_step_match_single_calls():
    """An integer array K gives ε after each of those steps: for a constant step and for a
    schedule with fewer distinct η than max_groups, exactly the scalar calls.
    Slow: about 19 s of CPU, the exact without-replacement RDP sums (mpmath) at every order for
    three horizons and two schedules, each also computed alone."""
    m, Ks = 50, np.array([1, 7, 40])
    for steps in (0.4, decreasing_step_sizes(BETA, P["lam"], 40)):
        curve = released_iterates_epsilon(1e-5, P["lipschitz"], P["sigma"], P["n"], m, steps,
                                          K=Ks, max_groups=64)
        one = [released_iterates_epsilon(1e-5, P["lipschitz"], P["sigma"], P["n"], m, steps,
                                         K=int(k), max_groups=64) for k in Ks]
        np.testing.assert_allclose(curve, one, rtol=1e-12)
        assert np.all(np.diff(curve) > 0)


@pytest.mark.slow
def test_released_iterates_calibration_is_the_smallest_sigma():
    """The calibration of the released-iterates bound is the smallest σ: ε(σ) ≤ 1 < ε(σ(1 − 1e-5)).
    Slow: about 11 s of CPU, three calibrations of the exact without-replacement RDP sums."""
    etas = decreasing_step_sizes(BETA, P["lam"], 30)
    for m in (1, 50, P["n"]):
        s = released_iterates_calibrate_sigma(1.0, 1e-5, P["lipschitz"], P["n"], m, etas,
                                              orders=RELEASED_ORDERS)
        eps = released_iterates_epsilon(1e-5, P["lipschitz"], s, P["n"], m, etas,
                                        orders=RELEASED_ORDERS)
        assert 1.0 - 1e-5 < eps <= 1.0
        assert released_iterates_epsilon(1e-5, P["lipschitz"], s * (1 - 1e-5), P["n"], m,
                                         etas, orders=RELEASED_ORDERS) > 1.0


def test_refutation_check_is_the_one_step_bound_at_the_runs_step_sizes():
    """The opt-in check of train_dp_sgld_logistic: the larger one-step δ over η_0 and η_{K−1}."""
    etas = np.array([CE["eta"], 0.5 * CE["eta"]])
    sigma = _seed_sigma()
    kw = dict(lipschitz=CE["lipschitz"], sigma=sigma, lam=CE["lam"], n=CE["n"], batch_size=1,
              radius=CE["radius"])
    got = theorem_3_1_refutation(1.0, step_sizes=etas, **kw)
    want = max(one_step_delta_lower_bound(1.0, eta=e, **kw) for e in etas)
    assert got == want > 50 * 1e-5


def test_decreasing_step_sizes_are_the_seed_schedule():
    """η_k = 1/(2β + λk/2) for k = 0, …, K − 1 (Cor. 3.3, Section 4.2), so η_0 = 1/(2β)."""
    etas = decreasing_step_sizes(BETA, P["lam"], 5)
    np.testing.assert_allclose(etas, [1 / (2 * BETA + P["lam"] * k / 2) for k in range(5)],
                               rtol=1e-15)
    assert etas[0] == 1 / (2 * BETA) < 1 / BETA


def test_released_iterates_grouping_is_an_upper_bound():
    """Rounding η_k up to a coarser grid can only raise ε (z_k ∝ 1/√η_k)."""
    etas = decreasing_step_sizes(BETA, P["lam"], 6)
    orders = [2.0, 4.0, 8.0, 16.0, 32.0]
    exact = released_iterates_epsilon(1e-5, P["lipschitz"], 0.05, P["n"], 100, etas,
                                      orders=orders)
    coarse = released_iterates_epsilon(1e-5, P["lipschitz"], 0.05, P["n"], 100, etas,
                                       orders=orders, max_groups=2)
    assert exact < coarse < exact * 1.05


# --- the counterexample --------------------------------------------------------------------------

CE = dict(lipschitz=1.0, lam=0.5, eta=1.0, n=1000, radius=1.0)


def _seed_sigma(K=1):
    return sgld_calibrate_sigma(1.0, 1e-5, CE["lipschitz"], CE["lam"], CE["n"], CE["eta"], K=K)


def test_theorem_3_1_fails_for_tiny_batches():
    """One step, λη = 1/2, m = 1 of n = 1000: Theorem 3.1 calibrated to (1, 1e-5)-DP, yet any
    valid δ at ε = 1 is ≥ 1e-3 (the record is drawn with probability 1/1000 and its jump
    ηa = 0.5 is 33 noise standard deviations)."""
    sigma = _seed_sigma()
    assert sgld_epsilon(1e-5, CE["lipschitz"], sigma, CE["lam"], CE["n"], CE["eta"],
                        K=1)[0] <= 1.0
    d = one_step_delta_lower_bound(1.0, sigma=sigma, batch_size=1, **CE)
    assert d > 50 * 1e-5
    assert d == pytest.approx(1e-3, rel=1e-3)          # ≈ m/n: the jump is fully visible
    # full batches: Theorem 3.1 is the DP-GLD theorem, and the check finds nothing
    assert one_step_delta_lower_bound(1.0, sigma=sigma, batch_size=CE["n"], **CE) <= 1e-5


def test_counterexample_agrees_with_a_monte_carlo_run_of_dp_sgld():
    """P_D(θ_1 ≤ t) − e P_D'(θ_1 ≤ t) at the returned threshold, estimated from 60k chains of
    dp_sgld on the same one-dimensional problem (ℓ = λθ²/2 + xθ, x_1 = ±(L − λr)); n = 100."""
    ce = dict(CE, n=100)
    sigma = sgld_calibrate_sigma(1.0, 1e-5, ce["lipschitz"], ce["lam"], ce["n"], ce["eta"], K=1)
    m, N = 1, 60_000
    delta, t = one_step_delta_lower_bound(1.0, sigma=sigma, batch_size=m,
                                          return_threshold=True, **ce)
    a = ce["lipschitz"] - ce["lam"] * ce["radius"]
    probs = []
    for x1, seed in ((a, 1), (-a, 2)):
        data = torch.zeros(ce["n"], dtype=torch.float64)
        data[0] = x1

        def grad(theta, idx, data=data):
            return ce["lam"] * theta + data[idx].mean(1, keepdim=True)
        th = dp_sgld(grad, None, n=ce["n"], batch_size=m, step_sizes=ce["eta"], K=1,
                     sigma=sigma, seed=seed, radius=ce["radius"], lam=ce["lam"], shape=(N, 1),
                     device="cpu")
        probs.append((th[:, 0] <= t).double().mean().item())
    p, q = probs
    se = math.sqrt(p * (1 - p) / N + math.e**2 * q * (1 - q) / N)
    assert abs((p - math.e * q) - delta) < 4.5 * se
    assert delta > 100 * 1e-5


def test_experiment_regime_is_not_refuted_by_the_one_step_check():
    """The book's experiment (λ = 0.03, η = 1/(2β), n ≈ 1077, m ≥ 10): no violation found."""
    c = logistic_regression_constants(np.eye(17)[:1].repeat(1077, 0), 0.03, num_classes=10,
                                      smoothness="example", feature_bound=1.0)
    eta = 1 / (2 * c.beta)
    for m in (10, 50, 200):
        s = sgld_calibrate_sigma(1.0, 1e-5, c.lipschitz, c.lam, 1077, eta, K=1)
        d = one_step_delta_lower_bound(1.0, lipschitz=c.lipschitz, sigma=s, lam=c.lam,
                                       eta=eta, n=1077, batch_size=m, radius=c.radius)
        assert d <= 1e-5


# --- logistic regression constants --------------------------------------------------------------

def _loss_flat(X, y, lam, C):
    def f(w):
        W = w.reshape(C, X.shape[-1])
        return torch.nn.functional.cross_entropy(X @ W.T, y) + lam / 2 * (w**2).sum()
    return f


def _per_example_hessians(X, y, lam, C, w):
    def one(x, t):
        return torch.func.hessian(_loss_flat(x[None], t[None], lam, C))(w)
    return torch.vmap(one)(X, y)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("C", [2, 3, 10])
def test_beta_bounds_the_numerical_hessian(seed, C):
    """Autograd Hessians on random data: λ ≤ eig(∇²L_D) ≤ β (Ryffel et al.'s Lemma) and every
    per-example Hessian ≤ the example β."""
    g = torch.Generator().manual_seed(seed)
    n, p, lam = 30, 4, 0.07
    X = torch.randn(n, p, generator=g, dtype=torch.float64) * (1 + seed)
    y = torch.randint(0, C, (n,), generator=g)
    b_data, lm, L, r = logistic_regression_constants(X, lam, num_classes=C)
    b_ex = logistic_regression_constants(X, lam, num_classes=C, smoothness="example").beta
    for scale in (0.0, 0.3, 3.0):
        w = torch.randn(C * p, generator=g, dtype=torch.float64) * scale
        H = torch.func.hessian(_loss_flat(X, y, lam, C))(w)
        ev = torch.linalg.eigvalsh(H)
        assert ev[-1] <= b_data * (1 + 1e-10)
        assert ev[0] >= lam * (1 - 1e-10)                       # λ-strongly convex
        Hi = _per_example_hessians(X, y, lam, C, w)
        assert torch.linalg.eigvalsh(Hi).max() <= b_ex * (1 + 1e-10)
        # and the per-example β can be needed: some example exceeds the dataset β when the
        # features are spread out (checked on the largest-norm example at W = 0 below)
    if C == 2:
        # at W = 0 with two classes diag(p) − ppᵀ has eigenvalue ½: the bound is attained, so the
        # factor ½ (not the ¼ of a one-vector sigmoid model) is needed for this model
        H0 = torch.func.hessian(_loss_flat(X, y, lam, 2))(torch.zeros(2 * p, dtype=X.dtype))
        assert torch.linalg.eigvalsh(H0)[-1].item() == pytest.approx(b_data, rel=1e-10)
        quarter = torch.linalg.eigvalsh(X.T @ X / n)[-1].item() / 4 + lam
        assert torch.linalg.eigvalsh(H0)[-1].item() > quarter
        Hi0 = _per_example_hessians(X, y, lam, 2, torch.zeros(2 * p, dtype=X.dtype))
        assert torch.linalg.eigvalsh(Hi0).max().item() == pytest.approx(b_ex, rel=1e-10)
        assert b_ex > b_data


def test_lipschitz_and_radius():
    rng = np.random.default_rng(0)
    n, p, C, lam = 200, 6, 4, 0.05
    X = rng.normal(size=(n, p))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = rng.integers(0, C, n)
    c = logistic_regression_constants(X, lam, num_classes=C)
    assert c.radius == pytest.approx(math.sqrt(2 * math.log(C) / lam))
    assert c.lipschitz == pytest.approx(math.sqrt(2) + lam * c.radius)
    # per-example gradient norms on the sphere of radius r stay below L
    grad = logistic_regression_grad(X, y, lam, C, device="cpu")
    W = torch.tensor(rng.normal(size=(64, C * p)))
    W = W / W.norm(dim=1, keepdim=True) * c.radius
    for i in range(0, n, 25):
        g = grad(W, torch.full((64, 1), i))
        assert g.norm(dim=1).max() <= c.lipschitz
    # the regularised minimiser is inside the ball: minimise by full-batch GD (smooth, convex)
    theta = torch.zeros(1, C * p, dtype=torch.float64)
    for _ in range(600):
        theta = theta - 1 / c.beta * grad(theta, None)
    assert grad(theta, None).norm() < 1e-8
    assert theta.norm() <= c.radius
    assert logistic_regression_loss(theta, X, y, lam, C)[0] <= math.log(C)


# --- dp_sgld statistics --------------------------------------------------------------------------

def _zero_grad(theta, idx):
    return torch.zeros_like(theta)


def test_zero_gradient_noise_has_the_right_variance():
    """θ_K − θ_0 = Σ √(2η_k)σ Z_k ~ N(0, 2σ²Σ η_k): chi-square test of the variance at level
    1e-4, and a twin with σ·1.05 is rejected (power)."""
    etas = decreasing_step_sizes(2.0, 0.1, 40)
    sigma, N = 0.7, 20_000
    th = dp_sgld(_zero_grad, np.zeros((N, 3)), n=10, batch_size=3, step_sizes=etas,
                 sigma=sigma, seed=3, device="cpu").numpy().ravel()
    var = 2 * sigma**2 * etas.sum()
    for s2, should_pass in ((var, True), (var * 1.05**2, False)):
        stat = (th**2).sum() / s2
        p = 2 * min(stats.chi2.cdf(stat, th.size), stats.chi2.sf(stat, th.size))
        assert (p > 1e-4) == should_pass
    assert stats.kstest(th / math.sqrt(var), "norm").pvalue > 1e-4


def test_theorem_start_and_projection():
    sigma, lam, N = 0.5, 0.2, 50_000
    th0 = dp_sgld(_zero_grad, None, n=5, batch_size=1, step_sizes=0.1, K=0, sigma=sigma,
                  seed=0, lam=lam, shape=(N, 2), device="cpu").numpy().ravel()
    assert stats.kstest(th0 / (sigma * math.sqrt(2 / lam)), "norm").pvalue > 1e-4
    path = dp_sgld(_zero_grad, None, n=5, batch_size=2, step_sizes=0.5, K=30, sigma=sigma,
                   seed=1, lam=lam, shape=(500, 4), radius=1.0, device="cpu", trajectory=True)
    norms = path.norm(dim=-1)
    assert path.shape == (31, 500, 4)
    assert norms.max() <= 1.0 + 1e-12
    assert (norms > 1 - 1e-12).float().mean() > 0.5      # the projection is active here
    # inside the ball nothing is changed
    inside = dp_sgld(_zero_grad, np.full((3, 2), 0.1), n=5, batch_size=1, step_sizes=1e-6,
                     K=1, sigma=1e-9, seed=0, radius=10.0, device="cpu")
    np.testing.assert_allclose(inside.numpy(), 0.1, atol=1e-10)


def test_batches_are_distinct_uniform_and_fresh():
    seen = []

    def grad(theta, idx):
        seen.append(idx.clone())
        return torch.zeros_like(theta)
    n, m, K = 12, 4, 3000
    dp_sgld(grad, np.zeros((2, 1)), n=n, batch_size=m, step_sizes=0.1, K=K, sigma=0.1, seed=5,
            device="cpu")
    idx = torch.stack(seen)                                  # (K, chains, m)
    assert all(len(set(b.tolist())) == m for b in idx.reshape(-1, m))
    counts = torch.bincount(idx.reshape(-1), minlength=n).numpy()
    assert stats.chisquare(counts).pvalue > 1e-4
    # consecutive batches are independent: P(record i in both) = (m/n)²
    both = (idx[1:, 0, :, None] == torch.arange(n)).any(1) & \
        (idx[:-1, 0, :, None] == torch.arange(n)).any(1)
    assert both.double().mean().item() == pytest.approx((m / n) ** 2, abs=0.01)


def test_full_batch_matches_the_squared_loss_closed_form():
    """m = n: DP-SGLD is noisy GD; on ℓ = (λ/2)‖θ − x‖² its mean and variance are those of
    dplib.langevin.squared_loss_moments (chapter 6)."""
    lam, eta, sigma, K, N = 1.0, 0.3, 0.2, 12, 40_000
    x = torch.tensor([[1.0, -2.0], [3.0, 0.5], [-1.0, 1.5]], dtype=torch.float64)

    def grad(theta, idx):
        assert idx is None
        return lam * (theta - x.mean(0))
    th = dp_sgld(grad, np.full((N, 2), 0.5), n=3, batch_size=3, step_sizes=eta, K=K,
                 sigma=sigma, seed=7, device="cpu").numpy()
    mean, var = squared_loss_moments(x.mean(0).numpy(), np.array([0.5, 0.5]), sigma, eta, K,
                                     lam=lam)
    z = (th.mean(0) - mean) / np.sqrt(var / N)
    assert np.all(np.abs(z) < 4.4)
    assert th.var(0) == pytest.approx(np.full(2, var), rel=0.04)


def test_seeded_and_device_default():
    a = dp_sgld(_zero_grad, np.zeros((2, 3)), n=4, batch_size=2, step_sizes=0.2, K=5,
                sigma=1.0, seed=11, device="cpu")
    b = dp_sgld(_zero_grad, np.zeros((2, 3)), n=4, batch_size=2, step_sizes=0.2, K=5,
                sigma=1.0, seed=11, device="cpu")
    assert torch.equal(a, b) and a.dtype == torch.float64


# --- the experiment pieces -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def digits():
    return digits_features(seed=0, dim=12)


def test_feature_map_is_public_unit_norm_and_deterministic(digits):
    d = digits
    for split in ("train", "test", "public"):
        np.testing.assert_allclose(np.linalg.norm(d[split][0], axis=1), 1.0, rtol=1e-12)
    sizes = [len(d[s][1]) for s in ("train", "test", "public")]
    assert sum(sizes) == 1797 and min(sizes) > 300
    # the map depends on the public split only: refitting on it reproduces the train features
    from dplib.datasets import load_digits
    raw = load_digits(seed=0, val_fraction=0.2, test_fraction=0.2, standardize=False)
    phi = fit_public_feature_map(raw["val"][0].numpy(), dim=12)
    np.testing.assert_allclose(phi(raw["train"][0].numpy()), d["train"][0], rtol=1e-12)
    assert d["feature_map"].dim == 13


def test_training_is_accurate_without_noise_and_accounted_with_it(digits):
    (X, y), (Xt, yt) = digits["train"], digits["test"]
    plain = train_dp_sgld_logistic(X, y, num_classes=10, lam=0.01, epochs=10, batch_size=100,
                                   target_epsilon=None, schedule="decreasing",
                                   eval_data=(Xt, yt), seed=0, device="cpu")
    assert plain.sigma == 0 and plain.test_accuracy[0] > 0.85
    assert plain.accountant == "none" and plain.seed == 0
    np.testing.assert_allclose(plain.step_sizes, decreasing_step_sizes(plain.constants.beta,
                                                                       0.01, plain.steps))
    priv = train_dp_sgld_logistic(X, y, num_classes=10, lam=0.03, epochs=5, batch_size=100,
                                  target_epsilon=2.0, chains=4, eval_data=(Xt, yt), seed=0,
                                  device="cpu")
    assert priv.epsilon == pytest.approx(2.0, rel=1e-6) and priv.epsilon <= 2.0
    # m = 100 < n: accounted as released iterates (valid for any batch size), not Theorem 3.1
    assert priv.accountant == "released_iterates" and priv.proved and priv.seed == 0
    assert priv.epsilon == released_iterates_epsilon(
        1e-5, priv.constants.lipschitz, priv.sigma, len(y), 100, priv.step_sizes,
        orders=RELEASED_ORDERS)
    assert priv.theta.shape == (4, 10 * 13) and priv.theta.norm(dim=1).max() <= \
        priv.constants.radius * (1 + 1e-12)
    assert np.all(priv.test_accuracy < plain.test_accuracy[0])
    acc = logistic_regression_accuracy(priv.theta, Xt, yt, 10)
    np.testing.assert_allclose(acc, priv.test_accuracy)


def test_table4_diagnostics():
    out = table4_diagnostics(beta=55.0, lam=1e-3, epsilon_rdp=0.5, alpha=20.0, n=50_000,
                             d=5120)
    assert out["beta_over_lam"] == pytest.approx(5.5e4)
    assert out["ratio"] == pytest.approx(0.5 * 50_000**2 / (20 * 5120) / 5.5e4**2)
    assert out["K_theorem_4_2"] == pytest.approx(5.5e4 * 0.5 * 50_000**2 / (20 * 5120))


# --- bad input -----------------------------------------------------------------------------------

def _grad1(theta, idx):
    return torch.zeros_like(theta)


@pytest.mark.parametrize("call, match", [
    (lambda: sgld_rdp(1.0, 1, 1, 0.1, 10, 0.1, K=1), "alpha"),
    (lambda: sgld_rdp(2.0, 0, 1, 0.1, 10, 0.1, K=1), "lipschitz"),
    (lambda: sgld_rdp(2.0, 1, -1, 0.1, 10, 0.1, K=1), "sigma"),
    (lambda: sgld_rdp(2.0, 1, 1, 0.0, 10, 0.1, K=1), "lam"),
    (lambda: sgld_rdp(2.0, 1, 1, 0.1, 0, 0.1, K=1), "n"),
    (lambda: sgld_rdp(2.0, 1, 1, 0.1, 10, 0.1), "K must be given"),
    (lambda: sgld_rdp(2.0, 1, 1, 0.1, 10, 0.1, K=1.5), "K must be an integer"),
    (lambda: sgld_rdp(2.0, 1, 1, 0.1, 10, [0.1, -0.1]), "step_sizes"),
    (lambda: sgld_rdp(2.0, 1, 1, 0.1, 10, []), "step_sizes must be non-empty"),
    (lambda: sgld_rdp(2.0, 1, 1, 0.1, 10, [[0.1]]), "step_sizes"),
    (lambda: sgld_rdp(2.0, 1, 1, 0.1, 10, [0.1, 0.1], K=3),
     r"K must be in \[0, len\(step_sizes\)\] = \[0, 2\]"),
    (lambda: sgld_rdp(2.0, 1, 1, 0.1, 10, 0.1, K=1, beta=0.05), "beta must be >= lam"),
    (lambda: sgld_rdp(2.0, 1, 1, 0.1, 10, 0.5, K=1, beta=2.0), r"step_sizes must be in \(0"),
    (lambda: decreasing_step_sizes(1.0, 0.1, 0), "K"),
    (lambda: decreasing_step_rdp(2.0, 1, 1, 0.1, 10, 0.01, 3), "beta must be >= lam"),
    (lambda: sgld_epsilon(0.0, 1, 1, 0.1, 10, 0.1, K=1), "delta"),
    (lambda: sgld_calibrate_sigma(-1.0, 1e-5, 1, 0.1, 10, 0.1, K=1), "target_epsilon"),
    (lambda: released_iterates_epsilon(1e-5, 1, 1, 10, 11, 0.1, K=1), "batch_size"),
    (lambda: one_step_delta_lower_bound(1.0, lipschitz=1, sigma=1, lam=1, eta=1, n=10,
                                        batch_size=1, radius=0.5), "eta"),
    (lambda: one_step_delta_lower_bound(1.0, lipschitz=0.1, sigma=1, lam=1, eta=0.5, n=10,
                                        batch_size=1, radius=0.5), "lipschitz"),
    (lambda: logistic_regression_constants(np.ones(3), 0.1), "X must be"),
    (lambda: logistic_regression_constants(np.ones((3, 2)), 0.1, smoothness="x"),
     "smoothness"),
    (lambda: logistic_regression_constants(np.ones((3, 2)), 0.1, feature_bound=1.0),
     "feature_bound"),
    (lambda: logistic_regression_constants(np.ones((3, 2)), 0.1, num_classes=1),
     "num_classes"),
    (lambda: logistic_regression_grad(np.ones((3, 2)), np.array([0, 1, 5]), 0.1, 3,
                                      device="cpu"), "y must hold labels"),
    (lambda: dp_sgld(_grad1, np.zeros((1, 2)), n=3, batch_size=4, step_sizes=0.1, K=1,
                     sigma=1, seed=0, device="cpu"), "batch_size"),
    (lambda: dp_sgld(_grad1, None, n=3, batch_size=1, step_sizes=0.1, K=1, sigma=1, seed=0,
                     device="cpu"), "give lam and shape"),
    (lambda: dp_sgld(_grad1, np.zeros(2), n=3, batch_size=1, step_sizes=0.1, K=1, sigma=1,
                     seed=0, device="cpu"), "theta0"),
    (lambda: dp_sgld(_grad1, np.zeros((1, 2)), n=3, batch_size=1, step_sizes=0.6, K=1,
                     sigma=1, seed=0, beta=2.0, device="cpu"), "step_sizes must be in"),
    (lambda: dp_sgld(_grad1, np.zeros((1, 2)), n=3, batch_size=1, step_sizes=0.1, K=1,
                     sigma=-1, seed=0, device="cpu"), "sigma"),
    (lambda: train_dp_sgld_logistic(np.ones((4, 2)), np.array([0, 1, 0, 1]), num_classes=2,
                                    lam=0.1, epochs=1, batch_size=2, schedule="cosine"),
     "schedule"),
    (lambda: train_dp_sgld_logistic(np.ones((4, 2)), np.array([0, 1, 0, 1]), num_classes=2,
                                    lam=0.1, epochs=1, batch_size=2, accountant="rdp"),
     "accountant"),
    (lambda: train_dp_sgld_logistic(np.ones((4, 2)), np.array([0, 1, 0, 1]), num_classes=2,
                                    lam=0.1, epochs=1, batch_size=2, seed=-1), "seed"),
    (lambda: released_iterates_calibrate_sigma(0.0, 1e-5, 1, 10, 2, 0.1, K=1),
     "target_epsilon"),
    (lambda: released_iterates_epsilon(1e-5, 1, 1, 10, 2, 0.1, K=[1, 0]), "K"),
    (lambda: fit_public_feature_map(np.ones((5, 3)), dim=4), "dim"),
    (lambda: fit_public_feature_map(np.ones((5, 3)), dim=2, bias=1.0), "bias"),
    (lambda: table4_diagnostics(1.0, 2.0, 0.1, 1.0, 10, 2), "alpha"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --- the utility theorems (Section 4 of the paper) -----------------------------------------------

def test_utility_bounds_recompute_the_papers_proofs():
    """Theorem 4.1: Lemma 4.1's three terms at η = 1/(2β), K = (2β/λ) ln r and ‖θ0 − θ*‖² ≤ 4L²/λ²
    add up to the returned bound (the paper's 6αβdL²/(ελ²n²) + ξ²/(4λ)); Theorem 4.2: Lemma 4.2's
    terms at the returned K stay below 18αdL²/(ελn²); σ² puts Theorem 3.1's limit at ε."""
    from dplib.langevin import sgld_utility_bound
    a, e, L, lam, beta, n, d = 24.0, 0.5, 1.8, 0.03, 0.53, 5000, 170
    c = sgld_utility_bound(a, e, L, lam, beta, n, d, grad_second_moment=0.7)
    eta, sig2 = 1 / (2 * beta), c["sigma"] ** 2
    assert math.isclose(sgld_rdp_limit(a, L, c["sigma"], lam, n), e, rel_tol=1e-12)
    lemma41 = (beta / 2 * 4 * L**2 / lam**2 * math.exp(-lam * eta * c["K"])
               + beta * eta * 0.7 / (2 * lam) + beta * d * sig2 / lam)
    assert math.isclose(c["bound"], lemma41, rel_tol=1e-12)
    assert math.isclose(c["noise_term"], 6 * a * beta * d * L**2 / (e * lam**2 * n**2),
                        rel_tol=1e-12)
    assert c["sgd_term"] == 0.7 / (4 * lam)
    assert sgld_utility_bound(a, e, L, lam, beta, n, d)["sgd_term"] == L**2 / (4 * lam)
    dec = sgld_utility_bound(a, e, L, lam, beta, n, d, schedule="decreasing")
    K = dec["K"]
    lemma42 = (2 * beta / K * 4 * L**2 / lam**2 + 2 * d * sig2
               + 4 * L**2 / (K * lam) * math.log(1 + lam * K / (4 * beta)))
    assert lemma42 <= dec["bound"] * (1 + 1e-12)
    assert math.isclose(dec["bound"], 18 * a * d * L**2 / (e * lam * n**2), rel_tol=1e-12)
    r = e * n**2 / (a * d)
    assert math.isclose(dec["ratio"], r / (beta / lam) ** 2, rel_tol=1e-12)
    assert K == max(beta / lam * r, lam / beta * r**2)
    # the ratio is the one of table4_diagnostics
    assert math.isclose(table4_diagnostics(beta, lam, e, a, n, d)["ratio"], dec["ratio"],
                        rel_tol=1e-12)


@pytest.mark.parametrize("bad, name", [
    (dict(alpha=1.0), "alpha"), (dict(epsilon=0.0), "epsilon"), (dict(lipschitz=-1.0),
                                                                 "lipschitz"),
    (dict(lam=0.0), "lam"), (dict(beta=0.01), "beta"), (dict(n=0), "n"), (dict(d=1.5), "d"),
    (dict(schedule="cosine"), "schedule"), (dict(grad_second_moment=-1.0), "grad_second_moment"),
    (dict(n=10), "epsilon \\* n\\*\\*2"),
])
def test_utility_bound_bad_input(bad, name):
    from dplib.langevin import sgld_utility_bound
    args = dict(alpha=24.0, epsilon=0.5, lipschitz=1.8, lam=0.03, beta=0.53, n=5000, d=170)
    with pytest.raises(ValueError, match=name):
        sgld_utility_bound(**{**args, **bad})
