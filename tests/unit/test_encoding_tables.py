"""The moment tables shipped in dplib/data/encoding_moment_tables.json (chapter 8 reads them
through ``moment_table`` instead of integrating) are what the quadrature computes."""
import json
from importlib import resources

import numpy as np
import pytest

from dplib.encoding import (GaussianNoise, LaplaceNoise, StudentTNoise, check_monotone,
                            laplace_log_moments, log_moments, moment_table)

FAMILIES = {("gaussian",): GaussianNoise(1.0), ("laplace",): LaplaceNoise(1.0),
            ("student_t", 9.0): StudentTNoise(9, 1.0)}


def stored() -> dict:
    path = resources.files("dplib") / "data" / "encoding_moment_tables.json"
    return json.loads(path.read_text(encoding="utf-8"))


def test_stored_tables_have_provenance_and_the_chapters_families():
    data = stored()
    assert data["provenance"]["command"] == "python benchmarks/encoding_moment_tables.py --write"
    assert {tuple(t["key"]) for t in data["tables"]} == set(FAMILIES)
    for t in data["tables"]:
        assert t["orders"] == list(np.arange(2.0, 65.0))
        assert np.array_equal(t["grid"], np.logspace(-4, 1, 161))


@pytest.mark.parametrize("start", [0, 144])     # chunks of 16 shifts, as the script ran them
def test_stored_tables_are_recomputed_by_the_quadrature(start):
    for t in stored()["tables"]:
        noise = FAMILIES[tuple(t["key"])]
        u = np.asarray(t["grid"])[start:start + 16]
        again = log_moments(noise, u, t["orders"])
        assert np.allclose(np.asarray(t["values"])[start:start + 16], again, rtol=1e-9, atol=0)


def test_stored_laplace_table_matches_the_closed_form():
    t = next(t for t in stored()["tables"] if t["key"] == ["laplace"])
    exact = laplace_log_moments(t["grid"], t["orders"], 1.0)
    assert np.allclose(t["values"], exact, rtol=1e-8, atol=0)


def test_moment_table_serves_the_stored_values():
    t = next(t for t in stored()["tables"] if t["key"] == ["student_t", 9])
    tab = moment_table(StudentTNoise(9, 0.7), 64, 10.0)      # any scale: standardised
    assert np.array_equal(tab.values, t["values"]) and np.array_equal(tab.grid, t["grid"])
    small = moment_table(StudentTNoise(9, 1.0), 8, 2.0)        # a slice of the same table
    assert np.array_equal(small.values, np.asarray(t["values"])[:, :7])


def test_check_monotone_beyond_the_stored_range_integrates_the_rest():
    from dplib.encoding import moments
    moments._MONOTONE.pop(("student_t", 9.0), None)
    check_monotone(StudentTNoise(9, 1.0), 4, 14.0)          # 10 < u <= 14: computed, passes
    assert moments._MONOTONE[("student_t", 9.0)] == (4, 14.0)


def test_scipy_noise_fast_log_density_is_the_frozen_one():
    """ScipyNoise calls the distribution's own _logpdf (the quadrature's hot path) only where
    it gives what the frozen logpdf gives; a density on a bounded support keeps the frozen call."""
    from scipy import stats

    from dplib.encoding import ScipyNoise
    y = np.linspace(-50.0, 50.0, 1001)
    for dist in (stats.gennorm(4.0), stats.t(3), stats.hypsecant(), stats.gennorm(beta=1.5)):
        noise = ScipyNoise(dist)
        assert noise._fast is not None
        assert np.array_equal(noise.std_logpdf(y), dist.logpdf(y))
        assert np.array_equal(noise.with_scale(2.0).logpdf(y), dist.logpdf(y / 2) - np.log(2))
    bounded = ScipyNoise(stats.cosine())                 # support [-pi, pi]
    assert bounded._fast is None
    assert np.array_equal(bounded.std_logpdf(y), stats.cosine().logpdf(y))


def test_mixture_renyi_direct_scipy_density_gives_the_same_numbers():
    """mixture_renyi_1d calls a frozen scipy distribution's own _logpdf (same numbers, a fraction
    of the time); wrapped in a lambda the frozen logpdf is called as given: equal results."""
    from scipy import stats

    from dplib.encoding import mixture_renyi_1d
    for dist in (stats.skewnorm(5.0), stats.t(4)):
        for args in ((1.0, 0.05, 8.0, "remove"), (1.0, 1.0, 8.0, "add")):
            fast = mixture_renyi_1d(dist.logpdf, *args[:3], direction=args[3])
            plain = mixture_renyi_1d(lambda x, d=dist: d.logpdf(x), *args[:3], direction=args[3])
            assert fast == plain
