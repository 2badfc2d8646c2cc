"""Accountant stress grid, fast subset (the full grid is benchmarks/stress_accountants.py).

No exception, NaN, negative ε or slow point; ε monotone in T and σ; RDP ≥ PLD; both ≥ the exact
ε where it is known (q = 1: composed Gaussian; T = 1: closed-form hockey stick, mpmath); PLD
tight (within 5%) for δ ≥ 1e-10; agreement with dp-accounting; calibrate_noise sound.

The extreme grid spans the whole legal box σ ∈ [0.01, 1e4], q ∈ [1e-9, 1], T ∈ [1, 1e9] (its
log-spaced corners and centre as a product, plus interior points): every call answers a finite
ε ≥ the exact one where that is cheap, PLD ≤ RDP, each call (and each calibrate_noise) within
2 s of wall-clock time.
"""
from __future__ import annotations

import itertools

import pytest

from dplib.testing import accountant_stress as S

RDP_GRID = dict(qs=[1e-5, 0.01, 1.0], sigmas=[0.2, 1.0, 50.0], steps=[1, 1000, 10 ** 7],
                deltas=[1e-15, 1e-5, 0.1])
PLD_GRID = dict(qs=[0.01, 1.0], sigmas=[0.5, 5.0], steps=[1, 1000], deltas=[1e-15, 1e-5, 0.1])


@pytest.fixture(scope="module")
def report():
    rep = S.Report()
    for kind, grid in (("rdp", RDP_GRID), ("pld", PLD_GRID)):
        for q, s, t in itertools.product(grid["qs"], grid["sigmas"], grid["steps"]):
            S.check_answers(rep, S.run_point(kind, q, s, t, grid["deltas"]))
            if kind == "pld":   # the RDP twin of every PLD point, for RDP ≥ PLD
                if not (q in RDP_GRID["qs"] and s in RDP_GRID["sigmas"]
                        and t in RDP_GRID["steps"]):
                    S.check_answers(rep, S.run_point("rdp", q, s, t, grid["deltas"]))
    return rep


def test_no_exception_nan_or_slow_point(report):
    assert len(report.answers) >= 100
    assert not report.failures, "\n".join(report.failures)


def test_monotone_and_rdp_above_pld(report):
    rep = S.Report(answers=report.answers)
    n = 0
    for grid in (RDP_GRID, PLD_GRID):
        n += S.check_grid_relations(rep, grid["qs"], grid["sigmas"], grid["steps"],
                                    grid["deltas"])
    assert n > 100
    assert not rep.failures, "\n".join(rep.failures)


def test_above_the_exact_epsilon(report):
    rep = S.Report()
    answers = [a for a in report.answers if a.q == 1.0 or (a.steps == 1 and a.q >= 0.01)]
    n = S.check_exact(rep, answers)
    assert n >= 20
    assert not rep.failures, "\n".join(rep.failures)


def test_pld_at_tiny_delta_is_a_bound_and_no_looser_than_rdp():
    """Found by the stress grid: δ = 1e-15 gave ε = 3.1 (exact 0.87, RDP 2.3) for q = 1e-3,
    σ = 1, T = 1 — and, once the window's tail was tied to δ, FFT round-off gave ε *below* the
    exact value for σ = 0.2, q = 1, T = 100. Now: an upper bound, never above RDP."""
    from dplib.accounting import PLDAccountant, RDPAccountant
    for q, s, t in ((1e-3, 1.0, 1), (1.0, 0.2, 100)):
        exact = (S.exact_epsilon_single_step(q, s, 1e-15) if t == 1
                 else S.exact_epsilon_full_batch(s, t, 1e-15))
        pld = PLDAccountant().step(noise_multiplier=s, sample_rate=q,
                                   num_steps=t).get_epsilon(1e-15)
        rdp = RDPAccountant().step(noise_multiplier=s, sample_rate=q,
                                   num_steps=t).get_epsilon(1e-15)
        assert exact <= pld <= rdp


def test_agrees_with_dp_accounting(report):
    rep = S.Report()
    answers = [a for a in report.answers if a.delta == 1e-5 and a.steps <= 1000
               and a.q >= 0.01 and (a.accountant == "rdp" or a.sigma >= 5.0)]
    n = S.check_reference(rep, answers)
    assert n >= 6
    assert not rep.failures, "\n".join(rep.failures)


@pytest.mark.parametrize("target,q,steps,kind", [(0.5, 0.01, 1000, "rdp"),
                                                 (8.0, 1.0, 1, "rdp"),
                                                 (1.0, 0.01, 100, "pld"),
                                                 (0.1, 1e-4, 10 ** 6, "rdp")])
def test_calibrate_noise_sound(target, q, steps, kind):
    rep = S.Report()
    S.check_calibration(rep, target, 1e-5, q, steps, kind)
    assert not rep.failures, "\n".join(rep.failures)


@pytest.fixture(scope="module")
def extreme_report():
    rep = S.Report()
    for q, s, t in S.extreme_points():
        for kind in ("rdp", "pld"):
            S.check_extreme_answers(rep, [S.run_timed_point(kind, q, s, t, d)
                                          for d in S.EXTREME_DELTAS])
    return rep


def test_extreme_grid_answers_finite_and_in_time(extreme_report):
    assert len(extreme_report.answers) == 2 * len(S.EXTREME_DELTAS) * len(S.extreme_points())
    assert not extreme_report.failures, "\n".join(extreme_report.failures)


def test_extreme_grid_upper_bounds(extreme_report):
    """Every comparison is made (a call that raised leaves one out, and fails this too)."""
    rep = S.Report()
    n = S.check_extreme_relations(rep, extreme_report.answers)
    assert n == S.expected_extreme_comparisons()
    assert not rep.failures, "\n".join(rep.failures)


@pytest.mark.parametrize("kind", ["rdp", "pld"])
def test_extreme_calibration(kind):
    rep = S.Report()
    for target, delta, q, steps in S.EXTREME_CALIBRATIONS:
        S.check_extreme_calibration(rep, target, delta, q, steps, kind)
    assert not rep.failures, "\n".join(rep.failures)
