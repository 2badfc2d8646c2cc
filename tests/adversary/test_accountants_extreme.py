"""Extreme but legal accountant inputs: each gets a finite upper bound on ε, in time.

A user controls (σ, q, T, δ). Every legal combination must give an answer that is an *upper*
bound on the optimal ε (a smaller one would certify privacy that is not there), with no
exception, NaN or hang. Each case below once failed: an RDP value of −1.65e-25 raised, the PLD
accountant refused small σ or tiny q with many steps ("needs N grid points"), overflowed at
σ = 0.03, took 15–75 s for q = 1e-6, T = 1e6 and q = 1, T = 1e9, and ``calibrate_noise(...,
accountant="pld")`` failed where ``"rdp"`` answered.

References, each computed by a route independent of the code under test:

* T = 1: the exact hockey-stick ε of one Poisson-subsampled Gaussian step (both add/remove
  directions, mpmath at 40 digits; ``dplib.testing.accountant_stress``);
* q = 1: T Gaussian steps are one Gaussian with σ/√T (Dong, Roth & Su 2022, §3), whose exact
  ε(δ) is Balle & Wang 2018, Thm 8 (:func:`dplib.mechanisms.gaussian_epsilon`);
* the RDP of a tiny-q step to second order in q, log A_α = C(α, 2)·q²·(e^{1/σ²} − 1) + O(q³)
  (Mironov, Talwar & Zhang 2019, §3.3, the binomial expansion of A_α around q = 0);
* dp-accounting's RDP accountant (an independent upper bound: the PLD answer must not exceed it);
* tiny q, many steps: no exact value is cheap there (dp-accounting's PLD returns 0 or
  overflows); the Gaussian-DP central limit (Dong, Roth & Su 2022, §5;
  :func:`dplib.accounting.clt_mu`), accurate when q√T = O(1) and T → ∞, is used as a
  plausibility floor (within 20 %), not as a bound.

The last tests take inputs that once crashed, returned NaN or blamed an internal value
(discrete δ at ε ≥ 710, group privacy and advanced composition past e^709, the amplification
recipe, PLD at T = 1e18, RDP orders of 1e300): each now gets its closed-form or mpmath value
(inf where that exceeds every double) or a ``ValueError`` naming the caller's parameter.

The time bound is 2 s per call, measured with ``time.perf_counter`` around the whole call
(``step`` and the first query, where the composition happens); a call over it is repeated once
and the faster run counts (contention on a shared 2-core machine, not the code, can stall one run).
"""
from __future__ import annotations

import math
import sys
import time
import warnings

import mpmath
import numpy as np
import pytest
from scipy.special import gammaln

from dplib import samplers
from dplib.accounting import (DEFAULT_ORDERS, PLDAccountant, RDPAccountant, advanced_composition,
                              calibrate_noise, clt_mu, gdp_epsilon, group_privacy,
                              rdp_to_epsilon, subsampled_gaussian_rdp, wor_gaussian_rdp)
from dplib.accounting.subsampling import amplified_advanced_composition
from dplib.mechanisms import discrete_gaussian_delta, gaussian_epsilon
from dplib.testing import accountant_stress as S


TIME_BOUND = 2.0      # seconds per call, wall clock
DELTA = 1e-5


def _timed(fn):
    """(fn(), wall seconds); a call over the bound is run once more and the faster run counts, so
    that a moment of contention on a shared machine is not mistaken for a slow call (a slow
    call is slow both times)."""
    t0 = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    if wall >= TIME_BOUND:
        t0 = time.perf_counter()
        out = fn()
        wall = min(wall, time.perf_counter() - t0)
    return out, wall


def _epsilon(kind: str, sigma: float, q: float, steps: int, delta: float = DELTA):
    """(ε, accountant) with the warnings of the call turned into errors."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        acc = RDPAccountant() if kind == "rdp" else PLDAccountant()
        acc.step(noise_multiplier=sigma, sample_rate=q, num_steps=steps)
        return acc.get_epsilon(delta), acc


def _dp_accounting_rdp(sigma: float, q: float, steps: int, delta: float = DELTA) -> float:
    eps = S.dp_accounting_epsilon("rdp", q, sigma, steps, delta, orders=DEFAULT_ORDERS)
    assert eps is not None
    return eps


def test_rdp_tiny_q_huge_sigma_is_a_finite_upper_bound():
    """σ = 1000, q = 1e-8: log A_α ≈ 5e-23·α(α−1) is far below the round-off of the fractional
    series (terms of size 1), which once returned −1.65e-25 and made get_epsilon raise."""
    sigma, q = 1000.0, 1e-8
    (eps, _), dt = _timed(lambda: _epsilon("rdp", sigma, q, 1))
    assert math.isfinite(eps) and dt < TIME_BOUND
    assert eps >= S.exact_epsilon_single_step(q, sigma, DELTA) * (1 - 1e-9)
    # Every order: at least the second-order value, and not absurdly above it.
    alpha = DEFAULT_ORDERS
    r = subsampled_gaussian_rdp(alpha, sigma, q)
    log_binom2 = gammaln(alpha + 1) - gammaln(3) - gammaln(alpha - 1)
    second = np.exp(log_binom2) * q * q * math.expm1(1 / sigma**2) / (alpha - 1)
    assert np.all(r >= second * (1 - 1e-6))
    assert np.all(r <= 2 * second)
    # A billion steps make the tiny per-step values count: finite, in time, and no smaller
    # than the conversion of the second-order values (a lower estimate of the same bound).
    (eps_many, acc), dt = _timed(lambda: _epsilon("rdp", sigma, q, 10**9))
    assert math.isfinite(eps_many) and dt < TIME_BOUND
    assert eps_many >= rdp_to_epsilon(alpha, 10**9 * second * (1 - 1e-6), DELTA)[0]


@pytest.mark.parametrize("sigma", [0.1, 0.03])
def test_pld_small_sigma_single_step(sigma):
    """σ = 0.1 was refused ("needs 206733547 grid points"), σ = 0.03 raised OverflowError."""
    q = 0.01
    (eps, acc), dt = _timed(lambda: _epsilon("pld", sigma, q, 1))
    exact = S.exact_epsilon_single_step(q, sigma, DELTA)
    assert math.isfinite(eps) and dt < TIME_BOUND
    assert eps >= exact * (1 - 1e-9)                       # an upper bound ...
    assert eps <= exact * 1.01 + 1e-3                      # ... and tight: the PLD route worked
    assert eps <= _dp_accounting_rdp(sigma, q, 1) * (1 + 1e-9)


@pytest.mark.parametrize("q,steps", [(1e-7, 10**7), (1e-6, 10**6)])
def test_pld_tiny_q_many_steps(q, steps):
    """σ = 0.6: q = 1e-7, T = 1e7 was refused; q = 1e-6, T = 1e6 took 15–23 s. RDP is 100×
    looser here (ε ≈ 0.8–1.0 against ≈ 0.01), so the PLD route has to work, in time."""
    sigma = 0.6
    (eps, acc), dt = _timed(lambda: _epsilon("pld", sigma, q, steps))
    assert math.isfinite(eps) and dt < TIME_BOUND
    assert eps <= _dp_accounting_rdp(sigma, q, steps) * (1 + 1e-9)
    clt = gdp_epsilon(clt_mu(q, sigma, steps), DELTA)
    assert 0.8 * clt <= eps <= 1.5 * clt


def test_pld_full_batch_billion_steps_is_the_exact_gaussian():
    """σ = 0.5, q = 1, T = 1e9 took 75–92 s; T Gaussian steps are one Gaussian with σ/√T."""
    sigma, steps = 0.5, 10**9
    (eps, acc), dt = _timed(lambda: _epsilon("pld", sigma, 1.0, steps))
    exact = float(gaussian_epsilon(sigma / math.sqrt(steps), DELTA))
    assert math.isfinite(eps) and dt < TIME_BOUND
    assert exact * (1 - 1e-12) <= eps <= exact * (1 + 1e-9)
    assert acc.route == "gaussian"


def test_calibrate_noise_pld_answers_where_rdp_does():
    """calibrate_noise(50, 1e-5, 0.01, 1, "pld") raised while "rdp" returned σ ≈ 0.1325."""
    target, q = 50.0, 0.01
    s_rdp, dt_rdp = _timed(lambda: calibrate_noise(target, DELTA, q, 1, accountant="rdp"))
    s_pld, dt = _timed(lambda: calibrate_noise(target, DELTA, q, 1, accountant="pld"))
    assert dt < TIME_BOUND and dt_rdp < TIME_BOUND
    assert 0 < s_pld <= s_rdp
    eps, _ = _epsilon("pld", s_pld, q, 1)
    assert eps <= target                                    # the same accountant: met
    assert S.exact_epsilon_single_step(q, s_pld, DELTA) <= target   # and truly met
    assert _epsilon("pld", s_pld * 0.99, q, 1)[0] > target  # and σ is not wastefully large


# --- inputs that crashed, returned NaN or blamed an internal value (closed forms, mpmath) -------

def test_discrete_gaussian_delta_past_e_to_709_is_zero_not_nan():
    """ε ≥ 710 gave e^ε·0 = NaN; δ matches mpmath (CKS 2020, Thm 7) at ε = 1, 710 and 800."""
    # σ² = 1, Δ = 1: δ(ε) = P[Y > ε − 1/2] − e^ε·P[Y > ε + 1/2], Y ~ N_Z(0, 1); |y| ≤ 900 holds
    # all the mass a double can see (the rest is below e^{-400000}).
    with mpmath.workdps(30):
        z = mpmath.fsum(mpmath.exp(-mpmath.mpf(y) ** 2 / 2) for y in range(-900, 901))

        def above(x):
            return mpmath.fsum(mpmath.exp(-mpmath.mpf(y) ** 2 / 2)
                               for y in range(math.floor(x) + 1, 901)) / z

        exact = [above(e - 0.5) - mpmath.exp(e) * above(e + 0.5) for e in (1.0, 710.0, 800.0)]
    got = discrete_gaussian_delta(1.0, [1.0, 710.0, 800.0])
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, [float(x) for x in exact], rtol=1e-12, atol=0.0)
    assert discrete_gaussian_delta(1.0, 710.0) == 0.0


def test_group_privacy_and_advanced_composition_past_e_to_709():
    """ε = 710 raised OverflowError: each bound is its closed form, or inf above every double."""
    with mpmath.workdps(30):
        e = mpmath.mpf(710)
        group = 0.1 * mpmath.expm1(2 * e) / mpmath.expm1(e)             # Razaviyayn, group lemma
        drv = e * mpmath.sqrt(4 * mpmath.log(10)) + 2 * e * mpmath.expm1(e)      # DRV 2010
        kov = e * mpmath.sqrt(4 * mpmath.log(10)) + 2 * e * mpmath.tanh(e / 2)   # KOV 2015
        assert drv > sys.float_info.max and 0.1 * mpmath.exp(800) > sys.float_info.max
    # log space there: e^{log δ + …} errs by ~u·|log| ≈ 1.6e-13 (relative)
    assert group_privacy(710.0, 0.1, 2) == (1420.0, pytest.approx(float(group), rel=1e-12))
    assert group_privacy(800.0, 0.1, 2)[1] == math.inf
    assert group_privacy(800.0, 0.0, 2) == (1600.0, 0.0)
    assert advanced_composition(710.0, 0.0, 2, 0.1) == (math.inf, 0.1)
    assert advanced_composition(710.0, 0.0, 2, 0.1, form="kov")[0] == pytest.approx(
        float(kov), rel=1e-13)


@pytest.mark.parametrize("sigma, q, steps", [(0.02, 0.01, 10), (1e-40, 0.5, 1)])
def test_amplified_advanced_composition_overflow_is_inf(sigma, q, steps):
    """σ = 0.02 raised OverflowError; the recipe's bound exceeds every double, so inf."""
    # The per-step ε0 (δ0 ≤ 5e-5) exceeds μ²/2 = 1/(2σ²) ≥ 1250 (see
    # test_laplace_gaussian.test_gaussian_epsilon_is_not_capped_at_2_to_200), so the amplified
    # ε1 = log(1 + q(e^{ε0} − 1)) ≥ ε0 + log q ≥ 1245 and advanced composition adds
    # T·ε1·(e^{ε1} − 1) > e^{1245} > 1.8e308.
    assert 1.0 / (2 * sigma**2) + math.log(q) > 1000
    assert amplified_advanced_composition(sigma, q, steps, DELTA) == math.inf


def test_amplified_advanced_composition_names_the_callers_parameters():
    """q = 1e-9, T = 10 blamed an internal "delta … got 500": the caller's δ ≥ 2Tq is named."""
    with pytest.raises(ValueError, match=r"delta must be < 2·num_steps·sample_rate = 2e-08.*"
                                         r"delta=1e-05 with sample_rate=1e-09, num_steps=10"):
        amplified_advanced_composition(1.0, 1e-9, 10, DELTA)


@pytest.mark.parametrize("q, steps", [(1e-12, 10**18), (1e-15, 10**30)])
def test_pld_huge_step_count_falls_back_to_rdp(q, steps):
    """T = 1e18 raised "Target length must be positive", T = 1e30 OverflowError: RDP answers."""
    (eps, acc), dt = _timed(lambda: _epsilon("pld", 1.0, q, steps))
    rdp, _ = _epsilon("rdp", 1.0, q, steps)
    assert dt < TIME_BOUND and acc.route == "rdp" and eps == rdp      # an upper bound
    assert eps >= gdp_epsilon(clt_mu(q, 1.0, steps), DELTA)       # plausibility floor (CLT)
    no_fallback = PLDAccountant(rdp_fallback=False)
    no_fallback.step(noise_multiplier=1.0, sample_rate=q, num_steps=steps)
    assert no_fallback.get_epsilon(DELTA) == math.inf and no_fallback.get_delta(1.0) == 1.0


@pytest.mark.parametrize("call", [
    lambda: RDPAccountant(orders=[1e300]).step(noise_multiplier=1.0, sample_rate=0.01,
                                               num_steps=1).get_epsilon(DELTA),
    lambda: subsampled_gaussian_rdp([2.0, 1e300], 1.0, 0.01),
    lambda: wor_gaussian_rdp([2.0, 1e300], 1.0, 0.01)])
def test_rdp_orders_above_the_cap_are_refused_by_name(call):
    """orders = [1e300] raised numpy's unnamed "Maximum allowed size exceeded"."""
    with pytest.raises(ValueError, match=r"orders must be in \(1, 1e\+06\], got 1e\+300"):
        call()


def test_rdp_largest_order_beside_the_default_grid_is_fast_and_bracketed():
    """Order 1e6 (the cap) beside the default grid: < 2 s, and r(α) within its closed-form bracket."""
    # The binomial sum A_α ≥ its last term q^α e^{α(α−1)/(2σ²)} (all terms ≥ 0) and subsampling
    # only lowers RDP: α/(2σ²) + α·log(q)/(α − 1) ≤ r(α) ≤ α/(2σ²) (MTZ 2019, §3.3; σ = 1).
    alpha, q, steps = 1e6, 0.01, 1000
    orders = np.concatenate([DEFAULT_ORDERS, [alpha]])
    acc, dt = _timed(lambda: RDPAccountant(orders=orders).step(
        noise_multiplier=1.0, sample_rate=q, num_steps=steps))
    assert dt < TIME_BOUND
    r = acc.rdp[-1] / steps
    assert alpha / 2 + alpha * math.log(q) / (alpha - 1) <= r <= alpha / 2
    base = RDPAccountant().step(noise_multiplier=1.0, sample_rate=q, num_steps=steps)
    assert acc.get_epsilon(DELTA) <= base.get_epsilon(DELTA)


def test_samplers_doc_gives_the_unit_the_accountant_takes():
    """samplers.py told fixed_size_batches users to pass std/(2C); the accountant takes std/C."""
    # WBK 2019, Thm 27 at α = 2: r(2) = log(1 + γ²·min{4(e^{1/σ'²} − 1), 2e^{1/σ'²}}) for the
    # base mechanism N(0, σ'²) vs N(1, σ'²), σ' = std/(2C) (replace-one sensitivity 2C).
    std, clip, gamma = 2.0, 1.0, 0.1
    inv = 1.0 / (std / (2 * clip)) ** 2
    closed_form = math.log1p(gamma**2 * min(4 * math.expm1(inv), 2 * math.exp(inv)))
    acc = RDPAccountant(orders=[2.0], neighboring="replace_one", sampling="without_replacement")
    acc.step(noise_multiplier=std / clip, sample_rate=gamma, num_steps=1)
    assert acc.rdp[0] == pytest.approx(closed_form, rel=1e-12)     # std/C is the unit
    doc = " ".join(samplers.__doc__.split())
    assert "``noise_multiplier`` = s/C for noise std s" in doc and "s/(2C) for noise std" not in doc
