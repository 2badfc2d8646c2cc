"""Amplification by subsampling and the without-replacement / replace-one accounting.

Oracles: closed forms (Balle, Barthe & Gaboardi 2018; the Gaussian mechanism's exact δ(ε)) and
Google's dp-accounting (SampledWithoutReplacementDpEvent with REPLACE_ONE for RDP, the PLD
accountant with NeighboringRelation.REPLACE_ONE for Poisson-subsampled Gaussians).
"""
import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant as dpa_pld
from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp
from scipy.stats import norm

from dplib.accounting import (DEFAULT_ORDERS, PLDAccountant, RDPAccountant, amplified_delta,
                              amplified_epsilon, amplified_epsilon_bound, amplify, gdp_epsilon,
                              subsampled_gaussian_rdp, wor_gaussian_rdp)

NR = dpa.NeighboringRelation


@pytest.mark.parametrize("eps, q", [(1.0, 0.1), (0.3, 0.01), (5.0, 0.5), (2.0, 1.0)])
def test_amplification_closed_form(eps, q):
    e, d = amplify(eps, 1e-6, q)
    assert e == pytest.approx(math.log(1 + q * (math.exp(eps) - 1)), rel=1e-14)
    assert d == pytest.approx(q * 1e-6, rel=1e-15)


def test_amplification_is_accurate_at_extremes():
    # tiny γε: log1p(γ(e^ε − 1)) ≈ γε without cancellation
    assert amplified_epsilon(1e-12, 1e-6) == pytest.approx(1e-18, rel=1e-9)
    # huge ε: ε + log γ + log1p((1−γ)e^{−ε}/γ), no overflow
    assert amplified_epsilon(1000.0, 0.01) == pytest.approx(1000 + math.log(0.01), rel=1e-14)
    assert amplified_epsilon(0.0, 0.3) == 0.0
    v = amplified_epsilon(np.array([0.1, 1.0, 31.0]), 0.2)
    assert v.shape == (3,) and np.all(np.diff(v) > 0)
    assert amplified_delta(np.array([1e-5, 1e-3]), 0.1) == pytest.approx([1e-6, 1e-4])


def test_two_q_epsilon_bound_holds_on_zero_one_and_is_refused_beyond():
    eps = np.linspace(0, 1, 201)
    for q in (1e-4, 0.01, 0.3, 1.0):
        assert np.all(amplified_epsilon(eps, q) <= amplified_epsilon_bound(eps, q) + 1e-15)
    with pytest.raises(ValueError, match=r"epsilon must be in \[0, 1\]"):
        amplified_epsilon_bound(1.5, 0.1)


@pytest.mark.parametrize("sigma", [0.7, 1.1, 2.0, 5.0])
@pytest.mark.parametrize("q", [1e-3, 0.01, 0.1, 0.5])
def test_wor_gaussian_rdp_matches_dp_accounting(sigma, q):
    """Per order, WBK 2019 Thm 27 against dp-accounting's implementation of the same theorem."""
    ours = wor_gaussian_rdp(DEFAULT_ORDERS, sigma, q)
    ref = dpa_rdp._compute_rdp_sample_wor_gaussian(q, sigma, DEFAULT_ORDERS)
    np.testing.assert_allclose(ours, ref, rtol=1e-9)


def test_wor_gaussian_rdp_is_exact_where_float_differences_cancel():
    """σ = 10: the forward differences cancel by ~100 digits at α ≈ 200. dplib sums them in
    multiple precision; dp-accounting's float64 recursion is then larger (looser, by round-off).
    Small orders still agree; ours is never above theirs."""
    o = np.array([2.0, 3, 8, 16, 64, 200, 256])
    ours = wor_gaussian_rdp(o, 10.0, 0.5)
    ref = dpa_rdp._compute_rdp_sample_wor_gaussian(0.5, 10.0, o)
    np.testing.assert_allclose(ours[:4], ref[:4], rtol=1e-9)
    assert np.all(ours <= ref * (1 + 1e-9))


def test_wor_gaussian_rdp_special_cases():
    o = np.array([1.5, 2.0, 7.25, 40.0])
    np.testing.assert_allclose(wor_gaussian_rdp(o, 1.3, 1.0), o / (2 * 1.3**2))
    # fractional orders interpolate the log-moment between neighbouring integers (WBK Cor. 10)
    r = wor_gaussian_rdp(np.array([7.0, 7.25, 8.0]), 1.0, 0.05)
    assert r[1] * 6.25 == pytest.approx(0.75 * r[0] * 6 + 0.25 * r[2] * 7, rel=1e-12)


@pytest.mark.parametrize("sigma, n, m, steps", [(1.1, 60000, 256, 14062), (0.8, 1000, 10, 500),
                                                 (2.0, 500, 100, 30)])
def test_rdp_accountant_without_replacement_matches_dp_accounting(sigma, n, m, steps):
    # dp-accounting's RDP event takes std / (replace-one sensitivity 2C); dplib takes std / C
    ref = dpa_rdp.RdpAccountant(orders=list(DEFAULT_ORDERS), neighboring_relation=NR.REPLACE_ONE)
    ref.compose(dpa.SampledWithoutReplacementDpEvent(n, m, dpa.GaussianDpEvent(sigma / 2)), steps)
    acc = RDPAccountant(sampling="without_replacement", neighboring="replace_one")
    acc.step(noise_multiplier=sigma, sample_rate=m / n, num_steps=steps)
    assert acc.get_epsilon(1e-5) == pytest.approx(ref.get_epsilon(1e-5), rel=1e-6)


def test_default_accountants_are_unchanged_by_the_new_keywords():
    a = RDPAccountant().step(noise_multiplier=1.0, sample_rate=0.01, num_steps=100)
    b = RDPAccountant(sampling="poisson", neighboring="add_remove").step(
        noise_multiplier=1.0, sample_rate=0.01, num_steps=100)
    np.testing.assert_array_equal(a.rdp, b.rdp)
    np.testing.assert_array_equal(a.rdp, 100 * subsampled_gaussian_rdp(DEFAULT_ORDERS, 1.0, 0.01))


@pytest.mark.parametrize("sigma, q, steps", [(1.1, 256 / 60000, 14062), (0.8, 0.01, 1000),
                                             (2.0, 0.1, 100), (0.5, 0.05, 50), (3.0, 0.3, 20)])
@pytest.mark.slow
def test_pld_replace_one_matches_dp_accounting(sigma, q, steps):
    ref = dpa_pld.PLDAccountant(NR.REPLACE_ONE, value_discretization_interval=1e-4)
    ref.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps)
    acc = PLDAccountant(neighboring="replace_one").step(noise_multiplier=sigma, sample_rate=q,
                                                        num_steps=steps)
    eps = acc.get_epsilon(1e-5)
    assert eps == pytest.approx(ref.get_epsilon(1e-5), rel=2e-3)
    assert acc.get_delta(eps) == pytest.approx(1e-5, rel=2e-2)
    # replace-one is the stronger relation: never cheaper than add/remove
    ar = PLDAccountant().step(noise_multiplier=sigma, sample_rate=q, num_steps=steps)
    assert eps > ar.get_epsilon(1e-5)


def test_pld_replace_one_full_batch_is_gaussian_with_sensitivity_two():
    """q = 1: T steps are one Gaussian with μ = 2√T/σ; δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)
    (Balle & Wang 2018, Thm 8)."""
    sigma, steps = 3.0, 4
    mu = 2 * math.sqrt(steps) / sigma
    acc = PLDAccountant(neighboring="replace_one").step(noise_multiplier=sigma, sample_rate=1.0,
                                                        num_steps=steps)
    for eps in (0.5, 1.0, 2.0):
        exact = norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)
        assert acc.get_delta(eps) == pytest.approx(exact, rel=1e-3)
        assert acc.get_delta(eps) >= exact * (1 - 1e-9)


@pytest.mark.parametrize("steps", [1, 10])
@pytest.mark.parametrize("sigma", [1.0, 2.0, 4.0])
def test_replace_one_accountants_share_one_noise_multiplier_unit(sigma, steps):
    """The unit trap is gone: for noise std s and clipping norm C every accountant takes
    σ = s/C. At q = 1 the run is one Gaussian with μ = 2√T/σ (replacing a record moves the sum
    by 2C), whose exact ε is gdp_epsilon(μ, δ). RDP-WOR(σ) must be an upper bound close to it
    (RDP → (ε, δ) conversion slack only) and PLD-replace-one(σ) ≈ exact; if either convention
    drifted by the factor 2 (as RDP once took s/(2C)), one of these fails."""
    delta = 1e-5
    exact = gdp_epsilon(2 * math.sqrt(steps) / sigma, delta)
    for sampling in ("poisson", "without_replacement"):
        rdp = RDPAccountant(sampling=sampling, neighboring="replace_one").step(
            noise_multiplier=sigma, sample_rate=1.0, num_steps=steps).get_epsilon(delta)
        pld = PLDAccountant(sampling=sampling, neighboring="replace_one").step(
            noise_multiplier=sigma, sample_rate=1.0, num_steps=steps).get_epsilon(delta)
        assert exact * (1 - 1e-9) <= rdp <= 1.25 * exact
        assert exact * (1 - 1e-9) <= pld <= 1.01 * exact


@pytest.mark.parametrize("call, match", [
    (lambda: amplified_epsilon(1.0, 0.0), "sample_rate"),
    (lambda: amplified_epsilon(1.0, 1.2), "sample_rate"),
    (lambda: amplified_epsilon(-0.1, 0.5), "epsilon"),
    (lambda: amplified_epsilon(float("nan"), 0.5), "epsilon"),
    (lambda: amplified_delta(1.5, 0.5), "delta"),
    (lambda: wor_gaussian_rdp([2.0], 0.0, 0.1), "noise_multiplier"),
    (lambda: wor_gaussian_rdp([1.0], 1.0, 0.1), "orders"),
    (lambda: RDPAccountant(sampling="without_replacement"), "sampling, neighboring"),
    (lambda: RDPAccountant(neighboring="replace_one").step(noise_multiplier=1.0,
                                                           sample_rate=0.1), "replace_one"),
    (lambda: RDPAccountant(sampling="shuffle", neighboring="replace_one"), "sampling"),
    (lambda: PLDAccountant(neighboring="swap"), "neighboring"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
