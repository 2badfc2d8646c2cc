"""Every function that releases a private output, attacked with what a hostile user controls.

Each test builds a hostile input (an overflowing utility, a value whose doubles are coarser than
its sensitivity, an embedding that underflows, a model that answers NaN, overlapping subsets,
…) or a pair of neighbouring data sets, and shows the release refuses it with a ``ValueError`` or
neutralises it so the sensitivity the accountant assumes still holds. Statistical checks are
seeded; the whole file runs in a few seconds.
"""
from __future__ import annotations

import contextlib
import itertools
import math
import signal
from fractions import Fraction

import numpy as np
import pytest

from dplib.experiments import icl as ex
from dplib.icl.aggregation import (ensemble_votes, esa, joint_em_utilities,
                                   joint_exponential_topk, noisy_vote, partition_exemplars,
                                   ptr_distance, ptr_topk, rnm_vote, vote_histogram)
from dplib.icl.fewshot import private_next_tokens
from dplib.icl.prompts import PromptTemplate
from dplib.mechanisms import (discrete_gaussian, discrete_gaussian_mechanism, discrete_laplace,
                              discrete_laplace_mechanism, exponential_mechanism,
                              exponential_mechanism_probabilities, gaussian_mechanism,
                              laplace_mechanism, randomized_response, report_noisy_max)
from dplib.samplers import fixed_size_batches, poisson_batches, shuffled_epochs


@contextlib.contextmanager
def deadline(seconds: float):
    """Fail (instead of hanging the suite) when the body runs longer than ``seconds``."""
    def stop(*_):
        raise TimeoutError(f"did not finish within {seconds} s")
    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


TEMPLATE = PromptTemplate(("negative", "positive"))


class VoteOfFirstDemo:
    """A stub model: each prompt votes the label of its first demonstration (0 if it has none)."""

    def __init__(self, labels):
        self.labels = np.asarray(labels)

    def predict(self, batch):
        first = batch.demos[:, 0]
        return np.where(first >= 0, self.labels[np.maximum(first, 0)], 0)


class HostileLM:
    """A stub language model over 5 tokens: every prompt puts its mass on token 3, except a prompt
    holding exemplar ``hostile``, whose log-probabilities are NaN (a half-precision overflow on a
    crafted text looks like this)."""
    eos_id = 4

    def __init__(self, hostile: int):
        self.hostile = hostile

    def next_token_logprobs(self, batch):
        lp = np.full((len(batch), 5), -30.0)
        lp[:, 3] = 0.0
        lp[np.any(batch.demos == self.hostile, axis=1)] = np.nan
        return lp


# ---------------------------------------------------------------------------------------------
# Default randomness: no release without explicit randomness, no hidden reseeding
# ---------------------------------------------------------------------------------------------
RELEASES = {
    "laplace_mechanism": lambda rng: laplace_mechanism([1.0, 2.0], 1.0, rng=rng),
    "gaussian_mechanism": lambda rng: gaussian_mechanism([1.0, 2.0], 0.5, 1e-5, rng=rng),
    "randomized_response": lambda rng: randomized_response([0, 1, 1, 0], 1.0, rng=rng),
    "exponential_mechanism": lambda rng: exponential_mechanism(np.zeros((4, 3)), 1.0, rng=rng),
    "report_noisy_max": lambda rng: report_noisy_max(np.zeros((4, 3)), 1.0, rng=rng),
    "discrete_laplace_mechanism": lambda rng: discrete_laplace_mechanism([1, 2, 3], 1, rng=rng),
    "discrete_gaussian_mechanism": lambda rng: discrete_gaussian_mechanism([1, 2], 4, rng=rng),
    "poisson_batches": lambda rng: poisson_batches(50, 0.2, 3, rng=rng),
    "fixed_size_batches": lambda rng: fixed_size_batches(50, 5, 3, rng=rng),
    "shuffled_epochs": lambda rng: shuffled_epochs(50, 5, 1, rng=rng),
    "partition_exemplars": lambda rng: partition_exemplars(50, 5, 2, shots=3, rng=rng),
    "noisy_vote": lambda rng: noisy_vote([[3.0, 2.0, 1.0]], 1.0, rng=rng),
    "rnm_vote": lambda rng: rnm_vote([[3.0, 2.0, 1.0]], 1.0, rng=rng),
    "esa": lambda rng: esa(np.eye(3), np.eye(3), 0.5, rng=rng),
    "joint_exponential_topk": lambda rng: joint_exponential_topk([5, 3, 1], 2, 1.0, rng=rng),
    "ptr_topk": lambda rng: ptr_topk([26, 1, 0], 1, 1.0, 1e-5, rng=rng),
}


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_a_release_without_randomness_is_refused(name):
    """``rng=None`` is refused (no unseeded global generator, no silent default seed)."""
    with pytest.raises(ValueError, match="rng"):
        RELEASES[name](None)


def _flat(out) -> np.ndarray:
    """Any release (array, scalar, tuple, list of batches, ``None``) as one float vector."""
    if out is None:
        return np.array([-1.0])
    if isinstance(out, (list, tuple)):
        return np.concatenate([np.ravel(np.asarray(x, dtype=float)) for x in out] or [[]])
    return np.ravel(np.asarray(out, dtype=float))


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_a_shared_generator_is_advanced_not_reseeded(name):
    """Two releases from one Generator are independent draws: the function consumes the stream
    it is given rather than restarting a fixed one (a reseeded release would repeat)."""
    gen = np.random.default_rng(123)
    flat = [_flat(RELEASES[name](gen)) for _ in range(8)]
    assert any(not np.array_equal(flat[0], f) for f in flat[1:]), name


# ---------------------------------------------------------------------------------------------
# The exponential mechanism and report-noisy-max: overflow, extreme ε/Δ, ties
# ---------------------------------------------------------------------------------------------
def test_huge_utilities_do_not_collapse_the_exponential_mechanism_to_index_0():
    """ε·u/(2Δ) overflowed to inf, the probabilities became NaN and the sampler returned index 0
    for every seed — a candidate of the lowest utility, chosen with certainty."""
    u = [0.0, 1e308, 1e308]
    p = exponential_mechanism_probabilities(u, 10.0)
    assert np.all(np.isfinite(p)) and p == pytest.approx([0.0, 0.5, 0.5])
    picks = np.array([exponential_mechanism(u, 10.0, rng=s) for s in range(200)])
    assert (picks != 0).all() and 60 < (picks == 1).sum() < 140
    # utilities spanning the whole double range: the difference itself must not overflow
    p = exponential_mechanism_probabilities([-1.7e308, 1.7e308], 1.0)
    assert p.tolist() == [0.0, 1.0]


@pytest.mark.parametrize("eps, sens, expected", [
    (1e300, 1e-300, [0.0, 1.0]),          # ε/Δ overflows: the limit is the arg-max
    (1e-300, 1e300, [0.5, 0.5]),          # ε/Δ underflows: the limit is uniform
])
def test_extreme_epsilon_over_sensitivity_gives_the_limit_law(eps, sens, expected):
    p = exponential_mechanism_probabilities([0.0, 1.0], eps, sens)
    assert np.all(np.isfinite(p)) and p == pytest.approx(expected)


def test_report_noisy_max_breaks_ties_by_noise_even_at_large_magnitude():
    """Scores of 1e20 absorbed Gumbel(2) noise completely (doubles there are 16384 apart), so
    the tie was always broken toward index 0 (200/200) instead of fairly."""
    picks = report_noisy_max(np.full((2000, 2), 1e20), 1.0, rng=0)
    assert 0.45 < np.mean(picks == 0) < 0.55
    lap = report_noisy_max(np.full((2000, 2), 1e20), 1.0, noise="laplace", rng=1)
    assert 0.45 < np.mean(lap == 0) < 0.55


def test_report_noisy_max_with_an_overflowing_noise_scale_is_uniform():
    """2Δ/ε = inf made the noise NaN/inf and the arg-max an artefact of which entry was NaN; the
    limit of report-noisy-max as the scale grows is the uniform choice."""
    picks = report_noisy_max(np.broadcast_to([0.0, 5.0, 10.0], (3000, 3)), 1e-300, 1e10, rng=2)
    freq = np.bincount(picks, minlength=3) / picks.size
    assert np.all(np.abs(freq - 1 / 3) < 0.04), freq


def test_a_zero_probability_candidate_is_never_sampled_even_by_a_hostile_generator():
    """Held: the inverse-CDF sampler never returns a candidate of probability 0, even when the
    uniform draw is the largest double below 1."""
    class Top(np.random.Generator):
        def random(self, size=None, dtype=np.float64, out=None):
            return np.full(size, 1.0 - 2.0 ** -53)
    gen = Top(np.random.PCG64(0))
    assert exponential_mechanism([0.0, 0.0, -5000.0], 1.0, rng=gen) == 1
    assert exponential_mechanism([0.0, -5000.0], 1.0, rng=gen) == 0


def test_rnm_vote_respects_its_declared_sensitivity_on_every_neighbouring_histogram():
    """Held: utility = count, Δu = 1. For every histogram of M = 4 votes over 3 labels and every
    neighbour (one vote moved), the exponential mechanism's probabilities differ by ≤ e^ε."""
    eps = 0.7
    hists = np.array([h for h in itertools.product(range(5), repeat=3) if sum(h) == 4], float)
    moves = np.array([np.eye(3)[b] - np.eye(3)[a] for a in range(3) for b in range(3) if a != b])
    nb = hists[:, None, :] + moves[None]
    ok = (nb >= 0).all(axis=2)
    p = exponential_mechanism_probabilities(hists, eps, 1.0)[:, None, :]
    pn = exponential_mechanism_probabilities(nb, eps, 1.0)
    ratio = np.abs(np.log(p) - np.log(pn)).max(axis=2)
    assert ratio[ok].max() <= eps + 1e-12


def test_ksa_utilities_and_ptr_distance_hold_on_every_neighbouring_histogram():
    """Held: changing one of M = 4 answers (any subset of d = 3 keywords) moves the joint-EM
    utility by ≤ 2 (its default Δu) and the PTR distance by ≤ 1, and a distance ≥ 1 means every
    neighbour has the same top-k set."""
    k = 2
    hists = np.array(list(itertools.product(range(5), repeat=3)), float)
    steps = np.array(list(itertools.product((-1, 0, 1), repeat=3)), float)
    for h in hists:
        nbs = [h + s for s in steps if ((h + s) >= 0).all() and ((h + s) <= 4).all()]
        _, u = joint_em_utilities(h, k)
        dist = ptr_distance(h, k)
        top = set(np.lexsort((np.arange(3), -h))[:k].tolist())
        for nb in nbs:
            assert np.abs(joint_em_utilities(nb, k)[1] - u).max() <= 2
            assert abs(ptr_distance(nb, k) - dist) <= 1
            if dist >= 1:
                assert set(np.lexsort((np.arange(3), -nb))[:k].tolist()) == top


def test_noisy_vote_ties_are_broken_by_the_noise():
    """Held: a tied histogram gives each tied label about half the time (the lowest-label rule
    only applies to the plain, non-private majority vote, ``noise_std = 0``)."""
    labels, _ = noisy_vote(np.full((4000, 2), 5.0), 1.0, rng=3)
    assert 0.47 < labels.mean() < 0.53


# ---------------------------------------------------------------------------------------------
# Laplace and Gaussian: non-finite data, overflowing scales, values coarser than Δ
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_values_are_refused_by_every_additive_release(bad):
    """Held: NaN/inf in the private value is refused, never released as NaN."""
    for call in (lambda: laplace_mechanism([1.0, bad], 1.0, rng=0),
                 lambda: gaussian_mechanism([1.0, bad], 0.5, 1e-5, rng=0),
                 lambda: noisy_vote([[1.0, bad]], 1.0, rng=0),
                 lambda: report_noisy_max([1.0, bad], 1.0, rng=0),
                 lambda: exponential_mechanism([1.0, bad], 1.0, rng=0)):
        with pytest.raises(ValueError, match="finite"):
            call()


def test_an_overflowing_noise_scale_is_refused():
    """Δ/ε = 1e10/1e-300 overflowed to inf and the Laplace mechanism released ``inf``; the
    classic Gaussian σ for a subnormal ε did the same."""
    with pytest.raises(ValueError, match="sensitivity/epsilon"):
        laplace_mechanism(1.0, 1e-300, 1e10, rng=0)
    with pytest.raises(ValueError, match="sigma"):
        gaussian_mechanism(1.0, 1e-310, 1e-5, method="classic", rng=0)


@pytest.mark.parametrize("release", [
    lambda v: laplace_mechanism(v, 1.0, 1.0, rng=0),
    lambda v: gaussian_mechanism(v, 0.5, 1e-5, 1.0, rng=0),
])
def test_values_whose_doubles_are_coarser_than_the_sensitivity_are_refused(release):
    """At |value| ≈ 2^53 doubles are 2 apart, so two real query answers 1 apart (Δ = 1) can
    round to doubles 2 apart, and the noise on them is rounded to the same coarse grid: with
    ε = 1, P(output = 2^53) was 0.51 from 2^53 and 0.14 from 2^53 + 2 (2·10⁵ draws each), a
    ratio of 3.6 > e^1 (and at 1e20 the output was the input itself, 1000 of 1000). Such a
    value is refused; moderate ones still work."""
    with pytest.raises(ValueError, match="value"):
        release(2.0 ** 53)
    with pytest.raises(ValueError, match="value"):
        release(np.array([1.0, 1e20]))
    with pytest.raises(ValueError, match="value"):
        release(-(2.0 ** 44))                    # doubles 2^-8 apart: more than Δ/1024
    out = release(1e6)
    assert out != 1e6 and abs(out - 1e6) < 100
    assert release(2.0 ** 42) != 2.0 ** 42       # doubles 2^-10 = Δ/1024 apart: released


# ---------------------------------------------------------------------------------------------
# Discrete samplers: wrap-around, extreme scales, empty input
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [np.int64(2 ** 63 - 1), np.int64(-2 ** 63),
                                   np.uint64(2 ** 63), np.array([2 ** 64 - 1], np.uint64)])
@pytest.mark.parametrize("mech", [
    lambda v: discrete_laplace_mechanism(v, 1, rng=0),
    lambda v: discrete_gaussian_mechanism(v, 4, rng=0),
])
def test_integer_values_that_would_wrap_around_are_refused(mech, value):
    """int64 2^63 − 1 plus positive noise wrapped to −9.2e18 (276 seeds in 1000), and uint64
    2^63 was read as −2^63 before any noise was added."""
    with pytest.raises(ValueError, match="value"):
        mech(value)


def test_integer_values_inside_the_safe_range_are_released():
    x = np.array([-2 ** 62, 0, 2 ** 62], np.int64)
    out = discrete_laplace_mechanism(x, 1, rng=0)
    assert out.dtype == np.int64 and np.all(np.abs(out - x) < 100)


def test_an_empty_integer_query_is_refused_by_name():
    """An empty value failed inside numpy ("cannot reshape array of size 1") instead of naming
    the parameter."""
    with pytest.raises(ValueError, match="value must be non-empty"):
        discrete_laplace_mechanism(np.array([], np.int64), 1, rng=0)
    with pytest.raises(ValueError, match="value must be non-empty"):
        discrete_gaussian_mechanism(np.array([], np.int64), 4, rng=0)


def test_discrete_samplers_terminate_at_extreme_scales():
    """Held: the exact samplers neither hang nor overflow at the extremes their checks allow."""
    with deadline(20):
        big = discrete_laplace(2 ** 55, 2000, rng=0)
        tiny = discrete_laplace(Fraction(1, 2 ** 61), 2000, rng=1)
        g_tiny = discrete_gaussian(Fraction(1, 10 ** 9), 500, rng=2)
        g_big = discrete_gaussian(10 ** 9, 500, rng=3)
    assert np.all(tiny == 0) and np.all(g_tiny == 0)
    # E|Z| ≈ b for Lap_Z(b) with b ≫ 1: a wrap-around would show as |Z| near 2^63
    assert 0.8 * 2 ** 55 < np.abs(big).mean() < 1.2 * 2 ** 55
    assert 0.8 * math.sqrt(2 / math.pi) * 10 ** 4.5 < np.abs(g_big).mean() \
        < 1.2 * math.sqrt(2 / math.pi) * 10 ** 4.5
    with pytest.raises(ValueError, match="scale"):
        discrete_laplace(2 ** 57, 1, rng=0)


# ---------------------------------------------------------------------------------------------
# Samplers
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("q", [1e-19, 1e-300, 5e-324])
def test_poisson_batches_with_a_tiny_rate_terminate_and_stay_in_range(q):
    """Geometric gaps near 2^63 wrapped around in the cumulative sum: q = 1e-19 put negative
    'record indices' into the batches, q = 1e-300 looped forever."""
    with deadline(10):
        batches = poisson_batches(1000, q, 50, rng=0)
    assert len(batches) == 50
    assert all(b.size == 0 or (b.min() >= 0 and b.max() < 1000) for b in batches)
    assert sum(b.size for b in batches) == 0     # P(any record) ≤ 5·10⁴·q


def test_poisson_batches_refuse_more_decisions_than_int64_can_index():
    with pytest.raises(ValueError, match="num_steps"):
        poisson_batches(2 ** 40, 0.5, 2 ** 22, rng=0)


def test_partitions_are_disjoint_for_every_sampler():
    """Held: no exemplar is in two subsets of one query (the premise of 'one exemplar moves one
    vote'), with and without the shots cap, Poisson and fixed."""
    for seed in range(5):
        for d in (partition_exemplars(60, 7, 20, rng=seed),
                  partition_exemplars(60, 7, 20, shots=2, sample_rate=0.5, rng=seed),
                  partition_exemplars(60, 7, 20, shots=8, sampler="fixed", rng=seed)):
            flat = d.reshape(d.shape[0], -1)
            for row in flat:
                used = row[row >= 0]
                assert used.size == np.unique(used).size


# ---------------------------------------------------------------------------------------------
# DP-ICL: neighbouring prompt sets
# ---------------------------------------------------------------------------------------------
def test_ensemble_votes_refuses_subsets_that_share_an_exemplar():
    """A hostile partition puts exemplar 0 in all M = 5 subsets. Flipping that one exemplar's
    label then moved 5 votes: neighbouring histograms [5, 0] and [0, 5], ℓ2 distance 7.07, not
    the √2 the accountant assumes. Overlapping subsets are refused."""
    demos = np.array([[[0, 1], [0, 2], [0, 3], [0, 4], [0, 5]]])
    labels = np.zeros(6, np.int64)
    with pytest.raises(ValueError, match="demos"):
        ensemble_votes(VoteOfFirstDemo(labels), TEMPLATE, [f"t{i}" for i in range(6)], labels,
                       ["q"], demos)
    ok = partition_exemplars(6, 3, 1, shots=2, sampler="fixed", rng=0)
    v = ensemble_votes(VoteOfFirstDemo(labels), TEMPLATE, [f"t{i}" for i in range(6)], labels,
                       ["q"], ok)
    assert v.histogram.tolist() == [[3, 0]]


def test_neighbouring_pools_move_the_vote_histogram_by_at_most_sqrt2():
    """Held: with the package's own partitions, changing one exemplar's label (replace-one,
    fixed partition) moves each query's histogram by ≤ √2 in ℓ2, whichever exemplar it is."""
    rng = np.random.default_rng(4)
    n, m = 40, 8
    labels = rng.integers(0, 2, n)
    demos = partition_exemplars(n, m, 10, shots=5, sampler="fixed", rng=5)
    pool = [f"t{i}" for i in range(n)]
    base = ensemble_votes(VoteOfFirstDemo(labels), TEMPLATE, pool, labels,
                          ["q"] * 10, demos).histogram
    for i in range(n):
        other = labels.copy()
        other[i] = 1 - other[i]
        h = ensemble_votes(VoteOfFirstDemo(other), TEMPLATE, pool, other,
                           ["q"] * 10, demos).histogram
        assert np.linalg.norm(h - base, axis=1).max() <= math.sqrt(2) + 1e-12


def test_private_next_tokens_refuses_subsets_that_share_an_exemplar():
    demos = np.array([[[0, 1], [0, 2]]])
    with pytest.raises(ValueError, match="demos"):
        private_next_tokens(HostileLM(hostile=-5), TEMPLATE, ["a", "b", "c"], [""], demos, 1.0,
                            rng=0)


def test_a_nan_answering_subset_abstains_instead_of_deciding_the_token():
    """One hostile exemplar made its subset's next-token distribution NaN; the NaN spread to the
    whole sum and the arg-max returned token 0 for every seed (200/200). The honest neighbour's
    answer is token 3. A subset whose distribution is not finite now abstains (contributes 0,
    within the √2 sensitivity), so the release follows the honest subsets."""
    pool = [f"t{i}" for i in range(30)]
    demos = partition_exemplars(30, 6, 200, shots=3, sampler="fixed", rng=0)
    tok = private_next_tokens(HostileLM(hostile=int(demos[0, 0, 0])), TEMPLATE, pool,
                              [""] * 200, demos, 0.5, rng=1)
    honest = private_next_tokens(HostileLM(hostile=-5), TEMPLATE, pool, [""] * 200, demos, 0.5,
                                 rng=1)
    assert np.mean(tok == 3) > 0.95 and np.mean(honest == 3) > 0.95


# ---------------------------------------------------------------------------------------------
# ESA: embeddings that underflow or overflow
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scale", [1e-200, 1e-320, 1e200, 1e307])
def test_esa_answers_keep_unit_norm_whatever_their_magnitude(scale):
    """An answer embedding with entries 1e-200 squared to 0, its 'norm' was floored at 1e-300
    and the row was blown up to norm 5e99 — one answer then decided the released mean (ℓ2
    sensitivity 2 assumed). Entries 1e200 overflowed the norm and the answer was zeroed. Every
    row now has norm ≤ 1 and keeps its direction; neighbouring answer sets differ by ≤ 2/M."""
    honest = np.array([[0.0, 1.0], [1.0, 0.0], [0.6, 0.8]])
    hostile = honest.copy()
    hostile[0] = [scale, scale]
    cands = np.eye(2)
    _, mean_h = esa(honest, cands, 0.0, rng=0)
    _, mean_x = esa(hostile, cands, 0.0, rng=0)
    assert np.linalg.norm(mean_x - mean_h) <= 2 / 3 + 1e-12
    assert mean_x == pytest.approx((np.array([1, 1]) / math.sqrt(2) + honest[1:].sum(0)) / 3)


def test_esa_zero_answer_stays_zero_and_nan_is_refused():
    """Held: an all-zero answer contributes nothing; a NaN answer is refused by name."""
    _, m = esa(np.array([[0.0, 0.0], [3.0, 4.0]]), np.eye(2), 0.0, rng=0)
    assert m.tolist() == pytest.approx([0.3, 0.4])
    with pytest.raises(ValueError, match="answer_embeddings"):
        esa(np.array([[math.nan, 0.0], [1.0, 0.0]]), np.eye(2), 0.0, rng=0)


def test_summaries_embed_the_public_candidates_apart_from_the_private_answers():
    """ESA's candidates must not depend on the private data. ``embed`` was called once on
    answers + candidates, so an embedder that normalises over its batch (centring, whitening,
    an IDF fitted on the batch) made the candidates' embeddings — and so the released index —
    depend on the private answers outside the noise. Answers and candidates are now embedded
    in separate calls."""
    from dplib.icl import OfflineICL, load_book_data
    model, data = OfflineICL(), load_book_data("sentiment")
    calls = []

    def spy(texts):
        calls.append(list(texts))
        return model.lexical.embed(list(texts)).toarray()

    ex.summarise_products(model, data, method="esa", epsilon=2.0, products=("battery",),
                          num_subsets=5, shots=2, max_tokens=2, num_candidates=7, embed=spy,
                          rng=0)
    assert sorted(len(c) for c in calls) == [5, 7]


# ---------------------------------------------------------------------------------------------
# In-place mutation and dtype tricks
# ---------------------------------------------------------------------------------------------
def _frozen(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


def test_releases_never_write_into_the_callers_arrays():
    """Held: read-only inputs go through every release (a write would raise) and come back
    unchanged."""
    x = _frozen([1.0, 2.0, 3.0])
    ints = _frozen([1, 2, 3])
    hist = _frozen([[3.0, 2.0, 1.0]])
    emb = _frozen([[3.0, 4.0], [1e-200, 0.0]])
    laplace_mechanism(x, 1.0, rng=0)
    gaussian_mechanism(x, 0.5, 1e-5, rng=0)
    exponential_mechanism(x, 1.0, rng=0)
    report_noisy_max(x, 1.0, rng=0)
    randomized_response(_frozen([0, 1, 1]), 1.0, rng=0)
    discrete_laplace_mechanism(ints, 1, rng=0)
    discrete_gaussian_mechanism(ints, 4, rng=0)
    noisy_vote(hist, 1.0, rng=0)
    rnm_vote(hist, 1.0, rng=0)
    esa(emb, _frozen(np.eye(2)), 0.5, rng=0)
    ptr_topk(_frozen([9, 1, 0]), 1, 1.0, 1e-5, rng=0)
    joint_exponential_topk(_frozen([9, 1, 0]), 2, 1.0, rng=0)
    assert x.tolist() == [1.0, 2.0, 3.0] and ints.tolist() == [1, 2, 3]
    assert hist.tolist() == [[3.0, 2.0, 1.0]] and emb[1, 0] == 1e-200


@pytest.mark.parametrize("bad", [np.array([1, 0], dtype=object), np.array(["1", "0"]),
                                 np.array([1.0, 0.5]), np.array([2, 0])])
def test_randomized_response_refuses_non_binary_answers(bad):
    """Held: object, string, fractional and out-of-range answers are refused (bools and −0.0
    are valid 0/1 answers)."""
    with pytest.raises(ValueError, match="answers"):
        randomized_response(bad, 1.0, rng=0)
    assert randomized_response(np.array([True, False]), 1.0, rng=0).dtype == np.int8
    assert randomized_response(np.array([-0.0, 1.0]), 50.0, rng=0).tolist() == [0, 1]


def test_vote_histogram_refuses_bool_and_out_of_range_votes():
    """Held: a bool or out-of-range vote cannot add an uncounted label; a single voter works."""
    for bad in (np.array([[True, False]]), np.array([[0, 2]]), np.array([[-1, 0]])):
        with pytest.raises(ValueError, match="votes"):
            vote_histogram(bad, 2)
    assert vote_histogram(np.array([[1]]), 3).tolist() == [[0, 1, 0]]


def test_vote_histogram_refuses_rows_without_votes_by_name():
    """Rows of zero votes failed inside numpy ("cannot reshape array of size 0")."""
    with pytest.raises(ValueError, match="votes must hold at least one vote"):
        vote_histogram(np.zeros((2, 0), np.int64), 3)


def test_embedders_return_copies_not_their_cache():
    """A caller that writes into a returned embedding must not change later embeddings (the
    embedders cache by text; the cache used to be returned by reference)."""
    from dplib.icl.model import _pretrained
    wv, lex = _pretrained()
    dense = wv.embed(["a good movie"])
    dense[:] = 7.0
    assert np.abs(wv.embed(["a good movie"])).max() <= 1.0 + 1e-12
    sp = lex.embed(["a good movie"])
    sp.data[:] = 7.0
    assert np.abs(lex.embed(["a good movie"]).toarray()).max() <= 1.0 + 1e-12
