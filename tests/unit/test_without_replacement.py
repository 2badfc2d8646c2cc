"""Fixed-size batches without replacement, replace-one: the symmetric dominating pair and its PLD.

Oracles: (1) Google's dp-accounting, building the same symmetric pair from a different route —
the closed-form δ(ε) of its ``GaussianPrivacyLoss`` (sensitivity 2), mirrored for ε < 0 by
δ(−ε) = 1 − e^{−ε} + e^{−ε}·δ(ε), discretised by its own connect-the-dots and composed by its own
FFT; (2) the exact Gaussian δ(ε) (Balle & Wang 2018) when every record is in the batch (γ = 1);
(3) direct numerical integration of the hockey-stick divergence of the real mechanism — every
batch of a tiny dataset enumerated — which the one-step pair must dominate.
"""
import itertools
import math

import numpy as np
import pytest
from dp_accounting.pld import pld_pmf
from dp_accounting.pld import privacy_loss_mechanism as plm
from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution
from scipy.stats import norm

from dplib.accounting import PLDAccountant
from dplib.accounting.without_replacement import wor_gaussian_epsilon, wor_gaussian_pld
from dplib.mechanisms import gaussian_epsilon

MNIST = (1.1, 256 / 60_000, 14_062)


def dp_accounting_epsilon(sigma, gamma, steps, delta, h=1e-3):
    """ε of the symmetric pair, built with dp-accounting primitives only."""
    loss = plm.GaussianPrivacyLoss(sigma, sensitivity=2.0, sampling_prob=gamma,
                                   adjacency_type=plm.AdjacencyType.REMOVE)
    k = np.arange(0, math.ceil(loss.connect_dots_bounds().epsilon_upper / h) + 1)
    d_pos = np.asarray(loss.get_delta_for_epsilon(k * h), dtype=float)
    d_neg = -np.expm1(-k[1:] * h) + np.exp(-k[1:] * h) * d_pos[1:]
    deltas = np.concatenate([d_neg[::-1], d_pos])
    pmf = pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(h, -int(k[-1]), int(k[-1]), deltas)
    return PrivacyLossDistribution(pmf).self_compose(steps).get_epsilon_for_delta(delta)


@pytest.mark.parametrize("sigma, gamma, steps, delta", [
    (*MNIST, 1e-5), (1.0, 0.2, 20, 1e-3), (2.0, 0.05, 500, 1e-6), (0.8, 0.01, 3000, 1e-5)])
def test_matches_dp_accounting_built_from_the_same_pair(sigma, gamma, steps, delta):
    ours = wor_gaussian_epsilon(sigma, gamma, steps, delta)
    assert ours == pytest.approx(dp_accounting_epsilon(sigma, gamma, steps, delta),
                                 rel=1e-3, abs=2e-3)


@pytest.mark.parametrize("sigma, steps", [(1.1, 100), (4.0, 10), (0.7, 1)])
def test_full_batch_is_the_gaussian_mechanism_with_sensitivity_two(sigma, steps):
    # γ = 1: the pair is N(2, σ²) vs N(0, σ²) itself, T steps are one Gaussian with std σ/√T.
    exact = gaussian_epsilon(sigma / (2 * math.sqrt(steps)), 1e-5)
    ours = wor_gaussian_epsilon(sigma, 1.0, steps, 1e-5)
    assert exact - 1e-9 <= ours <= exact + 2e-3


def test_upper_bound_lies_above_the_pair_of_datasets_that_attains_one_orientation():
    # A record with clipped gradient +C in D and −C in D' (all others −C) gives exactly the pair
    # (A, B) at every step: composing it is the ε of a real run, a lower bound. The symmetric pair
    # must not fall below it — and in the MNIST setting it is well above (orientations can mix).
    lower = PLDAccountant().step(noise_multiplier=MNIST[0] / 2, sample_rate=MNIST[1],
                                 num_steps=MNIST[2]).get_epsilon(1e-5)
    upper = wor_gaussian_epsilon(*MNIST, 1e-5)
    assert round(lower, 1) == 14.7 and upper > lower + 3.0


def test_one_step_profile_is_the_pair_for_positive_epsilon_and_symmetric():
    sigma, gamma, h = 1.0, 0.1, 1e-3
    step = wor_gaussian_pld(sigma, gamma, value_discretization_interval=h)
    assert step.pmf.min() >= 0
    assert step.pmf.sum() + step.infinity_mass == pytest.approx(1, abs=1e-12)
    loss = plm.GaussianPrivacyLoss(sigma, sensitivity=2.0, sampling_prob=gamma,
                                   adjacency_type=plm.AdjacencyType.REMOVE)
    eps = np.array([0.0, 0.1, 0.5, 1.0, 2.0])
    ours = np.array([step.get_delta(e) for e in eps])
    # connect-the-dots is exact at grid points
    np.testing.assert_allclose(ours, loss.get_delta_for_epsilon(eps), rtol=1e-9, atol=1e-12)
    mirror = np.array([step.get_delta(-e) for e in eps])
    np.testing.assert_allclose(mirror, -np.expm1(-eps) + np.exp(-eps) * ours, atol=1e-12)


def _mechanism_delta(values, x_new, sigma, m, eps):
    """δ(ε) = ∫(p − e^ε q)_+ of the real mechanism: all batches of m records, sum + N(0, σ²),
    D = values, D' = values with record 0 replaced by x_new (trapezoid rule on a fine grid)."""
    batches = np.array(list(itertools.combinations(range(len(values)), m)))
    d_other = np.array(values, dtype=float)
    d_other[0] = x_new
    s, s_other = np.asarray(values)[batches].sum(1), d_other[batches].sum(1)
    x = np.linspace(min(s.min(), s_other.min()) - 12 * sigma,
                    max(s.max(), s_other.max()) + 12 * sigma, 40_001)
    p = norm.pdf(x[:, None], s, sigma).mean(1)
    q = norm.pdf(x[:, None], s_other, sigma).mean(1)
    return np.trapezoid(np.maximum(p[:, None] - np.exp(eps) * q[:, None], 0.0), x, axis=0)


def test_dominates_the_real_mechanism_on_enumerated_batches():
    sigma, n, m = 0.9, 6, 2
    step = wor_gaussian_pld(sigma, m / n, value_discretization_interval=1e-3)
    eps = np.linspace(-1.5, 1.5, 13)
    bound = np.array([step.get_delta(e) for e in eps])
    rng = np.random.default_rng(0)
    for _ in range(20):   # clipped scalar gradients in [−1, 1] (units of C)
        vals = rng.uniform(-1, 1, n)
        assert np.all(_mechanism_delta(vals, rng.uniform(-1, 1), sigma, m, eps) <= bound + 1e-6)
    # the attaining configurations: +1 in D, −1 in D', all others −1 (D' is one Gaussian: the
    # ε ≥ 0 branch), and all others +1 (now D is one Gaussian: the ε < 0 branch)
    worst = _mechanism_delta([1.0] + [-1.0] * (n - 1), -1.0, sigma, m, eps)
    np.testing.assert_allclose(worst[eps >= 0], bound[eps >= 0], atol=1e-5)
    mirror = _mechanism_delta([1.0] * n, -1.0, sigma, m, eps)
    np.testing.assert_allclose(mirror[eps <= 0], bound[eps <= 0], atol=1e-5)


def test_array_delta_keeps_shape_and_order():
    d = np.array([[1e-3, 1e-5], [1e-7, 0.5]])
    e = wor_gaussian_epsilon(1.0, 0.05, 200, d)
    assert e.shape == d.shape and e[0, 0] < e[0, 1] < e[1, 0] and e[1, 1] < e[0, 0]
    assert isinstance(wor_gaussian_epsilon(1.0, 0.05, 200, 1e-5), float)
    assert e[0, 1] == wor_gaussian_epsilon(1.0, 0.05, 200, 1e-5)


@pytest.mark.parametrize("kwargs, name", [
    (dict(noise_multiplier=0.0), "noise_multiplier"),
    (dict(noise_multiplier=np.nan), "noise_multiplier"),
    (dict(sample_rate=0.0), "sample_rate"), (dict(sample_rate=1.5), "sample_rate"),
    (dict(num_steps=0), "num_steps"), (dict(num_steps=2.5), "num_steps"),
    (dict(delta=0.0), "delta"), (dict(delta=[1e-5, 1.0]), "delta"), (dict(delta="x"), "delta"),
    (dict(delta=[]), "delta"),
    (dict(value_discretization_interval=-1e-3), "value_discretization_interval")])
def test_bad_input_is_refused_by_name(kwargs, name):
    args = dict(noise_multiplier=1.0, sample_rate=0.1, num_steps=10, delta=1e-5)
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        wor_gaussian_epsilon(**args)


def test_huge_epsilon_coarsens_the_grid_and_stays_an_upper_bound():
    # γ = 1, σ = 0.3, 10⁶ steps: ε ≈ 2.2e7 needs a window of ~1e10 points at h = 1e-3; the grid is
    # coarsened to fit and the answer must still lie above the exact value.
    exact = gaussian_epsilon(0.3 / (2 * 1000), 1e-5)
    ours = wor_gaussian_epsilon(0.3, 1.0, 10**6, 1e-5)
    assert exact <= ours <= exact * (1 + 1e-3)
