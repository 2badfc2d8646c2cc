"""Chapter 10's experiments on DP in-context learning, shared by the notebook and
``benchmarks/dpicl.py``, ``benchmarks/icl_summaries.py`` and ``benchmarks/icl_solution_numbers.py``.

The mechanisms are in :mod:`dplib.icl` (:func:`~dplib.icl.classify.dp_icl_classify`, the
aggregators of :mod:`dplib.icl.aggregation`, the accounting of :mod:`dplib.icl.accounting`);
this module runs them and scores the results:

* :func:`accuracy_table` — accuracy at ε ∈ {0 (zero-shot), 1, 3, 8, ∞ (ensemble), ∞ (one
  prompt)} in the form of Wu et al.'s Table 1 (mean and standard deviation over runs);
  :func:`format_table` prints it;
* :func:`mia_one_shot` — membership inference against a 1-shot prompt, AUC per ε (Wu et al.
  2024, Table 15);
* :func:`summarise_products` — the generation task: a private one-line summary of a product's
  reviews by per-token noisy decoding, ESA or KSA, scored by :func:`unigram_f1`;
* :func:`derailment` — how per-token noise derails ensemble decoding.

Importing it loads nothing heavy: :func:`mia_one_shot` imports scikit-learn (the AUC) when called.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .._constraints import Integer, Options, RealArray, constrained, unconstrained
from .._validate import shown
from ..icl.accounting import (EMBEDDING_SENSITIVITY, VOTE_SENSITIVITY, gaussian_noise_std,
                              per_query_epsilon, vote_noise_std)
from ..icl.aggregation import (ensemble_votes, esa, joint_exponential_topk, keyword_histogram,
                               noisy_vote, partition_exemplars, ptr_topk)
from ..icl.classify import dp_icl_classify, single_prompt_predict, zero_shot_predict
from ..icl.data import (NEGATIVE, POSITIVE, PRODUCTS, STOPWORDS, TextDataset, product_reference,
                        tokenize)
from ..icl._params import (ACCOUNTANT, COUNT, DELTA, EPSILON_OR_INF, OPTIONAL_CALLABLE,
                           OPTIONAL_COUNT, RNG, SAMPLE_RATE, TEXT)
from ..icl._records import DATASET, TEMPLATE
from ..icl.fewshot import private_next_tokens
from ..icl.model import generate
from ..icl.prompts import PromptBatch, PromptTemplate, template_for
from ..tables import format_table as tables_format

__all__ = ["accuracy_table", "format_table", "mia_one_shot", "unigram_f1",
           "summarise_products", "derailment"]

#: The finite ε > 0 of a table's columns, at most 1-D (ε = ∞ is added by the driver itself).
_EPSILONS = RealArray(0.0, math.inf, nonempty=False, max_ndim=1)


@constrained(dataset=DATASET, epsilons=_EPSILONS, delta=DELTA, num_subsets=COUNT, shots=COUNT,
             num_runs=COUNT, num_queries=OPTIONAL_COUNT, accountant=ACCOUNTANT, rng=RNG)
def accuracy_table(model, dataset: TextDataset, *, epsilons: Sequence[float] = (1.0, 3.0, 8.0),
                   delta: float = 1e-5, num_subsets: int = 20, shots: int = 4,
                   num_runs: int = 5, num_queries: int | None = None,
                   accountant: str = "rdp", rng) -> dict[str, dict]:
    """Test accuracy (%) in the form of Wu et al. 2024, Table 1: zero-shot (ε = 0), DP-ICL at each
    ε, the noiseless ensemble (ε = ∞, "Agg") and one ``shots``-shot prompt (ε = ∞), as
    mean and standard deviation over ``num_runs`` runs (fresh subsets, noise and prompt per run).
    Queries: the first ``num_queries`` test texts (all by default), accounted as Q queries.
    The DP-ICL columns use :func:`dp_icl_classify`'s default rate q = M·shots/n from the pool
    size n, treated as public (add/remove adjacency of one exemplar; see there).
    """
    runs, gen = num_runs, rng
    tpl = template_for(dataset)
    queries = list(dataset.test_texts[:num_queries])
    truth = dataset.test_labels[:len(queries)]
    rows: dict[str, dict] = {}

    def stats(accs: list[float], **extra) -> dict:
        a = 100 * np.asarray(accs)
        return {"mean": float(a.mean()), "std": float(a.std()), "runs": a, **extra}

    zs = zero_shot_predict(model, tpl, queries)
    rows["ε = 0 (0-shot)"] = stats([np.mean(zs == truth)])
    for eps in [float(e) for e in np.atleast_1d(epsilons)] + [math.inf]:
        accs, noise = [], math.nan
        for _ in range(runs):
            r = dp_icl_classify(model, tpl, dataset.pool_texts, dataset.pool_labels, queries,
                                epsilon=eps, delta=delta, num_subsets=num_subsets, shots=shots,
                                accountant=accountant, rng=gen)
            accs.append(np.mean(r.predictions == truth))
            noise = r.noise_std
        name = "ε = ∞ (Agg)" if math.isinf(eps) else f"ε = {eps:g}"
        rows[name] = stats(accs, noise_std=noise, sample_rate=r.sample_rate)
    single = [np.mean(single_prompt_predict(model, tpl, dataset.pool_texts, dataset.pool_labels,
                                            queries, shots, rng=gen) == truth)
              for _ in range(runs)]
    rows["ε = ∞"] = stats(single)
    return rows


@unconstrained("formats the dicts accuracy_table returns (one per data set); no numeric input "
               "of its own")
def format_table(tables: dict[str, dict[str, dict]]) -> str:
    """A plain-text table, one row per data set, "mean ± std" per column (the layout of
    the results tables of Wu et al. 2024)."""
    names = list(next(iter(tables.values())))

    def cell(r: dict) -> str:
        return f"{r['mean']:.2f}" + (f" ± {r['std']:.2f}" if len(r['runs']) > 1 else "")
    table = [{"data set": ds, **{n: cell(by_name[n]) for n in names}}
             for ds, by_name in tables.items()]
    return tables_format(table, ["data set", *names], sep=" | ", pad=False, rule=None)


# ---------------------------------------------------------------------------------------------
# Membership inference against a 1-shot prompt
# ---------------------------------------------------------------------------------------------
def _mia_private_sets(n: int, m: int, t: int,
                      gen: np.random.Generator) -> tuple[np.ndarray, ...]:
    """The private sets of :func:`mia_one_shot`'s ``t`` trials over a pool of ``n`` exemplars.

    Returns (target, member, slot, sets): per trial a target index, a fair coin, a slot in
    [0, m) and ``sets`` (t, m), m *distinct* exemplars none of which is the target; in member
    trials the slot's exemplar is then replaced by the target (replace-one adjacency: the
    non-member set keeps its slot's non-target exemplar). So a member set holds the target
    exactly once, at ``slot``, and a non-member set never holds it.
    """
    target = gen.integers(0, n, t)
    member = gen.random(t) < 0.5
    slot = gen.integers(0, m, t)
    # m distinct draws per trial from the n − 1 non-targets (the first m of a random order),
    # then shifted past the target's index
    draw = np.argsort(gen.random((t, n - 1)), axis=1)[:, :m]
    sets = draw + (draw >= target[:, None])
    sets[member, slot[member]] = target[member]
    return target, member, slot, sets


@constrained(dataset=DATASET, epsilons=_EPSILONS, num_trials=Integer(min=4), num_subsets=COUNT,
             delta=DELTA, num_queries=COUNT, rng=RNG)
def mia_one_shot(model, dataset: TextDataset, epsilons: Sequence[float] = (1.0, 2.0, 4.0, 8.0),
                 *, num_trials: int = 2000, num_subsets: int = 10, delta: float = 1e-5,
                 num_queries: int = 100, rng) -> dict[float, dict]:
    """AUC of a membership-inference attack on the exemplars of 1-shot prompts, per ε.

    Each trial draws a target exemplar z* = (x*, y*), a coin and a private set of
    ``num_subsets`` distinct exemplars other than z*: *member* trials put z* in one random slot
    of it, *non-member* trials leave that slot's (non-target) exemplar in place (replace-one), so
    z* never appears in a non-member set.
    The attacker queries x* and scores the answer:

    * ε = ∞ — the private set is one 1-shot prompt (no DP); the attacker sees the model's
      probability of y* (Wu et al. 2024, Table 15, last column);
    * finite ε — DP-ICL with ``num_subsets`` 1-shot prompts (a fixed partition, q = 1) releasing
      the noisy vote histogram, noise calibrated for ``num_queries`` queries at (ε, δ); the
      score is the noisy count of y*.

    Returns, per ε, the AUC, its standard error (Hanley & McNeil 1982) and, for finite ε, the
    largest AUC any attack can reach from one released histogram, Φ(1/s): the two histograms
    differ by at most √2 in ℓ2 and the optimal test between N(μ, s²I) and N(μ+Δ, s²I) has AUC
    Φ(‖Δ‖/(√2 s)).
    """
    from scipy.stats import norm
    from sklearn.metrics import roc_auc_score

    t, m, gen = num_trials, num_subsets, rng
    tpl = template_for(dataset)
    n = len(dataset.pool_texts)
    if m >= n:
        raise ValueError(f"num_subsets must be < the pool size {n}, got {shown(num_subsets)}")
    target, member, slot, others = _mia_private_sets(n, m, t, gen)
    x_star = [dataset.pool_texts[i] for i in target]
    y_star = dataset.pool_labels[target]
    out: dict[float, dict] = {}

    def auc(score: np.ndarray) -> dict:
        a = float(roc_auc_score(member, score))
        n1, n0 = member.sum(), (~member).sum()
        q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
        se = math.sqrt((a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a))
                       / (n1 * n0))
        return {"auc": a, "se": se}

    # ε = ∞: one 1-shot prompt holding the target's slot exemplar
    one = PromptBatch(tpl, dataset.pool_texts, dataset.pool_labels,
                      others[np.arange(t), slot][:, None], x_star)
    lp = np.asarray(model.label_logprobs(one))
    out[math.inf] = auc(lp[np.arange(t), y_star])
    # finite ε: the ensemble of 1-shot prompts
    votes = ensemble_votes(model, tpl, dataset.pool_texts, dataset.pool_labels, x_star,
                           others[:, :, None])
    hist = votes.histogram
    for eps in np.atleast_1d(epsilons).tolist():
        s = vote_noise_std(eps, delta, num_queries, 1.0)
        _, noisy = noisy_vote(hist, s, rng=gen)
        res = auc(noisy[np.arange(t), y_star])
        res["bound"] = float(norm.cdf(1.0 / s))
        res["noise_std"] = s
        out[float(eps)] = res
    return out


# ---------------------------------------------------------------------------------------------
# Generation: product summaries
# ---------------------------------------------------------------------------------------------
@constrained(text=TEXT, reference=TEXT, ignore=TEXT)
def unigram_f1(text: str, reference: str, ignore: str = "") -> float:
    """F1 of the content words (stop words and the words of ``ignore`` removed, as sets) of
    ``text`` against ``reference``: a one-line ROUGE-1 (Lin 2004) on word sets."""
    skip = STOPWORDS | set(tokenize(ignore))
    a = {w for w in tokenize(text) if w not in skip}
    b = {w for w in tokenize(reference) if w not in skip}
    if not a or not b:
        return 0.0
    common = len(a & b)
    return 0.0 if common == 0 else 2 * common / (len(a) + len(b))


@constrained(dataset=DATASET, method=Options("per_token", "esa", "ksa_em", "ksa_ptr"),
             epsilon=EPSILON_OR_INF, delta=DELTA, num_subsets=COUNT, shots=COUNT,
             max_tokens=COUNT, num_candidates=COUNT, keywords=COUNT, embed=OPTIONAL_CALLABLE,
             rng=RNG)
def summarise_products(model, dataset: TextDataset, *, method: str, epsilon: float,
                       delta: float = 1e-5, products: Sequence[str] = PRODUCTS,
                       num_subsets: int = 10, shots: int = 4, max_tokens: int = 4,
                       num_candidates: int = 60, keywords: int = 2, embed=None,
                       rng) -> dict:
    """A private one-line summary of each product's reviews; returns texts and F1 scores.

    The private data of product p are its reviews in the pool; the query is the prefix
    "the p is". Every query uses fresh Poisson subsets (rate q = M·shots/n_p, largest over the
    products), one prompt per subset, and one of:

    * ``"per_token"`` — noisy ensemble decoding, one Gaussian release per token (noise for
      Q·``max_tokens`` releases, Δ = √2);
    * ``"esa"`` — each subset writes a summary; the mean of their embeddings + noise (Δ = 2/M
      on the mean, Q releases) picks the nearest of ``num_candidates`` public candidates
      (zero-shot samples of the model from the same prefix). ``embed`` maps a list of texts to
      an array of embeddings; by default the model's own ``embed`` (the offline model's hashed
      lexical embedding; a Hugging Face model's mean-pooled hidden states). The
      answers and the candidates are embedded in separate calls, so the candidates' embeddings
      never see the private answers;
    * ``"ksa_em"`` / ``"ksa_ptr"`` — histogram of the adjectives of the M summaries; the top
      ``keywords`` by the joint exponential mechanism (ε₀-DP per query) or propose-test-release
      ((ε₀, δ/2Q) per query), composed by :func:`per_query_epsilon`; the public template
      "the p is a and b" turns them into a sentence (an LLM would be prompted with them);
      PTR falls back to the zero-shot answer when its test fails.

    ε = ``math.inf`` runs the same method without noise. Scores: :func:`unigram_f1` against
    "the p is a and b" with a, b the two commonest adjectives of p's majority sentiment
    (:func:`dplib.icl.data.product_reference`), the prefix's words not counted.

    Adjacency: add/remove of one review (exemplar). The rate q = M·shots/n_p is computed from the
    per-product pool sizes n_p, which the accounting treats as public: the Poisson-subsampled
    Gaussian analysis assumes a rate fixed in advance, and under add/remove n_p itself changes by
    one. If the sizes are private, fix the rate independently of the data instead (as
    :mod:`dplib.icl.fewshot` says for its per-label rates). The KSA methods are accounted
    without amplification by subsampling (pure ε₀ per query), so their guarantee does not
    depend on q.

    Returns a dict with ``texts``, ``references``, ``f1`` (per product), ``mean_f1``,
    ``sample_rate`` (q) and ``noise``, the calibrated noise parameter every release used:
    the Gaussian noise std s for ``"per_token"`` (Δ = √2, Q·``max_tokens`` releases at rate q)
    and ``"esa"`` (Δ = 2/M, Q releases at rate q); the per-query ε₀ for ``"ksa_em"`` (pure,
    composed over Q queries) and ``"ksa_ptr"`` (with δ₀ = δ/2Q per query); 0 or ∞ (resp.) at
    ε = ∞. Q = ``len(products)``.
    """
    eps, d, m, k, t_max, gen = epsilon, delta, num_subsets, shots, max_tokens, rng
    tpl = template_for(dataset)
    toks = [set(tokenize(t)) for t in dataset.pool_texts]
    pools = {p: [dataset.pool_texts[i] for i, w in enumerate(toks) if p in w] for p in products}
    q = min(1.0, max(m * k / len(v) for v in pools.values()))
    qn = len(products)
    kw_list = tuple(NEGATIVE + POSITIVE)

    def embed_texts(texts: list[str]) -> np.ndarray:
        return np.asarray((embed or model.embed)(texts), dtype=float)

    if method == "per_token":
        noise = gaussian_noise_std(eps, d, qn * t_max, q, VOTE_SENSITIVITY)
    elif method == "esa":
        noise = gaussian_noise_std(eps, d, qn, q, EMBEDDING_SENSITIVITY / m)
    elif method == "ksa_em":
        noise = per_query_epsilon(eps, d, qn) if not math.isinf(eps) else math.inf
    else:
        noise = (per_query_epsilon(eps, d, qn, delta_per_query=d / (2 * qn))
                 if not math.isinf(eps) else math.inf)
    texts, scores, refs = [], [], []
    for p in products:
        pool = pools[p]
        prefix = f"the {p} is"
        ref = f"{prefix} {' and '.join(product_reference(dataset, p)[1])}"
        if method == "per_token":
            ids = model.encode(prefix)
            for _ in range(t_max):
                demos = partition_exemplars(len(pool), m, 1, shots=k, sample_rate=q, rng=gen)
                tok = int(private_next_tokens(model, tpl, pool, [model.decode(ids)], demos,
                                              noise, rng=gen)[0])
                if tok == model.eos_id:
                    break
                ids.append(tok)
            out = model.decode(ids)
        else:
            demos = partition_exemplars(len(pool), m, 1, shots=k, sample_rate=q, rng=gen)[0]
            batch = PromptBatch(tpl, pool, None, demos, [prefix] * m, generation=True)
            answers = generate(model, batch, t_max)
            if method == "esa":
                cands = generate(model, PromptBatch(tpl, (), None,
                                                    np.full((num_candidates, 1), -1),
                                                    [prefix] * num_candidates, generation=True),
                                 t_max, temperature=1.0, rng=gen)
                # two calls: an embedder that depends on its batch (centring, an IDF fitted on
                # it) must not let the private answers shape the public candidates
                idx, _ = esa(embed_texts(answers), embed_texts(cands), noise, rng=gen)
                out = cands[idx]
            else:
                hist = keyword_histogram(answers, kw_list)
                if method == "ksa_em":
                    chosen = (tuple(np.argsort(-hist, kind="stable")[:keywords])
                              if math.isinf(noise) else
                              joint_exponential_topk(hist, keywords, noise, rng=gen))
                else:
                    chosen = (tuple(np.argsort(-hist, kind="stable")[:keywords])
                              if math.isinf(noise) else
                              ptr_topk(hist, keywords, noise, d / (2 * qn), rng=gen))
                if chosen is None:
                    out = generate(model, PromptBatch(tpl, (), None, np.full((1, 1), -1),
                                                      [prefix], generation=True), t_max)[0]
                else:
                    out = f"{prefix} {' and '.join(kw_list[i] for i in chosen)}"
        texts.append(out)
        refs.append(ref)
        scores.append(unigram_f1(out, ref, ignore=prefix))
    return {"texts": texts, "references": refs, "f1": np.asarray(scores),
            "mean_f1": float(np.mean(scores)), "noise": noise, "sample_rate": q}


@constrained(template=TEMPLATE, prefix=TEXT,
             noise_stds=RealArray(0.0, math.inf, closed="left", nonempty=False, max_ndim=1),
             num_runs=COUNT, max_tokens=COUNT, num_subsets=COUNT, shots=COUNT,
             sample_rate=SAMPLE_RATE, rng=RNG)
def derailment(model, template: PromptTemplate, pool: Sequence[str], prefix: str,
               noise_stds: Sequence[float], *, num_runs: int = 100, max_tokens: int = 6,
               num_subsets: int = 40, shots: int = 2, sample_rate: float = 1.0,
               rng) -> dict[float, np.ndarray]:
    """How per-token noise derails ensemble decoding: for each noise std s, the fraction of
    ``num_runs`` runs whose first t generated tokens equal those of the *noiseless* run that
    used the same subsets, for t = 1 … ``max_tokens``.

    The noisy and the noiseless decoder see the same Poisson subsets at every step, so they differ
    only by the noise; once a noisy token differs, every later prompt differs (it continues a
    different text), and the curves show that the runs do not come back.
    """
    runs, t_max, gen = num_runs, max_tokens, rng
    out = {}
    for s in np.atleast_1d(noise_stds).tolist():
        clean = [model.encode(prefix) for _ in range(runs)]
        noisy = [model.encode(prefix) for _ in range(runs)]
        same = np.ones(runs, dtype=bool)
        curve = []
        for _ in range(t_max):
            demos = partition_exemplars(len(pool), num_subsets, runs, shots=shots,
                                        sample_rate=sample_rate, rng=gen)
            prefixes = [model.decode(x) for x in clean + noisy]
            noise_seed = gen.integers(2**63)
            t_clean = private_next_tokens(model, template, pool, prefixes[:runs], demos, 0.0,
                                          rng=0)
            t_noisy = private_next_tokens(model, template, pool, prefixes[runs:], demos,
                                          float(s), rng=int(noise_seed))
            for i in range(runs):
                clean[i].append(int(t_clean[i]))
                noisy[i].append(int(t_noisy[i]))
            same &= t_clean == t_noisy
            curve.append(same.mean())
        out[float(s)] = np.asarray(curve)
    return out
