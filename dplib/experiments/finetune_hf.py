"""Chapter 13's switch to a real model: a Hugging Face causal LM fine-tuned with DP-SGD and LoRA.

:func:`finetune_hf` runs, on any GPT-2-like model of the Hugging Face hub, what the chapter runs
on its offline models: load the model with a fresh classification head
(``AutoModelForSequenceClassification``; the head starts at zero, so a run depends on its
``seed`` alone and begins at the pretrained model's features), inject rank-``rank`` LoRA adapters on the attention's
``c_attn`` (Hu et al. 2022, Eq. (3); their DP use: Yu et al. 2022), train the adapters and the
head with DP-SGD and ghost clipping (Abadi et al. 2016, Alg. 1; Li et al. 2022, §4) at
(``epsilon``, ``delta``) — Poisson sampling of reviews at rate ``sample_rate``, add/remove
adjacency of one review, σ calibrated by the RDP accountant — and test it. It downloads the model
and SST-2 (about 500 MB and 7 MB for GPT-2), so the chapter runs it only when the reader turns it
on, in Colab with a GPU.

What is loaded is pinned: a hub name is loaded at one commit (:data:`~dplib.icl.hf.PINNED_REVISIONS`
or ``revision=<40-hex commit>``; a branch or tag can move), weights from safetensors only and no
code from the hub (``trust_remote_code=False``). A local directory (the tests use the book's
tiny GPT-2, :mod:`dplib.icl.tiny_lm`) is loaded as it is, offline.

Each review is cut or right-padded to ``max_length`` tokens with the pad token (GPT-2 has none:
its end-of-text token stands in). The classifier reads the hidden state of the last token that is
not a pad, and GPT-2's attention is causal, so the pads after a review change nothing before them:
each review's output depends on that review alone, as per-example clipping assumes.
"""
from __future__ import annotations

import platform
from pathlib import Path

from .._common_params import POSITIVE, SEED_OR_NONE, TEXT, optional
from .._constraints import Integer, Interval, constrained
from .._validate import shown

__all__ = ["HF_DEFAULT_MODEL", "finetune_hf"]

#: The model the chapter's switch loads (``gpt2`` redirects to this hub repository).
HF_DEFAULT_MODEL = "openai-community/gpt2"


def _revision(model_name: str, revision: str | None) -> str | None:
    """The hub commit to load ``model_name`` at; None for a local directory (loaded as it is)."""
    from ..icl.hf import pinned_revision

    if Path(model_name).is_dir():
        if revision is not None:
            raise ValueError(f"revision applies to hub names, not to the local directory "
                             f"model_name={shown(model_name)}; got revision={shown(revision)}")
        return None
    return pinned_revision(model_name, revision)


def _load(model_name: str, revision: str | None, num_labels: int, local_files_only: bool,
          tokenizer):
    """The classifier and tokenizer: a local directory offline, a hub name at ``revision``."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    hub = dict(local_files_only=True) if revision is None else \
        dict(revision=revision, local_files_only=local_files_only)
    if tokenizer is None:
        tokenizer = AutoTokenizer.from_pretrained(model_name, trust_remote_code=False, **hub)
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError(f"the tokenizer of {shown(model_name)} has neither a pad nor an "
                             f"end-of-text token to pad reviews with")
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForSequenceClassification.from_pretrained(
        model_name, num_labels=num_labels, use_safetensors=True, trust_remote_code=False, **hub)
    model.config.pad_token_id = tokenizer.pad_token_id
    with torch.no_grad():        # the new head starts at zero, not at transformers' random draw
        model.score.weight.zero_()
    return model, tokenizer


@constrained(model_name=TEXT, epsilon=POSITIVE, delta=Interval(0.0, 1.0, closed="neither"),
             rank=Integer(min=1), sample_rate=Interval(0.0, 1.0, closed="right"),
             epochs=POSITIVE, lr=POSITIVE, max_length=Integer(min=2),
             virtual_batch_size=optional(Integer(min=1)), seed=SEED_OR_NONE)
def finetune_hf(model_name: str = HF_DEFAULT_MODEL, *, revision: str | None = None, data=None,
                epsilon: float = 3.0, delta: float = 1e-5, rank: int = 8,
                sample_rate: float = 0.05, epochs: float = 3.0, lr: float = 0.5,
                max_length: int = 32, virtual_batch_size: int | None = None,
                seed: int | None = None, device=None,
                local_files_only: bool = False, tokenizer=None) -> dict:
    """Fine-tune ``model_name`` with LoRA of rank ``rank`` on ``c_attn`` plus a new head, by
    DP-SGD with ghost clipping at (``epsilon``, ``delta``) under add/remove adjacency of one
    review, on ``data`` (a :class:`~dplib.icl.data.TextDataset`; None downloads SST-2 with a pool
    of 20,000 training sentences, :func:`~dplib.icl.data.load_sst2`), and test it.

    Returns the result with its provenance: ``{"model_name", "revision", "accuracy", "epsilon",
    "delta", "noise_multiplier", "steps", "sample_rate", "trainable", "n_train", "n_test",
    "device", "versions"}`` (``revision``: the hub commit loaded, None for a local directory).
    ``virtual_batch_size``: the most examples sent through the model at once (a Poisson batch is
    split, the same update; bounds GPU memory). ``tokenizer`` may be passed in (the tests pass the tiny GPT-2's); ``seed`` drives the batches,
    the noise and the adapters' initialisation (None: fresh from the operating system)."""
    import peft
    import torch
    import transformers

    from ..device import as_device
    from ..training import evaluate, train
    from ..training.finetune import LogitsOnly, prepare_finetune, trainable_parameter_count

    from ..icl.data import TextDataset, load_sst2

    revision = _revision(model_name, revision)           # refused before anything is downloaded
    if data is None:
        data = load_sst2(n_pool=20_000)
    if not isinstance(data, TextDataset):
        raise ValueError(f"data must be a dplib.icl.data.TextDataset or None, got {shown(data)}")
    model, tok = _load(model_name, revision, len(data.labels), local_files_only, tokenizer)
    lora = prepare_finetune(model, "lora", rank=rank, target_modules=["c_attn"], head="score",
                            seed=seed)

    def encode(texts):
        return tok(list(texts), truncation=True, max_length=max_length, padding="max_length",
                   return_tensors="pt")["input_ids"]

    dev = as_device(device)
    res = train(LogitsOnly(lora), (encode(data.pool_texts), torch.as_tensor(data.pool_labels)),
                sample_rate=sample_rate, epochs=epochs, lr=lr, target_epsilon=epsilon,
                delta=delta, ghost=True, virtual_batch_size=virtual_batch_size, seed=seed,
                device=dev)
    acc = evaluate(LogitsOnly(lora), encode(data.test_texts), torch.as_tensor(data.test_labels),
                   device=dev)
    return {"model_name": model_name, "revision": revision, "accuracy": float(acc),
            "epsilon": float(res.epsilon), "delta": delta,
            "noise_multiplier": float(res.noise_multiplier), "steps": int(res.steps),
            "sample_rate": sample_rate, "trainable": trainable_parameter_count(lora),
            "n_train": len(data.pool_texts), "n_test": len(data.test_texts), "device": str(dev),
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                         "peft": peft.__version__, "python": platform.python_version()}}
