"""Property-based tests (hypothesis) of invariants of the accountants, mechanisms and audit core.

Every test runs under the fixed hypothesis profile of conftest.py (derandomize=True, bounded
max_examples, no database), applied with ``@settings(AUDIT_PROFILE)``: every run draws the same
examples, deterministic and fast.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from dplib import accounting as A
from dplib import mechanisms as M
from dplib.attacks import clopper_pearson, epsilon_lower_bound_from_counts

AUDIT_PROFILE = settings.get_profile("dplib-audit")   # registered in conftest.py

sigma_s = st.floats(0.3, 20.0)
q_s = st.floats(1e-4, 1.0)
steps_s = st.integers(1, 10 ** 5)
delta_s = st.floats(1e-12, 0.5)
eps_s = st.floats(0.01, 10.0)
orders = np.array([1.5, 2.0, 3.0, 5.0, 8.0, 16.0, 32.0, 64.0])


# ---- RDP ----------------------------------------------------------------------------------

@settings(AUDIT_PROFILE)
@given(sigma_s)
def test_gaussian_rdp_is_alpha_over_two_sigma_squared(sigma):
    """Mironov 2017, Prop. 7: the Gaussian mechanism (sensitivity 1) is (α, α/(2σ²))-RDP."""
    np.testing.assert_allclose(A.gaussian_rdp(orders, sigma), orders / (2 * sigma ** 2),
                               rtol=1e-12)


@settings(AUDIT_PROFILE)
@given(sigma_s, q_s, q_s)
def test_subsampled_rdp_nonnegative_monotone_and_amplified(sigma, q1, q2):
    lo, hi = sorted((q1, q2))
    r_lo = A.subsampled_gaussian_rdp(orders, sigma, lo)
    r_hi = A.subsampled_gaussian_rdp(orders, sigma, hi)
    full = A.gaussian_rdp(orders, sigma)
    assert np.all(r_lo >= 0)
    assert np.all(r_lo <= r_hi * (1 + 1e-9) + 1e-15)          # more sampling, more loss
    assert np.all(r_hi <= full * (1 + 1e-9) + 1e-15)          # amplification never hurts
    assert np.all(np.diff(r_hi) >= -1e-12 * np.abs(r_hi[1:]))  # RDP is monotone in α


@settings(AUDIT_PROFILE)
@given(sigma_s, q_s, steps_s, steps_s)
def test_rdp_composition_is_additive(sigma, q, t1, t2):
    """Mironov 2017, Prop. 1: RDP adds under composition, order by order."""
    a = A.RDPAccountant(orders).step(noise_multiplier=sigma, sample_rate=q, num_steps=t1)
    a.step(noise_multiplier=sigma, sample_rate=q, num_steps=t2)
    b = A.RDPAccountant(orders).step(noise_multiplier=sigma, sample_rate=q, num_steps=t1 + t2)
    np.testing.assert_allclose(a.rdp, b.rdp, rtol=1e-12)
    one = A.subsampled_gaussian_rdp(orders, sigma, q)
    np.testing.assert_allclose(b.rdp, (t1 + t2) * one, rtol=1e-12)


@settings(AUDIT_PROFILE)
@given(sigma_s, sigma_s, q_s, steps_s)
def test_rdp_heterogeneous_history_adds(s1, s2, q, t):
    a = A.RDPAccountant(orders).step(noise_multiplier=s1, sample_rate=q, num_steps=t)
    a.step(noise_multiplier=s2, sample_rate=q, num_steps=2 * t)
    expected = (t * A.subsampled_gaussian_rdp(orders, s1, q)
                + 2 * t * A.subsampled_gaussian_rdp(orders, s2, q))
    np.testing.assert_allclose(a.rdp, expected, rtol=1e-12)


@settings(AUDIT_PROFILE)
@given(sigma_s, q_s, steps_s, delta_s, delta_s)
def test_rdp_epsilon_nonnegative_and_decreasing_in_delta(sigma, q, t, d1, d2):
    acc = A.RDPAccountant().step(noise_multiplier=sigma, sample_rate=q, num_steps=t)
    lo, hi = sorted((d1, d2))
    e_lo, e_hi = acc.get_epsilon(lo), acc.get_epsilon(hi)
    assert 0 <= e_hi <= e_lo + 1e-12


@settings(AUDIT_PROFILE)
@given(sigma_s, q_s, steps_s, delta_s)
def test_rdp_epsilon_delta_round_trip(sigma, q, t, d):
    acc = A.RDPAccountant().step(noise_multiplier=sigma, sample_rate=q, num_steps=t)
    e = acc.get_epsilon(d)
    assume(e > 0)
    assert acc.get_delta(e) <= d * (1 + 1e-6)


@settings(AUDIT_PROFILE, max_examples=15)
@given(sigma_s, q_s, steps_s, st.floats(1.001, 4.0))
def test_rdp_epsilon_monotone_in_sigma_and_steps(sigma, q, t, factor):
    def eps(s, n):
        return A.RDPAccountant().step(noise_multiplier=s, sample_rate=q,
                                      num_steps=n).get_epsilon(1e-5)
    base = eps(sigma, t)
    assert eps(sigma * factor, t) <= base * (1 + 1e-12)
    assert eps(sigma, t + 1) >= base * (1 - 1e-12)


# ---- PLD (slower: fewer examples) -----------------------------------------------------------

@settings(AUDIT_PROFILE, max_examples=8)
@given(st.floats(0.5, 5.0), st.floats(1e-3, 1.0), st.integers(1, 2000),
       st.floats(1e-10, 0.1))
def test_pld_below_rdp_and_consistent(sigma, q, t, d):
    pld = A.PLDAccountant().step(noise_multiplier=sigma, sample_rate=q, num_steps=t)
    rdp = A.RDPAccountant().step(noise_multiplier=sigma, sample_rate=q, num_steps=t)
    e = pld.get_epsilon(d)
    assert 0 <= e <= rdp.get_epsilon(d) * (1 + 1e-12)
    if 0 < e < math.inf:
        assert pld.get_delta(e) <= d * (1 + 1e-6)


@settings(AUDIT_PROFILE, max_examples=10)
@given(st.floats(0.5, 5.0), st.floats(1e-3, 1.0), st.integers(1, 200))
def test_pld_full_batch_is_exact_composed_gaussian(sigma, q, t):
    """q = 1: T Gaussians compose into one with σ/√T; PLD is a tight upper bound on it."""
    exact = M.gaussian_epsilon(sigma / math.sqrt(t), 1e-5)
    e = A.PLDAccountant().step(noise_multiplier=sigma, sample_rate=1.0,
                               num_steps=t).get_epsilon(1e-5)
    assert exact * (1 - 1e-9) <= e <= exact + 0.01 * max(exact, 0.1)


@settings(AUDIT_PROFILE, max_examples=4)
@given(st.floats(0.3, 10.0), st.floats(1e-3, 0.2), st.integers(10, 2000))
def test_calibrate_noise_meets_the_target(target, q, t):
    for kind in ("rdp", "pld"):
        sigma = A.calibrate_noise(target, 1e-5, q, t, kind)
        acc = A.RDPAccountant() if kind == "rdp" else A.PLDAccountant()
        assert acc.step(noise_multiplier=sigma, sample_rate=q,
                        num_steps=t).get_epsilon(1e-5) <= target


# ---- composition theorems ---------------------------------------------------------------------

@settings(AUDIT_PROFILE)
@given(st.lists(st.floats(0.0, 5.0), min_size=1, max_size=8), st.integers(1, 50))
def test_basic_composition_adds(epsilons, k):
    e, d = A.basic_composition(epsilons, 0.0, k)
    assert math.isclose(e, k * sum(epsilons), rel_tol=1e-12, abs_tol=1e-12) and d == 0.0


@settings(AUDIT_PROFILE)
@given(st.floats(0.01, 2.0), st.integers(1, 200), st.floats(1e-9, 1e-3))
def test_optimal_composition_beats_basic(eps, k, d):
    opt = A.optimal_composition_epsilon(eps, 0.0, k, d)
    assert 0 <= opt <= k * eps * (1 + 1e-9)


@settings(AUDIT_PROFILE)
@given(st.floats(0.01, 2.0), st.one_of(st.just(0.0), st.floats(1e-300, 1e-4)),
       st.integers(1, 10))
def test_group_privacy(eps, d, k):
    """Dwork & Roth 2014, Thm 2.2 (and its δ form): (kε, k e^{(k−1)ε} δ)."""
    ge, gd = A.group_privacy(eps, d, k)
    assert math.isclose(ge, k * eps, rel_tol=1e-12)
    assert gd >= d * (1 - 1e-12) and ge >= eps * (1 - 1e-12)


# ---- mechanisms ---------------------------------------------------------------------------

@settings(AUDIT_PROFILE)
@given(eps_s, st.floats(0.1, 10.0), st.lists(st.floats(-50, 50), min_size=1, max_size=20))
def test_laplace_privacy_loss_is_bounded_by_epsilon(eps, sens, outputs):
    b = M.laplace_scale(eps, sens)
    loss = M.laplace_privacy_loss(np.array(outputs), b, sens)
    assert np.all(np.abs(loss) <= eps * (1 + 1e-9))


@settings(AUDIT_PROFILE)
@given(st.floats(0.05, 5.0), st.floats(1e-10, 0.1))
def test_gaussian_sigma_epsilon_round_trip(eps, d):
    s = M.gaussian_sigma(eps, d, method="analytic")
    assert math.isclose(M.gaussian_epsilon(s, d), eps, rel_tol=1e-6)
    assert M.gaussian_delta(s, eps) <= d * (1 + 1e-6)
    if eps < 1:
        assert s <= M.gaussian_sigma(eps, d, method="classic") * (1 + 1e-12)


@settings(AUDIT_PROFILE)
@given(st.floats(0.1, 20.0), st.floats(0.0, 10.0), st.floats(0.0, 10.0))
def test_gaussian_delta_decreasing(sigma, e1, e2):
    lo, hi = sorted((e1, e2))
    assert M.gaussian_delta(sigma, hi) <= M.gaussian_delta(sigma, lo) + 1e-15
    assert M.gaussian_delta(sigma * 1.5, lo) <= M.gaussian_delta(sigma, lo) + 1e-15


@settings(AUDIT_PROFILE)
@given(eps_s)
def test_randomized_response_ratio_is_e_to_epsilon(eps):
    p = M.rr_p_truth(eps)
    assert math.isclose(math.log(p / (1 - p)), eps, rel_tol=1e-9)
    assert math.isclose(M.rr_epsilon(p), eps, rel_tol=1e-9)


@settings(AUDIT_PROFILE)
@given(eps_s, st.lists(st.floats(-5, 5), min_size=2, max_size=12), st.data())
def test_exponential_mechanism_ratio_bound(eps, utilities, data):
    """Neighbouring utilities (|u − u'| ≤ Δ = 1 everywhere): every probability ratio ≤ e^ε."""
    u = np.array(utilities)
    shift = np.array(data.draw(st.lists(st.floats(-1, 1), min_size=u.size,
                                        max_size=u.size)))
    p = M.exponential_mechanism_probabilities(u, eps)
    p2 = M.exponential_mechanism_probabilities(u + shift, eps)
    assert np.all(np.abs(np.log(p) - np.log(p2)) <= eps * (1 + 1e-9) + 1e-12)
    assert math.isclose(p.sum(), 1.0, rel_tol=1e-12)


@settings(AUDIT_PROFILE)
@given(st.floats(0.1, 20.0))
def test_discrete_laplace_pmf_sums_to_one_and_ratio(scale):
    k = np.arange(-int(60 * scale) - 20, int(60 * scale) + 21)
    p = M.discrete_laplace_pmf(k, scale)
    assert math.isclose(p.sum(), 1.0, rel_tol=1e-9)
    ratio = p[1:] / p[:-1]
    assert np.all(np.abs(np.log(ratio)) <= 1 / scale * (1 + 1e-9))


@settings(AUDIT_PROFILE)
@given(st.floats(0.2, 50.0), st.floats(0.0, 5.0), st.floats(0.0, 5.0))
def test_discrete_gaussian_delta_decreasing_and_in_range(s2, e1, e2):
    lo, hi = sorted((e1, e2))
    d_lo, d_hi = M.discrete_gaussian_delta(s2, lo), M.discrete_gaussian_delta(s2, hi)
    assert 0 <= d_hi <= d_lo + 1e-15 <= 1


# ---- the audit core ------------------------------------------------------------------------

@settings(AUDIT_PROFILE)
@given(st.integers(1, 500), st.data(), st.floats(0.5, 0.999))
def test_clopper_pearson_contains_the_estimate(n, data, conf):
    k = data.draw(st.integers(0, n))
    lo, hi = clopper_pearson(k, n, conf)
    assert 0 <= lo <= k / n <= hi <= 1


@settings(AUDIT_PROFILE)
@given(st.integers(10, 10 ** 6), st.data())
def test_epsilon_lower_bound_monotone(n, data):
    kp = data.draw(st.integers(0, n - 1))
    kn = data.draw(st.integers(1, n))
    base = epsilon_lower_bound_from_counts(kp, n, kn, n)
    assert base >= 0
    assert epsilon_lower_bound_from_counts(kp + 1, n, kn, n) >= base   # larger TPR
    assert epsilon_lower_bound_from_counts(kp, n, kn - 1, n) >= base   # smaller FPR
    assert epsilon_lower_bound_from_counts(kp, n, kn, n, delta=0.01) <= base
