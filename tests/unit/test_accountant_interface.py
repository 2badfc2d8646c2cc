"""The accountant interface every trainer and calibration relies on: supports(event),
epsilon_after(event, count, δ), abstract get_epsilon/get_delta, and matching on event classes."""
from __future__ import annotations

import pytest

from dplib.accounting import (Accountant, GaussianEvent, LaplaceEvent, PLDAccountant,
                              PoissonSampledEvent, RDPAccountant, SelfComposedEvent, dpsgd_event)
from dplib.accounting.events import flatten


def test_supports_says_what_compose_would_refuse():
    sub_laplace = PoissonSampledEvent(0.1, LaplaceEvent(1.0))
    assert RDPAccountant().supports(dpsgd_event(1.0, 0.01, 10))
    assert not RDPAccountant().supports(sub_laplace)
    with pytest.raises(ValueError, match="subsampled Laplace"):
        RDPAccountant().compose(sub_laplace)
    assert not RDPAccountant(neighboring="replace_one").supports(dpsgd_event(1.0, 0.01, 10))
    assert PLDAccountant(neighboring="replace_one").supports(dpsgd_event(1.0, 0.01, 10))


@pytest.mark.parametrize("cls", [RDPAccountant, PLDAccountant])
def test_epsilon_after_equals_composing_and_leaves_the_accountant_unchanged(cls):
    one = dpsgd_event(1.1, 0.01, 1)
    acc = cls().compose(dpsgd_event(1.1, 0.01, 50))
    got = acc.epsilon_after(one, 150, 1e-5)
    want = cls().compose(dpsgd_event(1.1, 0.01, 200)).get_epsilon(1e-5)
    assert got == pytest.approx(want, rel=1e-6)
    assert sum(s.count for s in acc.history) == 50


def test_leaves_carry_their_event_class_not_a_name():
    leaves = list(flatten(SelfComposedEvent(PoissonSampledEvent(0.1, GaussianEvent(2.0)), 3)))
    assert leaves[0].mechanism is GaussianEvent and leaves[0].count == 3


def test_an_accountant_without_get_delta_cannot_be_built():
    class Half(Accountant):
        def get_epsilon(self, delta):
            return 0.0
    with pytest.raises(TypeError, match="abstract"):
        Half()
