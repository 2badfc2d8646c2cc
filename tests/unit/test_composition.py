"""Basic, advanced (DRV) and optimal (KOV) composition: formulas, orderings, and bad input."""
import math

import pytest
from scipy.special import comb

from dplib.accounting import (advanced_composition, basic_composition, optimal_composition_delta,
                              optimal_composition_epsilon)


def test_basic_composition_sums():
    assert basic_composition([0.1, 0.2, 0.3], [1e-6, 0.0, 2e-6]) == (pytest.approx(0.6),
                                                                      pytest.approx(3e-6))
    assert basic_composition(0.5, 1e-5, k=10) == (pytest.approx(5.0), pytest.approx(1e-4))
    assert basic_composition([0.1, 0.2], 1e-6, k=2) == (pytest.approx(0.6), pytest.approx(4e-6))


def test_advanced_composition_formula():
    eps, k, slack = 0.1, 100, 1e-6
    e, d = advanced_composition(eps, 1e-7, k, slack)
    assert e == pytest.approx(eps * math.sqrt(2 * k * math.log(1 / slack)) + k * eps * math.expm1(eps))
    assert d == pytest.approx(k * 1e-7 + slack)
    # Advanced beats basic for many small-ε steps, and loses for few large-ε steps.
    assert e < basic_composition(eps, 0, k)[0]
    assert advanced_composition(1.0, 0, 3, 1e-6)[0] > 3.0


def _kov_delta_at_grid(eps, delta, k, i):
    """KOV 2015, Thm 3.3 literally: δ for ε_total = (k − 2i)ε."""
    d_i = sum(comb(k, l, exact=True) * (math.exp((k - l) * eps) - math.exp((k - 2 * i + l) * eps))
              for l in range(i)) / (1 + math.exp(eps)) ** k
    return 1 - (1 - delta) ** k * (1 - d_i)


@pytest.mark.parametrize("eps,delta,k", [(0.5, 0.0, 10), (0.1, 1e-6, 30), (1.0, 1e-5, 7)])
def test_optimal_composition_matches_kov_theorem(eps, delta, k):
    for i in range(0, k // 2 + 1):
        got = optimal_composition_delta(eps, delta, k, (k - 2 * i) * eps)
        assert got == pytest.approx(_kov_delta_at_grid(eps, delta, k, i), rel=1e-9, abs=1e-15)


def test_optimal_epsilon_inverts_delta_and_beats_advanced():
    eps, delta, k, target = 0.1, 0.0, 100, 1e-5
    e_opt = optimal_composition_epsilon(eps, delta, k, target)
    assert optimal_composition_delta(eps, delta, k, e_opt) == pytest.approx(target, rel=1e-8)
    e_adv, _ = advanced_composition(eps, delta, k, target)
    assert e_opt < e_adv < basic_composition(eps, delta, k)[0]
    # Monotone: asking for a smaller δ costs more ε.
    assert optimal_composition_epsilon(eps, delta, k, 1e-8) > e_opt
    # k = 1, δ = 0: ε-randomized response, δ(ε_t) = p(1 − e^{ε_t − ε}) with p = e^ε/(1+e^ε).
    p = math.exp(0.7) / (1 + math.exp(0.7))
    assert optimal_composition_epsilon(0.7, 0.0, 1, 1e-3) == pytest.approx(
        0.7 + math.log(1 - 1e-3 / p), rel=1e-12)


@pytest.mark.parametrize("call,name", [
    (lambda: basic_composition(-0.1, 0.0), "epsilons"),
    (lambda: basic_composition(0.1, 1.0), "deltas"),
    (lambda: basic_composition([0.1, 0.2], [0.1, 0.2, 0.3]), "same length"),
    (lambda: basic_composition(0.1, 0.0, k=0), "k"),
    (lambda: advanced_composition(0.1, 0.0, 10, 0.0), "delta_slack"),
    (lambda: advanced_composition(-1.0, 0.0, 10, 1e-5), "epsilon"),
    (lambda: optimal_composition_epsilon(0.1, 1e-3, 100, 1e-2), "target_delta"),
    (lambda: optimal_composition_delta(0.1, 0.0, 10, -1.0), "target_epsilon"),
])
def test_bad_input_names_parameter(call, name):
    with pytest.raises(ValueError, match=name):
        call()
