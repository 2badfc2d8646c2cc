"""The chapter-13 switch to a real Hugging Face model (:mod:`dplib.experiments.finetune_hf`), run
offline: the book's tiny GPT-2 (a real GPT-2 checkpoint in Hugging Face's format) stands in for
the hub model, the book's reviews for SST-2. Not exercised here: the download, the hub's GPT-2
tokenizer (the tiny one is passed in) and SST-2's parser (tested in the data tests)."""
from __future__ import annotations

import pytest

pytest.importorskip("transformers")
pytest.importorskip("peft")

from dplib.experiments.finetune_hf import finetune_hf  # noqa: E402
from dplib.icl.hf import PINNED_REVISIONS, pinned_revision  # noqa: E402
from dplib.icl.tiny_lm import TINY_LM_DIR  # noqa: E402


def _tiny_tokenizer():
    from transformers import PreTrainedTokenizerFast
    return PreTrainedTokenizerFast(tokenizer_file=str(TINY_LM_DIR / "tokenizer.json"),
                                   unk_token="<unk>", pad_token="<pad>", eos_token="\n")


def test_local_model_fine_tunes_privately_and_reports_provenance():
    from dplib.icl.data import load_book_data
    data = load_book_data("sentiment").subset(300, 100)
    r = finetune_hf(str(TINY_LM_DIR), data=data, tokenizer=_tiny_tokenizer(), epsilon=3.0,
                    sample_rate=0.1, epochs=2, lr=0.5, max_length=10, seed=3)
    assert r["revision"] is None and r["model_name"] == str(TINY_LM_DIR)
    assert r["epsilon"] == pytest.approx(3.0, abs=0.02) and r["noise_multiplier"] > 0.5
    assert r["steps"] == 20 and (r["n_train"], r["n_test"]) == (300, 100)
    # rank 8 on c_attn (64 -> 192) in 2 layers, plus the new head 64 -> 2 without bias
    assert r["trainable"] == 2 * 8 * (64 + 192) + 64 * 2
    assert r["accuracy"] > 0.6                      # chance is about one half
    assert set(r["versions"]) == {"torch", "transformers", "peft", "python"}


def test_same_seed_same_run():
    from dplib.icl.data import load_book_data
    data = load_book_data("sentiment").subset(100, 50)
    kw = dict(data=data, epsilon=8.0, sample_rate=0.2, epochs=1, max_length=8, seed=5)
    a = finetune_hf(str(TINY_LM_DIR), tokenizer=_tiny_tokenizer(), **kw)
    b = finetune_hf(str(TINY_LM_DIR), tokenizer=_tiny_tokenizer(), **kw)
    assert a["accuracy"] == b["accuracy"] and a["noise_multiplier"] == b["noise_multiplier"]


def test_hub_names_are_loaded_at_a_pinned_commit_with_safetensors_only(monkeypatch):
    """The hub path passes the pinned commit, safetensors only and no remote code to
    ``from_pretrained`` (intercepted here: the local checkpoint is returned)."""
    import transformers
    real = transformers.AutoModelForSequenceClassification.from_pretrained
    seen = {}

    def spy(name, **kw):
        seen.update(kw, name=name)
        return real(str(TINY_LM_DIR), num_labels=kw["num_labels"], use_safetensors=True,
                    local_files_only=True)

    monkeypatch.setattr(transformers.AutoModelForSequenceClassification, "from_pretrained", spy)
    from dplib.icl.data import load_book_data
    r = finetune_hf("gpt2", data=load_book_data("sentiment").subset(50, 20),
                    tokenizer=_tiny_tokenizer(), epochs=1, sample_rate=0.2, max_length=8, seed=1)
    assert seen["name"] == "gpt2" and seen["revision"] == PINNED_REVISIONS["gpt2"]
    assert seen["use_safetensors"] is True and seen["trust_remote_code"] is False
    assert r["revision"] == PINNED_REVISIONS["gpt2"]


@pytest.mark.parametrize("name, revision, match", [
    ("some-user/some-model", None, "revision is required"),
    ("gpt2", "main", "40-hex commit"),
    (str(TINY_LM_DIR), "607a30d783dfa663caf39e06633721c8d4cfcd7e", "local directory"),
])
def test_unpinned_or_contradictory_loads_are_refused_before_any_download(name, revision, match):
    with pytest.raises(ValueError, match=match):
        finetune_hf(name, revision=revision, data=object(), tokenizer=_tiny_tokenizer())


def test_pinned_revision():
    assert pinned_revision("gpt2") == PINNED_REVISIONS["gpt2"]
    assert pinned_revision("x/y", "a" * 40) == "a" * 40


def test_data_must_be_a_text_dataset():
    with pytest.raises(ValueError, match="data must be"):
        finetune_hf(str(TINY_LM_DIR), data=[("good", 1)], tokenizer=_tiny_tokenizer())


def test_virtual_batches_give_the_same_run():
    """Splitting each Poisson batch into chunks of 7 (the GPU memory bound) changes nothing."""
    from dplib.icl.data import load_book_data
    data = load_book_data("sentiment").subset(60, 30)
    kw = dict(data=data, epsilon=4.0, sample_rate=0.3, epochs=1, max_length=6, seed=2)
    a = finetune_hf(str(TINY_LM_DIR), tokenizer=_tiny_tokenizer(), **kw)
    b = finetune_hf(str(TINY_LM_DIR), tokenizer=_tiny_tokenizer(), virtual_batch_size=7, **kw)
    assert a["accuracy"] == pytest.approx(b["accuracy"]) and a["steps"] == b["steps"]


def test_a_tokenizer_without_a_pad_token_pads_with_end_of_text():
    """GPT-2's tokenizer has no pad token: its end-of-text token pads, and the model is told."""
    from transformers import PreTrainedTokenizerFast

    from dplib.icl.data import load_book_data
    tok = PreTrainedTokenizerFast(tokenizer_file=str(TINY_LM_DIR / "tokenizer.json"),
                                  unk_token="<unk>", eos_token="\n")
    tok.pad_token = None                  # the tiny tokenizer's file names one; GPT-2's has none
    assert tok.pad_token is None
    r = finetune_hf(str(TINY_LM_DIR), data=load_book_data("sentiment").subset(40, 20),
                    tokenizer=tok, epochs=0.5, sample_rate=0.5, max_length=6, seed=4)
    assert tok.pad_token == "\n" and tok.pad_token_id == tok.eos_token_id
    assert 0.0 <= r["accuracy"] <= 1.0 and r["steps"] == 1
