"""Samplers (dplib.samplers): distributions checked by seeded statistical tests, and bad input."""
import numpy as np
import pytest
from scipy import stats

from dplib.samplers import fixed_size_batches, poisson_batches, shuffled_epochs


def _binomial_chi2_pvalue(sizes: np.ndarray, n: int, q: float) -> float:
    """Chi-square goodness of fit of observed batch sizes to Binomial(n, q), bins with E ≥ 5."""
    k = np.arange(n + 1)
    expected = stats.binom.pmf(k, n, q) * sizes.size
    observed = np.bincount(sizes, minlength=n + 1).astype(float)
    # merge the tails into the neighbouring bins until every bin expects at least 5
    keep = expected >= 5
    lo, hi = np.flatnonzero(keep)[[0, -1]]
    obs = np.concatenate([[observed[:lo + 1].sum()], observed[lo + 1:hi], [observed[hi:].sum()]])
    exp = np.concatenate([[expected[:lo + 1].sum()], expected[lo + 1:hi], [expected[hi:].sum()]])
    exp *= obs.sum() / exp.sum()
    return float(stats.chisquare(obs, exp).pvalue)


def test_poisson_batch_sizes_are_binomial():
    n, q = 60, 0.1
    sizes = np.array([b.size for b in poisson_batches(n, q, 20000, rng=1)])
    assert _binomial_chi2_pvalue(sizes, n, q) > 1e-3


def test_poisson_batch_sizes_reject_a_wrong_rate():
    """The same test has power: batches drawn with q = 0.115 are not Binomial(60, 0.1)."""
    sizes = np.array([b.size for b in poisson_batches(60, 0.115, 20000, rng=2)])
    assert _binomial_chi2_pvalue(sizes, 60, 0.1) < 1e-6


def test_poisson_inclusions_are_independent_and_uniform():
    n, q, steps = 40, 0.2, 5000
    batches = poisson_batches(n, q, steps, rng=3)
    counts = np.bincount(np.concatenate(batches), minlength=n)
    # each record's count is Binomial(steps, q): chi-square over the n records
    stat = np.sum((counts - steps * q) ** 2 / (steps * q * (1 - q)))
    assert stats.chi2.sf(stat, n) > 1e-3
    # within a batch indices are distinct, sorted and in range
    assert all(np.all(np.diff(b) > 0) and (b.size == 0 or (b[0] >= 0 and b[-1] < n))
               for b in batches)
    # pairs are independent: P(0 and 1 both in) ≈ q²
    both = np.mean([(0 in b) and (1 in b) for b in batches[:4000]])
    assert abs(both - q * q) < 4 * np.sqrt(q * q * (1 - q * q) / 4000)


def test_poisson_can_be_empty_and_is_reproducible():
    batches = poisson_batches(5, 0.05, 2000, rng=4)
    assert sum(b.size == 0 for b in batches) > 1000          # 0.95^5 ≈ 0.77
    again = poisson_batches(5, 0.05, 2000, rng=4)
    assert all(np.array_equal(a, b) for a, b in zip(batches, again))
    assert all(b.size == 7 for b in poisson_batches(7, 1.0, 3, rng=0))


def test_fixed_size_batches_are_uniform_subsets():
    n, m, steps = 30, 7, 6000
    b = fixed_size_batches(n, m, steps, rng=5)
    assert b.shape == (steps, m)
    assert all(np.unique(row).size == m for row in b)
    counts = np.bincount(b.ravel(), minlength=n)
    p = m / n
    stat = np.sum((counts - steps * p) ** 2 / (steps * p * (1 - p)))
    assert stats.chi2.sf(stat, n - 1) > 1e-3
    # without replacement: P(0 and 1 both in) = m(m−1)/(n(n−1)), not (m/n)²
    both = np.mean(np.any(b == 0, axis=1) & np.any(b == 1, axis=1))
    target = m * (m - 1) / (n * (n - 1))
    assert abs(both - target) < 4 * np.sqrt(target * (1 - target) / steps)
    assert np.array_equal(np.sort(fixed_size_batches(4, 4, 1, rng=0)[0]), np.arange(4))


def test_shuffled_epochs_use_every_record_once_per_epoch():
    n, m = 23, 5
    batches = shuffled_epochs(n, m, 3, rng=6)
    assert len(batches) == 3 * 5 and [x.size for x in batches[:5]] == [5, 5, 5, 5, 3]
    for e in range(3):
        assert np.array_equal(np.sort(np.concatenate(batches[5 * e:5 * e + 5])), np.arange(n))
    assert len(shuffled_epochs(n, m, 2, rng=6, drop_last=True)) == 8
    # the first position is uniform over records
    first = np.array([shuffled_epochs(10, 3, 1, rng=s)[0][0] for s in range(3000)])
    assert stats.chisquare(np.bincount(first, minlength=10)).pvalue > 1e-3


@pytest.mark.parametrize("call, match", [
    (lambda: poisson_batches(10, 0.0, 5, rng=0), "sample_rate"),
    (lambda: poisson_batches(10, 1.5, 5, rng=0), "sample_rate"),
    (lambda: poisson_batches(0, 0.1, 5, rng=0), "n must"),
    (lambda: poisson_batches(10, 0.1, 0, rng=0), "num_steps"),
    (lambda: poisson_batches(10, 0.1, 5, rng=None), "rng"),
    (lambda: fixed_size_batches(10, 11, 5, rng=0), r"batch_size must be in \[1, n=10\]"),
    (lambda: fixed_size_batches(10, 0, 5, rng=0), "batch_size"),
    (lambda: shuffled_epochs(10, 3, 0, rng=0), "epochs"),
    (lambda: shuffled_epochs(10, 3, 1, rng=0, drop_last=1), "drop_last"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
