"""The private-selection releases under hostile inputs: extreme utilities and answers, ties,
non-finite scores, extreme privacy parameters. Each is refused by name or handled by a documented
deterministic rule that keeps the released law the analysed one."""
import math

import numpy as np
import pytest

from dplib.accounting import GaussianEvent, RDPAccountant
from dplib.selection import (TunedRuns, above_threshold, gnmax, gnmax_log_q, lnmax, ptr_median,
                             sample_and_aggregate, smooth_median, sparse_vector, tnb_gamma,
                             tnb_mean)

NONFINITE = [np.nan, np.inf, -np.inf]


@pytest.mark.parametrize("bad", NONFINITE)
def test_non_finite_answers_thresholds_and_votes_are_refused(bad):
    with pytest.raises(ValueError, match="answers"):
        sparse_vector([0.0, bad], 0.0, 1.0, rng=0)
    with pytest.raises(ValueError, match="threshold"):
        above_threshold([0.0, 1.0], bad, 1.0, rng=0)
    with pytest.raises(ValueError, match="votes"):
        gnmax([[3.0, bad]], 1.0, rng=0)
    with pytest.raises(ValueError, match="votes"):
        gnmax_log_q([3.0, bad], 1.0)
    with pytest.raises(ValueError, match=r"\bx\b"):
        smooth_median([1.0, bad], 1.0, 0.0, 10.0, rng=0)


def test_huge_answers_keep_their_noise():
    # Shifting answers and threshold by the same huge constant changes nothing: the test is on
    # the gap a − T (computed exactly here), never on a + ν where rounding would eat ν.
    base = np.tile(np.linspace(-3, 3, 13), (2000, 1))
    shift = 2.0**40
    r0 = sparse_vector(base, 0.5, 2.0, 3, rng=5).answers
    r1 = sparse_vector(base + shift, 0.5 + shift, 2.0, 3, rng=5).answers
    np.testing.assert_array_equal(r0, r1)
    # |a − T| overflowing is the limit: always ⊤ (or always ⊥), whatever the noise
    assert above_threshold([1e308], -1e308, 1.0, rng=0) == 0
    assert above_threshold([-1e308], 1e308, 1.0, rng=0) == -1


def test_tiny_epsilon_refused_when_the_scale_overflows():
    sparse_vector([0.0, 1.0], 0.0, 1e-300, rng=0)          # scale 4e300: still finite, runs
    with pytest.raises(ValueError, match="epsilon"):
        sparse_vector([0.0, 1.0], 0.0, 1e-320, rng=0)
    with pytest.raises(ValueError, match="sensitivity"):
        sparse_vector([0.0, 1.0], 0.0, 1e-10, sensitivity=1e300, rng=0)


def test_tie_at_the_threshold_without_query_noise_is_above():
    # Stoddard et al.'s variant has no query noise: a = T + ρ exactly is ⊤ by the documented ≥.
    res = sparse_vector(np.zeros((200, 1)), 0.0, 1e300, variant="stoddard", rng=0)
    # ε = 1e300: ρ ~ Lap(2e-300) is ±tiny; the answer is ⊤ exactly when ρ ≤ 0
    assert 0.3 < (res.answers == 1).mean() < 0.7


def test_tied_and_huge_votes_are_split_by_the_noise():
    for level in (10.0, 1e20, 1e300):
        votes = np.tile([level, level, level], (3000, 1))
        share = np.bincount(gnmax(votes, 1.0, rng=1), minlength=3) / 3000
        assert (np.abs(share - 1 / 3) < 0.05).all(), (level, share)
        share = np.bincount(lnmax(votes, 1.0, rng=2), minlength=3) / 3000
        assert (np.abs(share - 1 / 3) < 0.05).all(), (level, share)
    # an overwhelming lead is kept even with huge counts
    assert (gnmax(np.tile([1e20, 1e20 - 1e6, 0.0], (100, 1)), 1.0, rng=0) == 0).all()


def test_extreme_bounds_and_statistics():
    with pytest.raises(ValueError, match="upper"):
        smooth_median([0.0, 1.0], 1.0, -1e308, 1e308, rng=0)        # width overflows
    with pytest.raises(ValueError, match=r"\bx\b"):
        ptr_median([0.0, 11.0], 1.0, 1e-5, 1.0, 0.0, 10.0, rng=0)    # outside the bounds

    def hostile(block):                                  # ±inf and NaN from a statistic
        return [np.inf, -np.inf, np.nan][len(block) % 3]
    out = sample_and_aggregate(np.arange(30.0), hostile, 3, 1e9, 0.0, 10.0, rng=0)
    assert math.isfinite(out) and 0.0 <= out <= 10.0


def test_tuning_extremes():
    assert tnb_mean(-0.5, tnb_gamma(-0.5, 1e6)) == pytest.approx(1e6, rel=1e-8)
    with pytest.raises(ValueError, match="mean"):       # E[K] ~ 1/γ^0.001: 1e6 is unreachable
        tnb_gamma(-0.999, 1e6)
    assert tnb_mean(999.0, tnb_gamma(999.0, 1.001)) == pytest.approx(1.001, rel=1e-9)
    with pytest.raises(ValueError, match="mean"):
        tnb_gamma(999.0, 1.0000000001)
    eps = RDPAccountant().compose(TunedRuns(GaussianEvent(3.0), "poisson", 1e6)).get_epsilon(1e-5)
    assert math.isfinite(eps)
    with pytest.raises(ValueError, match="mean"):
        TunedRuns(GaussianEvent(3.0), "geometric", 1.0)      # one run: not a tuning
