"""DP-ICL aggregation and accounting: partitions, noisy votes, ESA, KSA (joint EM, PTR).

Oracles: the plain majority vote (collections.Counter), Google's dp-accounting for the noise
calibration, numerical integration for the law of the Gaussian noisy arg-max, the exponential
mechanism's closed-form probabilities, brute force over neighbouring histograms for PTR, and the
Laplace tail for PTR's release probability. Fixed seeds; statistical tests at level 1e-4.
"""
import collections
import itertools
import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as dpa_rdp
from scipy import integrate, stats

from dplib.accounting import DEFAULT_ORDERS, RDPAccountant, optimal_composition_epsilon
from dplib.icl import (EMBEDDING_SENSITIVITY, VOTE_SENSITIVITY, PromptTemplate, dp_icl_classify,
                       ensemble_votes, esa, gaussian_epsilon_spent, gaussian_noise_std,
                       joint_em_topk_probability, joint_em_utilities, joint_exponential_topk,
                       keyword_histogram, noisy_vote, partition_exemplars, per_query_epsilon,
                       ptr_distance, ptr_release_probability, ptr_topk, rnm_vote, template_for,
                       topk_sequences, vote_histogram, vote_noise_std)
from dplib.mechanisms import exponential_mechanism_probabilities


# ------------------------------------------------------------------------------ partitions
def test_poisson_partition_is_disjoint_capped_and_has_rate_q():
    n, m, qn, q = 500, 10, 400, 0.08
    d = partition_exemplars(n, m, qn, shots=6, sample_rate=q, rng=0)
    assert d.shape == (qn, m, 6)
    for row in d:                                       # disjoint within every query
        used = row[row >= 0]
        assert used.size == np.unique(used).size
    # without a cap, inclusion is Bernoulli(q) per exemplar and query: binomial test
    full = partition_exemplars(n, m, qn, sample_rate=q, rng=1)
    kept = int((full >= 0).sum())
    assert stats.binomtest(kept, n * qn, q).pvalue > 1e-4
    # the subset of a kept exemplar is uniform over the M subsets: chi-square
    sizes = (full >= 0).sum(axis=2).sum(axis=0)
    assert stats.chisquare(sizes).pvalue > 1e-4


def test_fixed_partition_is_one_partition_reused():
    d = partition_exemplars(100, 5, 3, shots=4, sampler="fixed", rng=2)
    assert d.shape == (3, 5, 4) and (d >= 0).all()
    assert np.unique(d[0]).size == 20
    np.testing.assert_array_equal(d[0], d[2])


def test_fixed_partition_refuses_impossible_sizes():
    with pytest.raises(ValueError, match=r"num_subsets \* shots must be <= n = 10"):
        partition_exemplars(10, 5, 1, shots=3, sampler="fixed", rng=0)
    with pytest.raises(ValueError, match="sample_rate must be 1"):
        partition_exemplars(10, 2, 1, shots=2, sampler="fixed", sample_rate=0.5, rng=0)


def test_changing_one_exemplar_moves_the_histogram_by_at_most_sqrt2(sentiment, model):
    # Brute force over replace-one neighbours of a small private set with a fixed partition:
    # the vote histogram moves by at most √2 in ℓ2 (the sensitivity the accountant is given),
    # and the bound is attained.
    tpl = template_for(sentiment)
    pool, labels = sentiment.pool_texts[:40], sentiment.pool_labels[:40]
    demos = partition_exemplars(40, 5, 1, shots=2, sampler="fixed", rng=3)
    queries = list(sentiment.test_texts[:12])
    demos = np.repeat(demos, len(queries), axis=0)
    base = ensemble_votes(model, tpl, pool, labels, queries, demos).histogram
    worst = 0.0
    for pos in range(10):                               # every occupied slot ...
        for repl in range(10, 40, 3):                  # ... replaced by an unused exemplar
            d2 = demos.copy().reshape(len(queries), -1)
            d2[:, pos] = repl
            h = ensemble_votes(model, tpl, pool, labels, queries,
                               d2.reshape(demos.shape)).histogram
            worst = max(worst, np.linalg.norm(h - base, axis=1).max())
    assert worst == pytest.approx(math.sqrt(2))


# ------------------------------------------------------------------------------ voting
def test_vote_histogram_counts():
    h = vote_histogram(np.array([[0, 2, 2, 1], [1, 1, 1, 1]]), 3)
    np.testing.assert_array_equal(h, [[1, 1, 2], [0, 4, 0]])
    with pytest.raises(ValueError, match=r"votes must be integer labels in \[0, 2\]"):
        vote_histogram(np.array([[0, 3]]), 3)


def test_infinite_epsilon_is_the_plain_majority_vote(sentiment, model):
    tpl = template_for(sentiment)
    queries = list(sentiment.test_texts[:150])
    r = dp_icl_classify(model, tpl, sentiment.pool_texts, sentiment.pool_labels, queries,
                        epsilon=math.inf, delta=1e-5, num_subsets=9, shots=4, rng=4)
    assert r.noise_std == 0.0
    for votes, pred in zip(r.votes.votes, r.predictions):
        ranked = collections.Counter(votes.tolist()).most_common()
        top = [lab for lab, c in ranked if c == ranked[0][1]]
        assert pred == min(top)                        # majority (ties: lowest label)
    # 9 voters, 2 labels: never a tie, so the vote is the strict majority
    assert np.all(r.votes.histogram.max(axis=1) >= 5)


def test_noise_scale_matches_the_accountant_over_q_queries(sentiment, model):
    tpl = template_for(sentiment)
    queries = list(sentiment.test_texts[:60])
    eps, delta, qn = 3.0, 1e-5, 200
    r = dp_icl_classify(model, tpl, sentiment.pool_texts, sentiment.pool_labels, queries,
                        epsilon=eps, delta=delta, num_subsets=20, shots=4, num_queries=qn,
                        rng=5)
    q = 20 * 4 / len(sentiment.pool_texts)
    assert r.sample_rate == pytest.approx(q)
    sigma = r.noise_std / math.sqrt(2)                  # noise multiplier: std / sensitivity √2
    # dplib's accountant: the calibrated σ meets ε and is tight (within the 1e-4 tolerance)
    ours = RDPAccountant().step(noise_multiplier=sigma, sample_rate=q, num_steps=qn)
    assert eps * (1 - 2e-3) < ours.get_epsilon(delta) <= eps
    # an independent oracle: dp-accounting's RDP accountant for the same Poisson-subsampled
    # Gaussian composed over Q queries
    ref = dpa_rdp.RdpAccountant(orders=list(DEFAULT_ORDERS))
    ref.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), qn)
    assert ref.get_epsilon(delta) == pytest.approx(ours.get_epsilon(delta), rel=1e-4)
    # and the released histogram really carries that noise: χ² interval on the variance
    resid = (r.noisy - r.votes.histogram).ravel() / r.noise_std
    k = resid.size
    assert stats.chi2.ppf(1e-4, k) < np.sum(resid ** 2) < stats.chi2.ppf(1 - 1e-4, k)


def test_noise_std_round_trip_and_infinite_epsilon():
    s = vote_noise_std(2.0, 1e-5, 100, 0.05)
    assert gaussian_epsilon_spent(s, 1e-5, 100, 0.05) == pytest.approx(2.0, rel=2e-3)
    assert s == pytest.approx(VOTE_SENSITIVITY * gaussian_noise_std(2.0, 1e-5, 100, 0.05, 1.0))
    assert vote_noise_std(math.inf, 1e-5, 100) == 0.0
    # PLD needs less noise than RDP for the same guarantee
    assert vote_noise_std(2.0, 1e-5, 100, 0.05, accountant="pld") < s


def _argmax_probabilities(h, s):
    """P(argmax(h + N(0, s² I)) = c) by one-dimensional integration over the winner's noise."""
    out = []
    for c in range(h.size):
        others = np.delete(h, c)

        def f(z, c=c, others=others):
            return stats.norm.pdf(z) * np.prod(stats.norm.cdf((h[c] + s * z - others) / s))
        out.append(integrate.quad(f, -12, 12, epsabs=1e-12)[0])
    return np.array(out)


def test_noisy_vote_distribution_matches_integration():
    h = np.array([10.0, 8.0, 3.0, 7.0])
    s = 2.5
    n = 200_000
    pred, _ = noisy_vote(np.broadcast_to(h, (n, 4)), s, rng=6)
    p = _argmax_probabilities(h, s)
    assert p.sum() == pytest.approx(1.0, abs=1e-9)
    counts = np.bincount(pred, minlength=4)
    assert stats.chisquare(counts, n * p).pvalue > 1e-4
    # power: the same draws do not pass for a 10% smaller noise scale
    assert stats.chisquare(counts, n * _argmax_probabilities(h, 0.9 * s)).pvalue < 1e-4


def test_rnm_vote_is_the_exponential_mechanism():
    h = np.array([6.0, 5.0, 1.0])
    n = 100_000
    idx = rnm_vote(np.broadcast_to(h, (n, 3)), 0.7, rng=7)
    expected = n * exponential_mechanism_probabilities(h, 0.7, 1.0)
    assert stats.chisquare(np.bincount(idx, minlength=3), expected).pvalue > 1e-4


def test_per_query_epsilon_composes_to_the_budget():
    e0 = per_query_epsilon(2.0, 1e-5, 50)
    assert optimal_composition_epsilon(e0, 0.0, 50, 1e-5) == pytest.approx(2.0, rel=1e-8)
    assert optimal_composition_epsilon(e0, 0.0, 50, 1e-5) <= 2.0
    assert e0 > 2.0 / 50                                 # better than basic composition
    assert per_query_epsilon(2.0, 1e-5, 1) == 2.0
    with pytest.raises(ValueError, match="delta_per_query must satisfy"):
        per_query_epsilon(1.0, 1e-5, 10, delta_per_query=1e-5)


def test_rnm_aggregator_uses_the_per_query_budget(sentiment, model):
    r = dp_icl_classify(model, template_for(sentiment), sentiment.pool_texts,
                        sentiment.pool_labels, list(sentiment.test_texts[:20]), epsilon=1.0,
                        delta=1e-5, num_subsets=10, shots=2, aggregator="rnm", rng=8)
    assert r.info["epsilon_per_query"] == pytest.approx(per_query_epsilon(1.0, 1e-5, 20))


# ------------------------------------------------------------------------------ ESA
def test_esa_returns_the_candidate_nearest_to_the_noisy_mean():
    rng = np.random.default_rng(9)
    answers = rng.normal(size=(12, 30))
    cands = rng.normal(size=(25, 30))
    for seed in range(20):
        idx, noisy = esa(answers, cands, 0.3, rng=seed)
        assert 0 <= idx < 25
        cos = cands @ noisy / np.linalg.norm(cands, axis=1) / np.linalg.norm(noisy)
        assert idx == int(np.argmax(cos))
    # without noise, a candidate pointing along the mean of the unit answers wins
    unit = answers / np.linalg.norm(answers, axis=1, keepdims=True)
    cands[7] = 5 * unit.mean(axis=0)
    assert esa(answers, cands, 0.0, rng=0)[0] == 7


def test_esa_noise_is_gaussian_around_the_mean_of_unit_answers():
    answers = np.array([[3.0, 0.0], [0.0, 0.5], [1.0, 1.0]])
    unit = answers / np.linalg.norm(answers, axis=1, keepdims=True)
    draws = np.array([esa(answers, np.eye(2), 0.2, rng=s)[1] for s in range(3000)])
    z = (draws - unit.mean(axis=0)) / 0.2
    assert stats.kstest(z.ravel(), "norm").pvalue > 1e-4


# ------------------------------------------------------------------------------ KSA
def test_keyword_histogram_counts_each_answer_once():
    h = keyword_histogram(["the lamp is bright and bright", "bright dim", "nothing"],
                          ["bright", "dim", "lamp"])
    np.testing.assert_array_equal(h, [2, 1, 1])


def test_joint_em_utilities_by_brute_force():
    h = np.array([9.0, 4.0, 7.0, 1.0, 7.0])
    seqs, u = joint_em_utilities(h, 2)
    assert len(seqs) == 20 == math.perm(5, 2)
    top = np.sort(h)[::-1][:2]
    for s, v in zip(seqs, u):
        assert v == -max(top[i] - h[s[i]] for i in range(2))
    assert u[[tuple(s) for s in seqs.tolist()].index((0, 2))] == 0.0   # the true top-2


def test_joint_em_utility_sensitivity_by_brute_force():
    """Over every neighbouring keyword histogram: when one answer changes, each count moves by
    −1, 0 or +1 (some down, some up) and the utility of some sequence moves by exactly 2 — the
    default Δu = 2; when counts can only rise (one person added, Gillenwater et al. 2022) it
    moves by at most 1."""
    h = np.array([6, 5, 5, 3, 2])
    k = 2
    seqs, u = joint_em_utilities(h, k)
    worst_swap, worst_mono = 0.0, 0.0
    for delta in itertools.product((-1, 0, 1), repeat=h.size):
        g = h + np.array(delta)
        if g.min() < 0:
            continue
        s2, u2 = joint_em_utilities(g, k)
        np.testing.assert_array_equal(s2, seqs)
        move = float(np.max(np.abs(u2 - u)))
        worst_swap = max(worst_swap, move)
        if min(delta) >= 0:
            worst_mono = max(worst_mono, move)
    assert worst_swap == 2.0
    assert worst_mono == 1.0


def test_esa_sum_sensitivity_is_two_for_unit_embeddings():
    """Changing one answer moves the mean of the unit-normalised answers by ≤ 2/M in ℓ2
    (EMBEDDING_SENSITIVITY / M), with equality for an antipodal replacement."""
    rng = np.random.default_rng(12)
    m, d = 7, 5
    answers = rng.normal(size=(m, d))
    cands = np.eye(d)
    base = esa(answers, cands, 0.0, rng=0)[1]
    worst = 0.0
    for _ in range(200):
        other = answers.copy()
        other[rng.integers(m)] = rng.normal(size=d) * rng.uniform(0.1, 10.0)
        worst = max(worst, np.linalg.norm(esa(other, cands, 0.0, rng=0)[1] - base))
    assert worst <= EMBEDDING_SENSITIVITY / m + 1e-12
    flipped = answers.copy()
    flipped[3] = -5.0 * answers[3]
    assert np.linalg.norm(esa(flipped, cands, 0.0, rng=0)[1] - base) == pytest.approx(
        EMBEDDING_SENSITIVITY / m, rel=1e-12)


def test_joint_em_samples_the_exponential_law():
    h = np.array([6.0, 5.0, 1.0, 3.0])
    seqs, u = joint_em_utilities(h, 2)
    p = exponential_mechanism_probabilities(u, 1.5, 2.0)
    n = 30_000
    index = {tuple(s): i for i, s in enumerate(seqs.tolist())}
    draws = [index[tuple(s)] for s in joint_exponential_topk(h, 2, 1.5, size=n, rng=10).tolist()]
    assert stats.chisquare(np.bincount(draws, minlength=len(seqs)), n * p).pvalue > 1e-4
    assert joint_exponential_topk(h, 2, 1.5, rng=0) in index            # one draw: a tuple
    hit = sum(np.bincount(draws, minlength=len(seqs))[index[s]] for s in ((0, 1), (1, 0)))
    p_set = joint_em_topk_probability(h, 2, 1.5)
    assert p_set == pytest.approx(p[index[(0, 1)]] + p[index[(1, 0)]])
    assert stats.binomtest(int(hit), n, p_set).pvalue > 1e-4


def test_topk_sequences_guard():
    assert topk_sequences(4, 2).shape == (12, 2)
    with pytest.raises(ValueError, match="k must be in"):
        topk_sequences(3, 4)
    with pytest.raises(ValueError, match="d!/\\(d-k\\)! must be <="):
        topk_sequences(200, 4)


def test_ptr_distance_is_a_safe_stability_margin():
    assert ptr_distance([9, 7, 2, 2], 2) == 2                 # gap 5 -> ceil(5/2) - 1
    assert ptr_distance([9, 7, 6, 2], 2) == 0
    assert ptr_distance([5, 4, 4], 1) == 0
    # brute force: every neighbour (each count moved by -1, 0 or +1) of a histogram with
    # dist >= 1 has the same top-k set, and dist moves by at most 1
    h = np.array([8, 7, 4, 3, 3])
    k = 2
    d0 = ptr_distance(h, k)
    assert d0 == 1
    top = set(np.argsort(-h, kind="stable")[:k])
    for delta in itertools.product((-1, 0, 1), repeat=h.size):
        g = h + np.array(delta)
        assert set(np.argsort(-g, kind="stable")[:k]) == top
        assert abs(ptr_distance(g, k) - d0) <= 1


@pytest.mark.slow
def test_ptr_release_probability_is_the_laplace_tail():
    h = np.array([30, 22, 3, 2])                                # gap 19: dist = 9
    eps, delta = 1.0, 1e-3
    thresh = math.log(1 / delta) / eps                         # 6.9 < 9: released mostly
    p_release = 1 - 0.5 * math.exp(-(9 - thresh) * eps)
    assert ptr_release_probability(h, 2, eps, delta) == pytest.approx(p_release)
    assert ptr_release_probability([5, 4, 1], 1, eps, delta) == pytest.approx(
        0.5 * math.exp(-thresh * eps))                          # dist 0: δ/2
    gen = np.random.default_rng(11)
    n = 20_000
    out = [ptr_topk(h, 2, eps, delta, rng=gen) for _ in range(n)]
    released = [o for o in out if o is not None]
    assert all(o == (0, 1) for o in released)                   # the exact top-2 set
    assert stats.binomtest(len(released), n, p_release).pvalue > 1e-4


@pytest.mark.parametrize("call, match", [
    (lambda: noisy_vote([[1.0, 2.0]], -1.0, rng=0), r"noise_std must be in \[0, inf\)"),
    (lambda: esa(np.ones((2, 3)), np.ones((2, 4)), 0.1, rng=0), "same d"),
    (lambda: ptr_topk([3, 1], 1, 0.0, 1e-5, rng=0), r"epsilon must be in \(0, inf\)"),
    (lambda: ptr_topk([3, 1], 1, 1.0, 1.5, rng=0), r"delta must be in \(0, 1\)"),
    (lambda: partition_exemplars(10, 0, rng=0), r"num_subsets must be an integer >= 1"),
    (lambda: partition_exemplars(10, 2, sample_rate=0.0, rng=0),
     r"sample_rate must be in \(0, 1\]"),
    (lambda: vote_noise_std(1.0, 1e-5, 10, accountant="moments"), "accountant must be one of"),
    (lambda: vote_noise_std(-1.0, 1e-5, 10), r"epsilon must be in \(0, inf\], got -1.0"),
    (lambda: keyword_histogram(["a"], ["a", "a"]), "keywords must be distinct"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_dp_icl_refuses_epsilon_zero(sentiment, model):
    with pytest.raises(ValueError, match="epsilon must be in \\(0, inf\\], got 0"):
        dp_icl_classify(model, PromptTemplate(("a", "b")), sentiment.pool_texts,
                        sentiment.pool_labels, ["x"], epsilon=0.0, delta=1e-5, num_subsets=2,
                        shots=1, rng=0)
