"""Private few-shot generation (Tang et al. 2024) and the chapter's experiments.

Oracles: the summed next-token distributions computed prompt by prompt, dplib's own accountant
for the calibrated noise, the plain majority vote, and the analytic ceiling Φ(1/s) on the AUC of
any membership test against one released histogram.
"""
import math

import numpy as np
import pytest

from dplib.accounting import optimal_composition_epsilon
from dplib.experiments.icl import accuracy_table, mia_one_shot, summarise_products, unigram_f1
from dplib.icl import (PromptBatch, gaussian_epsilon_spent, partition_exemplars,
                       private_next_tokens, synthetic_demonstrations, synthetic_demos_prompts,
                       template_for, zero_shot_predict)


def test_noiseless_step_is_the_argmax_of_summed_distributions(model, sentiment):
    tpl = template_for(sentiment)
    pool = sentiment.pool_texts[:200]
    demos = partition_exemplars(200, 6, 3, shots=3, sample_rate=0.2, rng=0)
    prefixes = ["", "the lamp", "my kettle feels"]
    tok = private_next_tokens(model, tpl, pool, prefixes, demos, 0.0, rng=0)
    for b, pre in enumerate(prefixes):
        total = sum(np.exp(model.next_token_logprobs(
            PromptBatch(tpl, pool, None, demos[b, j:j + 1], [pre], generation=True))[0])
            for j in range(6))
        assert tok[b] == int(np.argmax(total))


def test_public_top_k_restricts_the_candidates(model, sentiment):
    tpl = template_for(sentiment)
    pool = sentiment.pool_texts[:200]
    demos = partition_exemplars(200, 8, 50, shots=2, sample_rate=0.1, rng=1)
    prefixes = ["the battery is"] * 50
    tok = private_next_tokens(model, tpl, pool, prefixes, demos, 5.0, public_top_k=3, rng=2)
    public = np.exp(model.next_token_logprobs(PromptBatch(tpl, (), None, np.array([[-1]]),
                                                          ["the battery is"], generation=True)))
    allowed = set(np.argsort(-public[0], kind="stable")[:3].tolist())
    assert set(tok.tolist()) <= allowed and len(set(tok.tolist())) > 1   # noisy, but inside


def test_synthetic_demonstrations_are_calibrated_and_useful(model, sentiment):
    tpl = template_for(sentiment)
    kw = dict(demos_per_label=3, max_tokens=6, num_subsets=40, shots=2, public_top_k=10)
    texts, ys, noise = synthetic_demonstrations(model, tpl, sentiment.pool_texts,
                                                sentiment.pool_labels, epsilon=4.0, delta=1e-5,
                                                rng=3, **kw)
    assert len(texts) == 6 and ys.tolist() == [0, 0, 0, 1, 1, 1]
    q_max = max(40 * 2 / np.sum(sentiment.pool_labels == c) for c in (0, 1))
    # the noise is what the accountant needs for 3 demonstrations x 6 tokens per label
    assert gaussian_epsilon_spent(noise, 1e-5, 18, q_max) == pytest.approx(4.0, rel=2e-3)
    # without noise, synthetic demonstrations beat zero-shot on the test queries
    clean, ys0, n0 = synthetic_demonstrations(model, tpl, sentiment.pool_texts,
                                              sentiment.pool_labels, epsilon=math.inf,
                                              delta=1e-5, rng=4, **kw)
    assert n0 == 0.0
    q = list(sentiment.test_texts)
    acc = np.mean(model.predict(synthetic_demos_prompts(tpl, clean, ys0, q))
                  == sentiment.test_labels)
    zero = np.mean(zero_shot_predict(model, tpl, q) == sentiment.test_labels)
    assert acc > zero + 0.03


def test_accuracy_table_structure_and_agg_column(model, sentiment):
    small = sentiment.subset(400, 60)
    rows = accuracy_table(model, small, epsilons=(2.0,), num_subsets=10, shots=4, num_runs=2,
                          rng=5)
    assert list(rows) == ["ε = 0 (0-shot)", "ε = 2", "ε = ∞ (Agg)", "ε = ∞"]
    assert rows["ε = ∞ (Agg)"]["noise_std"] == 0.0 and rows["ε = 2"]["noise_std"] > 0
    for r in rows.values():
        assert 0 <= r["mean"] <= 100 and r["std"] >= 0


def test_mia_auc_is_high_without_dp_and_bounded_with_dp(model, sentiment):
    res = mia_one_shot(model, sentiment, (1.0, 8.0), num_trials=1500, num_subsets=10,
                       num_queries=10, rng=6)
    assert res[math.inf]["auc"] > 0.8
    for eps in (1.0, 8.0):
        r = res[eps]
        assert r["auc"] <= r["bound"] + 3 * r["se"]             # no attack beats Φ(1/s)
        assert abs(r["auc"] - 0.5) < 0.1
    assert res[1.0]["bound"] < res[8.0]["bound"]


def test_mia_non_member_sets_never_hold_the_target(model, sentiment):
    from dplib.experiments.icl import _mia_private_sets
    n, m, t = 12, 6, 3000          # small pool: (m − 1)/n would put the target in ~40% of sets
    target, member, slot, sets = _mia_private_sets(n, m, t, np.random.default_rng(11))
    assert 0.45 < member.mean() < 0.55
    hits = (sets == target[:, None]).sum(axis=1)
    assert np.all(hits[~member] == 0)                        # non-member: never
    assert np.all(hits[member] == 1)                         # member: exactly once, at the slot
    assert np.all(sets[member, slot[member]] == target[member])
    srt = np.sort(sets, axis=1)
    assert np.all(np.diff(srt, axis=1) > 0) and sets.min() >= 0 and sets.max() < n  # distinct
    assert set(sets[~member].ravel().tolist()) == set(range(n))   # every non-target can appear
    with pytest.raises(ValueError, match="num_subsets must be <"):
        mia_one_shot(model, sentiment.subset(5, 5), num_subsets=5, num_trials=4, rng=0)


def test_unigram_f1_values():
    assert unigram_f1("the lamp is bright and sleek", "the lamp is sleek and dim") == 2 / 3
    assert unigram_f1("the lamp is bright", "the lamp is dim", ignore="the lamp is") == 0.0
    assert unigram_f1("", "the lamp") == 0.0


def test_summaries_without_noise_beat_the_noisiest(model, sentiment):
    prods = ("battery", "screen", "camera", "speaker")
    clean = summarise_products(model, sentiment, method="ksa_em", epsilon=math.inf,
                               products=prods, num_subsets=40, shots=2, rng=7)
    assert clean["mean_f1"] > 0.3 and len(clean["texts"]) == 4
    esa_inf = summarise_products(model, sentiment, method="esa", epsilon=math.inf,
                                 products=prods, num_subsets=40, shots=2, num_candidates=30,
                                 rng=8)
    assert all(t.startswith(f"the {p} is") for t, p in zip(esa_inf["texts"], prods))
    with pytest.raises(ValueError, match="method must be one of"):
        summarise_products(model, sentiment, method="beam", epsilon=1.0, rng=0)


def test_summaries_noise_is_calibrated_at_finite_epsilon(model, sentiment, monkeypatch):
    """At ε = 2 every method's noise, as reported and as passed to its mechanism, spends ε."""
    import dplib.experiments.icl as ex
    from dplib.icl.data import tokenize
    prods, m, k, t_max, eps, delta = ("battery", "screen"), 10, 2, 2, 2.0, 1e-5
    # the rate, recomputed from the product pools (sizes treated as public)
    n_p = [sum(p in set(tokenize(x)) for x in sentiment.pool_texts) for p in prods]
    q = min(1.0, max(m * k / n for n in n_p))
    used = []

    def spy(name, pos):
        real = getattr(ex, name)

        def wrapper(*args, **kw):
            used.append(args[pos])
            return real(*args, **kw)
        monkeypatch.setattr(ex, name, wrapper)

    spy("private_next_tokens", 5)
    spy("esa", 2)
    spy("joint_exponential_topk", 2)
    spy("ptr_topk", 2)
    Q = len(prods)
    spent = {
        # one Gaussian release per token, Δ = √2, Q·T releases
        "per_token": lambda s: gaussian_epsilon_spent(s, delta, Q * t_max, q, math.sqrt(2)),
        # one Gaussian release of the mean embedding per query, Δ = 2/M
        "esa": lambda s: gaussian_epsilon_spent(s, delta, Q, q, 2.0 / m),
        # Q pure ε₀-DP selections, optimal composition
        "ksa_em": lambda e0: optimal_composition_epsilon(e0, 0.0, Q, delta),
        # Q (ε₀, δ/2Q)-DP propose-test-release steps
        "ksa_ptr": lambda e0: optimal_composition_epsilon(e0, delta / (2 * Q), Q, delta),
    }
    for method, eps_of in spent.items():
        used.clear()
        res = summarise_products(model, sentiment, method=method, epsilon=eps, delta=delta,
                                 products=prods, num_subsets=m, shots=k, max_tokens=t_max,
                                 num_candidates=10, rng=12)
        assert res["sample_rate"] == pytest.approx(q, rel=1e-12)
        noise = res["noise"]
        assert used and all(u == noise for u in used), method   # the reported noise is used
        assert 0 < noise < math.inf
        e = eps_of(noise)
        assert e <= eps + 1e-9, (method, e)                       # within budget ...
        # ... and not wastefully so: the Gaussian calibration is a numerical search (its ε is
        # 1.99985 here), the ε₀ of the pure methods a root to ~1e-10 (basic composition, ε/Q,
        # would spend 1.99998 at Q = 2 and fail the second tolerance)
        rel = 1e-3 if method in ("per_token", "esa") else 1e-6
        assert e == pytest.approx(eps, rel=rel), (method, e)


def test_derailment_curves(model, sentiment):
    from dplib.experiments.icl import derailment
    pool = [t for t in sentiment.pool_texts if "lamp" in t.split()]
    res = derailment(model, template_for(sentiment), pool, "the lamp is", (0.0, 3.0),
                     num_runs=20, max_tokens=4, num_subsets=10, shots=2, sample_rate=0.5,
                     rng=9)
    np.testing.assert_array_equal(res[0.0], np.ones(4))     # no noise: never leaves the text
    assert np.all(np.diff(res[3.0]) <= 0) and res[3.0][-1] < 1.0
