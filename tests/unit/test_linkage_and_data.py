"""Linkage helpers and synthetic data: exact answers on hand-made tables, seeding, bad input."""
import numpy as np
import pytest

from dplib.attacks import combined_key, link_records, uniqueness_rate
from dplib.datasets import synthetic_health_records, synthetic_survey


def test_uniqueness_on_a_small_table():
    zip_ = np.array([1, 1, 2, 2, 3])
    sex = np.array([0, 1, 0, 0, 1])
    assert uniqueness_rate([zip_]) == pytest.approx(1 / 5)       # only zip 3 is alone
    assert uniqueness_rate([zip_, sex]) == pytest.approx(3 / 5)  # (2,0) appears twice


def test_combined_key_equal_iff_rows_equal():
    a = np.array([1, 1, 2, 2])
    b = np.array([5, 6, 5, 5])
    k = combined_key([a, b])
    assert k[2] == k[3] and len(set(k[:3])) == 3


def test_link_records_finds_exactly_the_unique_pairs():
    release = [np.array([10, 10, 20, 30, 40]), np.array([0, 0, 1, 1, 0])]
    public = [np.array([30, 10, 20, 50]), np.array([1, 0, 1, 0])]
    rows, pub = link_records(release, public)
    # (10,0) is twice in the release: not linked. (20,1) and (30,1) link; (50,0) is not released.
    assert sorted(zip(rows.tolist(), pub.tolist())) == [(2, 2), (3, 0)]


def test_linkage_on_synthetic_town_is_correct():
    rec = synthetic_health_records(5_000, rng=0)
    voters = np.random.default_rng(1).choice(5_000, 3_000, replace=False)
    qi = ["zip", "birth_date", "sex"]
    rows, vrows = link_records([rec[c] for c in qi], [rec[c][voters] for c in qi])
    assert len(rows) > 2_000
    np.testing.assert_array_equal(voters[vrows], rows)  # each link is the right person


def test_synthetic_survey_exact_count_and_seed():
    a = synthetic_survey(1_001, 0.1, rng=4)
    assert a.sum() == 100 and a.shape == (1_001,)
    np.testing.assert_array_equal(a, synthetic_survey(1_001, 0.1, rng=4))


def test_health_records_rates():
    rec = synthetic_health_records(50_000, diabetes_rate=0.1, rng=3)
    assert abs(rec["diabetes"].mean() - 0.1) < 4 * np.sqrt(0.09 / 50_000)
    assert set(np.unique(rec["sex"])) == {0, 1}


@pytest.mark.parametrize("kwargs, name", [
    (dict(n=0, proportion=0.5), "n"), (dict(n=10, proportion=1.5), "proportion")])
def test_bad_survey_input(kwargs, name):
    with pytest.raises(ValueError, match=name):
        synthetic_survey(rng=0, **kwargs)


def test_bad_linkage_input():
    with pytest.raises(ValueError, match="columns"):
        uniqueness_rate([])
    with pytest.raises(ValueError, match="same length"):
        combined_key([np.arange(3), np.arange(4)])
    with pytest.raises(ValueError, match="same columns"):
        link_records([np.arange(3)], [np.arange(3), np.arange(3)])
    with pytest.raises(ValueError, match="birth_years"):
        synthetic_health_records(10, birth_years=(2000, 1990), rng=0)
