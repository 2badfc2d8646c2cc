"""Published deployments (dplib.deployments): the numbers dplib computes from the published
parameters match the published numbers to the precision they are published with."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dplib.accounting import rho_for_epsilon, zcdp_epsilon
from dplib.deployments import apple_cms, census_2020, gboard_2023
from dplib.mechanisms.count_mean_sketch import cms_flip_probability


def _cks_epsilon_by_bisection(rho: float, delta: float) -> float:
    """The Census DAS code's own route (programs/engine/curve.py): δ(ε) at the order solving
    g'(α) = (2α−1)ρ − ε + log(1−1/α) = 0 by bisection, then ε by bisection on δ(ε) = δ —
    rewritten here with numpy only, to check dplib's conversion against the method the
    published numbers came from."""
    def log_delta(eps: float) -> float:
        lo, hi = max((eps + rho) / (2 * rho), 1 + 1e-12), max((eps + rho + 1) / (2 * rho), 2.0)
        while (2 * hi - 1) * rho - eps + math.log(1 - 1 / hi) < 0:
            hi *= 2
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if (2 * mid - 1) * rho - eps + math.log(1 - 1 / mid) < 0:
                lo = mid
            else:
                hi = mid
        a = 0.5 * (lo + hi)
        return (a - 1) * (a * rho - eps) + a * math.log(1 - 1 / a) - math.log(a - 1)
    lo, hi = 0.0, 100.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if log_delta(mid) > math.log(delta):
            lo = mid
        else:
            hi = mid
    return hi


def test_census_persons_file_matches_the_published_epsilon():
    c = census_2020()
    assert c.delta == 1e-10 and c.neighboring == "replace_one"
    assert c.persons_rho == pytest.approx(float(Fraction(542, 339) ** 2), rel=1e-15)
    assert round(c.persons_epsilon, 2) == c.published_persons_epsilon == 17.14
    assert c.persons_epsilon == pytest.approx(_cks_epsilon_by_bisection(c.persons_rho, 1e-10),
                                              abs=1e-8)


def test_census_levels_split_the_persons_rho():
    c = census_2020()
    names = [lv.name for lv in c.persons_levels]
    assert names == ["US", "State", "County", "Tract", "Block group", "Block"]
    assert sum(lv.share for lv in c.persons_levels) == 1
    assert math.fsum(lv.rho for lv in c.persons_levels) == pytest.approx(c.persons_rho,
                                                                         rel=1e-14)
    for lv in c.persons_levels:
        assert lv.rho == pytest.approx(float(lv.share) * c.persons_rho, rel=1e-14)
    # each level alone is a weaker claim than the whole file
    assert all(zcdp_epsilon(lv.rho, c.delta) < c.persons_epsilon for lv in c.persons_levels)


def test_census_totals_match_the_published_budget():
    c = census_2020()
    assert round(zcdp_epsilon(c.units_rho_implied, c.delta), 2) == c.published_units_epsilon
    assert round(c.total_epsilon_basic, 2) == c.published_total_epsilon == 19.61
    assert c.total_rho == pytest.approx(c.persons_rho + c.units_rho_implied, rel=1e-15)
    # converting the summed ρ once is tighter than adding the two ε's
    assert c.persons_epsilon < c.total_epsilon_zcdp < c.total_epsilon_basic
    assert c.not_found and len(c.sources) == 3


def test_gboard_range_and_the_es_es_launch_are_consistent():
    g = gboard_2023()
    assert g.delta == 1e-10 and g.rho_range == (0.2, 2.0)
    assert g.epsilon_range == (zcdp_epsilon(0.2, 1e-10), zcdp_epsilon(2.0, 1e-10))
    assert [round(e, 2) for e in g.epsilon_range] == [4.17, 14.87]
    # the es-ES launch's published ε, read back as ρ, lies in the published ρ range
    assert g.rho_range[0] < g.es_es_first_launch_rho_implied < g.rho_range[1]
    assert round(zcdp_epsilon(g.es_es_first_launch_rho_implied, g.delta), 1) == \
        g.es_es_first_launch_epsilon == 8.9
    assert g.es_es_first_launch_rho_implied == pytest.approx(rho_for_epsilon(8.9, 1e-10))


def test_apple_per_donation_budgets_and_daily_cap():
    a = apple_cms()
    emoji = a.use_case("emoji")
    assert (emoji.epsilon_per_donation, emoji.donations_per_day) == (4.0, 1)
    assert (emoji.sketch_rows, emoji.sketch_columns) == (65_536, 1024)
    assert a.use_case("QuickType").epsilon_per_donation == 8.0
    assert a.use_case("Health types").epsilon_per_donation == 2.0
    assert a.emoji_epsilon_per_day == 4.0 and a.emoji_epsilon_per_year == 1460.0
    assert a.emoji_flip_probability == pytest.approx(1 / (1 + np.exp(2.0)), rel=1e-12)
    assert a.emoji_flip_probability == cms_flip_probability(4.0)
    with pytest.raises(ValueError, match="name"):
        a.use_case("Safari")


def test_records_are_frozen():
    with pytest.raises(Exception):
        census_2020().delta = 1e-5          # type: ignore[misc]
