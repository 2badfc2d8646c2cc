"""Accounting by events: one unit everywhere, a registry, and calibration for any event.

The central test builds one *physical* run — noise std s, clipping norm C, a sampler and a
neighbouring relation — and checks that every dplib accountant that accepts it reports an ε that
agrees with an independent computation of that same run (Google's dp-accounting, in its own units,
or a closed form). A unit slip of 2 (the trap of taking std/(2C) in one place and std/C in another)
moves ε by far more than the tolerances.
"""
import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting import NeighboringRelation as NR
from dp_accounting.pld import pld_privacy_accountant as dpa_pld
from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp

from dplib.accounting import (DEFAULT_ORDERS, Accountant, ComposedEvent, GaussianEvent,
                              LaplaceEvent, PLDAccountant, PoissonSampledEvent, RDPAccountant,
                              RDPCurveEvent, SampledWithoutReplacementEvent, SelfComposedEvent,
                              accountant_names, calibrate, calibrate_noise, dpsgd_event,
                              gdp_epsilon, laplace_rdp, make_accountant, register_accountant)
from dplib.accounting import registry as registry_module

DELTA = 1e-5
# (noise std s, clipping norm C, sample rate, steps): σ = s/C is 1.1, 0.8 and 2.0
RUNS = [(0.55, 0.5, 256 / 60000, 2000), (1.6, 2.0, 0.02, 300), (2.0, 1.0, 0.1, 50)]


def _dpa_rdp(event, steps, relation):
    acc = dpa_rdp.RdpAccountant(orders=list(DEFAULT_ORDERS), neighboring_relation=relation)
    return acc.compose(event, steps).get_epsilon(DELTA)


def _dpa_pld(event, steps, relation):
    acc = dpa_pld.PLDAccountant(relation, value_discretization_interval=1e-4)
    return acc.compose(event, steps).get_epsilon(DELTA)


@pytest.mark.slow
@pytest.mark.parametrize("s, c, q, steps", RUNS)
def test_same_run_same_epsilon_in_every_accountant_and_relation(s, c, q, steps):
    sigma = s / c                                   # the one unit: noise std / clipping norm
    n = 60000
    m = round(q * n)
    run = {
        ("poisson", "add_remove"): dpsgd_event(sigma, q, steps),
        ("poisson", "replace_one"): dpsgd_event(sigma, q, steps),
        ("without_replacement", "replace_one"):
            dpsgd_event(sigma, m / n, steps, sampling="without_replacement"),
    }
    # Independent values, each in dp-accounting's own unit for that event: std / C for Poisson
    # events (sensitivity C; its REPLACE_ONE pair moves the sum by 2C itself), std / (2C) for its
    # RDP analysis of sampling without replacement (the replace-one sensitivity of the sum).
    gauss = dpa.GaussianDpEvent(sigma)
    ref = {
        ("rdp", "poisson", "add_remove"):
            _dpa_rdp(dpa.PoissonSampledDpEvent(q, gauss), steps, NR.ADD_OR_REMOVE_ONE),
        ("pld", "poisson", "add_remove"):
            _dpa_pld(dpa.PoissonSampledDpEvent(q, gauss), steps, NR.ADD_OR_REMOVE_ONE),
        ("pld", "poisson", "replace_one"):
            _dpa_pld(dpa.PoissonSampledDpEvent(q, gauss), steps, NR.REPLACE_ONE),
        ("rdp", "without_replacement", "replace_one"):
            _dpa_rdp(dpa.SampledWithoutReplacementDpEvent(n, m, dpa.GaussianDpEvent(sigma / 2)),
                     steps, NR.REPLACE_ONE),
    }
    for (name, sampling, relation), want in ref.items():
        acc = make_accountant(name, neighboring=relation)
        got = acc.compose(run[sampling, relation]).get_epsilon(DELTA)
        assert got == pytest.approx(want, rel=3e-3), (name, sampling, relation)
        # the .step shorthand describes the same run
        short = make_accountant(name, neighboring=relation, sampling=sampling).step(
            noise_multiplier=sigma, sample_rate=m / n if sampling != "poisson" else q,
            num_steps=steps).get_epsilon(DELTA)
        assert short == pytest.approx(got, rel=1e-12)
    # fixed-size batches under PLD: tighter than their Rényi bound, looser than one pair of
    # datasets that attains one orientation (the Poisson remove pair with sensitivity 2C)
    wor = run["without_replacement", "replace_one"]
    pld_wor = PLDAccountant(neighboring="replace_one").compose(wor).get_epsilon(DELTA)
    rdp_wor = RDPAccountant(neighboring="replace_one").compose(wor).get_epsilon(DELTA)
    one_pair = PLDAccountant(rdp_fallback=False).compose(
        dpsgd_event(sigma / 2, m / n, steps)).get_epsilon(DELTA)
    assert one_pair <= pld_wor <= rdp_wor * (1 + 1e-12)


@pytest.mark.parametrize("relation, sens", [("add_remove", 1.0), ("replace_one", 2.0)])
@pytest.mark.parametrize("sigma, steps", [(1.0, 1), (3.0, 10)])
def test_full_batch_gaussian_is_the_exact_gaussian_in_both_relations(relation, sens, sigma,
                                                                     steps):
    exact = gdp_epsilon(sens * math.sqrt(steps) / sigma, DELTA)
    event = SelfComposedEvent(GaussianEvent(sigma), steps)
    pld = PLDAccountant(neighboring=relation).compose(event).get_epsilon(DELTA)
    rdp = RDPAccountant(neighboring=relation).compose(event).get_epsilon(DELTA)
    assert exact * (1 - 1e-9) <= pld <= exact * 1.001
    assert exact * (1 - 1e-9) <= rdp <= exact * 1.25


@pytest.mark.parametrize("b", [0.5, 1.0, 3.0])
def test_laplace_rdp_matches_dp_accounting_and_the_pure_dp_limit(b):
    acc = dpa_rdp.RdpAccountant(orders=list(DEFAULT_ORDERS))
    want = acc.compose(dpa.LaplaceDpEvent(b), 3).get_epsilon(DELTA)
    got = RDPAccountant().compose(LaplaceEvent(b), 3).get_epsilon(DELTA)
    assert got == pytest.approx(want, rel=1e-9)
    # Rényi divergence grows with the order towards the max divergence 1/b (Mironov 2017, Prop. 6)
    r = laplace_rdp([1.5, 4.0, 1e6], b)
    assert np.all(np.diff(r) > 0) and r[-1] == pytest.approx(1 / b, rel=1e-5)
    # replace-one: ℓ1 sensitivity 2C
    np.testing.assert_allclose(
        RDPAccountant(neighboring="replace_one").compose(LaplaceEvent(b)).rdp,
        laplace_rdp(DEFAULT_ORDERS, b / 2))


def test_composed_events_add_up_in_rdp_and_order_does_not_matter():
    a = dpsgd_event(1.0, 0.01, 100)
    b = SelfComposedEvent(GaussianEvent(5.0), 3)
    c = LaplaceEvent(10.0)
    whole = RDPAccountant().compose(ComposedEvent([a, b, c])).rdp
    parts = RDPAccountant().compose(c).compose(a).compose(b).rdp
    np.testing.assert_allclose(whole, parts, rtol=1e-12)
    twice = RDPAccountant().compose(a, count=2).rdp
    np.testing.assert_allclose(twice, 2 * RDPAccountant().compose(a).rdp, rtol=1e-12)


def test_pld_accountant_composes_mixed_samplers_under_replace_one():
    poisson, wor = dpsgd_event(1.2, 0.02, 200), dpsgd_event(
        1.2, 0.02, 200, sampling="without_replacement")
    acc = PLDAccountant(neighboring="replace_one", rdp_fallback=False)
    both = acc.compose(poisson).compose(wor).get_epsilon(DELTA)
    alone = [PLDAccountant(neighboring="replace_one", rdp_fallback=False).compose(e)
             .get_epsilon(DELTA) for e in (poisson, wor)]
    assert max(alone) < both < sum(alone)


@pytest.mark.parametrize("make, event, match", [
    (lambda: RDPAccountant(), dpsgd_event(1.0, 0.1, 5, sampling="without_replacement"),
     "replace-one"),
    (lambda: PLDAccountant(), dpsgd_event(1.0, 0.1, 5, sampling="without_replacement"),
     "replace-one"),
    (lambda: RDPAccountant(neighboring="replace_one"), dpsgd_event(1.0, 0.1, 5),
     "PLDAccountant"),
    (lambda: RDPAccountant(), PoissonSampledEvent(0.1, LaplaceEvent(1.0)), "Laplace"),
    (lambda: PLDAccountant(), LaplaceEvent(1.0), "Gaussian events only"),
])
def test_unsupported_events_are_refused_by_name_and_nothing_is_recorded(make, event, match):
    acc = make()
    with pytest.raises(ValueError, match=match):
        acc.compose(event)
    assert acc.history == [] and acc.events == []


@pytest.mark.parametrize("build, name", [
    (lambda: GaussianEvent(0.0), "noise_multiplier"),
    (lambda: GaussianEvent(float("nan")), "noise_multiplier"),
    (lambda: LaplaceEvent(-1.0), "noise_multiplier"),
    (lambda: PoissonSampledEvent(0.0, GaussianEvent(1.0)), "sample_rate"),
    (lambda: PoissonSampledEvent(1.5, GaussianEvent(1.0)), "sample_rate"),
    (lambda: SampledWithoutReplacementEvent(0.1, "gauss"), "event"),
    (lambda: SelfComposedEvent(GaussianEvent(1.0), 0), "count"),
    (lambda: SelfComposedEvent(GaussianEvent(1.0), 2.5), "count"),
    (lambda: ComposedEvent([]), "events"),
    (lambda: ComposedEvent([GaussianEvent(1.0), 3]), r"events\[1\]"),
    (lambda: dpsgd_event(1.0, 0.1, 10, sampling="shuffle"), "sampling"),
    (lambda: RDPAccountant().compose("gaussian"), "event"),
    (lambda: RDPAccountant(neighboring="swap"), "neighboring"),
    (lambda: PLDAccountant(sampling="without_replacement"), "sampling, neighboring"),
    (lambda: make_accountant("moments"), "accountant"),
])
def test_bad_events_are_refused_by_name(build, name):
    with pytest.raises(ValueError, match=name):
        build()


def test_registry_names_and_a_new_accountant_in_one_decorator():
    assert accountant_names()[:2] == ("rdp", "pld")
    assert isinstance(make_accountant("pld", neighboring="replace_one"), PLDAccountant)

    class Basic(Accountant):
        """Basic composition of pure ε-DP Laplace events (Dwork & Roth 2014, Thm 3.16)."""

        def __init__(self, **kw):
            super().__init__(**kw)
            self.eps = 0.0

        def _check_supported(self, leaf):
            super()._check_supported(leaf)
            if not issubclass(leaf.mechanism, LaplaceEvent) or leaf.sample_rate < 1:
                self._refuse(leaf, "pure Laplace events only")

        def _add(self, leaf):
            self.eps += leaf.count / leaf.noise_multiplier

        def get_epsilon(self, delta):
            return self.eps

        def get_delta(self, epsilon):
            return 0.0 if epsilon >= self.eps else 1.0

    try:
        register_accountant("basic_test")(Basic)
        with pytest.raises(ValueError, match="already registered"):
            register_accountant("basic_test")(RDPAccountant)
        with pytest.raises(ValueError, match="subclass"):
            register_accountant("other_test")(dict)
        assert "basic_test" in accountant_names()
        # calibration works for any registered accountant and any event: 4 releases at ε = 1
        b = calibrate(lambda s: SelfComposedEvent(LaplaceEvent(s), 4), 1.0, DELTA,
                      accountant="basic_test")
        assert 4.0 <= b <= 4.0 * (1 + 1e-4)
    finally:
        registry_module._ACCOUNTANTS.pop("basic_test", None)


class _Curve(RDPCurveEvent):
    """A mechanism that states its RDP: the Gaussian with σ = scale, add/remove only."""

    def __init__(self, scale):
        self.scale = scale

    def rdp(self, orders, neighboring):
        if neighboring != "add_remove":
            raise ValueError("neighboring: add_remove only")
        return orders / (2 * self.scale**2)


def test_rdp_curve_events_and_calibration_agree_with_the_gaussian_they_state():
    got = RDPAccountant().compose(_Curve(2.0), 7).get_epsilon(DELTA)
    want = RDPAccountant().compose(GaussianEvent(2.0), 7).get_epsilon(DELTA)
    assert got == pytest.approx(want, rel=1e-12)
    with pytest.raises(ValueError, match="Gaussian events only"):
        PLDAccountant().compose(_Curve(2.0))
    s_curve = calibrate(lambda s: SelfComposedEvent(_Curve(s), 7), 2.0, DELTA)
    s_gauss = calibrate(lambda s: SelfComposedEvent(GaussianEvent(s), 7), 2.0, DELTA)
    assert s_curve == pytest.approx(s_gauss, rel=1e-9)


@pytest.mark.parametrize("name", ["rdp", "pld"])
@pytest.mark.parametrize("relation, sampling", [("add_remove", "poisson"),
                                                ("replace_one", "poisson"),
                                                ("replace_one", "without_replacement")])
def test_calibrated_noise_meets_the_target_on_the_safe_side(name, relation, sampling):
    if name == "rdp" and (relation, sampling) == ("replace_one", "poisson"):
        with pytest.raises(ValueError, match="PLDAccountant"):
            calibrate_noise(2.0, DELTA, 0.02, 200, name, neighboring=relation, sampling=sampling)
        return
    sigma = calibrate_noise(2.0, DELTA, 0.02, 200, name, neighboring=relation, sampling=sampling)

    def eps(s):
        return make_accountant(name, neighboring=relation).compose(
            dpsgd_event(s, 0.02, 200, sampling=sampling)).get_epsilon(DELTA)
    assert eps(sigma) <= 2.0 < eps(sigma / (1 + 2e-4))
