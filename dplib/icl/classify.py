"""DP-ICL classification (Wu et al. 2024, §3.1) and the two baselines it is compared with.

* :func:`dp_icl_classify` — one batch of queries: disjoint subsets of the private exemplars, one
  prompt per subset, a private arg-max of the votes (Gaussian noise or report-noisy-max);
  its result, :class:`DPICLResult`, carries what a privacy report needs;
* :func:`zero_shot_predict` — no demonstrations (ε = 0: the private data are never read);
* :func:`single_prompt_predict` — one non-private prompt of random exemplars.

The chapter's tables built from them (accuracy against ε, membership inference, summaries) are
experiment drivers: :mod:`dplib.experiments.icl`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Sequence

import numpy as np

from .._constraints import Options, constrained, unconstrained
from .._validate import shown
from ._params import (ACCOUNTANT, COUNT, DELTA, EPSILON_OR_INF, OPTIONAL_COUNT, OPTIONAL_RATE, RNG,
                      SAMPLER)
from ._records import TEMPLATE
from .accounting import per_query_epsilon, vote_noise_std
from .aggregation import Votes, ensemble_votes, noisy_vote, partition_exemplars, rnm_vote
from .prompts import PromptBatch, PromptTemplate

if TYPE_CHECKING:
    from ..reporting import PrivacyReport

__all__ = ["DPICLResult", "zero_shot_predict", "single_prompt_predict", "dp_icl_classify"]


# ---------------------------------------------------------------------------------------------
# Classification
# ---------------------------------------------------------------------------------------------
@unconstrained("the result record of dp_icl_classify, built from its checked arguments")
@dataclass(frozen=True)
class DPICLResult:
    """Output of :func:`dp_icl_classify` (``noisy`` is what a released histogram would be).

    Only ``predictions`` (and ``noisy``) are private releases; ``votes`` are the ensemble's raw,
    non-private answers, kept for analysis — publishing them publishes the exemplars' votes."""
    predictions: np.ndarray
    votes: Votes
    noisy: np.ndarray | None
    noise_std: float
    epsilon: float
    delta: float
    sample_rate: float
    info: dict = field(default_factory=dict)

    @unconstrained("forwards the public facts to dplib.reporting.privacy_report, which checks "
                   "them")
    def privacy_report(self, **public_facts: object) -> "PrivacyReport":
        """This release's complete privacy statement, read from the run:
        :func:`dplib.reporting.privacy_report` (``public_facts``: only what the run cannot know)."""
        from ..reporting import privacy_report
        return privacy_report(self, **public_facts)


@constrained(template=TEMPLATE)
def zero_shot_predict(model, template: PromptTemplate, queries: Sequence[str]) -> np.ndarray:
    """Predictions with no demonstrations at all (ε = 0: the private data are never read)."""
    batch = PromptBatch(template, (), None, np.full((len(queries), 1), -1), list(queries))
    return np.asarray(model.predict(batch))


@constrained(template=TEMPLATE, shots=COUNT, rng=RNG)
def single_prompt_predict(model, template: PromptTemplate, pool_texts: Sequence[str],
                          pool_labels: np.ndarray, queries: Sequence[str], shots: int, *,
                          rng) -> np.ndarray:
    """Non-private ICL with *one* prompt of ``shots`` random exemplars shared by every query."""
    k = shots
    if k > len(pool_texts):
        raise ValueError(f"shots must be in [1, {len(pool_texts)}], got {shown(shots)}")
    demos = rng.choice(len(pool_texts), k, replace=False)
    batch = PromptBatch(template, pool_texts, np.asarray(pool_labels),
                        np.broadcast_to(demos, (len(queries), k)).copy(), list(queries))
    return np.asarray(model.predict(batch))


@constrained(template=TEMPLATE, epsilon=EPSILON_OR_INF, delta=DELTA, num_subsets=COUNT,
             shots=COUNT, sample_rate=OPTIONAL_RATE, sampler=SAMPLER,
             aggregator=Options("gaussian", "rnm"), accountant=ACCOUNTANT,
             num_queries=OPTIONAL_COUNT, rng=RNG)
def dp_icl_classify(model, template: PromptTemplate, pool_texts: Sequence[str],
                    pool_labels: np.ndarray, queries: Sequence[str], *, epsilon: float,
                    delta: float, num_subsets: int, shots: int,
                    sample_rate: float | None = None, sampler: str = "poisson",
                    aggregator: str = "gaussian", accountant: str = "rdp",
                    num_queries: int | None = None, rng) -> DPICLResult:
    """DP-ICL classification of ``queries`` (Wu et al. 2024, §3.1), (ε, δ)-DP for the exemplars.

    Every query gets its own disjoint subsets (:func:`partition_exemplars`; ``sampler`` and its
    adjacency as documented there; default rate q = M·shots/n for Poisson sampling), one prompt
    per subset, and a private arg-max of the M votes:

    * ``aggregator="gaussian"``: N(0, s²) on every count, s from :func:`vote_noise_std` for Q
      queries (``num_queries``, default ``len(queries)``) at rate q;
    * ``aggregator="rnm"``: Gumbel report-noisy-max, ε₀-DP per query with ε₀ from
      :func:`per_query_epsilon` (pure DP, optimal composition).

    ε = ``math.inf`` is the non-private ensemble (plain majority vote).

    Adjacency: add/remove of one exemplar (Poisson sampling). The default rate q = M·shots/n is
    computed from the pool size n, which the accounting treats as public: the
    Poisson-subsampled Gaussian analysis assumes a rate fixed in advance, and under add/remove n
    itself changes by one. If n is private, pass a ``sample_rate`` fixed independently of the
    data (as :mod:`dplib.icl.fewshot` says for its per-label rates).
    """
    eps, d, m, k, gen = epsilon, delta, num_subsets, shots, rng
    n = len(pool_texts)
    if sample_rate is None:
        q = 1.0 if sampler == "fixed" else min(1.0, m * k / n)
    else:
        q = sample_rate
    qn = len(queries) if num_queries is None else num_queries
    if qn < len(queries):
        raise ValueError(f"num_queries must be >= len(queries) = {len(queries)}, got {qn}")
    demos = partition_exemplars(n, m, len(queries), shots=k, sample_rate=q, sampler=sampler,
                                rng=gen)
    votes = ensemble_votes(model, template, pool_texts, pool_labels, queries, demos)
    hist = votes.histogram
    info = {"num_queries": qn, "num_subsets": m, "shots": k, "aggregator": aggregator,
            "sampler": sampler, "accountant": accountant}
    if aggregator == "rnm":
        if math.isinf(eps):
            return DPICLResult(np.argmax(hist, axis=1), votes, None, 0.0, eps, d, q, info)
        e0 = per_query_epsilon(eps, d, qn)
        info["epsilon_per_query"] = e0
        return DPICLResult(np.asarray(rnm_vote(hist, e0, rng=gen)), votes, None, math.nan, eps,
                           d, q, info)
    s = vote_noise_std(eps, d, qn, q, accountant=accountant)
    pred, noisy = noisy_vote(hist, s, rng=gen)
    return DPICLResult(pred, votes, noisy, s, eps, d, q, info)
