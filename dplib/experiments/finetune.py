"""Chapter 13's experiments: fine-tuning a model pretrained on public data with DP-SGD.

Two pretrained models the book holds offline.

**Images** (:func:`digits_transfer`, :func:`pretrain_digits`, :func:`finetune_digits`). The 1,797
8×8 digits of scikit-learn are split by CLASS: the images of the digits 0–4 are public, those of
5–9 private. A multi-layer perceptron (64 → 128 → 128 → 5, tanh; :func:`dplib.training.make_mlp`)
is pretrained without privacy on the public classes; fine-tuning gives it a new zero-initialised
head for the five private classes and trains it on the private images with DP-SGD. The public
data contain no image of a private class, so a model of the public data alone cannot answer the
private task (it is at chance, 20 %): the private data matter, and what pretraining can
contribute is features (strokes, loops) that transfer from one set of digits to another. (The
digits task of chapter 5 has the same classes in the public and the private images; there a
model of the public images alone is within a point of the best private recipes.)

Methods (:data:`METHODS`): ``"scratch"`` (the same network, randomly initialised, all weights
trained privately), and the four recipes of :func:`dplib.training.finetune.prepare_finetune` on
the pretrained network: ``"last_layer"`` (the new head only), ``"bias"`` (bias terms + head,
BitFit), ``"lora"`` (rank-r adapters on both hidden layers + head; Hu et al. 2022) and
``"full"`` (every weight). Every run is (ε, δ)-DP by the RDP accountant for its (σ, q, T), with
Poisson sampling at rate q and per-example clipping at C = 1 (:func:`dplib.training.train`).

The settings of each method (:data:`SETTINGS`: sample rate, epochs, learning rate) are fixed,
the same for every ε and seed; they were set by hand once and are not searched per row, so the
table reports the methods, not a tuned competition (and no private search is left unaccounted in
a row; a deployment chooses its settings on public data, chapter 12).

**Text** (:func:`text_classifier`, :func:`encode_texts`): the tiny GPT-2 of
:mod:`dplib.icl.tiny_lm` (pretrained on public text only) with a classification head on the mean
of its last hidden states, for the private sentiment pool of :func:`dplib.icl.data.load_book_data`.

The noise argument (:func:`noise_norm`): DP-SGD's averaged update carries Gaussian noise
N(0, (σC/B)² I_d) on the d trainable coordinates (Abadi et al. 2016, Alg. 1), whose Euclidean
norm is ≈ σC√d/B (the norm of a standard Gaussian vector in d dimensions is √d up to O(1)), while
a clipped gradient's norm is at most C: fewer trainable parameters, less total noise.
"""
from __future__ import annotations

import copy
import functools
import math
import statistics
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .._common_params import FLAG, NONNEGATIVE, PATH_OR_NONE, POSITIVE, SEED, int_range, optional
from .._constraints import (Custom, InstanceOf, Integer, Interval, Options, constrained,
                            unconstrained)
from .._digits import sklearn_digits
from .._validate import check_int, shown
from ._finetune_params import EPSILON_OR_NONE, epsilon_list, method_list

__all__ = ["METHODS", "SETTINGS", "EPSILONS", "DELTA", "DigitsTransfer", "digits_transfer",
           "pretrain_digits", "digits_model", "finetune_digits", "calibrated_sigma", "noise_norm",
           "utility_table", "load_finetune_table", "table_accuracy", "rank_accuracy",
           "text_classifier", "encode_texts", "FINETUNE_TABLE"]

#: The compared methods, in the order of the table.
METHODS = ("scratch", "last_layer", "bias", "lora", "full")
#: ε of the stored table (δ = :data:`DELTA`).
EPSILONS = (1.0, 3.0, 8.0)
DELTA = 1e-5
#: Fixed settings per method: sample rate q, epochs, learning rate (SGD, no momentum), C = 1;
#: clipped sums by ghost norms (:mod:`dplib.training.ghost`), which equal the per-example ones.
SETTINGS = {
    "scratch": dict(sample_rate=0.5, epochs=20, lr=1.0),
    "last_layer": dict(sample_rate=0.5, epochs=20, lr=2.0),
    "bias": dict(sample_rate=0.5, epochs=20, lr=2.0),
    "lora": dict(sample_rate=0.5, epochs=20, lr=1.0),
    "full": dict(sample_rate=0.5, epochs=20, lr=0.5),
}
HIDDEN = (128, 128)
PUBLIC_CLASSES = (0, 1, 2, 3, 4)
#: Where ``benchmarks/finetune_utility.py`` stores the table.
FINETUNE_TABLE = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / \
    "finetune_utility.json"


_METHOD = Options(*METHODS)


def _ranks(name: str, value: object) -> tuple:
    if not isinstance(value, (tuple, list)):
        raise ValueError(f"{name} must be a tuple of positive integers, got {shown(value)}")
    for r in value:
        check_int(name, r)
    return value


def _stored_table(key: str, what: str) -> Custom:
    def check(name: str, value: object) -> object:
        if not isinstance(value, dict) or key not in value:
            raise ValueError(f"{name} must be a stored fine-tuning table {what}, got "
                             f"{shown(value)}"[:200])
        return value
    return Custom(check, f"a stored fine-tuning table {what}", [None, {}, 3, "abc", []])


@unconstrained("data record built by digits_transfer from its checked arguments")
@dataclass(frozen=True)
class DigitsTransfer:
    """Public images of the digits 0–4 (labels 0–4) and private images of 5–9 (labels 0–4 for
    the digits 5–9), split into a private training set and a test set. Tensors [n, 64] in
    [0, 1] (pixels divided by their fixed maximum 16, no statistic of private data)."""
    public: tuple[torch.Tensor, torch.Tensor]
    private: tuple[torch.Tensor, torch.Tensor]
    test: tuple[torch.Tensor, torch.Tensor]


@constrained(n_private=int_range(10, 800, what="an integer in [10, 800] (896 private images, "
                                              "at least 96 for the test)"), seed=SEED)
def digits_transfer(*, n_private: int = 500, seed: int) -> DigitsTransfer:
    """The split of the module docstring: every image of 0–4 public (901 images); the 896 images
    of 5–9 shuffled by ``seed``, the first ``n_private`` private, the rest the test set."""
    pixels, target = sklearn_digits()      # scikit-learn's file, without importing it
    x = (pixels / 16.0).astype(np.float32)
    y = target.astype(np.int64)
    pub = y < 5
    idx = np.random.default_rng(seed).permutation(np.flatnonzero(~pub))
    tr, te = idx[:n_private], idx[n_private:]

    def t(rows, shift):
        return torch.from_numpy(x[rows]), torch.from_numpy(y[rows] - shift)
    return DigitsTransfer(t(np.flatnonzero(pub), 0), t(tr, 5), t(te, 5))


_DATA = InstanceOf(DigitsTransfer, "a DigitsTransfer (digits_transfer())", bad=(None, 3, "x"))


def _pretrained(name: str, value: object) -> nn.Module:
    if not isinstance(value, nn.Sequential) or len(value) != 6:
        raise ValueError(f"{name} must be the nn.Sequential of pretrain_digits(), got "
                         f"{shown(value)}"[:200])
    return value


_PRETRAINED = Custom(_pretrained, "the nn.Sequential of pretrain_digits()",
                     [None, 3, "model", nn.Linear(2, 2)])


@constrained(data=_DATA, epochs=Integer(min=1), seed=SEED)
def pretrain_digits(data: DigitsTransfer, *, epochs: int = 30, seed: int) -> nn.Module:
    """The public model: :func:`dplib.training.make_mlp` (64 → 128 → 128 → 5, tanh) trained
    WITHOUT privacy (σ = 0, no clipping) on the public images only, SGD with momentum 0.9,
    learning rate 0.2, batches of expected size 225 (q = 0.25). Its last layer (index 5 of the
    ``nn.Sequential``) is the head that fine-tuning replaces."""
    from ..training import make_mlp, train
    model = make_mlp(64, len(PUBLIC_CLASSES), HIDDEN, seed=seed)
    train(model, data.public, sample_rate=0.25, epochs=epochs, lr=0.2, momentum=0.9,
          noise_multiplier=0.0, max_grad_norm=math.inf, seed=seed)
    return model


@constrained(method=_METHOD, pretrained=_PRETRAINED, rank=Integer(min=1), seed=SEED)
def digits_model(method: str, pretrained: nn.Module, *, rank: int = 4,
                 seed: int) -> nn.Module:
    """The network ``method`` fine-tunes: a copy of ``pretrained`` with a new zero-initialised
    head (5 private classes), frozen by :func:`dplib.training.finetune.prepare_finetune`
    (``"lora"``: rank ``rank`` on both hidden layers, α = r, the adapters' random initialisation
    drawn from ``seed``); ``"scratch"``: a fresh
    :func:`~dplib.training.make_mlp` of the same shape from ``seed``, every weight trainable."""
    from ..training import make_mlp
    from ..training.finetune import prepare_finetune
    if method == "scratch":
        return make_mlp(64, 5, HIDDEN, seed=seed)
    model = copy.deepcopy(pretrained)
    model[5] = nn.Linear(HIDDEN[-1], 5)
    nn.init.zeros_(model[5].weight)
    nn.init.zeros_(model[5].bias)
    if method == "full":
        return prepare_finetune(model, "full")
    if method == "lora":              # the adapters' random A: from ``seed``, not global state
        return prepare_finetune(model, "lora", rank=rank, target_modules=["1", "3"], head="5",
                                seed=seed)
    return prepare_finetune(model, method, head="5")


@constrained(data=_DATA, pretrained=_PRETRAINED, method=_METHOD, epsilon=EPSILON_OR_NONE,
             seed=SEED, rank=Integer(min=1), epochs=optional(NONNEGATIVE))
def finetune_digits(data: DigitsTransfer, pretrained: nn.Module, method: str,
                    epsilon: float | None, *, seed: int, rank: int = 4,
                    epochs: float | None = None) -> dict:
    """Train :func:`digits_model` ``(method, pretrained)`` on ``data.private`` with DP-SGD at
    (``epsilon``, δ = :data:`DELTA`) — ``None``: the same run without noise (σ = 0, the same
    clipping at C = 1 and the same batches; ε = ∞) — with the method's :data:`SETTINGS` (``epochs`` overrides them, e.g. in quick mode),
    and test it. Returns ``{"method", "epsilon", "accuracy", "rank" (LoRA's, else None),
    "trainable", "noise_multiplier", "steps", "sample_rate", "noise_norm"}`` (``noise_norm``: :func:`noise_norm` of the run)."""
    from ..training import evaluate, train
    from ..training.finetune import trainable_parameter_count
    s = dict(SETTINGS[method])
    if epochs is not None:
        s["epochs"] = epochs
    model = digits_model(method, pretrained, rank=rank, seed=seed)
    d = trainable_parameter_count(model)
    # σ calibrated to (ε, δ) at (q, T) as train(target_epsilon=ε) does, once per (ε, q, T)
    priv = dict(noise_multiplier=calibrated_sigma(epsilon, s["sample_rate"], s["epochs"]),
                delta=DELTA) if epsilon is not None else dict(noise_multiplier=0.0)
    res = train(model, data.private, seed=seed, ghost=True, **s, **priv)
    n = data.private[0].shape[0]
    sigma = float(res.noise_multiplier)
    return {"method": method, "epsilon": epsilon, "accuracy": float(evaluate(model, *data.test)),
            "rank": rank if method == "lora" else None, "trainable": d, "noise_multiplier": sigma, "steps": int(res.steps),
            "sample_rate": s["sample_rate"],
            "noise_norm": noise_norm(d, sigma, 1.0, s["sample_rate"] * n)}


@constrained(epsilon=POSITIVE, sample_rate=Interval(0.0, 1.0, closed="right"), epochs=POSITIVE)
def calibrated_sigma(epsilon: float, sample_rate: float, epochs: float) -> float:
    """σ = :func:`dplib.accounting.calibrate_noise` (ε, :data:`DELTA`, q, T = round(epochs/q)),
    the RDP accountant's calibration, exactly what :func:`dplib.training.train` computes for
    ``target_epsilon=ε`` at these settings; remembered per (ε, q, epochs), so the methods of one
    privacy level calibrate once."""
    from ..training.config import steps_for_epochs
    return _calibrated_sigma(epsilon, sample_rate, steps_for_epochs(epochs, sample_rate))


@functools.lru_cache(maxsize=128)
def _calibrated_sigma(epsilon: float, sample_rate: float, steps: int) -> float:
    from ..accounting import calibrate_noise
    return float(calibrate_noise(epsilon, DELTA, sample_rate, steps, "rdp"))


@constrained(trainable=Integer(min=1), noise_multiplier=NONNEGATIVE, max_grad_norm=POSITIVE,
             batch_size=POSITIVE)
def noise_norm(trainable: int, noise_multiplier: float, max_grad_norm: float,
               batch_size: float) -> float:
    """E‖ξ‖ for the noise ξ ~ N(0, (σC/B)² I_d) of one averaged DP-SGD update (Abadi et al. 2016,
    Alg. 1): σC/B · √2 Γ((d+1)/2)/Γ(d/2), which is σC√d/B up to a factor in [√(d/(d+1)), 1]
    (the mean of a chi distribution with d degrees of freedom)."""
    d, s, c, b = trainable, noise_multiplier, max_grad_norm, batch_size
    chi = math.sqrt(2.0) * math.exp(math.lgamma((d + 1) / 2) - math.lgamma(d / 2))
    return s * c / b * chi


@constrained(seeds=Integer(min=1),
             epsilons=epsilon_list(none_allowed=True), quick=FLAG, methods=method_list(METHODS),
             lora_ranks=Custom(_ranks, "a tuple of positive integers", [(0,), (2.5,), 3, None]),
             rank_repeats=Integer(min=1))
def utility_table(*, seeds: int = 5, epsilons: tuple = EPSILONS, quick: bool = False,
                  methods: tuple = METHODS, lora_ranks: tuple = (),
                  rank_repeats: int = 3) -> dict:
    """Every method at every ε (and without noise, ``epsilon=None``) for ``seeds`` training
    seeds 0, 1, …, on one split and one pretrained model (both seed 0). Returns ``{"rows": [...
    :func:`finetune_digits` results with their ``seed``], "public_only": the public model's
    outputs 0–4 read as the digits 5–9 on the test set (it knows none of the private classes:
    any reading of its outputs is a guess),
    "pretrained_public_accuracy", "n_public", "n_private", "n_test", "settings", "hidden",
    "delta", "seeds", "quick", "lora_ranks", "rank_seeds", "rank_rows"}``. ``quick``: 10 epochs
    instead of each method's setting. ``lora_ranks``: a sweep of LoRA's rank, every rank at every
    ε (and without noise) for ``rank_repeats`` seeds 0, 1, … (``rank_rows``; the table's own rank,
    4, is copied from ``rows``, whose seeds are the same runs)."""
    eps_list = list(epsilons)
    ranks = [int(r) for r in lora_ranks]
    if ranks and ("lora" not in methods or rank_repeats > seeds):
        raise ValueError(f"rank_repeats must be at most seeds={seeds} and methods must include "
                         f"'lora' for a rank sweep, got rank_repeats={shown(rank_repeats)}, "
                         f"methods={shown(methods)}")
    from ..training import evaluate
    data = digits_transfer(seed=0)          # the public/private split: fixed, for the table
    base = pretrain_digits(data, seed=0)    # public digits only
    rows = []
    for method in methods:
        for eps in [*eps_list, None]:
            for s in range(seeds):
                r = finetune_digits(data, base, method, eps, seed=s, epochs=10 if quick else None)
                rows.append({**r, "seed": s})
    rank_rows = []
    for rank in ranks:
        for eps in [*eps_list, None]:
            for s in range(rank_repeats):
                if rank == 4:                 # the table's LoRA: the same runs as in ``rows``
                    r = next(x for x in rows if x["method"] == "lora" and x["epsilon"] == eps
                             and x["seed"] == s)
                else:
                    r = {**finetune_digits(data, base, "lora", eps, seed=s, rank=rank,
                                           epochs=10 if quick else None), "seed": s}
                rank_rows.append(r)
    with torch.no_grad():
        pub_pred = base(data.test[0]).argmax(1)
    return {"rows": rows, "public_only": float((pub_pred == data.test[1]).float().mean()),
            "pretrained_public_accuracy": float(evaluate(base, *data.public)),
            "n_public": int(data.public[0].shape[0]), "n_private": int(data.private[0].shape[0]),
            "n_test": int(data.test[0].shape[0]), "settings": SETTINGS, "hidden": list(HIDDEN),
            "delta": DELTA, "seeds": seeds, "quick": quick, "lora_ranks": ranks,
            "rank_seeds": rank_repeats, "rank_rows": rank_rows}


@constrained(path=PATH_OR_NONE)
def load_finetune_table(path: str | None = None) -> dict:
    """The stored table of ``benchmarks/finetune_utility.py`` (default :data:`FINETUNE_TABLE`)."""
    import json
    from pathlib import Path
    p = FINETUNE_TABLE if path is None else Path(path)
    if not p.is_file():
        raise ValueError(f"path must be an existing JSON file, got {shown(str(p))}")
    return json.loads(p.read_text())


@constrained(table=_stored_table("rows", "(a dict with 'rows')"), method=_METHOD,
             epsilon=EPSILON_OR_NONE)
def table_accuracy(table: dict, method: str, epsilon: float | None) -> tuple[float, float]:
    """Mean and standard deviation (over seeds, in %) of ``method`` at ``epsilon`` in ``table``
    (None: the non-private row)."""
    acc = [100 * r["accuracy"] for r in table["rows"]
           if r["method"] == method and r["epsilon"] == epsilon]
    if not acc:
        raise ValueError(f"epsilon must be one of the table's privacy levels, got {shown(epsilon)}")
    return statistics.mean(acc), (statistics.stdev(acc) if len(acc) > 1 else 0.0)


@constrained(table=_stored_table("rank_rows", "with a rank sweep (a dict with 'rank_rows')"),
             rank=Integer(min=1), epsilon=EPSILON_OR_NONE)
def rank_accuracy(table: dict, rank: int, epsilon: float | None) -> tuple[float, float]:
    """Mean and standard deviation (over seeds, in %) of LoRA of rank ``rank`` at ``epsilon``
    (None: without noise) in the rank sweep of ``table`` (:func:`utility_table`'s
    ``rank_rows``)."""
    acc = [100 * r["accuracy"] for r in table["rank_rows"]
           if r["rank"] == rank and r["epsilon"] == epsilon]
    if not acc:
        raise ValueError(f"rank and epsilon must be in the table's sweep (ranks "
                         f"{table.get('lora_ranks')}), got rank={rank}, epsilon={shown(epsilon)}")
    return statistics.mean(acc), (statistics.stdev(acc) if len(acc) > 1 else 0.0)


class _MeanPooledClassifier(nn.Module):
    def __init__(self, transformer: nn.Module, num_classes: int, pad_id: int) -> None:
        super().__init__()
        self.transformer = transformer
        self.head = nn.Linear(transformer.config.n_embd, num_classes)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)
        self.pad_id = pad_id

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.transformer(input_ids=ids).last_hidden_state
        mask = (ids != self.pad_id).to(h.dtype)
        return self.head((h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1))


@constrained(num_classes=Integer(min=2), pretrained=FLAG, seed=SEED)
def text_classifier(num_classes: int = 2, *, pretrained: bool = True, seed: int):
    """The tiny GPT-2 of :func:`dplib.icl.tiny_lm.load_tiny_lm` (``pretrained=False``: the same
    architecture, randomly initialised from ``seed``) as a classifier: a zero-initialised linear
    head (module ``"head"``) on the mean of the last hidden states of the non-padding tokens.
    Sequences are padded on the RIGHT, so under GPT-2's causal attention no real token attends to
    a pad and each example's output depends on its own tokens only. Returns (model, tokenizer)."""
    from ..icl.tiny_lm import load_tiny_lm
    lm = load_tiny_lm()
    gpt = lm.model
    if not pretrained:
        from transformers import GPT2LMHeadModel
        torch.manual_seed(seed)
        gpt = GPT2LMHeadModel(gpt.config)
    torch.manual_seed(seed)
    return _MeanPooledClassifier(gpt.transformer, num_classes,
                                 lm.tokenizer.pad_token_id), lm.tokenizer


def _texts(name: str, value: object) -> object:
    if not isinstance(value, (list, tuple)) or not all(isinstance(t, str) for t in value):
        raise ValueError(f"{name} must be a list of strings, got {shown(value)}"[:200])
    return value


def _tokenizer(name: str, value: object) -> object:
    if not hasattr(value, "pad_token_id"):
        raise ValueError(f"{name} must be a Hugging Face tokenizer, got {shown(value)}"[:200])
    return value


@constrained(tokenizer=Custom(_tokenizer, "a Hugging Face tokenizer", [None, 3, "tok"]),
             texts=Custom(_texts, "a list of strings", [None, "abc", [1], 3]),
             length=Integer(min=1))
def encode_texts(tokenizer, texts, length: int = 8) -> torch.Tensor:
    """Token ids [n, ``length``] of ``texts`` (truncated, right-padded with the pad token)."""
    ids = np.full((len(texts), length), tokenizer.pad_token_id, dtype=np.int64)
    for i, t in enumerate(texts):       # tokenisation is per string (the tokenizer's API)
        e = tokenizer(t)["input_ids"][:length]
        ids[i, :len(e)] = e
    return torch.from_numpy(ids)
