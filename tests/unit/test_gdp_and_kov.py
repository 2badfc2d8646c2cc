"""Gaussian DP helpers and the KOV closed form of advanced composition."""
import math

import numpy as np
import pytest

from dplib.accounting import (PLDAccountant, advanced_composition, clt_mu, gdp_epsilon,
                              optimal_composition_epsilon)
from dplib.mechanisms import gaussian_epsilon


def test_gdp_of_composed_gaussians_is_exact():
    # k Gaussian mechanisms with noise σ (Δ = 1) are exactly sqrt(k)/σ-GDP: same ε as one
    # Gaussian with σ/sqrt(k) (Dong, Roth & Su 2022, Sec. 3).
    k, sigma, delta = 100, 10.0, 1e-5
    assert gdp_epsilon(math.sqrt(k) / sigma, delta) == pytest.approx(
        gaussian_epsilon(sigma / math.sqrt(k), delta), rel=1e-12)
    pld = PLDAccountant().step(noise_multiplier=sigma, sample_rate=1.0, num_steps=k)
    assert pld.get_epsilon(delta) >= gdp_epsilon(math.sqrt(k) / sigma, delta) - 1e-9
    assert pld.get_epsilon(delta) == pytest.approx(gdp_epsilon(math.sqrt(k) / sigma, delta),
                                                   rel=2e-3)


def test_clt_mu_formula_and_that_it_is_only_an_approximation():
    q, sigma, steps = 256 / 60000, 1.1, 14062
    mu = clt_mu(q, sigma, steps)
    assert mu == pytest.approx(q * math.sqrt(steps * (math.exp(1 / sigma**2) - 1)), rel=1e-14)
    # For this DP-SGD run the CLT reports a smaller ε than the PLD upper bound.
    pld = PLDAccountant().step(noise_multiplier=sigma, sample_rate=q, num_steps=steps)
    assert gdp_epsilon(mu, 1e-5) < pld.get_epsilon(1e-5)


@pytest.mark.parametrize("eps0", [0.01, 0.1, 0.5, 1.0, 2.0])
@pytest.mark.parametrize("k", [1, 10, 100, 1000])
def test_kov_closed_form_is_an_upper_bound_and_tighter_than_drv(eps0, k):
    slack = 1e-6
    kov = advanced_composition(eps0, 0.0, k, slack, form="kov")[0]
    drv = advanced_composition(eps0, 0.0, k, slack)[0]
    assert optimal_composition_epsilon(eps0, 0.0, k, slack) <= kov + 1e-9 <= drv + 1e-9
    assert kov == pytest.approx(eps0 * math.sqrt(2 * k * math.log(1 / slack))
                                + k * eps0 * math.expm1(eps0) / (math.exp(eps0) + 1), rel=1e-12)


def test_bad_input():
    with pytest.raises(ValueError, match="form"):
        advanced_composition(1.0, 0.0, 10, 1e-6, form="seed")
    with pytest.raises(ValueError, match="mu"):
        gdp_epsilon(0.0, 1e-5)
    with pytest.raises(ValueError, match="sample_rate"):
        clt_mu(0.0, 1.0, 10)
    with pytest.raises(ValueError, match="noise_multiplier"):
        clt_mu(0.1, np.nan, 10)


def test_group_privacy_matches_the_geometric_walk():
    from dplib.accounting import group_privacy
    eps, delta, k = 1.0, 1e-5, 4
    e, d = group_privacy(eps, delta, k)
    assert e == 4.0
    assert d == pytest.approx(delta * sum(math.exp(j * eps) for j in range(k)), rel=1e-12)
    assert group_privacy(eps, delta, 1) == pytest.approx((eps, delta))
    with pytest.raises(ValueError, match="k must be an integer"):
        group_privacy(1.0, 1e-5, 0)


def test_amplified_advanced_composition_is_a_loose_upper_bound():
    from dplib.accounting import amplified_advanced_composition, amplified_epsilon
    q, sigma, steps, delta = 256 / 60000, 1.1, 14062, 1e-5
    eps = amplified_advanced_composition(sigma, q, steps, delta)
    # Recompute the recipe by hand from its three published pieces.
    d0 = delta / (2 * steps * q)
    e1 = float(amplified_epsilon(gaussian_epsilon(sigma, d0), q))
    assert eps == pytest.approx(advanced_composition(e1, q * d0, steps, delta / 2)[0], rel=1e-12)
    pld = PLDAccountant().step(noise_multiplier=sigma, sample_rate=q, num_steps=steps)
    assert eps > 4 * pld.get_epsilon(delta)
    with pytest.raises(ValueError, match="num_steps"):
        amplified_advanced_composition(sigma, q, 0, delta)
