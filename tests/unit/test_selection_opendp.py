"""dplib.selection against OpenDP (a test-only oracle, ``opendp`` 0.16): where OpenDP covers the
same mechanism, its privacy map gives the same number. OpenDP has no sparse vector technique and
no tuning accountant in 0.16; those are checked against the papers' formulas in the other
test_selection_* files."""
import math

import numpy as np
import pytest

from dplib.accounting import DEFAULT_ORDERS
from dplib.selection import GNMaxEvent, LNMaxEvent

dp = pytest.importorskip("opendp.prelude")
dp.enable_features("contrib")


@pytest.mark.parametrize("sigma", [1.0, 7.5, 40.0])
def test_gnmax_rdp_is_opendp_gaussian_zcdp_at_l2_sensitivity_sqrt2(sigma):
    # One teacher changes its vote: the histogram moves by √2 in ℓ2. OpenDP's Gaussian mechanism
    # maps it to ρ-zCDP; ρ-zCDP is (λ, ρλ)-RDP (Bun & Steinke 2016, Def. 1.1).
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float)
    rho = dp.m.make_gaussian(*space, scale=sigma).map(math.sqrt(2))
    np.testing.assert_allclose(GNMaxEvent(sigma).rdp(DEFAULT_ORDERS, "add_remove"),
                               rho * DEFAULT_ORDERS, rtol=1e-12)


@pytest.mark.parametrize("gamma", [0.01, 0.1, 1.0])
def test_lnmax_epsilon_is_opendp_laplace_and_noisy_max(gamma):
    # Pure ε of one LNMax answer: the Laplace mechanism on a histogram of ℓ1 sensitivity 2,
    # and report-noisy-max at the same scale on counts of ℓ∞ sensitivity 1 (not monotone).
    l1 = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)
    eps_lap = dp.m.make_laplace(*l1, scale=1.0 / gamma).map(2.0)
    linf = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
    eps_max = dp.m.make_noisy_max(*linf, dp.max_divergence(), scale=1.0 / gamma).map(1.0)
    assert eps_lap == pytest.approx(2 * gamma) and eps_max == pytest.approx(2 * gamma)
    # the RDP curve of LNMaxEvent tends to that ε at large orders (Mironov 2017, Prop. 6)
    big = LNMaxEvent(gamma).rdp(np.array([1e6]), "replace_one")[0]
    assert big == pytest.approx(2 * gamma, rel=1e-3)
    assert (LNMaxEvent(gamma).rdp(DEFAULT_ORDERS, "replace_one") <= 2 * gamma + 1e-12).all()
