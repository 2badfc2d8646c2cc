"""The offline in-context learner and the Hugging Face adapter.

What is checked: the prediction is a function of the prompt only; the learner really learns in
context (accuracy rises with the number of demonstrations, and flipped demonstration labels drag
it below zero-shot); batched results equal prompt-by-prompt results; generation copies from the
demonstrations; the HF adapter computes the right log-probabilities (on a tiny fake causal LM,
offline). The real-transformer path is tests/unit/test_icl_tiny_lm.py.
"""
import math
import zlib

import numpy as np
import pytest
import torch
from scipy.special import logsumexp

from dplib.icl import (HashingEmbedder, HFCausalLM, OfflineICL, PromptBatch, PromptTemplate,
                       generate, load_book_data, template_for)
from dplib.icl.classify import zero_shot_predict


def _accuracy(model, ds, k, draws, seed, flip=False, n_queries=300):
    tpl = template_for(ds)
    rng = np.random.default_rng(seed)
    q = list(ds.test_texts[:n_queries])
    labels = 1 - ds.pool_labels if flip else ds.pool_labels
    accs = []
    for _ in range(draws):
        demos = np.stack([rng.choice(len(ds.pool_texts), k, replace=False) for _ in q])
        batch = PromptBatch(tpl, ds.pool_texts, labels, demos, q)
        accs.append(np.mean(model.predict(batch) == ds.test_labels[:n_queries]))
    return np.array(accs)


def test_accuracy_improves_with_more_demonstrations(model, sentiment):
    # Mean accuracy over 4 random draws of k demonstrations per query, 300 queries.
    acc = {k: _accuracy(model, sentiment, k, 4, seed=k).mean() for k in (2, 8, 32, 128)}
    zero = np.mean(zero_shot_predict(model, template_for(sentiment),
                                     list(sentiment.test_texts[:300]))
                   == sentiment.test_labels[:300])
    se = math.sqrt(0.25 / 1200)                       # standard error of a mean of 1 200 answers
    assert acc[2] < acc[8] < acc[32] < acc[128]
    assert acc[128] - acc[8] > 6 * se                 # a large, not a marginal, gain
    assert acc[8] > zero and acc[128] > zero + 0.1


def test_flipped_demonstration_labels_are_learned(model, sentiment):
    # The model follows the labels in its prompt: with 64 flipped demonstrations it does much
    # worse than zero-shot — the mapping comes from the context, not from fixed weights.
    flipped = _accuracy(model, sentiment, 64, 2, seed=1, flip=True).mean()
    zero = np.mean(zero_shot_predict(model, template_for(sentiment),
                                     list(sentiment.test_texts[:300]))
                   == sentiment.test_labels[:300])
    assert flipped < zero - 0.15


def test_prediction_depends_only_on_the_prompt(model, sentiment):
    tpl = template_for(sentiment)
    demos = np.array([[0, 1, 2, 3], [0, 1, 2, 3], [4, 5, -1, -1]])
    q = ["the lamp is sleek", "the lamp is sleek", "the lamp is sleek"]
    lp = model.label_logprobs(PromptBatch(tpl, sentiment.pool_texts, sentiment.pool_labels,
                                          demos, q))
    np.testing.assert_allclose(lp[0], lp[1])          # same prompt, same answer
    assert not np.allclose(lp[0], lp[2])              # other demonstrations, other answer
    again = OfflineICL().label_logprobs(PromptBatch(tpl, sentiment.pool_texts,
                                                    sentiment.pool_labels, demos, q))
    np.testing.assert_array_equal(lp, again)          # no hidden state between calls
    np.testing.assert_allclose(logsumexp(lp, axis=1), 0.0, atol=1e-12)
    # order of the demonstrations does not matter to this model (attention is a set function)
    perm = PromptBatch(tpl, sentiment.pool_texts, sentiment.pool_labels,
                       np.array([[3, 1, 0, 2]]), q[:1])
    np.testing.assert_allclose(model.label_logprobs(perm)[0], lp[0])


def test_batched_equals_one_prompt_at_a_time(model, sentiment):
    tpl = template_for(sentiment)
    rng = np.random.default_rng(3)
    demos = rng.integers(-1, 300, size=(40, 5))
    q = [sentiment.test_texts[i] for i in rng.integers(0, 400, 40)]
    full = PromptBatch(tpl, sentiment.pool_texts, sentiment.pool_labels, demos, q)
    lp = model.label_logprobs(full)
    nt = model.next_token_logprobs(PromptBatch(tpl, sentiment.pool_texts, None, demos,
                                               [x[:12] for x in q], generation=True))
    for i in range(0, 40, 7):
        one = PromptBatch(tpl, sentiment.pool_texts, sentiment.pool_labels, demos[i:i + 1],
                          q[i:i + 1])
        np.testing.assert_allclose(model.label_logprobs(one)[0], lp[i], atol=1e-12)
        gen = PromptBatch(tpl, sentiment.pool_texts, None, demos[i:i + 1], [q[i][:12]],
                          generation=True)
        np.testing.assert_allclose(model.next_token_logprobs(gen)[0], nt[i], atol=1e-12)
    np.testing.assert_allclose(np.exp(nt).sum(axis=1), 1.0, atol=1e-9)


def test_generation_copies_the_demonstrations(model):
    tpl = PromptTemplate(("negative", "positive"), input_name="Review")
    pool = ["the kettle is leaky and sticky"] * 3
    batch = PromptBatch(tpl, pool, None, np.array([[0, 1, 2]]), ["the kettle is"],
                        generation=True)
    assert generate(model, batch, 6) == ["the kettle is leaky and sticky"]
    # without demonstrations the public grammar still writes a review-like continuation
    zero = generate(model, PromptBatch(tpl, (), None, np.array([[-1]]), ["the kettle is"],
                                       generation=True), 6)[0]
    assert zero.startswith("the kettle is ") and len(zero.split()) > 3


def test_sampling_follows_the_model(model):
    tpl = PromptTemplate(("a", "b"))
    batch = PromptBatch(tpl, (), None, np.full((4000, 1), -1), ["the kettle is"] * 4000,
                        generation=True)
    first = [t.split()[3] for t in generate(model, batch, 1, temperature=1.0, rng=0)]
    p = np.exp(model.next_token_logprobs(PromptBatch(tpl, (), None, np.array([[-1]]),
                                                     ["the kettle is"], generation=True))[0])
    top = int(np.argmax(p))
    share = np.mean([w == model.vocabulary[top] for w in first])
    assert abs(share - p[top]) < 4 * math.sqrt(p[top] * (1 - p[top]) / 4000)


def test_hashing_embedder_is_stable_and_normalised():
    e = HashingEmbedder(n_features=64)
    m = e.embed(["sleek lamp", "", "sleek lamp"]).toarray()
    np.testing.assert_allclose(np.linalg.norm(m, axis=1), [1.0, 0.0, 1.0])
    h = zlib.crc32(b"sleek")
    j, sign = h % 64, (1.0 if (h >> 31) & 1 == 0 else -1.0)
    assert np.sign(m[0, j]) == sign                       # crc32 picks the bucket and the sign
    assert e.similarity(["sleek lamp"], ["sleek lamp"])[0, 0] == pytest.approx(1.0)


def test_word_vectors_know_only_the_common_words(model):
    # pretrained knowledge: common positive words are nearer "positive" than "negative";
    # the domain words were never seen with a consistent sentiment
    wv = model.word_vectors
    pos, neg = wv.embed(["positive", "negative"])

    def margin(words):
        v = wv.embed(words)
        return float(np.mean(v @ pos - v @ neg))
    assert margin(["good", "great", "excellent", "nice"]) > 0.3
    assert margin(["bad", "awful", "terrible", "poor"]) < -0.3
    assert abs(margin(["crisp", "snappy", "quiet", "sturdy"])) < \
        0.5 * margin(["good", "great", "excellent", "nice"])


@pytest.mark.parametrize("kwargs, match", [
    (dict(semantic_mix=1.5), r"semantic_mix must be in \[0, 1\], got 1.5"),
    (dict(sharpness=0.0), r"sharpness must be in \(0, inf\), got 0.0"),
    (dict(copy_strength=-1.0), r"copy_strength must be in \[0, inf\), got -1.0"),
    (dict(sink=2.0), r"sink must be in \[-1, 1\], got 2.0"),
])
def test_bad_model_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        OfflineICL(**kwargs)


def test_bad_prompt_batches():
    tpl = PromptTemplate(("a", "b"))
    with pytest.raises(ValueError, match=r"demos must hold pool indices in \[-1, 1\]"):
        PromptBatch(tpl, ["x", "y"], np.array([0, 1]), np.array([[0, 2]]), ["q"])
    with pytest.raises(ValueError, match="queries must have one entry per prompt"):
        PromptBatch(tpl, ["x", "y"], np.array([0, 1]), np.array([[0, 1]]), ["q", "r"])
    with pytest.raises(ValueError, match="descriptions must have one entry per label"):
        PromptTemplate(("a", "b"), ("only one",))


def test_rendered_prompt_has_the_demonstrations_and_the_query():
    tpl = PromptTemplate(("negative", "positive"), input_name="Review", output_name="Sentiment")
    b = PromptBatch(tpl, ["the lamp is dim", "the lamp is bright"], np.array([0, 1]),
                    np.array([[1, -1, 0]]), ["the kettle is leaky"])
    text = b.render(0)
    assert text.index("Review: the lamp is bright\nSentiment: positive") < \
        text.index("Review: the lamp is dim\nSentiment: negative")
    assert text.endswith("Review: the kettle is leaky\nSentiment:")


# ------------------------------------------------------------------------- Hugging Face adapter
class _FakeTokenizer:
    """Whitespace tokenizer over a fixed vocabulary, the minimal API the adapter uses."""

    def __init__(self, words):
        self.vocab = {w: i for i, w in enumerate(words)}
        self.inv = dict(enumerate(words))
        self.eos_token_id = 0

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [self.vocab.get(w, 1) for w in text.replace("\n", " ").split()]}

    def decode(self, ids):
        return " ".join(self.inv[i] for i in ids)

    def __len__(self):
        return len(self.vocab)


class _FakeLM(torch.nn.Module):
    """A bigram LM with random logits; position ids must not matter (checked via padding)."""

    def __init__(self, v):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(v, v, generator=torch.Generator()
                                                    .manual_seed(0)))

    def forward(self, input_ids, attention_mask=None, position_ids=None):
        class Out:
            pass
        out = Out()
        out.logits = self.table[input_ids]
        return out


def _fake_adapter(batch_size=2):
    words = ["<eos>", "<unk>", "Review:", "Sentiment:", "negative", "positive", "the", "lamp",
             "is", "dim", "bright", "kettle", "leaky", "Classify", "sentiment", "of", "each",
             "review."]
    tok = _FakeTokenizer(words)
    return HFCausalLM(model=_FakeLM(len(words)), tokenizer=tok, device="cpu",
                      batch_size=batch_size), tok


def test_hf_adapter_scores_the_label_tokens_on_a_fake_lm():
    lm, tok = _fake_adapter()
    tpl = PromptTemplate(("negative", "positive"), input_name="Review", output_name="Sentiment")
    b = PromptBatch(tpl, ["the lamp is dim", "the lamp is bright"], np.array([0, 1]),
                    np.array([[0, 1], [1, -1], [-1, -1]]),
                    ["the kettle is leaky", "the lamp is", "the"])
    lp = lm.label_logprobs(b)
    for i in range(3):
        ids = tok(b.render(i))["input_ids"]
        logits = lm.model.table[ids[-1]].detach().numpy().astype(float)
        full = logits - logsumexp(logits)
        sel = full[[tok.vocab["negative"], tok.vocab["positive"]]]
        np.testing.assert_allclose(lp[i], sel - logsumexp(sel), atol=1e-5)
    # left padding and batching do not change anything
    one, _ = _fake_adapter(batch_size=1)
    np.testing.assert_allclose(one.label_logprobs(b), lp, atol=1e-6)
    nt = lm.next_token_logprobs(PromptBatch(tpl, b.pool_texts, None, b.demos, b.queries,
                                            generation=True))
    assert nt.shape == (3, len(tok)) and np.allclose(np.exp(nt).sum(axis=1), 1.0, atol=1e-5)
    assert lm.decode(lm.encode("the lamp is dim") + [0, 5]) == "the lamp is dim"
