"""Private aggregation of an ensemble of prompts (Wu et al. 2024, DP-ICL).

The recipe, for every query: split the private exemplars into disjoint subsets
(:func:`partition_exemplars`), ask the model once per subset, and release only a *noisy
consensus* of the answers. Each exemplar sits in one subset, so it can move one answer; the
consensus is built so that one moved answer changes it by a bounded amount, and noise of that
size hides it (the accounting is in :mod:`dplib.icl.accounting`).

Classification — the answers are labels; their histogram gets Gaussian noise and the arg-max is
released (:func:`noisy_vote`; ``noise_std = 0`` is the plain majority vote). Variant: the
exponential mechanism on the vote counts via report-noisy-max with Gumbel noise
(:func:`rnm_vote`, pure ε-DP per query).

Generation — the answers are sentences, too many to vote over:

* ESA, embedding space aggregation (:func:`esa`): embed every answer on the unit sphere, add
  Gaussian noise to their mean, and return the *public* candidate closest to the noisy mean. The
  candidates must not depend on the private data (e.g. zero-shot answers of the model) — only the
  noisy mean does.
* KSA, keyword space aggregation (:func:`keyword_histogram`): count in how many answers each
  keyword of a public keyword list occurs, then release the top-k keywords privately, either with
  the joint exponential mechanism (:func:`joint_exponential_topk`, Gillenwater et al. 2022) or by
  propose-test-release (:func:`ptr_topk`); a public step turns the keywords into a sentence.

Every release takes an explicit ``rng``. An integer seed makes the subsets and the noise
reproducible by anyone who knows it: for experiments, never for a release (pass
``np.random.default_rng()``). The unit of privacy is one exemplar: a person who contributed c
exemplars is protected as a group of c (Dwork & Roth 2014, Thm 2.2), since their exemplars may
land in c different subsets.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .._constraints import Custom, constrained, unconstrained
from .._validate import shown
from ..mechanisms import (exponential_mechanism, exponential_mechanism_probabilities,
                          laplace_mechanism, report_noisy_max)
from ._checks import check_disjoint
from ._params import (COUNT, COUNTS, DELTA, EPSILON, FINITE_ARRAY, NOISE_STD, OPTIONAL_COUNT, RNG,
                      SAMPLE_RATE, SAMPLER, SENSITIVITY)
from ._records import TEMPLATE
from .data import tokenize
from .prompts import PromptBatch, PromptTemplate

__all__ = ["partition_exemplars", "ensemble_votes", "vote_histogram", "noisy_vote", "rnm_vote",
           "esa", "keyword_histogram", "topk_sequences", "joint_em_utilities",
           "joint_exponential_topk", "ptr_topk", "ptr_distance", "Votes",
           "ptr_release_probability", "joint_em_topk_probability"]

#: Largest number of ordered k-sequences :func:`joint_exponential_topk` enumerates.
MAX_SEQUENCES = 2_000_000


# ---------------------------------------------------------------------------------------------
# Disjoint subsets
# ---------------------------------------------------------------------------------------------
@constrained(n=COUNT, num_subsets=COUNT, num_queries=COUNT, shots=OPTIONAL_COUNT,
             sample_rate=SAMPLE_RATE, sampler=SAMPLER, rng=RNG)
def partition_exemplars(n: int, num_subsets: int, num_queries: int = 1, *,
                        shots: int | None = None, sample_rate: float = 1.0,
                        sampler: str = "poisson", rng) -> np.ndarray:
    """Disjoint subsets of the n exemplars for every query: an int array (Q, M, k), ``-1`` = empty.

    ``sampler="poisson"`` (add/remove adjacency): for every query independently, each exemplar
    is kept with probability q = ``sample_rate`` (Poisson subsampling) and, if kept, put into one
    of the M subsets uniformly at random, independently of the others. If ``shots`` is given, a
    subset with more members keeps ``shots`` of them chosen uniformly at random — a function of
    that subset alone. Adding or removing one exemplar therefore changes at most one subset of one
    query's partition, and only with probability q: the structure the accountant assumes.
    Subset sizes are random (about Binomial(qn, 1/M)); k = ``shots`` or the largest size.

    ``sampler="fixed"`` (replace-one adjacency, n public): one uniformly random partition of
    M·``shots`` of the exemplars into M subsets of exactly ``shots``, reused for every query;
    requires ``sample_rate`` = 1 and M·shots ≤ n. Replacing one exemplar changes one subset.

    Vectorised: one ``lexsort`` groups all (query, subset) members at once.
    """
    m, qn, q, k_cap, gen = num_subsets, num_queries, sample_rate, shots, rng
    if sampler == "fixed":
        if k_cap is None:
            raise ValueError("sampler='fixed' needs shots (the size of every subset), got None")
        if q != 1.0:
            raise ValueError(f"sample_rate must be 1 for sampler='fixed' (one partition reused "
                             f"by every query), got {shown(sample_rate)}")
        if m * k_cap > n:
            raise ValueError(f"num_subsets * shots must be <= n = {n} for sampler='fixed', "
                             f"got {m} * {k_cap} = {m * k_cap}")
        part = gen.permutation(n)[:m * k_cap].reshape(m, k_cap)
        return np.broadcast_to(part, (qn, m, k_cap)).copy()
    qi, ex = np.nonzero(gen.random((qn, n)) < q) if q < 1.0 else np.divmod(np.arange(qn * n), n)
    group = qi * m + gen.integers(0, m, size=qi.size)
    order = np.lexsort((gen.random(group.size), group))   # random order within each group
    group, ex = group[order], ex[order]
    first = np.searchsorted(group, group, side="left")
    rank = np.arange(group.size) - first
    if k_cap is not None:
        keep = rank < k_cap
        group, ex, rank = group[keep], ex[keep], rank[keep]
    k = k_cap if k_cap is not None else max(1, int(rank.max(initial=-1)) + 1)
    out = np.full((qn * m, k), -1, dtype=np.int64)
    out[group, rank] = ex
    return out.reshape(qn, m, k)


# ---------------------------------------------------------------------------------------------
# Classification
# ---------------------------------------------------------------------------------------------
@unconstrained("a result record: ensemble_votes builds it from the model's answers, and "
               "vote_histogram checks the votes against num_classes when the histogram is read")
@dataclass(frozen=True)
class Votes:
    """The (non-private) answers of an ensemble: one label per query and subset."""
    votes: np.ndarray          # (Q, M) label of every subset's prompt
    num_classes: int

    @property
    def histogram(self) -> np.ndarray:
        """(Q, C) vote counts."""
        return vote_histogram(self.votes, self.num_classes)


@constrained(template=TEMPLATE)
def ensemble_votes(model, template: PromptTemplate, pool_texts: Sequence[str],
                   pool_labels: np.ndarray, queries: Sequence[str],
                   demos: np.ndarray) -> Votes:
    """Ask ``model`` once per query and subset: ``demos`` (Q, M, k) from
    :func:`partition_exemplars`. All Q·M prompts go to the model as one batch. Subsets of one
    query that share an exemplar are refused (:func:`check_disjoint`)."""
    d = np.asarray(demos)
    if d.ndim != 3 or d.shape[0] != len(queries):
        raise ValueError(f"demos must have shape (num_queries={len(queries)}, num_subsets, "
                         f"shots), got {d.shape}")
    check_disjoint("demos", d)
    qn, m, k = d.shape
    batch = PromptBatch(template, pool_texts, np.asarray(pool_labels), d.reshape(qn * m, k),
                        [q for q in queries for _ in range(m)])
    return Votes(np.asarray(model.predict(batch)).reshape(qn, m), len(template.labels))


@constrained(num_classes=COUNT)
def vote_histogram(votes: object, num_classes: int) -> np.ndarray:
    """Counts of each label along the last axis: (..., M) labels → (..., C) counts."""
    c = num_classes
    v = np.asarray(votes)
    if not np.issubdtype(v.dtype, np.integer) or v.size and (v.min() < 0 or v.max() >= c):
        raise ValueError(f"votes must be integer labels in [0, {c - 1}], got {shown(votes)}")
    if v.ndim == 0 or v.shape[-1] == 0:
        raise ValueError(f"votes must hold at least one vote along the last axis, got shape "
                         f"{v.shape}")
    flat = v.reshape(-1, v.shape[-1])
    offs = np.arange(flat.shape[0])[:, None] * c
    counts = np.bincount((flat + offs).ravel(), minlength=flat.shape[0] * c)
    return counts.reshape(v.shape[:-1] + (c,))


@constrained(histograms=FINITE_ARRAY, noise_std=NOISE_STD, rng=RNG)
def noisy_vote(histograms: object, noise_std: float, *, rng) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian noisy arg-max of vote histograms (..., C): returns (labels, noisy histograms).

    Every count gets independent N(0, s²) noise, s = ``noise_std``; the arg-max (ties: lowest
    label) is released. Releasing the whole noisy histogram is the Gaussian mechanism with ℓ2
    sensitivity √2 (one exemplar moves one vote), so the arg-max alone is as private (post-
    processing; Wu et al. 2024 §3.1 call it report-noisy-max with Gaussian noise). ``noise_std =
    0`` returns the plain majority vote.

    Float noise: drawn with floating-point samplers, not hardened against the floating-point
    attack of Mironov (2012) (exact samplers: :mod:`dplib.mechanisms.discrete`).
    """
    h, s = histograms, noise_std
    noisy = h + (rng.normal(0.0, s, size=h.shape) if s > 0 else 0.0)
    return np.argmax(noisy, axis=-1), noisy


@constrained(epsilon=EPSILON, rng=RNG)
def rnm_vote(histograms: object, epsilon: float, *, rng) -> np.ndarray:
    """Report-noisy-max of the vote counts with Gumbel(2/ε) noise: the exponential mechanism with
    utility = count, sensitivity 1 (one moved vote changes each count by at most 1 — not
    monotonically, so the factor 2 stays), ε-DP per query (:func:`dplib.mechanisms.
    report_noisy_max`; McSherry & Talwar 2007; Durfee & Rogers 2019). The histograms are
    checked there (as its ``scores``).

    Float noise: Gumbel noise drawn with floating-point samplers, not hardened against the
    floating-point attack of Mironov (2012)."""
    return report_noisy_max(histograms, epsilon, 1.0, noise="gumbel", rng=rng)


# ---------------------------------------------------------------------------------------------
# Generation: ESA
# ---------------------------------------------------------------------------------------------
def _unit_rows(a: np.ndarray) -> np.ndarray:
    """Rows scaled to ℓ2 norm 1 (zero rows stay zero), without under- or overflow: each row is
    first divided by its largest |entry|, so its norm lies in [1, √d] before the division."""
    top = np.max(np.abs(a), axis=1, keepdims=True)
    b = a / np.where(top > 0, top, 1.0)
    unit = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1.0)
    # rounding can leave a norm of 1 + 1e-16; never let it exceed 1
    return unit / np.maximum(np.linalg.norm(unit, axis=1, keepdims=True), 1.0)


@constrained(answer_embeddings=FINITE_ARRAY, candidate_embeddings=FINITE_ARRAY,
             noise_std=NOISE_STD, rng=RNG)
def esa(answer_embeddings: object, candidate_embeddings: object, noise_std: float, *,
        rng) -> tuple[int, np.ndarray]:
    """Embedding space aggregation: the public candidate nearest to the noisy mean answer.

    ``answer_embeddings`` (M, d): one embedding per subset's answer; each row is scaled to unit
    norm (rows of zeros stay zero), so one changed answer moves the *sum* by at most 2 in ℓ2.
    The scaling divides by the largest entry first, so entries as small as 1e-320 or as large
    as 1e308 (whose squares underflow or overflow) still give a unit row. A non-finite row is
    refused: map an embedder's failure to a zero row (an abstention) before calling, since a
    refusal that depends on one private answer is itself an observable outcome.
    The released statistic is mean + N(0, s² I) with s = ``noise_std`` (use
    σ·2/M from :func:`dplib.icl.accounting.gaussian_noise_std` with sensitivity 2/M, or
    equivalently noise σ·2 on the sum). ``candidate_embeddings`` (P, d) must be public; the
    returned index is the candidate with the largest cosine similarity to the noisy mean
    (post-processing). Returns (index, noisy mean).

    Float noise: drawn with floating-point samplers, not hardened against the floating-point
    attack of Mironov (2012) (exact samplers: :mod:`dplib.mechanisms.discrete`).
    """
    a, c, s = answer_embeddings, candidate_embeddings, noise_std
    if a.ndim != 2 or c.ndim != 2 or a.shape[1] != c.shape[1]:
        raise ValueError(f"answer_embeddings (M, d) and candidate_embeddings (P, d) must be 2-D "
                         f"with the same d, got shapes {a.shape} and {c.shape}")
    unit = _unit_rows(a)
    noisy = unit.mean(axis=0) + (rng.normal(0.0, s, a.shape[1]) if s else 0.0)
    cn = _unit_rows(c)
    return int(np.argmax(cn @ noisy)), noisy


# ---------------------------------------------------------------------------------------------
# Generation: KSA
# ---------------------------------------------------------------------------------------------
def _check_strings(name: str, value: object, *, allow_empty: bool = False) -> list[str]:
    """A list/tuple of strings (non-empty unless ``allow_empty``); a bare string is refused."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, np.ndarray)):
        raise ValueError(f"{name} must be a list of strings, got {shown(value)}")
    items = list(value)
    if not items and not allow_empty:
        raise ValueError(f"{name} must be a non-empty list of strings, got {shown(value)}")
    bad = [v for v in items if not isinstance(v, str)]
    if bad:
        raise ValueError(f"{name} must be a list of strings, got element {shown(bad[0])}")
    return items


_BAD_STRINGS = [None, "a b", [1, 2], 3.0]
#: A list of strings (a bare string is refused: it is not a list of its characters).
_ANSWERS = Custom(lambda name, value: _check_strings(name, value, allow_empty=True),
                  "a list of strings", _BAD_STRINGS)
_KEYWORDS = Custom(_check_strings, "a non-empty list of strings", _BAD_STRINGS + [[]])


@constrained(answers=_ANSWERS, keywords=_KEYWORDS)
def keyword_histogram(answers: Sequence[str], keywords: Sequence[str]) -> np.ndarray:
    """How many answers contain each keyword (each answer counts a keyword at most once).

    One changed answer moves every count by at most 1 (up for words it gains, down for words it
    loses): ℓ∞ sensitivity 1, not monotone.
    """
    kw = {w: i for i, w in enumerate(keywords)}
    if len(kw) != len(keywords):
        raise ValueError(f"keywords must be distinct, got {shown(keywords)}")
    counts = np.zeros(len(keywords), dtype=np.int64)
    for a in answers:
        for w in set(tokenize(a)):
            j = kw.get(w)
            if j is not None:
                counts[j] += 1
    return counts


@constrained(d=COUNT, k=COUNT)
def topk_sequences(d: int, k: int) -> np.ndarray:
    """All ordered sequences of k distinct items of range(d), shape (d!/(d−k)!, k)."""
    if k > d:
        raise ValueError(f"k must be in [1, d={d}], got {k}")
    total = math.perm(d, k)
    if total > MAX_SEQUENCES:
        raise ValueError(f"d!/(d-k)! must be <= {MAX_SEQUENCES} to enumerate, got {total} for "
                         f"d={d}, k={k}; restrict the keyword list or k")
    return np.array(list(itertools.permutations(range(d), k)), dtype=np.int64).reshape(-1, k)


@constrained(counts=COUNTS, k=COUNT)
def joint_em_utilities(counts: object, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The joint exponential mechanism's utility of every ordered k-sequence s:

        u(s) = − max_{i ≤ k} (h_(i) − h_{s_i}),

    h_(i) the i-th largest count (Gillenwater, Joseph, Muñoz Medina & Ribero 2022, "A joint
    exponential mechanism for differentially private top-k", ICML, §3). The true top-k in order
    has utility 0. Returns (sequences, utilities).
    """
    h = counts
    if h.ndim != 1:
        raise ValueError(f"counts must be 1-D, got shape {h.shape}")
    seqs = topk_sequences(h.size, k)
    top = np.sort(h)[::-1][:k]
    return seqs, -np.max(top[None, :] - h[seqs], axis=1)


@constrained(counts=COUNTS, k=COUNT, epsilon=EPSILON, sensitivity=SENSITIVITY,
             size=OPTIONAL_COUNT, rng=RNG)
def joint_exponential_topk(counts: object, k: int, epsilon: float, *, sensitivity: float = 2.0,
                           size: int | None = None, rng) -> tuple[int, ...] | np.ndarray:
    """Private top-k keywords by the joint exponential mechanism, ε-DP.

    Samples a sequence with probability ∝ exp(ε u(s)/(2Δu)) with u from
    :func:`joint_em_utilities`, through :func:`dplib.mechanisms.exponential_mechanism`
    (brute force over all d!/(d−k)! sequences; Gillenwater et al. sample the same law in
    O(dk log k) time). Sensitivity: Gillenwater et al. prove Δu = 1 when one person can only
    raise counts (monotone). In KSA one exemplar *changes* one answer (under add/remove of the
    exemplar with Poisson subsets as under replace-one with a fixed partition), so some counts
    may fall by 1 while others rise by 1, and h_(i) − h_{s_i} can move by 2: the default Δu = 2
    is the safe value here — the value the authors' reference code (google-research
    ``dp_topk/joint.py``) uses for swap neighbours. ``size`` = n draws independent samples at
    once (an (n, k) array).
    """
    seqs, u = joint_em_utilities(counts, k)
    if size is not None:
        return seqs[exponential_mechanism(np.broadcast_to(u, (size, u.size)), epsilon, sensitivity,
                                          rng=rng)]
    idx = exponential_mechanism(u, epsilon, sensitivity, rng=rng)
    return tuple(int(x) for x in seqs[idx])


@constrained(counts=FINITE_ARRAY, k=COUNT)
def ptr_distance(counts: object, k: int) -> int:
    """A lower bound on the number of changed answers needed before the top-k *set* could change.

    With gap g = h_(k) − h_(k+1), one changed answer lowers g by at most 2 (and can lower it by
    exactly 2), and a histogram whose gap is ≥ 3 keeps its top-k set on every neighbour (their
    gap is ≥ 1); so at least max(0, ⌈(g − 2)/2⌉) = max(0, ⌈g/2⌉ − 1) changes are needed to reach a
    histogram with gap ≤ 2, the only ones that may be unstable. This
    dist has sensitivity 1 and dist ≥ 1 implies every neighbour has the same top-k set — the two
    properties propose-test-release needs (Dwork & Roth 2014, §7.3).
    """
    h = counts
    if h.ndim != 1 or k > h.size:
        raise ValueError(f"counts must be 1-D with at least k={k} entries, got shape {h.shape}")
    if k == h.size:
        return np.iinfo(np.int64).max // 2          # nothing can enter or leave the set
    srt = np.sort(h)[::-1]
    gap = srt[k - 1] - srt[k]
    return max(0, int(math.ceil(gap / 2.0)) - 1)


@constrained(counts=FINITE_ARRAY, k=COUNT, epsilon=EPSILON, delta=DELTA)
def ptr_release_probability(counts: object, k: int, epsilon: float, delta: float) -> float:
    """P(:func:`ptr_topk` releases the top-k set) = P(dist + Lap(1/ε) > ln(1/δ)/ε), exactly:
    with t = ln(1/δ)/ε − dist, ½·e^{−εt} for t ≥ 0 and 1 − ½·e^{εt} for t < 0."""
    eps, d = epsilon, delta
    t = math.log(1.0 / d) / eps - min(ptr_distance(counts, k), 1e12)
    return 0.5 * math.exp(-eps * t) if t >= 0 else 1.0 - 0.5 * math.exp(eps * t)


@constrained(counts=COUNTS, k=COUNT, epsilon=EPSILON, sensitivity=SENSITIVITY)
def joint_em_topk_probability(counts: object, k: int, epsilon: float, *,
                              sensitivity: float = 2.0) -> float:
    """P(:func:`joint_exponential_topk` returns the true top-k *set*, in any order), exactly:
    the exponential-mechanism probabilities of the k! orderings of the true top-k summed."""
    h = counts
    seqs, u = joint_em_utilities(h, k)
    p = exponential_mechanism_probabilities(u, epsilon, sensitivity)
    top = set(np.lexsort((np.arange(h.size), -h))[:k].tolist())
    hit = np.array([set(s) == top for s in seqs.tolist()])
    return float(p[hit].sum())


@constrained(counts=FINITE_ARRAY, k=COUNT, epsilon=EPSILON, delta=DELTA, rng=RNG)
def ptr_topk(counts: object, k: int, epsilon: float, delta: float, *,
             rng) -> tuple[int, ...] | None:
    """Propose-test-release for the top-k keyword set: (ε, δ)-DP.

    Test: d̂ = dist + Lap(1/ε) with dist = :func:`ptr_distance`; if d̂ > ln(1/δ)/ε release the
    exact top-k *set* (as sorted indices: the order by count may differ on a neighbour even when
    the set does not), else release nothing (``None``; fall back to a public answer). The
    classic stability argument: the test is ε-DP, and it passes on an unstable input only with
    probability ≤ δ/2 (Dwork & Roth 2014, §7.3; Thakurta & Smith 2013). Wu et al. 2024 use a
    Rényi-DP variant of the same idea.
    """
    h, eps, d = counts, epsilon, delta
    dist = ptr_distance(h, k)
    noisy = laplace_mechanism(float(min(dist, 1e12)), eps, 1.0, rng=rng)
    if noisy <= math.log(1.0 / d) / eps:
        return None
    order = np.lexsort((np.arange(h.size), -h))
    return tuple(sorted(int(i) for i in order[:k]))
