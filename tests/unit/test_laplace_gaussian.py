"""Laplace and Gaussian mechanisms: calibration against formulas and dp-accounting, statistical
tests of the output law (with power checks), empirical privacy loss, and bad input.

Every statistical test uses a fixed seed and level 1e-4 (or states its tolerance); each has a twin
showing that a deliberately wrong scale fails it, so the test has power.
"""
import math

import mpmath
import numpy as np
import pytest
from scipy import stats

from dplib.accounting import gdp_epsilon
from dplib.mechanisms import (float_laplace_reachable, gaussian_delta, gaussian_epsilon,
                              gaussian_mechanism, gaussian_privacy_loss, gaussian_sigma,
                              laplace_mechanism, laplace_privacy_loss, laplace_scale,
                              mean_sensitivity, textbook_float_laplace)

dp_gauss = pytest.importorskip("dp_accounting.gaussian_mechanism")

EPS_GRID = np.geomspace(0.05, 20, 15)
DELTA_GRID = np.geomspace(1e-12, 1e-2, 11)


# --- calibration -------------------------------------------------------------------------------

def test_published_sigmas():
    # Balle & Wang (2018): analytic 3.7306 vs classic 4.8448 at ε=1, δ=1e-5, Δ=1 (classic at ε→1).
    assert gaussian_sigma(1.0, 1e-5, method="analytic") == pytest.approx(3.7306, abs=5e-5)
    classic = 1.0 * math.sqrt(2 * math.log(1.25 / 1e-5)) / 1.0
    assert classic == pytest.approx(4.8448, abs=5e-5)
    assert gaussian_sigma(0.999999, 1e-5) == pytest.approx(classic / 0.999999, rel=1e-12)


def test_analytic_matches_dp_accounting_on_grid():
    eps, delta = np.meshgrid(EPS_GRID, DELTA_GRID)
    ours = gaussian_sigma(eps, delta, method="analytic")
    ref = np.vectorize(dp_gauss.get_sigma_gaussian)(eps, delta)
    np.testing.assert_allclose(ours, ref, rtol=1e-6)


@pytest.mark.parametrize("sens", [0.01, 1.0, 7.5])
def test_sigma_scales_linearly_with_sensitivity(sens):
    for method, eps in (("analytic", 3.0), ("classic", 0.5)):
        assert gaussian_sigma(eps, 1e-6, sens, method) == pytest.approx(
            sens * gaussian_sigma(eps, 1e-6, 1.0, method), rel=1e-9)


def test_analytic_sigma_is_tight_and_never_above_classic():
    eps, delta = np.meshgrid(np.geomspace(0.05, 0.99, 8), DELTA_GRID)
    analytic = gaussian_sigma(eps, delta, method="analytic")
    assert np.all(analytic < gaussian_sigma(eps, delta, method="classic"))
    # δ(σ) equals the target at the calibrated σ and exceeds it 0.1% below (tightness).
    np.testing.assert_allclose(gaussian_delta(analytic, eps), delta, rtol=1e-6)
    assert np.all(gaussian_delta(analytic * 0.999, eps) > delta)


def test_delta_and_epsilon_agree_with_dp_accounting():
    for sigma in (0.5, 1.0, 3.0, 20.0):
        for d in (1e-10, 1e-5, 1e-2):
            ref = dp_gauss.get_epsilon_gaussian(sigma, d)
            assert gaussian_epsilon(sigma, d) == pytest.approx(ref, rel=1e-6, abs=1e-9)
    # Theorem 8 is symmetric in the sense δ(ε) → 0 as ε grows, 1 − ... at ε = 0: δ = 2Φ(Δ/2σ) − 1.
    assert gaussian_delta(2.0, 0.0) == pytest.approx(2 * stats.norm.cdf(0.25) - 1, rel=1e-12)


# --- δ(ε), σ and ε(δ) where Δ/σ is tiny or huge (references: mpmath, closed forms) ------------

def _exact_log_delta(sigma, eps, sens=1.0):
    """log δ(ε) of N(0, σ²) on sensitivity Δ (Balle & Wang 2018, Thm 8) in mpmath, with enough
    digits to resolve Φ(a) − e^ε·Φ(b), whose two terms agree to about |log10(Δ/σ)| digits."""
    mu = mpmath.mpf(sens) / mpmath.mpf(sigma)
    digits = 50 + max(0, -int(mpmath.log10(mu)))
    with mpmath.workdps(digits):
        mu, e = mpmath.mpf(sens) / mpmath.mpf(sigma), mpmath.mpf(eps)
        d = mpmath.ncdf(mu / 2 - e / mu) - mpmath.exp(e) * mpmath.ncdf(-mu / 2 - e / mu)
        return mpmath.log(d) if d > 0 else -mpmath.inf


@pytest.mark.parametrize("sigma, eps", [(1.032008862e13, 1e-12), (3.593352611e15, 1e-300),
                                        (2.535769055e13, 1e-12), (1e10, 1e-9), (1e15, 0.0)])
def test_gaussian_delta_tiny_ratio_is_not_rounded_down(sigma, eps):
    """Δ/σ ≲ 1e-11 made ε + log Φ(b) − log Φ(a) cancel to δ = 0 (exact 2.6e-39 at σ = 1.03e13)."""
    got = math.log(gaussian_delta(sigma, eps))
    assert 0.0 <= got - float(_exact_log_delta(sigma, eps)) <= 1e-11


def test_gaussian_delta_never_below_exact_and_accurate():
    """δ is never below mpmath's and ≤ 1e-9 above it for Δ/σ ∈ [1e-290, 1e3], a ∈ [−37, 1]."""
    # the old form was below: by 1e-7 (relative) at Δ/σ = 2.4e-6, and δ = 0 at Δ/σ = 1e-290
    for mu in np.geomspace(1e-290, 1e3, 35):
        for a in (1.0, 0.0, -0.5, -2.0, -6.0, -15.0, -30.0, -37.0):
            eps = mu * (mu / 2 - a)                       # a = μ/2 − ε/μ
            if eps < 0:
                continue
            exact = _exact_log_delta(1.0 / mu, eps)
            if exact < math.log(1e-300):
                continue
            err = float(mpmath.log(gaussian_delta(1.0 / mu, eps)) - exact)
            assert 0.0 <= err <= 1e-9, (mu, eps, err)


@pytest.mark.parametrize("eps, delta", [(1e-12, 1e-100), (1e-300, 1e-100), (1e-12, 1e-300),
                                        (0.01, 1e-300), (1e-6, 1e-12), (1e-12, 1e-12)])
@pytest.mark.parametrize("sens", [1.0, 1e-200, 1e200])
def test_analytic_sigma_meets_delta_checked_with_mpmath(eps, delta, sens):
    """σ meets δ by mpmath and is tight (σ(1e-12, 1e-100) was 1.03e13, exact δ 2.6e-39)."""
    sigma = gaussian_sigma(eps, delta, sens, method="analytic")
    log_target = mpmath.log(delta)
    assert _exact_log_delta(sigma, eps, sens) <= log_target
    assert _exact_log_delta(sigma * (1 - 1e-6), eps, sens) > log_target


@pytest.mark.parametrize("eps", [1e30, 1e100, 1e300])
def test_analytic_sigma_at_huge_epsilon_meets_delta_and_is_tight(eps):
    """σ meets δ (mpmath) and is Δ/√(2ε) to 1e-13 (an overflow made it 2.7e4× too big at 1e300)."""
    # a = μ/2 − ε/μ = −Φ^{-1}(1 − δ) + o(1) at the optimum, so μ = √(2ε) (1 + O(ε^{-1/2}))
    sigma = gaussian_sigma(eps, 1e-5, method="analytic")
    assert sigma == pytest.approx(1.0 / math.sqrt(2 * eps), rel=1e-13)
    with mpmath.workdps(400):
        mu, e = 1 / mpmath.mpf(sigma), mpmath.mpf(eps)
        exact = mpmath.ncdf(mu / 2 - e / mu) - mpmath.exp(e) * mpmath.ncdf(-mu / 2 - e / mu)
    assert exact <= 1e-5


@pytest.mark.parametrize("sigma", [1e-31, 1e-40, 1e-100])
def test_gaussian_epsilon_is_not_capped_at_2_to_200(sigma):
    """ε is the closed form μ²/2 to 1e-12, not 2^200 ≈ 1.6e60 (σ = 1e-31: exact 5e61)."""
    # With μ = 1/σ the exact ε lies in (μ²/2, μ²/2 + 5μ): δ(μ²/2) = 1/2 − e^{μ²/2}Φ(−μ)
    # ≥ 1/2 − 1/(μ√(2π)) > 1e-5 (Mills ratio) and δ(μ²/2 + 5μ) ≤ Φ(−5) < 1e-5 (Thm 8).
    half = 0.5 / sigma**2
    assert half <= gaussian_epsilon(sigma, 1e-5) <= half * (1 + 1e-12)
    assert half <= gdp_epsilon(1.0 / sigma, 1e-5) <= half * (1 + 1e-12)


def test_gaussian_epsilon_is_inf_beyond_the_doubles():
    """σ = 1e-200: the exact ε > μ²/2 = 5e399 exceeds every double, so inf, not a finite ε."""
    assert gaussian_epsilon(1e-200, 1e-5) == math.inf
    np.testing.assert_array_equal(gaussian_epsilon([1e-200, 1.0], 1e-5) == math.inf, [True, False])


def test_classic_refuses_epsilon_at_least_one():
    with pytest.raises(ValueError, match=r"epsilon.*\(0, 1\).*method='analytic'"):
        gaussian_sigma(1.0, 1e-5)
    with pytest.raises(ValueError, match="analytic"):
        gaussian_sigma(np.array([0.5, 2.0]), 1e-5, method="classic")


def test_laplace_scale_and_mean_sensitivity():
    assert laplace_scale(0.5, 2.0) == 4.0
    np.testing.assert_allclose(laplace_scale([1.0, 2.0]), [1.0, 0.5])
    assert mean_sensitivity(100, 1.0) == 0.02     # seed 001: 2c/n under replacement


# --- the output law: KS tests with power checks -------------------------------------------------

N = 100_000


def test_laplace_samples_pass_ks():
    eps, sens = 0.7, 2.0
    out = laplace_mechanism(np.full(N, 3.0), eps, sens, rng=11)
    assert stats.kstest(out, stats.laplace(loc=3.0, scale=sens / eps).cdf).pvalue > 1e-4
    # E|Z| = b and P(|Z| ≥ t b) = e^{-t} (Dwork & Roth 2014, Fact 3.7).
    b = sens / eps
    z = np.abs(out - 3.0)
    assert abs(z.mean() - b) < 5 * b / math.sqrt(N)
    assert stats.binomtest(int((z >= 2 * b).sum()), N, math.exp(-2)).pvalue > 1e-4


def test_ks_detects_wrong_laplace_scale():
    # Power: noise drawn with a scale 5% too small fails the same test at the same level.
    out = 3.0 + np.random.default_rng(11).laplace(0, 0.95 * 2.0 / 0.7, N)
    assert stats.kstest(out, stats.laplace(loc=3.0, scale=2.0 / 0.7).cdf).pvalue < 1e-4


def test_gaussian_samples_pass_ks():
    eps, delta, sens = 1.0, 1e-5, 0.5
    sigma = gaussian_sigma(eps, delta, sens, "analytic")
    out = gaussian_mechanism(np.zeros(N), eps, delta, sens, rng=12)
    assert stats.kstest(out, stats.norm(scale=sigma).cdf).pvalue > 1e-4
    wrong = np.random.default_rng(12).normal(0, 0.95 * sigma, N)
    assert stats.kstest(wrong, stats.norm(scale=sigma).cdf).pvalue < 1e-4


def test_vector_queries_keep_shape_and_are_reproducible():
    v = np.arange(6.0).reshape(2, 3)
    a = laplace_mechanism(v, 1.0, rng=5)
    assert a.shape == (2, 3)
    np.testing.assert_array_equal(a, laplace_mechanism(v, 1.0, rng=np.random.default_rng(5)))
    assert isinstance(gaussian_mechanism(1.0, 1.0, 1e-5, rng=0), float)


# --- empirical privacy loss on neighbouring inputs ---------------------------------------------

def _empirical_max_log_ratio(a, b, bins):
    ca, _ = np.histogram(a, bins)
    cb, _ = np.histogram(b, bins)
    keep = (ca >= 2_000) & (cb >= 2_000)   # bins with enough mass for a ±5% ratio estimate
    return np.max(np.abs(np.log(ca[keep] / cb[keep])))


def test_laplace_empirical_privacy_loss_within_epsilon():
    eps, sens, n = 1.0, 1.0, 400_000
    rng = np.random.default_rng(21)
    a = laplace_mechanism(np.zeros(n), eps, sens, rng=rng)   # f(D) = 0
    b = laplace_mechanism(np.ones(n), eps, sens, rng=rng)    # f(D') = Δ
    bins = np.linspace(-4, 5, 46)
    # Every bin's log-ratio stays below ε up to sampling error (±0.1 at ≥ 2,000 counts).
    assert _empirical_max_log_ratio(a, b, bins) < eps + 0.1
    # Power: the same estimate on noise with half the scale sees a loss near 2ε.
    a2 = laplace_mechanism(np.zeros(n), 2 * eps, sens, rng=rng)
    b2 = laplace_mechanism(np.ones(n), 2 * eps, sens, rng=rng)
    assert _empirical_max_log_ratio(a2, b2, bins) > eps + 0.5


def test_laplace_privacy_loss_is_bounded_by_epsilon():
    o = np.linspace(-50, 50, 10_001)
    loss = laplace_privacy_loss(o, laplace_scale(0.8, 2.0), 2.0)
    assert loss.max() == pytest.approx(0.8) and loss.min() == pytest.approx(-0.8)


def test_gaussian_empirical_delta_matches_theorem():
    # δ(ε) = E_D[(1 − e^{ε − L})_+] (Balle & Wang 2018, Thm 5): estimate it from samples of o ~ M(D).
    eps, delta, n = 1.0, 1e-2, 1_000_000
    sigma = gaussian_sigma(eps, delta, method="analytic")
    o = np.random.default_rng(31).normal(0, sigma, n)
    vals = np.maximum(0, 1 - np.exp(eps - gaussian_privacy_loss(o, sigma)))
    est, se = vals.mean(), vals.std() / math.sqrt(n)
    assert abs(est - delta) < 4 * se
    # Power: the classic-with-ε/2 mistake (σ calibrated for 2ε) has a visibly larger δ.
    s_small = gaussian_sigma(2 * eps, delta, method="analytic")
    o2 = np.random.default_rng(32).normal(0, s_small, n)
    vals2 = np.maximum(0, 1 - np.exp(eps - gaussian_privacy_loss(o2, s_small)))
    assert vals2.mean() - 4 * vals2.std() / math.sqrt(n) > delta


def test_privacy_loss_law_is_normal_eta_2eta():
    sigma = 1.7
    eta = 1 / (2 * sigma ** 2)
    loss = gaussian_privacy_loss(np.random.default_rng(4).normal(0, sigma, N), sigma)
    assert stats.kstest(loss, stats.norm(eta, math.sqrt(2 * eta)).cdf).pvalue > 1e-4


# --- Mironov (2012) -------------------------------------------------------------------------

def test_float_laplace_reachability_is_exact_and_leaks():
    y0 = textbook_float_laplace(0.0, 1.0, 5_000, rng=8)
    assert float_laplace_reachable(y0, 0.0, 1.0).all()         # own input: always reachable
    leaked = ~float_laplace_reachable(y0, 1.0, 1.0)
    assert leaked.mean() > 0.3   # a large share of outputs rule out the neighbour entirely


# --- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    (dict(epsilon=0.0, delta=1e-5), r"epsilon must be in \(0, inf\), got 0.0"),
    (dict(epsilon=-1.0, delta=1e-5), r"epsilon.*-1.0"),
    (dict(epsilon=float("nan"), delta=1e-5), r"epsilon.*nan"),
    (dict(epsilon=0.5, delta=0.0), r"delta must be in \(0, 1\), got 0.0"),
    (dict(epsilon=0.5, delta=1.0), r"delta must be in \(0, 1\), got 1.0"),
    (dict(epsilon=0.5, delta=float("nan")), r"delta.*nan"),
    (dict(epsilon=0.5, delta=1e-5, sensitivity=-1.0), r"sensitivity must be in \(0, inf\)"),
    (dict(epsilon=0.5, delta=1e-5, method="exact"), r"method must be one of"),
])
def test_gaussian_sigma_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gaussian_sigma(**kwargs)


def test_mechanisms_bad_input():
    with pytest.raises(ValueError, match=r"epsilon must be in \(0, inf\)"):
        laplace_mechanism(1.0, 0.0, rng=0)
    with pytest.raises(ValueError, match=r"sensitivity must be in \(0, inf\), got -2"):
        laplace_mechanism(1.0, 1.0, -2, rng=0)
    with pytest.raises(ValueError, match=r"value must be finite"):
        laplace_mechanism([1.0, float("nan")], 1.0, rng=0)
    with pytest.raises(ValueError, match="rng"):
        gaussian_mechanism(1.0, 1.0, 1e-5, rng=None)
    with pytest.raises(ValueError, match=r"sigma must be in \(0, inf\)"):
        gaussian_delta(0.0, 1.0)
    with pytest.raises(ValueError, match=r"epsilon must be in \[0, inf\)"):
        gaussian_delta(1.0, -0.5)
    with pytest.raises(ValueError, match=r"n must be an integer >= 1"):
        mean_sensitivity(0, 1.0)
