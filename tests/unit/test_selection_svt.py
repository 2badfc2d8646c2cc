"""The sparse vector technique: the output law against its integral formula, the privacy ratio of
AboveThreshold (Dwork & Roth 2014, Thm 3.23) and of Lee & Clifton's variant (Lyu, Su & Li 2017,
Alg. 4), the stopping rule, and the audits that refute the broken variants. Fixed seeds."""
import math

import numpy as np
import pytest
from scipy import integrate, stats

from dplib.experiments.svt_audits import svt_audit_table
from dplib.selection import SVT_VARIANTS, above_threshold, sparse_vector, svt_error_rates


def _lap_cdf(x, b):
    return stats.laplace.cdf(x, scale=b)


def _first_above_law(a, t, b_rho, b_nu):
    """P[first ⊤ at i], i = 0..k−1, and P[none], with one ρ ~ Lap(b_rho) and ν_i ~ Lap(b_nu):
    ∫ f_ρ(r) Π_{j<i} F(T + r − a_j) (1 − F(T + r − a_i)) dr (the definition of Alg. 1), by
    Simpson's rule on a fine grid of r (vectorised over r and i)."""
    r = np.linspace(-60 * b_rho, 60 * b_rho, 240_001)
    below = _lap_cdf(t + r[None, :] - np.asarray(a)[:, None], b_nu)      # (k, grid)
    before = np.vstack([np.ones_like(r), np.cumprod(below, axis=0)])     # Π_{j<i}, i = 0..k
    last = np.vstack([1.0 - below, np.ones_like(r)])
    f = stats.laplace.pdf(r, scale=b_rho) * before * last
    return integrate.simpson(f, x=r, axis=1)


def test_above_threshold_law_matches_its_integral():
    a, t, eps = np.array([0.0, 2.0, 1.0, 4.0]), 2.5, 1.0
    law = _first_above_law(a, t, 2 / eps, 4 / eps)
    assert law.sum() == pytest.approx(1.0, abs=1e-8)
    n = 200_000
    idx = above_threshold(np.broadcast_to(a, (n, 4)), t, eps, rng=0)
    counts = np.bincount(np.where(idx < 0, 4, idx), minlength=5)
    assert stats.chisquare(counts, law * n).pvalue > 1e-4


def test_above_threshold_privacy_ratio_within_e_epsilon():
    # Worst-case style neighbours: below-queries move up, the answered one moves down.
    eps = 1.0
    a = np.array([0.0, 0.0, 0.0, 1.0])
    ap = np.array([1.0, 1.0, 1.0, 0.0])
    p, q = _first_above_law(a, 0.0, 2 / eps, 4 / eps), _first_above_law(ap, 0.0, 2 / eps, 4 / eps)
    ratio = np.max(np.abs(np.log(p) - np.log(q)))
    assert ratio <= eps + 1e-9
    assert ratio > 0.3 * eps              # the pair is informative: the test can fail


def test_lee_clifton_privacy_ratio_exceeds_its_claim():
    # Alg. 4 with c = 1: the event "⊥ ⊥ ⊥ ⊤" ratio exceeds e^ε (actual (1 + 6c)/4 ε).
    eps = 1.0
    v = SVT_VARIANTS["lee_clifton"]
    b_rho, b_nu = v.threshold_scale(eps, 1), v.query_scale(eps, 1)
    a = np.r_[np.zeros(6), [1.0]]
    ap = np.r_[np.ones(6), [0.0]]
    p, q = _first_above_law(a, 0.0, b_rho, b_nu), _first_above_law(ap, 0.0, b_rho, b_nu)
    ratio = abs(math.log(p[6]) - math.log(q[6]))
    assert eps < ratio <= v.actual(eps, 1) + 1e-9


def test_variant_table_matches_lyu_su_li():
    eps, c = 2.0, 3
    v = SVT_VARIANTS
    assert (v["lyu_alg1"].threshold_scale(eps, c), v["lyu_alg1"].query_scale(eps, c)) == (1.0, 6.0)
    assert v["dwork_roth"].query_scale(eps, c) == 6.0 and v["dwork_roth"].resample_threshold
    assert v["lee_clifton"].actual(eps, c) == pytest.approx((1 + 6 * c) * eps / 4)
    assert v["stoddard"].query_scale(eps, c) == 0.0 and not v["stoddard"].stops_after_c
    assert all(math.isinf(v[n].actual(eps, c)) for n in ("roth_notes", "stoddard", "chen"))
    assert {n for n in v if v[n].correct} == {"lyu_alg1", "dwork_roth"}


@pytest.mark.parametrize("variant", ["lyu_alg1", "dwork_roth", "lee_clifton", "roth_notes"])
def test_stops_after_c_answers(variant):
    a = np.tile(np.r_[np.full(10, 100.0), np.zeros(5)], (50, 1))
    res = sparse_vector(a, 0.0, 5.0, 3, variant=variant, rng=1)
    assert ((res.answers == 1).sum(-1) <= 3).all()
    assert ((res.answers == 1).sum(-1) == 3).mean() > 0.9          # big gaps: three ⊤ found
    first_stop = np.argmax(np.cumsum(res.answers == 1, -1) == 3, -1)
    after = np.arange(15) > first_stop[:, None]
    assert (res.answers[after] == -1).all()
    if variant == "roth_notes":
        assert np.isfinite(res.values[res.answers == 1]).all()
    else:
        assert np.isnan(res.values).all()


def test_no_cutoff_variants_answer_everything():
    res = sparse_vector(np.zeros((5, 8)), 0.0, 1.0, 1, variant="chen", rng=0)
    assert (res.answers >= 0).all()


def test_seeded_runs_repeat_and_default_draws_fresh_entropy():
    a = np.linspace(-3, 3, 20)
    r1 = sparse_vector(a, 0.0, 1.0, 2, rng=7).answers
    assert np.array_equal(r1, sparse_vector(a, 0.0, 1.0, 2, rng=7).answers)
    draws = {tuple(sparse_vector(np.zeros(30), 0.0, 0.5, 5).answers) for _ in range(5)}
    assert len(draws) > 1


@pytest.mark.slow      # a statistical audit: 4·10⁵ runs per side of the value pair (~2–4 s)
def test_audits_refute_every_broken_variant_and_no_correct_one():
    rows = svt_audit_table(1.0, n=20_000, n_values=200_000, rng=0)
    assert {r["variant"] for r in rows if r["broken"]} == {"roth_notes", "lee_clifton",
                                                            "stoddard", "chen"}
    for r in rows:
        assert r["refuted"] == r["broken"], r
        assert r["epsilon_lower"] <= r["actual"]                     # a valid lower bound
    assert min(r["epsilon_lower"] for r in rows if r["broken"]) > 1.5


def test_error_rates_summarise_the_runs():
    a = np.array([0.0, 1.0, 9.0, 2.0, 8.0])
    out = svt_error_rates(a, 5.0, 50.0, 2, runs=500, rng=0)    # large ε: almost exact
    np.testing.assert_allclose(out["p_above"], [0, 0, 1, 0, 1], atol=0.02)
    assert out["false_above"] < 0.05 and out["missed"] < 0.05 and out["alpha"] < 1.0
    noisy = svt_error_rates(a, 5.0, 0.2, 2, runs=500, rng=0)
    assert noisy["alpha"] > out["alpha"] and noisy["false_above"] > out["false_above"]
