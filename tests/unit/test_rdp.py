"""RDP of the (subsampled) Gaussian and the RDPAccountant.

Oracles: Opacus' RDP analysis (same order grid and conversion), direct numerical integration of the
Rényi divergence (scipy.integrate.quad) and closed forms. Each test fails if a constant is off (a
wrong exponent (i²−i)/(2σ²), a missing log((α−1)/α) term, or a wrong sign in the fractional series).
"""
import math

import numpy as np
import pytest
from scipy import integrate

from dplib.accounting import (DEFAULT_ORDERS, OPACUS_ORDERS, RDPAccountant, gaussian_rdp,
                              rdp_to_delta, rdp_to_epsilon, subsampled_gaussian_rdp)

# (q, σ, T, ε at δ=1e-5 published by Opacus' accountant).
CASES = [(256 / 60000, 1.1, 14062, 2.5966), (0.01, 1.0, 1000, 2.1014), (0.1, 0.5, 1000, 136.05)]


def _log_a_quad(alpha, q, sigma, direction="remove"):
    """log E_{μ0}[(μ/μ0)^α] (remove) or log E_{μ}[(μ0/μ)^α] (add) by adaptive quadrature."""
    log_mu0 = lambda z: -z * z / (2 * sigma**2) - math.log(sigma * math.sqrt(2 * math.pi))
    # log(μ/μ0) = log(1 − q + q e^{(2z−1)/(2σ²)}), in log space so large z cannot overflow.
    log_ratio = lambda z: np.logaddexp(math.log1p(-q), math.log(q) + (2 * z - 1) / (2 * sigma**2))
    power = alpha if direction == "remove" else 1 - alpha
    g = lambda z: log_mu0(z) + power * log_ratio(z)
    lo, hi = -40 * sigma - 10, 40 * sigma + alpha + 10
    pts = np.linspace(lo, hi, 21)
    shift = float(np.max(g(np.linspace(lo, hi, 4001))))   # keeps exp() in range when A_α is huge
    f = lambda z: math.exp(g(z) - shift)
    val = sum(integrate.quad(f, a, b, epsabs=0, epsrel=1e-13, limit=200)[0]
              for a, b in zip(pts[:-1], pts[1:]))
    return math.log(val) + shift


@pytest.mark.parametrize("q,sigma,T,published", CASES)
def test_epsilon_matches_opacus(q, sigma, T, published):
    from opacus.accountants.analysis import rdp as opacus_rdp
    acc = RDPAccountant(orders=OPACUS_ORDERS).step(noise_multiplier=sigma, sample_rate=q,
                                                   num_steps=T)
    eps = acc.get_epsilon(1e-5)
    ref_rdp = opacus_rdp.compute_rdp(q=q, noise_multiplier=sigma, steps=T, orders=list(OPACUS_ORDERS))
    ref, _ = opacus_rdp.get_privacy_spent(orders=list(OPACUS_ORDERS), rdp=ref_rdp, delta=1e-5)
    assert eps == pytest.approx(ref, rel=1e-6)
    assert eps == pytest.approx(published, abs=6e-3 * published)
    # Orders that matter (RDP not astronomically large) agree order by order too.
    useful = ref_rdp < 1e4
    np.testing.assert_allclose(acc.rdp[useful], ref_rdp[useful], rtol=1e-6)


@pytest.mark.parametrize("q,sigma", [(0.01, 1.0), (0.1, 0.5), (256 / 60000, 1.1), (0.5, 2.0),
                                     (1e-4, 20.0)])
@pytest.mark.parametrize("alpha", [2, 3, 8, 32])
def test_integer_orders_match_numerical_integration(q, sigma, alpha):
    got = subsampled_gaussian_rdp(alpha, sigma, q)[0] * (alpha - 1)
    ref = _log_a_quad(alpha, q, sigma)
    assert got == pytest.approx(ref, rel=1e-8, abs=1e-14)


@pytest.mark.parametrize("q,sigma", [(0.01, 1.0), (0.1, 0.5), (0.3, 3.0)])
@pytest.mark.parametrize("alpha", [1.1, 1.5, 2.5, 7.3])
def test_fractional_orders_match_numerical_integration(q, sigma, alpha):
    got = subsampled_gaussian_rdp(alpha, sigma, q)[0] * (alpha - 1)
    assert got == pytest.approx(_log_a_quad(alpha, q, sigma), rel=1e-8, abs=1e-14)


@pytest.mark.parametrize("alpha", [1.5, 5, 16])
def test_remove_direction_dominates_add(alpha):
    # MTZ 2019 §3.3: A_α (mixture vs N(0,σ²)) ≥ the add direction, so r(α) covers both.
    for q, sigma in [(0.1, 0.5), (0.5, 1.5)]:
        assert _log_a_quad(alpha, q, sigma, "add") <= _log_a_quad(alpha, q, sigma) + 1e-12


def test_q_one_is_plain_gaussian_and_small_q_is_quadratic():
    orders = np.array([1.5, 2.0, 10.0, 64.0])
    np.testing.assert_allclose(subsampled_gaussian_rdp(orders, 1.3, 1.0), orders / (2 * 1.3**2))
    np.testing.assert_allclose(gaussian_rdp(orders, 1.3), orders / (2 * 1.3**2))
    # Tiny q, large σ: r(α) ≈ q² α (e^{1/σ²} − 1)/2 (MTZ 2019, the i = 2 term); log-space keeps it.
    r = subsampled_gaussian_rdp([2.0, 3.0], 20.0, 1e-6)
    approx = 1e-12 * np.array([2.0, 3.0]) * math.expm1(1 / 400) / 2
    np.testing.assert_allclose(r, approx, rtol=1e-4)
    assert np.all(r > 0)


def test_conversions():
    orders = np.array([2.0, 8.0, 32.0])
    rdp = np.array([0.1, 0.4, 2.0])
    d = 1e-5
    classic = rdp + math.log(1 / d) / (orders - 1)
    assert rdp_to_epsilon(orders, rdp, d, method="classic") == (pytest.approx(classic.min()), 8.0)
    improved = classic + np.log((orders - 1) / orders) - np.log(orders) / (orders - 1)
    eps, _ = rdp_to_epsilon(orders, rdp, d)
    assert eps == pytest.approx(improved.min()) and eps < classic.min()
    # get_delta inverts get_epsilon (at the optimal order).
    assert rdp_to_delta(orders, rdp, eps)[0] == pytest.approx(d, rel=1e-9)
    assert rdp_to_delta(orders, rdp, eps, method="classic")[0] > d


def test_accountant_heterogeneous_and_chainable():
    a = RDPAccountant()
    assert a.step(noise_multiplier=1.0, sample_rate=0.01, num_steps=300) is a
    a.step(noise_multiplier=2.0, sample_rate=0.05, num_steps=200).step(
        noise_multiplier=1.0, sample_rate=0.01, num_steps=200)
    expected = (500 * subsampled_gaussian_rdp(DEFAULT_ORDERS, 1.0, 0.01)
                + 200 * subsampled_gaussian_rdp(DEFAULT_ORDERS, 2.0, 0.05))
    np.testing.assert_allclose(a.rdp, expected, rtol=1e-12)
    from opacus.accountants import RDPAccountant as OpacusRDP
    o = OpacusRDP()
    o.history = [(1.0, 0.01, 500), (2.0, 0.05, 200)]
    b = RDPAccountant(orders=OPACUS_ORDERS).step(noise_multiplier=1.0, sample_rate=0.01,
                                                 num_steps=500)
    b.step(noise_multiplier=2.0, sample_rate=0.05, num_steps=200)
    assert b.get_epsilon(1e-6) == pytest.approx(o.get_epsilon(1e-6), rel=1e-6)
    d = a.get_delta(a.get_epsilon(1e-6))
    assert d == pytest.approx(1e-6, rel=1e-6)


@pytest.mark.parametrize("call,name", [
    (lambda: subsampled_gaussian_rdp([2, 0.5], 1.0, 0.1), "orders"),
    (lambda: subsampled_gaussian_rdp(1.0, 1.0, 0.1), "orders"),
    (lambda: subsampled_gaussian_rdp(2, 0.0, 0.1), "noise_multiplier"),
    (lambda: subsampled_gaussian_rdp(2, 1.0, 0.0), "sample_rate"),
    (lambda: subsampled_gaussian_rdp(2, 1.0, 1.5), "sample_rate"),
    (lambda: RDPAccountant().step(noise_multiplier=-1, sample_rate=0.1), "noise_multiplier"),
    (lambda: RDPAccountant().step(noise_multiplier=1, sample_rate=0.1, num_steps=0), "num_steps"),
    (lambda: RDPAccountant().step(noise_multiplier=1, sample_rate=0.1).get_epsilon(1.0), "delta"),
    (lambda: RDPAccountant().step(noise_multiplier=1, sample_rate=0.1).get_epsilon(0), "delta"),
    (lambda: RDPAccountant().step(noise_multiplier=1, sample_rate=0.1).get_delta(-1), "epsilon"),
    (lambda: RDPAccountant().get_epsilon(1e-5), "step"),
    (lambda: rdp_to_epsilon([2, 3], [0.1], 1e-5), "rdp"),
    (lambda: rdp_to_epsilon([2], [0.1], 1e-5, method="magic"), "method"),
])
def test_bad_input_names_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def _log_a_mpmath(alpha, q, sigma, dps=60):
    """log A_α by mpmath quadrature at ``dps`` digits, enough to resolve A_α − 1 ≈ 1e-25."""
    import mpmath as mp
    mp.mp.dps = dps
    q_, s_, a_ = mp.mpf(q), mp.mpf(sigma), mp.mpf(alpha)

    def f(z):
        return mp.npdf(z, 0, s_) * ((1 - q_) + q_ * mp.e ** ((2 * z - 1) / (2 * s_ ** 2))) ** a_
    return mp.log(mp.quad(f, [-mp.inf, -10 * s_, 0, 10 * s_, mp.inf]))


@pytest.mark.slow
@pytest.mark.parametrize("q,sigma", [(1e-8, 1000.0), (1e-9, 1e4), (1e-7, 1e4)])
def test_fractional_orders_stay_upper_bounds_below_round_off(q, sigma):
    """A_α − 1 ≈ 1e-22 is below the round-off of the fractional series (terms of size 1): it once
    came out as −1.65e-25 (q = 1e-8, σ = 1000) and made the accountant raise. Now every value is
    ≥ the exact one (mpmath, 60 digits) and at most twice it (the convexity bound's worst case
    in (1, 2) is r(2) = 2/α·r(α))."""
    alpha = np.array([1.1, 1.5, 2.5, 7.3, 10.9])
    got = subsampled_gaussian_rdp(alpha, sigma, q) * (alpha - 1)
    exact = np.array([float(_log_a_mpmath(a, q, sigma)) for a in alpha])
    assert np.all(exact > 0)
    assert np.all(got >= exact * (1 - 1e-12))
    assert np.all(got <= 2 * exact)


@pytest.mark.parametrize("q,sigma", [(0.01, 1.0), (0.1, 0.5), (0.5, 2.0)])
def test_convexity_bound_is_above_the_series(q, sigma):
    """log A_α is convex in α (Hölder): the chord between the integer orders around α lies above
    the exact value, which the series gives to ~1e-13 where it converges."""
    from dplib.accounting.rdp import _log_a_fractional, _log_a_interpolated
    alpha = np.array([1.1, 1.5, 2.5, 4.7, 9.9])
    series = _log_a_fractional(alpha, q, sigma)
    assert np.all(np.isfinite(series))
    assert np.all(_log_a_interpolated(alpha, q, sigma) >= series * (1 - 1e-12))



def test_remembered_curves_are_the_computed_ones_and_cannot_be_changed():
    """subsampled_gaussian_rdp remembers its last curves: a repeated call returns the value the
    unremembered computation gives, as a fresh copy (writing into one does not change the next),
    and the memo stays bounded."""
    from dplib.accounting import rdp as R
    orders = np.array([1.25, 2.0, 3.5, 32.0, 256.0])
    first = R.subsampled_gaussian_rdp(orders, 0.9, 0.02)
    np.testing.assert_array_equal(first, R._subsampled_gaussian_rdp(orders, 0.9, 0.02))
    first[:] = -1.0
    again = R.subsampled_gaussian_rdp(orders, 0.9, 0.02)
    np.testing.assert_array_equal(again, R._subsampled_gaussian_rdp(orders, 0.9, 0.02))
    assert again is not R.subsampled_gaussian_rdp(orders, 0.9, 0.02)
    assert not np.array_equal(R.subsampled_gaussian_rdp(orders, 0.9, 0.03), again)
    for k in range(R._MEMO_SIZE + 5):
        R.subsampled_gaussian_rdp(np.array([2.0]), 1.0 + k / 1000, 0.5)
    assert len(R._MEMO) == R._MEMO_SIZE
