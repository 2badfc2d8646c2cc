"""Statistical audits of every mechanism in dplib (fast versions; the full run is
benchmarks/audit_mechanisms.py).

Each audit runs the mechanism many times on a worst-case neighbouring pair, chooses the best
threshold event on half of the runs and bounds ε from below on the other half with
Clopper–Pearson at 95% (dplib.attacks.audit_stats). It must not exceed the claimed ε; for the simple
mechanisms it must come close (the audit has power); and deliberately broken mechanisms must be
refuted (a test of the audit itself).
"""
from __future__ import annotations

import numpy as np
import pytest

from dplib.experiments.mechanism_audits import mechanism_audits

N = 60_000          # runs per side (the float-Laplace audit uses fewer: its check is exact)
AUDITS = {a.name: a for a in mechanism_audits(1.0)}
SOUND = [a for a in AUDITS.values() if not a.broken]
BROKEN = [a for a in AUDITS.values() if a.broken]


def _n(audit):
    return 2000 if "float" in audit.name else N


def test_catalogue_covers_every_mechanism():
    names = " ".join(AUDITS)
    for mech in ("randomized_response", "laplace_mechanism", "discrete_laplace_mechanism",
                 "gaussian_mechanism", "discrete_gaussian_mechanism", "exponential_mechanism",
                 "report_noisy_max[gumbel]", "report_noisy_max[laplace]",
                 "report_noisy_max[laplace, monotone]", "subsampled_gaussian"):
        assert mech in names
    assert len(SOUND) >= 10 and len(BROKEN) >= 5
    try:
        import dplib.icl.aggregation  # noqa: F401
    except ImportError:
        return
    assert "icl.noisy_vote[histogram]" in names and "icl.rnm_vote" in names


@pytest.mark.parametrize("audit", SOUND, ids=lambda a: a.name)
def test_sound_mechanism_is_not_refuted(audit):
    res = audit.run(_n(audit), rng=12345)
    assert res.epsilon_lower <= audit.claimed_epsilon, (audit.name, res)
    if audit.pair_epsilon is not None:
        assert audit.pair_epsilon <= audit.claimed_epsilon + 1e-12


@pytest.mark.parametrize("name,fraction", [
    ("randomized_response", 0.9), ("laplace_mechanism", 0.7),
    ("discrete_laplace_mechanism", 0.7), ("exponential_mechanism", 0.7),
    ("report_noisy_max[gumbel]", 0.7), ("report_noisy_max[laplace]", 0.7),
    ("icl.rnm_vote", 0.7),
])
def test_audit_has_power_on_simple_mechanisms(name, fraction):
    """At ε = 1 with 60 000 runs per side the bound reaches ≥ 0.7 of the pair's true ε."""
    if name not in AUDITS:
        pytest.skip(f"{name}: its module is not installed")
    audit = AUDITS[name]
    target = audit.pair_epsilon if audit.pair_epsilon is not None else audit.claimed_epsilon
    res = audit.run(N, rng=7)
    assert res.epsilon_lower >= fraction * target, (name, res.epsilon_lower, target)


@pytest.mark.parametrize("name,fraction", [
    ("subsampled_gaussian[σ=1,q=0.5,T=1]", 0.7), ("discrete_gaussian_mechanism", 0.7),
    ("gaussian_mechanism@profile", 0.6), ("subsampled_gaussian[σ=1,q=0.5,T=10]", 0.6),
    ("icl.noisy_vote[histogram]", 0.6),
])
def test_audit_has_power_on_accounted_mechanisms(name, fraction):
    """The subsampled Gaussian (accountant's ε), the discrete Gaussian (CKS 2020 Thm 7) and the
    Gaussian (Balle & Wang 2018 Thm 8, dplib.mechanisms.gaussian_epsilon) at the audit's δ: the
    bound comes close to the claim, so a claim too small by that factor would be caught."""
    if name not in AUDITS:
        pytest.skip(f"{name}: its module is not installed")
    audit = AUDITS[name]
    res = audit.run(N, rng=11)
    assert fraction * audit.claimed_epsilon <= res.epsilon_lower <= audit.claimed_epsilon, name


@pytest.mark.parametrize("audit", BROKEN, ids=lambda a: a.name)
def test_broken_mechanism_is_refuted(audit):
    res = audit.run(_n(audit), rng=2024)
    assert res.refutes(audit.claimed_epsilon), (audit.name, res)


@pytest.mark.parametrize("eps", [0.25, 2.0])
def test_other_privacy_levels(eps):
    """RR and Laplace at other ε: not refuted, and the halved-scale Laplace is refuted."""
    audits = {a.name: a for a in mechanism_audits(eps)}
    for name in ("randomized_response", "laplace_mechanism"):
        res = audits[name].run(N, rng=5)
        assert 0.6 * eps <= res.epsilon_lower <= eps
    assert audits["BROKEN laplace (scale halved)"].run(N, rng=5).refutes(eps)
