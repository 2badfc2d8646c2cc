"""A tiny real transformer for chapter 10: a 2-layer GPT-2 trained on the book's public corpus.

The offline stand-in (:class:`~dplib.icl.model.OfflineICL`) is not a transformer. This module
builds a genuine ``transformers`` causal LM — a :class:`transformers.GPT2LMHeadModel` with 2
layers, 4 heads and 64-dimensional states (132 864 weights) and a word-level tokenizer
trained with ``tokenizers`` on the toy language — and trains it in a few CPU minutes
(:func:`train_tiny_lm`, run by ``tools/train_tiny_lm.py``). The result is stored in
``dplib/data/tiny_lm/`` with a provenance record, and :func:`load_tiny_lm` returns it behind
:class:`~dplib.icl.hf.HFCausalLM`, so every DP-ICL path of the chapter runs through the same
Hugging Face code a reader's GPT-2 or Llama would, offline and without a download.

What it is trained on (all public, nothing from the book's private pools): the public corpus
(:func:`dplib.icl.data.public_corpus`), and prompts in the chapter's format whose
demonstrations and queries come from *another* draw of the book's generators
(:func:`make_book_data` with :data:`PUBLIC_SEED`, not the private data's seed; the product
profiles, which make the private summaries identifiable, differ). Label words are permuted in a
fraction :data:`PERMUTED_LABELS` of the training prompts, so answering those needs the
demonstrations: the pressure toward in-context learning of meta-training (Min et al. 2022,
"MetaICL", NAACL; Chan et al. 2022, "Data distributional properties drive emergent in-context
learning", NeurIPS). What 120 000 weights cannot do — world knowledge, long contexts, language
beyond the toy vocabulary — is said in the chapter.

The newline is the end-of-text token: a generated answer ends where a line ends, as the
chapter's prompts separate demonstrations by blank lines.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import re
from pathlib import Path
import numpy as np

from .._constraints import Integer, constrained, unconstrained
from .._validate import shown
from ._params import COUNT, POSITIVE, RNG
from .data import TASKS, make_book_data, public_corpus, vocabulary
from .prompts import PromptTemplate

__all__ = ["TINY_LM_DIR", "PUBLIC_SEED", "PERMUTED_LABELS", "ANSWER_WEIGHT", "build_tokenizer", "tiny_config",
           "training_texts", "train_tiny_lm", "save_tiny_lm", "load_tiny_lm"]

#: Where the trained model, its tokenizer and ``PROVENANCE.json`` are stored (package data).
TINY_LM_DIR = Path(__file__).resolve().parents[1] / "data" / "tiny_lm"
#: Random seed of the public draw the training prompts come from (the private data use another).
PUBLIC_SEED = 7
#: Fraction of training prompts whose label words are permuted (learnable only in context).
PERMUTED_LABELS = 0.25
#: How much more an answer token weighs in the training loss than any other token.
ANSWER_WEIGHT = 8.0
_FILES = ("config.json", "model.safetensors", "tokenizer.json")
_PATTERN = r"\n|[A-Za-z0-9']+|[^\sA-Za-z0-9']"


def _templates() -> dict[str, PromptTemplate]:
    return {t: PromptTemplate(s["labels"], s["descriptions"], s["input_name"], s["output_name"])
            for t, s in TASKS.items()}


def build_tokenizer():
    """A word-level tokenizer for the toy language: words, punctuation and the newline.

    Vocabulary: ``<unk>``, ``<pad>``, the newline (end of text), the punctuation and every word
    the book's generators and prompt templates can produce (:func:`dplib.icl.data.vocabulary`).
    Returns a :class:`transformers.PreTrainedTokenizerFast`.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = set(vocabulary())
    for tpl in _templates().values():
        words |= set(tpl.render([("x", 0)], "x").lower().split()) | set(tpl.labels)
        words |= {tpl.input_name, tpl.output_name, tpl.header()}
    pieces = set()
    for w in words:
        pieces |= set(re.findall(_PATTERN, w))
    vocab = {"<unk>": 0, "<pad>": 1, "\n": 2}
    for p in sorted(pieces - set(vocab)):
        vocab[p] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex("[ \t]+"), behavior="removed"),
        pre_tokenizers.Split(Regex(_PATTERN), behavior="isolated")])
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=True)   # joins words with spaces
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>",
                                   eos_token="\n", bos_token="\n")


@constrained(vocab_size=Integer(min=3), n_layer=COUNT, n_head=COUNT, n_embd=COUNT,
             n_positions=COUNT)
def tiny_config(vocab_size: int, *, n_layer: int = 2, n_head: int = 4, n_embd: int = 64,
                n_positions: int = 320):
    """The GPT-2 configuration of the tiny model (:class:`transformers.GPT2Config`)."""
    from transformers import GPT2Config

    return GPT2Config(vocab_size=vocab_size, n_positions=n_positions, n_embd=n_embd,
                      n_layer=n_layer, n_head=n_head, bos_token_id=2, eos_token_id=2,
                      pad_token_id=1, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)


def _public_rows(task: str) -> list[tuple[int, str]]:
    rows = csv.DictReader(io.StringIO(make_book_data(task, seed=PUBLIC_SEED)))
    return [(int(r["label"]), r["text"]) for r in rows]


@constrained(n=COUNT, rng=RNG)
def training_texts(n: int, *, rng) -> list[str]:
    """``n`` public training texts: ICL prompts with their answer, and unlabelled-review prompts.

    Half are classification prompts (a task at random, 0–8 demonstrations, the query and its
    label; in :data:`PERMUTED_LABELS` of them the label words are permuted consistently within
    the prompt), a quarter are generation prompts (2–4 reviews as the chapter's generation
    prompts render them), a quarter public-corpus sentences. Every text ends with the newline.
    """
    gen = rng
    tpls = _templates()
    rows = {t: _public_rows(t) for t in tpls}
    corpus = public_corpus()
    out = []
    for _ in range(n):
        u = gen.random()
        if u < 0.5:
            task = str(gen.choice(list(tpls)))
            tpl, data = tpls[task], rows[task]
            if gen.random() < PERMUTED_LABELS:
                tpl = PromptTemplate(tuple(np.asarray(tpl.labels)[gen.permutation(len(tpl.labels))]),
                                     tpl.descriptions, tpl.input_name, tpl.output_name)
            idx = gen.choice(len(data), size=int(gen.integers(0, 9)) + 1, replace=False)
            demos = [(data[i][1], data[i][0]) for i in idx[1:]]
            y, query = data[idx[0]]
            out.append(tpl.render(demos, query) + f" {tpl.labels[y]}\n")
        elif u < 0.75:
            data = rows["sentiment"]
            idx = gen.choice(len(data), size=int(gen.integers(2, 5)), replace=False)
            out.append(tpls["sentiment"].render([(data[i][1], None) for i in idx[:-1]],
                                                data[idx[-1]][1], generation=True) + "\n")
        else:
            out.append(str(corpus[int(gen.integers(len(corpus)))]) + "\n")
    return out


@constrained(steps=COUNT, batch_size=COUNT, lr=POSITIVE, rng=RNG, log_every=Integer(min=0))
def train_tiny_lm(*, steps: int = 1500, batch_size: int = 32, lr: float = 3e-3, rng,
                  log_every: int = 0):
    """Train the tiny GPT-2 from scratch on :func:`training_texts`; returns (model, tokenizer).

    AdamW with a linear warm-up and cosine decay, next-token cross-entropy on every token
    (padding masked, answers weighted :data:`ANSWER_WEIGHT` times). ``rng`` (a seed or a numpy
    Generator) is required, as everywhere in dplib; the run is deterministic for a given ``rng``
    on one machine (torch is seeded from it).
    """
    import torch
    from transformers import GPT2LMHeadModel

    gen = rng
    torch.manual_seed(int(gen.integers(2**31)))
    tok = build_tokenizer()
    cfg = tiny_config(len(tok))
    model = GPT2LMHeadModel(cfg)
    answer_ids = torch.tensor(sorted({tok.convert_tokens_to_ids(lab) for t in TASKS.values()
                                      for lab in t["labels"]}))
    colon_id = tok.convert_tokens_to_ids(":")
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (
        1 + np.cos(np.pi * min(1.0, s / steps))))
    model.train()
    for step in range(steps):
        enc = tok(training_texts(batch_size, rng=gen), return_tensors="pt", padding=True,
                  truncation=True, max_length=cfg.n_positions)
        loss = _weighted_loss(model, enc, answer_ids, colon_id)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if log_every and step % log_every == 0:
            print(f"step {step:5d}  loss {loss.item():.3f}", flush=True)
    return model.eval(), tok


def _weighted_loss(model, enc, answer_ids, colon_id):
    """Next-token cross-entropy, padding masked, answers (a label word after ":") weighted
    :data:`ANSWER_WEIGHT` times: one token in sixty is an answer, and it is the one that
    carries the task."""
    import torch

    ids, mask = enc["input_ids"], enc["attention_mask"]
    logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]
    target = ids[:, 1:]
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                           target.reshape(-1), reduction="none").view_as(target)
    answer = torch.isin(target, answer_ids) & (ids[:, :-1] == colon_id)
    w = mask[:, 1:].float() * (1 + (ANSWER_WEIGHT - 1) * answer.float())
    return (ce * w).sum() / w.sum()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@unconstrained("writes a trained model's files for tools/train_tiny_lm.py (any path-like "
               "directory); no numeric input")
def save_tiny_lm(model, tokenizer, directory: str | Path = TINY_LM_DIR, *,
                 provenance: dict | None = None) -> dict:
    """Write the model (safetensors), config, tokenizer and ``PROVENANCE.json`` with SHA-256s."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    tokenizer.backend_tokenizer.save(str(d / "tokenizer.json"))
    for extra in d.iterdir():                  # keep only the files load_tiny_lm reads
        if extra.name not in (*_FILES, "PROVENANCE.json"):
            extra.unlink()
    record = dict(provenance or {})
    record["sha256"] = {f: _sha256(d / f) for f in _FILES}
    (d / "PROVENANCE.json").write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return record


@constrained(batch_size=COUNT)
def load_tiny_lm(directory: str | Path = TINY_LM_DIR, *, device=None, batch_size: int = 64,
                 verify: bool = True):
    """The stored tiny transformer behind :class:`~dplib.icl.hf.HFCausalLM` (offline, no hub).

    The files are checked against the SHA-256s of ``PROVENANCE.json`` first (``verify``): local
    files stand in for the pinned hub commit a downloaded model is loaded at. Weights are read
    from safetensors only.
    """
    import torch  # noqa: F401  (transformers needs it; fail here with a clear message if absent)
    from transformers import GPT2LMHeadModel, PreTrainedTokenizerFast

    from .hf import HFCausalLM

    d = Path(directory)
    missing = [f for f in (*_FILES, "PROVENANCE.json") if not (d / f).exists()]
    if missing:
        raise ValueError(f"directory {shown(str(d))} lacks {missing}; train the model with "
                         "`python tools/train_tiny_lm.py`")
    if verify:
        want = json.loads((d / "PROVENANCE.json").read_text())["sha256"]
        bad = [f for f in _FILES if _sha256(d / f) != want.get(f)]
        if bad:
            raise ValueError(f"{bad} in {shown(str(d))} do not match the SHA-256 of "
                             f"PROVENANCE.json")
    tok = PreTrainedTokenizerFast(tokenizer_file=str(d / "tokenizer.json"), unk_token="<unk>",
                                  pad_token="<pad>", eos_token="\n", bos_token="\n")
    model = GPT2LMHeadModel.from_pretrained(d, use_safetensors=True, local_files_only=True)
    return HFCausalLM("tiny", model=model, tokenizer=tok, device=device, batch_size=batch_size,
                      max_length=model.config.n_positions)
