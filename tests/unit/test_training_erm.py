"""dplib.training.erm: the convex part of the DP-SGD chapter.

Oracles: scikit-learn's LogisticRegression (the non-private solver), brute-force minimisation on
a grid (the perturbed median), dplib.accounting's advanced composition and PLD accountant (the
DP-GD noise levels), and distributional tests of the released noise with fixed seeds.
"""
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats
from sklearn.linear_model import LogisticRegression

from dplib.accounting import PLDAccountant, advanced_composition
from dplib.mechanisms import gaussian_sigma
from dplib.training.erm import (_objective_perturbation_parameters, balanced_lambda,
                                dp_gd_logistic, dpgd_bound, dpgd_sigma, dpgd_steps,
                                fit_logistic, logistic_grad, logistic_loss,
                                objective_perturbation_logistic, output_perturbation_logistic,
                                perturbed_median, synthetic_logistic)

X, Y, W0 = synthetic_logistic(400, 5, rng=0)


def test_synthetic_data_is_bounded_and_seeded():
    assert X.shape == (400, 5) and np.all(np.linalg.norm(X, axis=1) <= 1 + 1e-12)
    assert set(np.unique(Y)) == {0.0, 1.0} and abs(np.linalg.norm(W0) - 4) < 1e-12
    assert np.array_equal(synthetic_logistic(400, 5, rng=0)[0], X)


def test_gradient_matches_finite_differences():
    w = np.linspace(-1, 1, 5)
    g = logistic_grad(w, X, Y)
    e = np.eye(5) * 1e-6
    fd = [(logistic_loss(w + e[i], X, Y) - logistic_loss(w - e[i], X, Y)) / 2e-6
          for i in range(5)]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("lam", [0.01, 0.1])
def test_fit_logistic_matches_scikit_learn(lam):
    w = fit_logistic(X, Y, lam=lam, steps=3000)
    sk = LogisticRegression(C=1 / (len(Y) * lam), fit_intercept=False, tol=1e-12,
                            max_iter=10_000).fit(X, Y)
    np.testing.assert_allclose(w, sk.coef_[0], rtol=1e-5, atol=1e-7)


def test_fit_logistic_respects_the_ball():
    w = fit_logistic(X, Y, radius=1.0)
    assert np.linalg.norm(w) <= 1.0 + 1e-12
    # projected-gradient optimality: the gradient points outward along w
    g = logistic_grad(w, X, Y)
    assert np.linalg.norm(g + np.dot(-g, w) * w / np.linalg.norm(w) ** 2) < 1e-6


def test_dpgd_sigma_derived_form_is_advanced_composition_of_gaussians():
    eps, delta, n = 0.5, 1e-5, 1000
    for T in (1, 10, 100, 1000):
        sigma = dpgd_sigma(eps, delta, T, n)
        d0 = delta / (T + 1)
        # per-step ε' of the classic Gaussian mechanism at this σ, sensitivity 2/n
        eps_step = (2 / n) * math.sqrt(2 * math.log(1.25 / d0)) / sigma
        total, total_delta = advanced_composition(eps_step, d0, T, d0)
        assert total <= eps + 1e-12 and total_delta == pytest.approx(delta)
        expected = 8 * math.sqrt(T) / (eps * n) * math.sqrt(
            math.log((T + 1) / delta) * math.log(1.25 * (T + 1) / delta))
        assert sigma == pytest.approx(expected, rel=1e-12)
        assert dpgd_sigma(eps, delta, T, n, form="razaviyayn") >= sigma


def test_dpgd_sigma_gdp_form_is_exact_by_the_pld_accountant():
    eps, delta, n, T = 0.8, 1e-5, 500, 50
    sigma = dpgd_sigma(eps, delta, T, n, form="gdp")
    multiplier = sigma / (2 / n)                 # noise / sensitivity
    got = PLDAccountant(1e-4).step(noise_multiplier=multiplier, sample_rate=1.0,
                                   num_steps=T).get_epsilon(delta)
    assert got == pytest.approx(eps, rel=2e-3)
    assert sigma == pytest.approx(2 / n * math.sqrt(T) * gaussian_sigma(eps, delta, 1.0,
                                                                         "analytic"))


def test_dpgd_sigma_razaviyayn_form_and_scaling_are_exact():
    """The closed form of Razaviyayn's lecture notes, σ = 8L√T/(εn)·(ln(1.25/δ) + ln(T + 1)),
    and σ ∝ L/n
    in every form (the sensitivity 2L/n of the average gradient)."""
    eps, delta, n, T = 0.5, 1e-6, 300, 40
    seed = 8 * math.sqrt(T) / (eps * n) * (math.log(1.25 / delta) + math.log(T + 1))
    assert dpgd_sigma(eps, delta, T, n, form="razaviyayn") == pytest.approx(seed, rel=1e-12)
    for form in ("derived", "razaviyayn", "gdp"):
        base = dpgd_sigma(eps, delta, T, n, 1.0, form=form)
        assert dpgd_sigma(eps, delta, T, n, 2.5, form=form) == pytest.approx(2.5 * base,
                                                                              rel=1e-12)
        assert dpgd_sigma(eps, delta, T, 3 * n, 1.0, form=form) == pytest.approx(base / 3,
                                                                                  rel=1e-12)


def test_dpgd_bound_is_the_shamir_zhang_value():
    """2·D·G·(2 + ln T)/√T with G² = L² + dσ(T)² (Shamir & Zhang 2013 at c = D/G)."""
    eps, delta, n, d, D, L = 0.7, 1e-5, 5000, 8, 3.0, 1.5
    Ts = np.array([1, 10, 1000])
    got = dpgd_bound(eps, delta, Ts, n, d, D, L)
    for t, g in zip(Ts, got):
        sig = dpgd_sigma(eps, delta, int(t), n, L)
        want = 2 * D * math.sqrt(L ** 2 + d * sig ** 2) * (2 + math.log(t)) / math.sqrt(t)
        assert g == pytest.approx(want, rel=1e-12)


def test_dp_gd_default_step_is_d_over_g():
    """η_t = c/√t with c = D/G = 2R/√(1 + dσ²) (L = 1): the default equals that lr_scale."""
    Xs, Ys, r, T = X[:100], Y[:100], 3.0, 20
    sigma = dpgd_sigma(0.5, 1e-5, T, 100)
    c = 2 * r / math.sqrt(1 + 5 * sigma ** 2)
    a = dp_gd_logistic(Xs, Ys, epsilon=0.5, delta=1e-5, steps=T, radius=r, rng=4)
    b = dp_gd_logistic(Xs, Ys, epsilon=0.5, delta=1e-5, steps=T, radius=r, rng=4, lr_scale=c)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, dp_gd_logistic(Xs, Ys, epsilon=0.5, delta=1e-5, steps=T,
                                                radius=r, rng=4, lr_scale=1.1 * c))


def test_dpgd_steps_minimises_the_bound():
    T = dpgd_steps(0.5, 1e-5, 10_000, 10)
    b = dpgd_bound(0.5, 1e-5, np.array([max(1, T // 2), T, 2 * T]), 10_000, 10, 1.0)
    assert b[1] <= b[0] and b[1] <= b[2]
    assert isinstance(dpgd_bound(0.5, 1e-5, 7, 100, 3, 2.0), float)


def test_dp_gd_converges_when_the_noise_vanishes():
    w = dp_gd_logistic(X, Y, epsilon=1e6, delta=1e-5, steps=2000, radius=10.0, rng=0,
                       form="gdp")
    best = fit_logistic(X, Y, radius=10.0, steps=3000)
    assert logistic_loss(w, X, Y) - logistic_loss(best, X, Y) < 2e-3


@pytest.mark.slow
def test_output_perturbation_sensitivity_and_noise():
    """Output perturbation: replacing one record moves the regularised minimiser by at most
    2L/(nλ), and the released noise is the Gaussian calibrated to that sensitivity.
    Slow: about 14 s of CPU, six 3000-step fits and 120 releases."""
    lam, n = 0.1, len(Y)
    w = fit_logistic(X, Y, lam=lam, steps=3000)
    rng = np.random.default_rng(1)
    for _ in range(5):                          # replace one record: moves ≤ 2L/(nλ)
        X2, Y2 = X.copy(), Y.copy()
        i = rng.integers(n)
        X2[i] = rng.normal(size=5)
        X2[i] /= np.linalg.norm(X2[i])
        Y2[i] = 1 - Y2[i]
        shift = np.linalg.norm(fit_logistic(X2, Y2, lam=lam, steps=3000) - w)
        assert shift <= 2 / (n * lam)
    sigma = gaussian_sigma(1.0, 1e-5, 2 / (n * lam), "analytic")
    z = (np.array([output_perturbation_logistic(X, Y, lam=lam, epsilon=1.0, delta=1e-5, rng=s)
                   for s in range(120)]) - w).ravel() / sigma
    assert stats.kstest(z, "norm").pvalue > 1e-3
    k = z.size                                   # χ² test of the variance, and its power
    assert 2 * min(stats.chi2.cdf(z @ z, k), stats.chi2.sf(z @ z, k)) > 1e-3
    assert stats.chi2.cdf(z @ z / 1.2 ** 2, k) < 1e-3


def test_objective_perturbation_noise_has_the_gamma_norm():
    # recover b from the optimality condition ∇L(w) + λ'w + b/n = 0 and test ‖b‖ ~ Γ(d, 2/ε')
    Xs, Ys = X[:60], Y[:60]
    n, d, lam, eps = 60, 5, 0.5, 2.0
    eps_p = eps - math.log(1 + 2 * 0.25 / (n * lam) + 0.25 ** 2 / (n * lam) ** 2)
    norms = []
    for s in range(80):
        w = objective_perturbation_logistic(Xs, Ys, lam=lam, epsilon=eps, rng=s)
        b = -n * (logistic_grad(w, Xs, Ys) + lam * w)
        norms.append(np.linalg.norm(b))
    assert stats.kstest(norms, stats.gamma(d, scale=2 / eps_p).cdf).pvalue > 1e-3
    assert stats.kstest(norms, stats.gamma(d, scale=2.6 / eps_p).cdf).pvalue < 1e-3


def test_objective_perturbation_adds_regularisation_when_needed():
    # tiny λ: ε' ≤ 0, so Δ = c/(n(e^{ε/4} − 1)) − λ is added and ε' = ε/2 (CMS 2011, Alg. 2):
    # b recovered with the total regulariser λ + Δ must have ‖b‖ ~ Γ(d, 2/ε') = Γ(d, 4/ε)
    Xs, Ys = X[:20], Y[:20]
    n, d, eps = 20, 5, 0.1
    assert eps - math.log(1 + 2 * 0.25 / (n * 1e-4) + 0.25 ** 2 / (n * 1e-4) ** 2) <= 0
    lam_total = 0.25 / (n * math.expm1(eps / 4))
    norms = []
    for s in range(80):
        w = objective_perturbation_logistic(Xs, Ys, lam=1e-4, epsilon=eps, rng=s)
        b = -n * (logistic_grad(w, Xs, Ys) + lam_total * w)
        norms.append(np.linalg.norm(b))
    assert stats.kstest(norms, stats.gamma(d, scale=4 / eps).cdf).pvalue > 1e-3
    assert stats.kstest(norms, stats.gamma(d, scale=2 / eps).cdf).pvalue < 1e-3   # ε' = ε


# --- objective perturbation: the privacy guarantee from first principles in d = 1 -------------

# w grid: fine in the middle, geometric tails (the release has full support on the real line)
_W_GRID = np.concatenate([np.linspace(-40.0, 40.0, 8001), np.geomspace(40.0, 1e4, 200),
                          -np.geomspace(40.0, 1e4, 200)])
_RECORDS = [(xv, yv) for xv in (-1.0, -0.5, 0.0, 0.5, 1.0) for yv in (0.0, 1.0)]


def _release_log_density(x, y, lam_total, eps_p, w=_W_GRID):
    """log density at w of argmin (1/n)Σℓ(w; x_i, y_i) + (λ_total/2)w² + bw/n with b drawn from
    p_b(b) = (ε'/4)e^{−ε'|b|/2} (d = 1). The first-order condition gives b = b_D(w) = −n(L'_D(w) + λ_total w), strictly
    increasing with db/dw = n(L''_D(w) + λ_total), so p_D(w) = p_b(b_D(w))·b_D'(w)."""
    n = len(x)
    z = w[:, None] * x[None, :]
    s = 0.5 * (1.0 + np.tanh(0.5 * z))                          # σ(wx)
    grad = ((s - y[None, :]) * x[None, :]).sum(axis=1)          # n·L'_D(w)
    curv = (s * (1.0 - s) * x[None, :] ** 2).sum(axis=1)        # n·L''_D(w), each term ≤ 1/4
    b = -(grad + n * lam_total * w)
    return math.log(eps_p / 4) - eps_p * np.abs(b) / 2 + np.log(curv + n * lam_total)


def _max_privacy_loss(n, lam_total, eps_p):
    """max over w, over both directions and over replace-one neighbours of
    |log p_D(w) − log p_D'(w)|: the other n − 1 records are all x = 0 (no curvature, the worst
    case for the Jacobian), all x = 1 or all x = −1 (labels 0 or 1), and the replaced record runs
    over every pair of {−1, −½, 0, ½, 1} × {0, 1} (x = 1, y = 1 → x = −1, y = 1, label flips …)."""
    worst = -np.inf
    for xr in (0.0, 1.0, -1.0):
        for yr in (0.0, 1.0):
            rest_x, rest_y = np.full(n - 1, xr), np.full(n - 1, yr)
            dens = [_release_log_density(np.r_[rest_x, xv], np.r_[rest_y, yv], lam_total, eps_p)
                    for xv, yv in _RECORDS]
            for i in range(len(dens)):
                for j in range(i):
                    worst = max(worst, np.abs(dens[i] - dens[j]).max())
    return worst


# (n, λ, ε): three in the ε' > 0 branch, three in the Δ branch (ε' ≤ 0: λ is raised)
_OBJPERT_CONFIGS = [(5, 1.0, 0.5), (5, 1.0, 2.0), (3, 0.1, 2.0),
                    (3, 1e-4, 0.5), (5, 0.01, 1.0), (3, 1.0, 0.1)]


def test_objective_perturbation_is_eps_dp_by_change_of_variables():
    """Chaudhuri, Monteleoni & Sarwate 2011, Algorithm 2 / Theorem 9, checked without their proof.

    In d = 1 the released w is a smooth bijective image of the noise b, so its density is known
    exactly (:func:`_release_log_density`), and ε-DP (replace-one, n public) is the statement
    sup_w |log p_D(w) − log p_D'(w)| ≤ ε for every pair of neighbours. We evaluate that on a grid
    of w for worst-case neighbours, in both branches of the algorithm, with the parameters
    (λ + Δ, ε') that the mechanism uses (:func:`_objective_perturbation_parameters`).

    The bound has slack in d = 1 (the found maximum is 0.30–0.50·ε: the logistic gradients of
    two records differ by about 1, not the Lipschitz bound 2, and the Jacobian ratio is at most
    1 + c/(nλ), not CMS's (1 + c/(nλ))²), so a wrong constant c = 1/8 would still be private
    (ln(1 + 2u) ≤ 2 ln(1 + u)); it is caught by the noise-law test below instead. What the check
    does catch: dropping the correction altogether (ε' = ε, λ as given) or, in the Δ branch,
    forgetting to raise λ — both exceed ε by far for small nλ.
    """
    branches = set()
    for n, lam, eps in _OBJPERT_CONFIGS:
        lam_total, eps_p = _objective_perturbation_parameters(n, lam, eps)
        branches.add(lam_total > lam)
        assert 0 < eps_p <= eps and lam_total >= lam
        assert _max_privacy_loss(n, lam_total, eps_p) <= eps + 1e-9
    assert branches == {False, True}                    # both branches were exercised
    # power: the same check rejects the mechanism without the CMS correction ...
    n, lam, eps = 3, 1e-4, 0.5
    assert _max_privacy_loss(n, lam, eps) > 5 * eps             # ε' = ε, λ unchanged
    # ... and the Δ branch with ε' = ε/2 but without the extra regularisation Δ
    lam_total, eps_p = _objective_perturbation_parameters(n, lam, eps)
    assert lam_total > lam and _max_privacy_loss(n, lam, eps_p) > 5 * eps


@pytest.mark.slow
@pytest.mark.parametrize("n,lam,eps,samples", [(5, 0.1, 1.0, 300), (4, 1e-3, 0.5, 150)])
def test_objective_perturbation_noise_law_in_one_dimension(n, lam, eps, samples):
    """The real mechanism in d = 1 releases argmin (1/n)Σℓ + (λ_total/2)w² + bw/n with
    |b| ~ Exponential(scale 2/ε') (CMS 2011, Alg. 2: density ∝ e^{−ε'|b|/2}), for the
    (λ_total, ε') of :func:`_objective_perturbation_parameters`: b is recovered from the
    first-order condition b = −n(L'(w) + λ_total w). First case: ε' > 0 branch; second: Δ branch
    (fewer samples: the wrong laws are far off, and each release runs 1000 solver steps).
    Slow: about 11 s of CPU for the first case, 300 releases of 1000 solver steps each."""
    x = np.linspace(-1.0, 1.0, n).reshape(-1, 1)
    y = (np.arange(n) % 2).astype(float)
    lam_total, eps_p = _objective_perturbation_parameters(n, lam, eps)
    delta_branch = n * lam < 0.01
    assert (lam_total > lam) == delta_branch
    # the solver has converged: the objective is (L''+λ_total)/λ_total ≤ 1 + 1/(4λ_total)
    # conditioned, and 1000 FISTA steps (the default) agree with 300 to rounding
    assert 1 + 0.25 / lam_total < 5
    for bb in (-30.0, 3.0, 40.0):
        np.testing.assert_allclose(fit_logistic(x, y, lam=lam_total, linear_term=[bb / n]),
                                   fit_logistic(x, y, lam=lam_total, linear_term=[bb / n],
                                                steps=300), rtol=0, atol=1e-12)
    ws = np.array([objective_perturbation_logistic(x, y, lam=lam, epsilon=eps, rng=s)[0]
                   for s in range(samples)])
    grad = np.array([logistic_grad([w], x, y)[0] for w in ws])

    def recovered(lam_t):
        return np.abs(n * (grad + lam_t * ws))

    assert stats.kstest(recovered(lam_total), stats.expon(scale=2 / eps_p).cdf).pvalue > 1e-3
    # power: ε' = ε (no log correction / no halving) is rejected ...
    assert stats.kstest(recovered(lam_total), stats.expon(scale=2 / eps).cdf).pvalue < 1e-3
    # ... and so is c = 1/8 (a wrong ε' in the ε' > 0 branch, a wrong λ + Δ in the Δ branch)
    lam_8, eps_8 = _objective_perturbation_parameters(n, lam, eps, c=1 / 8)
    assert (lam_8, eps_8) != (lam_total, eps_p)
    assert stats.kstest(recovered(lam_8), stats.expon(scale=2 / eps_8).cdf).pvalue < 1e-3

def test_perturbed_median_equals_brute_force():
    rng = np.random.default_rng(3)
    grid = np.linspace(-1, 12, 13001)
    for _ in range(20):
        x = np.round(rng.uniform(0, 10, size=rng.integers(1, 8)), 2)
        b = rng.uniform(-len(x) + 1e-3, len(x) - 1e-3, size=5)
        obj = np.abs(grid[None, :, None] - x[None, None, :]).mean(-1) + \
            b[:, None] / len(x) * grid[None, :]
        brute = grid[np.argmin(obj, axis=1)]
        got = perturbed_median(x, b)
        got_obj = np.abs(got[:, None] - x[None, :]).mean(-1) + b / len(x) * got
        np.testing.assert_allclose(got_obj, obj.min(axis=1), atol=1e-9)
        assert np.all(np.abs(got - brute) < 1e-6) or np.allclose(got_obj, obj.min(axis=1))


def test_perturbed_median_is_not_private():
    b = np.random.default_rng(0).uniform(-1.99, 1.99, 10_000)
    a, c = perturbed_median([0, 100], b), perturbed_median([0, 101], b)
    assert np.mean(a == 100) == pytest.approx(np.mean(b < 0)) and not np.any(c == 100)


def test_balanced_lambda_values():
    assert balanced_lambda("objective", 1.0, 1e-5, 100, 4, 2.0) == pytest.approx(
        2 * math.sqrt(2) * 4 / (100 * 2.0))
    lam = balanced_lambda("output", 1.0, 1e-5, 100, 4, 2.0)
    assert lam == pytest.approx(math.sqrt(2 * math.sqrt(2 * math.log(1.25e5)) / 100))


@pytest.mark.parametrize("call,match", [
    (lambda: dpgd_sigma(1.0, 1e-5, 10, 100), "epsilon"),
    (lambda: dpgd_sigma(0.5, 1e-5, 10, 100, form="loose"), "form"),
    (lambda: dpgd_sigma(0.5, 0.0, 10, 100), "delta"),
    (lambda: fit_logistic(X * 2, Y), "norm <= 1"),
    (lambda: fit_logistic(X, Y + 1), "binary"),
    (lambda: perturbed_median([0, 1], 2.0), r"\|b\| < n"),
    (lambda: output_perturbation_logistic(X, Y, lam=0.0, epsilon=1, delta=1e-5, rng=0),
     "lam"),
    (lambda: balanced_lambda("noise", 1.0, 1e-5, 10, 2, 1.0), "method"),
    (lambda: dpgd_bound(0.5, 1e-5, 0, 10, 2, 1.0), "steps"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_perturbed_median_with_a_regulariser_is_the_exact_minimiser():
    """Subgradient optimality of w = argmin (1/n)Σ|w − x_i| + (λ/2)w² + (b/n)w, by a fine grid."""
    rng = np.random.default_rng(0)
    for lam in (1e-3, 0.05, 0.7, 5.0):
        x = np.round(rng.normal(size=7) * 3, 1)             # ties possible
        b = rng.uniform(-2, 2, size=50)
        w = perturbed_median(x, b, lam=lam)
        grid = np.linspace(x.min() - 5, x.max() + 5, 200_001)
        obj = (np.abs(grid[None, :, None] - x[None, None, :]).mean(2)
               + lam / 2 * grid[None, :] ** 2 + b[:, None] / len(x) * grid[None, :])
        best = obj.min(1)
        at_w = (np.abs(w[:, None] - x[None, :]).mean(1) + lam / 2 * w ** 2 + b / len(x) * w)
        assert np.all(at_w <= best + 1e-9)


def test_the_regulariser_does_not_remove_the_median_atom():
    """D = {0, 100}, D' = {0, 101}, λ = 1e-3, b uniform on (−2, 2): M(D) = 100 with probability
    (2 − 200λ)/4 = 0.45, M(D') = 100 never — strong convexity does not repair the kink."""
    b = np.random.default_rng(1).uniform(-2, 2, size=200_000)
    p_d = np.mean(perturbed_median([0.0, 100.0], b, lam=1e-3) == 100.0)
    p_d2 = np.mean(perturbed_median([0.0, 101.0], b, lam=1e-3) == 100.0)
    assert abs(p_d - 0.45) < 0.005 and p_d2 == 0.0


@pytest.mark.parametrize("module", ["dplib.training.erm", "dplib"])
def test_numpy_modules_import_without_torch(module):
    """ERM is NumPy only, and ``import dplib`` is torch-free: neither may load torch (the DP-SGD
    modules of dplib.training load it on first use), checked in a fresh interpreter."""
    code = f"import sys, {module}; assert 'torch' not in sys.modules, 'torch was imported'"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]


def test_training_names_still_load_on_first_use():
    pytest.importorskip("torch")
    import dplib.training as T
    assert T.train.__module__ == "dplib.training.trainer"
    assert T.grads.__name__ == "dplib.training.grads"
    assert set(T.__all__) <= set(dir(T))
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        T.no_such_name
