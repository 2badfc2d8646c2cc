"""Private few-shot generation (Tang et al. 2024) and the chapter's experiments.

Oracles: the summed next-token distributions computed prompt by prompt, dplib's own accountant
for the calibrated noise, the plain majority vote, and the analytic ceiling Φ(1/s) on the AUC of
any membership test against one released histogram.
"""
import math

import numpy as np
import pytest

from dplib.icl import (PromptBatch, accuracy_table, gaussian_epsilon_spent, mia_one_shot,
                       partition_exemplars, private_next_tokens, summarise_products,
                       synthetic_demonstrations, synthetic_demos_prompts, template_for, unigram_f1,
                       zero_shot_predict)


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


def test_derailment_curves(model, sentiment):
    from dplib.icl import derailment
    pool = [t for t in sentiment.pool_texts if "lamp" in t.split()]
    res = derailment(model, template_for(sentiment), pool, "the lamp is", (0.0, 3.0),
                     num_runs=20, max_tokens=4, num_subsets=10, shots=2, sample_rate=0.5,
                     rng=9)
    np.testing.assert_array_equal(res[0.0], np.ones(4))     # no noise: never leaves the text
    assert np.all(np.diff(res[3.0]) <= 0) and res[3.0][-1] < 1.0
