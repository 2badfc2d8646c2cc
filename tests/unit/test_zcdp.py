"""zCDP (dplib.accounting.zcdp, ZCDPEvent, the "zcdp" accountant): the Gaussian's ρ and the
conversion to (ε, δ) against dp-accounting and against the closed form of Canonne, Kamath &
Steinke 2020 (Cor. 13) evaluated independently here; monotonicity, the inverse, composition, the
events' accounting rules and their refusals."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from dplib.accounting import (ComposedEvent, GaussianEvent, LaplaceEvent, PLDAccountant,
                              PoissonSampledEvent, RDPAccountant,
                              SampledWithoutReplacementEvent, ZCDPAccountant, ZCDPEvent,
                              compose_rho, gaussian_rdp, gaussian_rho, make_accountant,
                              pure_dp_rho, rho_for_epsilon, zcdp_delta, zcdp_epsilon)

dp_accounting = pytest.importorskip("dp_accounting")
from dp_accounting import dp_event as DE  # noqa: E402
from dp_accounting.rdp import rdp_privacy_accountant as DR  # noqa: E402

GRID = [(0.01, 1e-5), (0.1, 1e-6), (0.5, 1e-5), (1.0, 1e-10), (2.5562, 1e-10), (10.0, 1e-3),
        (50.0, 1e-8)]
#: A dense order grid: the conversion minimises over it, so it converges to the infimum.
DENSE = np.concatenate([1 + np.geomspace(1e-4, 1.0, 4000), np.linspace(2.0, 3000.0, 60000)])


def _cks_log_delta(rho: float, eps: float, alpha: np.ndarray) -> np.ndarray:
    """log of exp((α−1)(αρ−ε))/(α−1)·(1−1/α)^α (Canonne, Kamath & Steinke 2020, Cor. 13), written
    out here independently of dplib."""
    return (alpha - 1) * (alpha * rho - eps) - np.log(alpha - 1) + alpha * np.log(1 - 1 / alpha)


def _cks_eps_at(rho: float, delta: float, alpha: np.ndarray) -> np.ndarray:
    """ε(α) = αρ + (log(1/δ) + (α−1)log(1−1/α) − log α)/(α−1) (the same corollary, for ε)."""
    return alpha * rho + (math.log(1 / delta) + (alpha - 1) * np.log(1 - 1 / alpha)
                          - np.log(alpha)) / (alpha - 1)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.7, 40.0])
def test_gaussian_rho_is_bun_steinke_and_matches_dp_accounting(sigma):
    rho = gaussian_rho(sigma)
    assert rho == pytest.approx(1 / (2 * sigma**2), rel=1e-15)
    orders = np.array([1.5, 2.0, 8.0, 64.0])
    assert gaussian_rdp(orders, sigma) == pytest.approx(orders * rho, rel=1e-14)
    # dp-accounting: its Gaussian event and its zCDP event with our ρ give the same ε.
    a = DR.RdpAccountant(list(DENSE[::50])).compose(DE.GaussianDpEvent(sigma))
    b = DR.RdpAccountant(list(DENSE[::50])).compose(DE.ZCDpEvent(rho))
    assert a.get_epsilon(1e-6) == pytest.approx(b.get_epsilon(1e-6), rel=1e-12)


@pytest.mark.parametrize("rho,delta", GRID)
def test_epsilon_matches_dp_accounting_zcdp_event(rho, delta):
    """dp-accounting's RDP accountant on its own ZCDpEvent minimises the same conversion (CKS
    Prop. 12) over its order grid: never below ours, and equal to it on a dense grid."""
    ours = zcdp_epsilon(rho, delta)
    theirs = DR.RdpAccountant(list(DENSE)).compose(DE.ZCDpEvent(rho)).get_epsilon(delta)
    assert theirs >= ours - 1e-9
    assert theirs == pytest.approx(ours, rel=2e-5, abs=1e-7)
    d_theirs = DR.RdpAccountant(list(DENSE)).compose(DE.ZCDpEvent(rho)).get_delta(ours)
    assert d_theirs == pytest.approx(delta, rel=1e-3)


@pytest.mark.parametrize("rho,delta", GRID)
def test_epsilon_is_the_closed_form_infimum(rho, delta):
    ours = zcdp_epsilon(rho, delta)
    grid_min = float(_cks_eps_at(rho, delta, DENSE).min())
    res = minimize_scalar(lambda a: float(_cks_eps_at(rho, delta, np.array([a]))[0]),
                          bounds=(1 + 1e-9, 1e5), method="bounded",
                          options=dict(xatol=1e-12))
    assert ours <= grid_min + 1e-9
    assert ours == pytest.approx(min(grid_min, res.fun), rel=1e-7, abs=1e-9)
    assert zcdp_delta(rho, ours) <= delta * (1 + 1e-9)


@pytest.mark.parametrize("rho,eps", [(0.01, 0.5), (0.5, 3.0), (1.0, 1.0), (2.0, 14.0),
                                     (5.0, 2.0), (0.1, 0.0)])
def test_delta_is_the_closed_form_infimum(rho, eps):
    ours = zcdp_delta(rho, eps)
    grid = float(np.exp(_cks_log_delta(rho, eps, DENSE).min()))
    res = minimize_scalar(lambda a: float(_cks_log_delta(rho, eps, np.array([a]))[0]),
                          bounds=(1 + 1e-9, 1e5), method="bounded", options=dict(xatol=1e-12))
    best = min(grid, math.exp(res.fun), 1.0)
    assert ours <= min(grid, 1.0) * (1 + 1e-9)
    assert ours == pytest.approx(best, rel=1e-7)


def test_simple_bound_is_bun_steinke_prop_1_3_and_never_tighter():
    for rho, delta in GRID:
        simple = zcdp_epsilon(rho, delta, method="simple")
        assert simple == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1 / delta)), rel=1e-15)
        assert zcdp_epsilon(rho, delta) < simple
        assert zcdp_delta(rho, simple, method="simple") == pytest.approx(delta, rel=1e-9)
        assert zcdp_delta(rho, simple) <= delta


def test_monotone_in_rho_delta_and_epsilon():
    rhos = np.geomspace(1e-3, 20, 25)
    eps = [zcdp_epsilon(r, 1e-6) for r in rhos]
    assert np.all(np.diff(eps) > 0)
    deltas = np.geomspace(1e-12, 0.5, 25)
    eps_d = [zcdp_epsilon(1.0, d) for d in deltas]
    assert np.all(np.diff(eps_d) < 0)
    epsilons = np.linspace(0, 20, 25)
    dl = [zcdp_delta(1.0, e) for e in epsilons]
    assert np.all(np.diff(dl) < 0)
    assert all(zcdp_delta(r, 3.0) <= zcdp_delta(r * 1.1, 3.0) for r in rhos)


@pytest.mark.parametrize("rho,delta", GRID)
def test_rho_for_epsilon_inverts_zcdp_epsilon(rho, delta):
    eps = zcdp_epsilon(rho, delta)
    back = rho_for_epsilon(eps, delta)
    assert back == pytest.approx(rho, rel=1e-8)
    assert zcdp_epsilon(back, delta) <= eps
    target = 1.0 + rho
    r = rho_for_epsilon(target, delta)
    assert zcdp_epsilon(r, delta) <= target
    assert zcdp_epsilon(r, delta) == pytest.approx(target, rel=1e-9)


def test_epsilon_zero_when_delta_is_large():
    assert zcdp_epsilon(1e-6, 0.5) == 0.0
    assert zcdp_delta(1e-6, 0.0) < 0.5


def test_composition_is_additive_everywhere():
    assert compose_rho([0.1, 0.25, gaussian_rho(2.0)]) == pytest.approx(0.475, rel=1e-15)
    assert pure_dp_rho(2.0) == 2.0                           # ε²/2 (Bun & Steinke, Prop. 1.4)
    acc = ZCDPAccountant().compose(GaussianEvent(2.0), 10).compose(ZCDPEvent(0.3))
    assert acc.rho == pytest.approx(10 * 0.125 + 0.3, rel=1e-15)
    assert acc.get_epsilon(1e-5) == pytest.approx(zcdp_epsilon(1.55, 1e-5), rel=1e-12)
    assert acc.get_delta(5.0) == pytest.approx(zcdp_delta(1.55, 5.0), rel=1e-12)
    lap = ZCDPAccountant().compose(LaplaceEvent(0.5))           # ε = 2 → ρ = 2
    assert lap.rho == pytest.approx(2.0)
    assert make_accountant("zcdp").__class__ is ZCDPAccountant


def test_rdp_accountant_consumes_zcdp_event_exactly():
    acc = RDPAccountant().compose(ZCDPEvent(0.7), 3)
    assert acc.rdp == pytest.approx(acc.orders * 2.1, rel=1e-15)
    gauss = RDPAccountant().compose(GaussianEvent(1.3), 5)
    same = RDPAccountant().compose(ZCDPEvent(gaussian_rho(1.3)), 5)
    assert gauss.get_epsilon(1e-6) == pytest.approx(same.get_epsilon(1e-6), rel=1e-13)
    mixed = RDPAccountant().compose(ComposedEvent([ZCDPEvent(0.2), GaussianEvent(2.0)]))
    assert mixed.rdp == pytest.approx(mixed.orders * (0.2 + 0.125), rel=1e-14)


def test_relations_of_a_zcdp_claim():
    """add/remove claim → replace-one: 4ρ (group of two, Bun & Steinke Prop. 1.9), which is
    what the Gaussian itself costs under replace-one (sensitivity 2C); a replace-one claim
    bounds nothing under add/remove and is refused before anything is recorded."""
    orders = RDPAccountant().orders
    r1 = RDPAccountant(neighboring="replace_one").compose(ZCDPEvent(gaussian_rho(2.0)))
    g1 = RDPAccountant(neighboring="replace_one").compose(GaussianEvent(2.0))
    assert r1.rdp == pytest.approx(orders * 4 * gaussian_rho(2.0), rel=1e-14)
    assert r1.rdp == pytest.approx(g1.rdp, rel=1e-14)
    z = ZCDPAccountant(neighboring="replace_one").compose(GaussianEvent(2.0))
    assert z.rho == pytest.approx(4 * gaussian_rho(2.0))
    stated = ZCDPEvent(0.5, neighboring="replace_one")
    assert RDPAccountant(neighboring="replace_one").compose(stated).rdp == pytest.approx(
        orders * 0.5)
    for acc in (RDPAccountant(), ZCDPAccountant()):
        with pytest.raises(ValueError, match="replace-one"):
            acc.compose(stated)
        assert acc.history == [] and not acc.supports(stated)


def test_subsampling_and_pld_refuse_a_zcdp_event():
    for cls in (PoissonSampledEvent, SampledWithoutReplacementEvent):
        with pytest.raises(ValueError, match="amplification-by-subsampling"):
            cls(0.1, ZCDPEvent(1.0))
    with pytest.raises(ValueError, match="PLD accountant bounds Gaussian events only"):
        PLDAccountant().compose(ZCDPEvent(1.0))
    with pytest.raises(ValueError, match="no zCDP amplification"):
        ZCDPAccountant().compose(PoissonSampledEvent(0.01, GaussianEvent(1.0)))
    assert not ZCDPAccountant().supports(PoissonSampledEvent(0.01, GaussianEvent(1.0)))


@pytest.mark.parametrize("call,name", [
    (lambda: gaussian_rho(0.0), "noise_multiplier"), (lambda: zcdp_epsilon(-1.0, 1e-5), "rho"),
    (lambda: zcdp_epsilon(1.0, 1.0), "delta"), (lambda: zcdp_delta(1.0, float("nan")), "epsilon"),
    (lambda: zcdp_delta(1.0, 1.0, method="exact"), "method"),
    (lambda: rho_for_epsilon(float("inf"), 1e-5), "epsilon"), (lambda: compose_rho([]), "rhos"),
    (lambda: ZCDPEvent(float("nan")), "rho"), (lambda: ZCDPEvent(1.0, "zero_out"), "neighboring"),
])
def test_bad_inputs_are_refused_by_name(call, name):
    with pytest.raises(ValueError, match=name):
        call()


@pytest.mark.parametrize("rho,delta", GRID)
def test_rdp_accountant_on_zcdp_event_equals_dp_accounting_on_the_same_orders(rho, delta):
    """Same curve αρ, same orders, same conversion (CKS Prop. 12) in both libraries: the same ε."""
    ours = RDPAccountant().compose(ZCDPEvent(rho))
    theirs = DR.RdpAccountant(list(ours.orders)).compose(DE.ZCDpEvent(rho))
    assert ours.get_epsilon(delta) == pytest.approx(theirs.get_epsilon(delta), rel=1e-12,
                                                    abs=1e-12)
    assert ours.get_epsilon(delta) >= zcdp_epsilon(rho, delta) - 1e-12
