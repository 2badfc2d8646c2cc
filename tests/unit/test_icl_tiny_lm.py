"""The real-transformer path of DP-ICL: a ``transformers`` GPT-2 behind HFCausalLM, offline.

What is checked, with no download and nothing skipped:

* the word-level tokenizer trained on the book's corpus covers the book's data (no ``<unk>``),
  gives each label one distinct token, and round-trips text;
* on a randomly initialised GPT-2 built from a config here, HFCausalLM's label and next-token
  log-probabilities equal a direct computation from the model's logits, batching and left padding
  change nothing, and ``embed`` is the unit-norm mean of the last hidden layer, one text at a time;
* the stored tiny GPT-2 (``dplib/data/tiny_lm``) loads only when its files match the SHA-256 of
  its provenance record; it knows both tasks from public pretraining and, as the chapter says,
  answers the same whatever labels its demonstrations carry;
* every DP-ICL path runs through it: noisy and report-noisy-max votes, ESA with the model's own
  embedding, KSA by the joint exponential mechanism and by propose-test-release, per-token
  generation, private few-shot generation, and the 1-shot membership-inference attack;
* the chapter's switch (``load_model``) and the stored table of benchmarks/icl_models.py.
"""
import json
import math
import shutil

import numpy as np
import pytest
import torch
from scipy.special import logsumexp

from dplib.experiments.icl import mia_one_shot, summarise_products
from dplib.experiments.icl_report import load_model_table
from dplib.icl import (HFCausalLM, OfflineICL, PromptBatch, dp_icl_classify, load_book_data,
                       load_datasets, load_model, load_tiny_lm, synthetic_demonstrations,
                       template_for, zero_shot_predict)
from dplib.icl.data import vocabulary
from dplib.icl.tiny_lm import TINY_LM_DIR, build_tokenizer, tiny_config, training_texts


@pytest.fixture(scope="module")
def books():
    return load_book_data("sentiment"), load_book_data("topic")


@pytest.fixture(scope="module")
def tiny():
    return load_tiny_lm(device="cpu")


@pytest.fixture(scope="module")
def random_gpt2():
    from transformers import GPT2LMHeadModel
    tok = build_tokenizer()
    torch.manual_seed(3)
    model = GPT2LMHeadModel(tiny_config(len(tok), n_layer=1, n_embd=16, n_head=2))
    return model.eval(), tok


# ------------------------------------------------------------------------------------ tokenizer
def test_tokenizer_covers_the_book_data_and_round_trips(books):
    tok = build_tokenizer()
    unk = tok.convert_tokens_to_ids("<unk>")
    for ds in books:
        for text in ds.pool_texts[:300] + ds.test_texts[:100]:
            ids = tok(text, add_special_tokens=False)["input_ids"]
            assert unk not in ids
            assert tok.decode(ids) == text
    assert all(len(tok(w, add_special_tokens=False)["input_ids"]) == 1 for w in vocabulary())
    for ds in books:
        first = [tok(" " + lab, add_special_tokens=False)["input_ids"] for lab in ds.labels]
        assert all(len(f) == 1 for f in first) and len({f[0] for f in first}) == len(first)
    assert tok.eos_token == "\n"


def test_training_texts_are_public_and_seeded(books):
    a, b = training_texts(200, rng=5), training_texts(200, rng=5)
    assert a == b and training_texts(200, rng=6) != a
    private = set(books[0].pool_texts) | set(books[1].pool_texts)
    blocks = {line.split(": ", 1)[1] for t in a for line in t.splitlines()
              if line.startswith(("Review: ", "Headline: "))}
    # another draw of the same generators: short texts may coincide by chance, few do
    assert len(blocks & private) < 0.1 * len(blocks)


# -------------------------------------------------------------- the adapter on a real GPT-2 class
def test_hf_adapter_equals_a_direct_computation_on_a_real_gpt2(random_gpt2, books):
    model, tok = random_gpt2
    lm = HFCausalLM(model=model, tokenizer=tok, device="cpu", batch_size=3)
    ds = books[0]
    tpl = template_for(ds)
    b = PromptBatch(tpl, ds.pool_texts, ds.pool_labels, np.array([[0, 1], [2, -1], [-1, -1],
                                                                  [3, 4]]),
                    list(ds.test_texts[:4]))
    lp = lm.label_logprobs(b)
    label_ids = [tok(" " + lab, add_special_tokens=False)["input_ids"][0] for lab in ds.labels]
    for i in range(len(b)):
        ids = torch.tensor([tok(b.render(i), add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            logits = model(ids).logits[0, -1].double().numpy()
        full = logits - logsumexp(logits)
        sel = full[label_ids]
        np.testing.assert_allclose(lp[i], sel - logsumexp(sel), atol=1e-5)
    one = HFCausalLM(model=model, tokenizer=tok, device="cpu", batch_size=1)
    np.testing.assert_allclose(one.label_logprobs(b), lp, atol=1e-5)     # padding is invisible
    nt = lm.next_token_logprobs(PromptBatch(tpl, ds.pool_texts, None, b.demos, b.queries,
                                            generation=True))
    assert nt.shape == (4, len(tok)) and np.allclose(np.exp(nt).sum(axis=1), 1, atol=1e-5)


def test_embed_is_the_unit_mean_hidden_state_of_each_text_alone(random_gpt2, books):
    model, tok = random_gpt2
    lm = HFCausalLM(model=model, tokenizer=tok, device="cpu")
    texts = list(books[0].test_texts[:3])
    e = lm.embed(texts)
    assert e.shape == (3, 16) and np.allclose(np.linalg.norm(e, axis=1), 1)
    ids = torch.tensor([tok(texts[1], add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        h = model(ids, output_hidden_states=True).hidden_states[-1][0].mean(0).double().numpy()
    np.testing.assert_allclose(e[1], h / np.linalg.norm(h), atol=1e-5)
    # an embedding depends on its own text only, not on what else is in the call
    np.testing.assert_allclose(lm.embed([texts[1]])[0], e[1], atol=1e-6)
    np.testing.assert_allclose(lm.embed(texts[::-1])[::-1], e, atol=1e-6)


# ------------------------------------------------------------------------- the stored tiny GPT-2
def test_stored_model_is_verified_before_it_is_loaded(tmp_path):
    d = tmp_path / "tiny"
    shutil.copytree(TINY_LM_DIR, d)
    prov = json.loads((d / "PROVENANCE.json").read_text())
    assert prov["parameters"] > 50_000 and "training_data" in prov and prov["steps"] > 0
    load_tiny_lm(d, device="cpu")                          # the copy itself loads
    raw = bytearray((d / "model.safetensors").read_bytes())
    raw[-1] ^= 1                                           # one flipped bit in the weights
    (d / "model.safetensors").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="SHA-256"):
        load_tiny_lm(d, device="cpu")
    (d / "tokenizer.json").unlink()
    with pytest.raises(ValueError, match="tokenizer.json"):
        load_tiny_lm(d, device="cpu")


def test_tiny_model_knows_the_tasks_and_ignores_its_demonstrations(tiny, books):
    """What chapter 10 says of it: public pretraining taught it both tasks (zero-shot accuracy
    far above chance), and it answers the same whatever labels its demonstrations carry."""
    for ds in books:
        tpl = template_for(ds)
        q, truth = list(ds.test_texts[:120]), ds.test_labels[:120]
        zero = np.mean(zero_shot_predict(tiny, tpl, q) == truth)
        assert zero > 0.85, (ds.name, zero)
        demos = np.random.default_rng(0).choice(len(ds.pool_texts), (len(q), 4))
        true = tiny.predict(PromptBatch(tpl, ds.pool_texts, ds.pool_labels, demos, q))
        flipped = tiny.predict(PromptBatch(tpl, ds.pool_texts,
                                           (ds.pool_labels + 1) % len(ds.labels), demos, q))
        assert abs(np.mean(true == truth) - np.mean(flipped == truth)) <= 0.03, ds.name


# ------------------------------------------------------------------- every DP-ICL path, through HF
def test_private_votes_through_the_tiny_transformer(tiny, books):
    ds = books[0]
    tpl = template_for(ds)
    q = list(ds.test_texts[:60])
    # report-noisy-max splits ε over the queries without amplification: give it more
    for agg, eps in (("gaussian", 3.0), ("rnm", 30.0)):
        r = dp_icl_classify(tiny, tpl, ds.pool_texts, ds.pool_labels, q, epsilon=eps,
                            delta=1e-5, num_subsets=10, shots=4, aggregator=agg, rng=2)
        assert np.mean(r.predictions == ds.test_labels[:60]) > 0.8, agg
        assert r.votes.histogram.sum(axis=1).max() <= 10                # one vote per subset
        # seeded end to end (subsets, prompts, noise): checked on 12 queries, which costs a
        # fifth of rerunning all 60 through the transformer
        one, two = (dp_icl_classify(tiny, tpl, ds.pool_texts, ds.pool_labels, q[:12],
                                    epsilon=eps, delta=1e-5, num_subsets=10, shots=4,
                                    aggregator=agg, rng=9) for _ in range(2))
        assert np.array_equal(one.predictions, two.predictions)
        assert np.array_equal(one.votes.histogram, two.votes.histogram)


@pytest.mark.parametrize("method", ["per_token", "esa", "ksa_em", "ksa_ptr"])
def test_summaries_through_the_tiny_transformer(tiny, books, method):
    products = ("battery", "lamp")
    r = summarise_products(tiny, books[0], method=method, epsilon=8.0, products=products,
                           num_subsets=6, shots=2, max_tokens=3, num_candidates=12, rng=3)
    assert len(r["texts"]) == 2 and np.isfinite(r["noise"]) and r["noise"] > 0
    for p, text in zip(products, r["texts"]):
        assert text.startswith(f"the {p} is"), text
    clean = summarise_products(tiny, books[0], method=method, epsilon=math.inf,
                               products=products, num_subsets=6, shots=2, max_tokens=3,
                               num_candidates=12, rng=3)
    assert clean["mean_f1"] >= 0 and len(clean["texts"]) == 2


def test_esa_uses_the_models_hidden_state_embedding(tiny, books, monkeypatch):
    seen = []
    real = tiny.embed

    def spy(texts):
        seen.append(list(texts))
        return real(texts)
    monkeypatch.setattr(tiny, "embed", spy)
    summarise_products(tiny, books[0], method="esa", epsilon=8.0, products=("lamp",),
                       num_subsets=4, shots=2, max_tokens=3, num_candidates=8, rng=4)
    assert [len(s) for s in seen] == [4, 8]          # answers, then candidates, separately


def test_private_few_shot_generation_through_the_tiny_transformer(tiny, books):
    ds = books[0]
    tpl = template_for(ds)
    texts, ys, noise = synthetic_demonstrations(
        tiny, tpl, ds.pool_texts, ds.pool_labels, epsilon=8.0, delta=1e-5, demos_per_label=1,
        num_subsets=8, shots=2, max_tokens=4, rng=5)
    assert len(texts) == len(ys) == 2 and sorted(ys) == [0, 1] and noise > 0
    assert all(isinstance(t, str) and t for t in texts)


def test_membership_inference_through_the_tiny_transformer(tiny, books):
    mia = mia_one_shot(tiny, books[0], (8.0,), num_trials=300, num_subsets=10, delta=1e-5,
                       num_queries=100, rng=6)
    # a model that does not read its demonstrations has nothing of them to leak
    assert abs(mia[math.inf]["auc"] - 0.5) < 3 * mia[math.inf]["se"]
    assert mia[8.0]["auc"] <= mia[8.0]["bound"] + 3 * mia[8.0]["se"]   # DP-ICL caps it anyway


# ----------------------------------------------------------------------------------- the switch
def test_the_switch_picks_each_model_and_its_data(books):
    assert isinstance(load_model("offline"), OfflineICL)
    assert isinstance(load_model("tiny", device="cpu"), HFCausalLM)
    s, t = load_datasets("tiny")
    assert s.pool_texts == books[0].pool_texts and t.name == "topic"
    with pytest.raises(ValueError, match="revision is required"):
        load_model("someone/unpinned-model")                 # refused before any download
    for bad in ("", None, 3):
        with pytest.raises(ValueError, match="name"):
            load_model(bad)


def test_stored_table_says_how_to_recompute_it():
    """The stored model table names the benchmark run that wrote it, with its commit and seed.
    Recomputing it (about a minute on the tiny transformer) is a measurement, not a unit test:
    ``python benchmarks/icl_models.py --check`` reruns the report with the stored seed and
    compares every column with the table."""
    table = load_model_table()
    assert {"offline", "tiny"} <= set(table["models"])
    prov = table["provenance"]["tiny"]
    assert prov["command"].startswith("python benchmarks/icl_models.py") and prov["commit"]
    assert isinstance(prov["seed"], int)
    stored = table["models"]["tiny"]
    for task in ("sentiment", "topic"):
        assert stored[task] and all(0.0 <= v["mean"] <= 100.0 for v in stored[task].values())
    assert 0.0 <= stored["mia_auc"]["inf"] <= 100.0
