"""PATE: vote histograms, the q̃ bound of Papernot et al. (2018, Prop. 7), the data-dependent
bound of their Thm 6 recomputed here from its statement, the data-independent events, and the
noisy-max aggregators. Fixed seeds."""
import math

import numpy as np
import pytest
from scipy.special import erfc

from dplib.accounting import DEFAULT_ORDERS, RDPAccountant, laplace_rdp
from dplib.selection import (GNMaxEvent, LNMaxEvent, data_dependent_epsilon_not_publishable,
                             data_dependent_rdp_not_publishable, gnmax, gnmax_log_q, lnmax,
                             pate_epsilon, teacher_partitions, vote_histogram)


def test_partitions_are_disjoint_and_cover():
    parts = teacher_partitions(103, 10, rng=0)
    allidx = np.concatenate(parts)
    assert len(parts) == 10 and np.array_equal(np.sort(allidx), np.arange(103))


def test_vote_histogram_counts():
    preds = np.array([[0, 1], [2, 1], [0, 0]])             # 3 teachers, 2 queries
    np.testing.assert_array_equal(vote_histogram(preds, 3), [[2, 0, 1], [1, 2, 0]])


def test_log_q_is_proposition_7():
    votes = np.array([120.0, 80, 30, 20])
    sigma = 25.0
    q = sum(0.5 * erfc((120 - v) / (2 * sigma)) for v in votes[1:])
    assert gnmax_log_q(votes, sigma) == pytest.approx(math.log(q), rel=1e-12)
    assert gnmax_log_q(np.array([5.0, 5, 5]), 1.0) == pytest.approx(math.log(2 / 3))  # the cap


def _theorem6_by_hand(q, sigma, lam):
    """Papernot et al. 2018, Thm 6 written from its statement: μ₂ = σ√log(1/q), μ₁ = μ₂ + 1,
    ε_i = μ_i/σ²; A = (1−q)/(1 − (q e^{ε₂})^{(μ₂−1)/μ₂}), B = e^{ε₁}/q^{1/(μ₁−1)};
    RDP ≤ 1/(λ−1) log((1−q) A^{λ−1} + q B^{λ−1}) for λ < μ₁."""
    mu2 = sigma * math.sqrt(math.log(1 / q))
    mu1 = mu2 + 1
    e1, e2 = mu1 / sigma**2, mu2 / sigma**2
    a = (1 - q) / (1 - (q * math.exp(e2)) ** ((mu2 - 1) / mu2))
    b = math.exp(e1) / q ** (1 / (mu1 - 1))
    return math.log((1 - q) * a ** (lam - 1) + q * b ** (lam - 1)) / (lam - 1), mu1


def test_data_dependent_bound_is_theorem_6():
    sigma = 40.0
    votes = np.zeros(10)
    votes[0] = 250
    q = math.exp(gnmax_log_q(votes, sigma))
    orders = np.array([2.0, 5.0, 10.0, 20.0])
    got = data_dependent_rdp_not_publishable(votes[None, :], sigma, orders)
    for lam, g in zip(orders, got):
        want, mu1 = _theorem6_by_hand(q, sigma, lam)
        assert lam < mu1
        assert g == pytest.approx(min(want, lam / sigma**2), rel=1e-9)
        assert g < lam / sigma**2                     # consensus: far below the λ/σ² bound


def test_data_dependent_never_above_independent_and_equal_without_consensus():
    sigma = 10.0
    flat = np.full((3, 4), 25.0)
    np.testing.assert_allclose(data_dependent_rdp_not_publishable(flat, sigma),
                               3 * DEFAULT_ORDERS / sigma**2)
    rng = np.random.default_rng(0)
    votes = rng.multinomial(100, [0.7, 0.1, 0.1, 0.1], size=20).astype(float)
    assert (data_dependent_rdp_not_publishable(votes, sigma)
            <= 20 * DEFAULT_ORDERS / sigma**2 + 1e-12).all()
    assert (data_dependent_epsilon_not_publishable(votes, sigma, 1e-5)
            <= pate_epsilon(20, 1e-5, sigma=sigma) + 1e-12)


def test_events_state_their_curves_and_compose():
    np.testing.assert_allclose(GNMaxEvent(3.0).rdp(DEFAULT_ORDERS, "add_remove"),
                               DEFAULT_ORDERS / 9.0)
    np.testing.assert_allclose(LNMaxEvent(0.1).rdp(DEFAULT_ORDERS, "replace_one"),
                               laplace_rdp(DEFAULT_ORDERS, 5.0))
    eps = pate_epsilon(100, 1e-5, sigma=40.0)
    assert eps == pytest.approx(RDPAccountant().compose(GNMaxEvent(40.0), 100).get_epsilon(1e-5))
    with pytest.raises(ValueError, match="sigma / gamma"):
        pate_epsilon(10, 1e-5, sigma=1.0, gamma=0.1)


def test_aggregators_follow_consensus_and_noise():
    votes = np.tile([2.0, 90.0, 8.0], (500, 1))
    assert (gnmax(votes, 5.0, rng=0) == 1).all()
    assert (lnmax(votes, 1.0, rng=0) == 1).all()
    close = np.tile([50.0, 50.0, 0.0], (4000, 1))
    share = np.mean(gnmax(close, 10.0, rng=1) == 0)
    assert 0.45 < share < 0.55                                      # a tie is split by the noise


def _gnmax_label_law(votes, sigma):
    """P[GNMax = j] = ∫ φ(z) Π_{i≠j} Φ(z + (n_j − n_i)/σ) dz (noise N(0, σ²) on every count),
    in log space on a fine grid (accurate to far below the 1e-7 probabilities used here)."""
    from scipy.integrate import simpson
    from scipy.stats import norm
    z = np.linspace(-14, 14, 40_001)
    out = []
    for j in range(len(votes)):
        log_f = norm.logpdf(z) + sum(norm.logcdf(z + (votes[j] - votes[i]) / sigma)
                                    for i in range(len(votes)) if i != j)
        out.append(simpson(np.exp(log_f), x=z))
    p = np.array(out)
    return p / p.sum()


def test_data_dependent_bound_is_above_the_exact_divergence_to_every_neighbour():
    # Papernot et al. 2018, Thm 6 bounds D_λ(M(D) ‖ M(D')) for every neighbour D' of D (one
    # teacher moves its vote). Exact label laws by integration, all k(k−1) moves.
    sigma, votes = 5.0, np.array([40.0, 5.0, 5.0])
    orders = np.array([2.0, 4.0, 8.0, 12.0])
    bound = data_dependent_rdp_not_publishable(votes[None, :], sigma, orders)
    assert (bound < orders / sigma**2).all()                 # the theorem applies here
    p = _gnmax_label_law(votes, sigma)
    worst = np.zeros(orders.size)
    for a in range(3):
        for b in range(3):
            if a != b and votes[a] > 0:
                moved = votes.copy()
                moved[a] -= 1
                moved[b] += 1
                q = _gnmax_label_law(moved, sigma)
                d = np.log((p[None, :] ** orders[:, None] * q[None, :] ** (1 - orders[:, None]))
                           .sum(1)) / (orders - 1)
                worst = np.maximum(worst, d)
    assert (worst <= bound).all()
    assert worst.max() > 1e-6                              # the pair is not trivial
