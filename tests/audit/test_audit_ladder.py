"""The adversary ladder and one-run audits, small versions (the full ones are
benchmarks/audit_ladder.py).

Every rung's bound must stay below the PLD accountant's ε for a correct trainer; the strongest
rung (Dirac gradient canary, every update) must come close to it; a trainer that adds σ/2 while
claiming σ must be refuted; the one-run bound must match its closed form and stay valid.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dplib.accounting import calibrate_noise
from dplib.attacks.ladder import RUNGS, adversary_ladder, ladder_runs, llr_statistic
from dplib.attacks.one_run import (one_run_epsilon_lower_bound, one_run_gradient_audit,
                                   one_run_p_value)

RNG = np.random.default_rng(0)
X = RNG.normal(size=(20, 4)).astype(np.float32)
Y = (X[:, 0] > 0).astype(np.int64)
DELTA = 0.01


@pytest.fixture(scope="module")
def ladder():
    sigma = calibrate_noise(1.0, DELTA, 0.5, 2, "pld")
    return adversary_ladder(X, Y, runs=20_000, steps=2, sample_rate=0.5,
                            noise_multiplier=sigma, delta=DELTA, seed=0, device="cpu")


def test_every_rung_is_below_the_accountant(ladder):
    lb = ladder.lower_bounds()
    assert list(lb) == list(RUNGS)
    assert all(0.0 <= v <= ladder.epsilon_pld for v in lb.values()), lb
    assert abs(ladder.epsilon_pld - 1.0) < 0.01


def test_strongest_rung_is_close_to_tight(ladder):
    lb = ladder.lower_bounds()
    assert lb[RUNGS[-1]] >= 0.6 * ladder.epsilon_pld          # 0.8+ with 100,000 runs
    assert lb[RUNGS[0]] < lb[RUNGS[-1]]                       # black-box is the weakest


def test_increments_are_the_subsampled_gaussian():
    """Per step the canary weight moves by B_t·κ + σZ_t in units of C (both canaries)."""
    for canary in ("gradient", "input"):
        a = ladder_runs(X, Y, canary=canary, runs=3000, steps=2, sample_rate=0.5,
                        noise_multiplier=1.0, with_canary=True, seed=1, device="cpu")
        u, k = a["increments"], a["kappa"]
        assert abs(u.mean() - 0.5 * k) < 0.05 and abs(u.var() - (1 + 0.25 * k * k)) < 0.1
    b = ladder_runs(X, Y, canary="gradient", runs=3000, steps=2, sample_rate=0.5,
                    noise_multiplier=1.0, with_canary=False, seed=2, device="cpu")["increments"]
    assert abs(b.mean()) < 0.05 and abs(b.var() - 1.0) < 0.08


def test_broken_trainer_is_refuted():
    sigma = calibrate_noise(1.0, DELTA, 0.5, 2, "pld")
    r = adversary_ladder(X, Y, runs=5_000, steps=2, sample_rate=0.5, noise_multiplier=sigma,
                         delta=DELTA, noise_scale=0.5, seed=3, device="cpu")
    assert r.rungs[RUNGS[-1]].refutes(r.epsilon_pld)


def test_llr_statistic_is_the_log_likelihood_ratio():
    u = np.array([[0.3, -1.2], [2.0, 0.1]])
    q, s = 0.3, 0.8
    dens = lambda x, mu: stats.norm.pdf(x, mu, s)                      # noqa: E731
    want = np.log(((1 - q) * dens(u, 0) + q * dens(u, 1)) / dens(u, 0)).sum(1)
    np.testing.assert_allclose(llr_statistic(u, sample_rate=q, noise_multiplier=s), want)
    np.testing.assert_allclose(llr_statistic(u, sample_rate=1.0, noise_multiplier=s),
                               np.log(dens(u, 1) / dens(u, 0)).sum(1))


def test_one_run_bound_closed_form_and_monotone():
    # all r guesses right, δ = 0: the bound solves (e^ε/(1 + e^ε))^r = 0.05
    for r in (20, 100, 1000):
        want = -math.log(math.expm1(math.log(20) / r))
        assert abs(one_run_epsilon_lower_bound(r, r, r) - want) < 1e-5
    assert one_run_epsilon_lower_bound(100, 100, 50) == 0.0             # chance level
    assert one_run_p_value(100, 10, 8, 1.0, 1e-5) >= one_run_p_value(100, 10, 8, 1.0, 0.0)
    assert one_run_epsilon_lower_bound(100, 100, 100, delta=1e-3) < \
        one_run_epsilon_lower_bound(100, 100, 100)


def test_one_run_audit_valid_and_catches_a_broken_trainer():
    sigma = calibrate_noise(2.0, 1e-5, 1.0, 1, "pld")
    ok = [one_run_gradient_audit(X, Y, canaries=2000, guesses=200, steps=1, sample_rate=1.0,
                                 noise_multiplier=sigma, seed=s, device="cpu")
          for s in range(5)]
    assert all(a.epsilon_lower <= a.epsilon_pld for a in ok)
    assert max(a.epsilon_lower for a in ok) > 0.5
    bad = one_run_gradient_audit(X, Y, canaries=2000, guesses=200, steps=1, sample_rate=1.0,
                                 noise_multiplier=sigma, noise_scale=0.25, seed=0,
                                 device="cpu")
    assert bad.epsilon_lower > bad.epsilon_pld


@pytest.mark.parametrize("call, name", [
    (lambda: llr_statistic([[1.0]], sample_rate=0.0, noise_multiplier=1.0), "sample_rate"),
    (lambda: llr_statistic([[1.0]], sample_rate=0.5, noise_multiplier=-1.0), "noise_multiplier"),
    (lambda: ladder_runs(X, Y, canary="pixel", runs=2, steps=1, sample_rate=0.5,
                         noise_multiplier=1.0, with_canary=True), "canary"),
    (lambda: ladder_runs(X, Y, canary="input", runs=0, steps=1, sample_rate=0.5,
                         noise_multiplier=1.0, with_canary=True), "runs"),
    (lambda: one_run_p_value(10, 11, 5, 1.0), "r"),
    (lambda: one_run_epsilon_lower_bound(10, 5, 6), "v"),
    (lambda: one_run_gradient_audit(X, Y, canaries=10, guesses=11, steps=1, sample_rate=0.5,
                                    noise_multiplier=1.0), "guesses"),
    (lambda: one_run_gradient_audit(X, Y, canaries=10, guesses=4, steps=1, sample_rate=0.5,
                                    noise_multiplier=1.0, view="loss"), "view"),
])
def test_bad_inputs_name_the_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()
