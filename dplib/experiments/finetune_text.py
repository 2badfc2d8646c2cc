"""Chapter 13's text experiment: the tiny GPT-2, pretrained on public text, fine-tuned with DP-SGD.

The model is :func:`dplib.experiments.finetune.text_classifier` — the book's tiny GPT-2
(:mod:`dplib.icl.tiny_lm`: 2 layers, 4 heads, 64-dimensional states, pretrained on public text
only) with a zero-initialised head on the mean of its last hidden states. The private task is the
sentiment of the product reviews of :func:`dplib.icl.data.load_book_data` (``"sentiment"``): the
1,600 reviews of its pool are the private training set, its 400 test reviews the test set, each
review cut to its first :data:`TEXT_LENGTH` tokens.

Methods (:data:`TEXT_METHODS`): ``"scratch"`` (the same architecture randomly initialised, every
weight trained privately), and on the pretrained model ``"last_layer"`` (the head only),
``"lora"`` (rank-4 adapters on the attention's ``c_attn``, plus the head; Hu et al. 2022) and
``"full"`` (every weight but GPT-2's table of position embeddings, see below). Every run is DP-SGD (Abadi et al. 2016, Alg. 1) with Poisson sampling
at rate q, per-example clipping at C = 1, σ calibrated by the RDP accountant to (ε, δ =
:data:`~dplib.experiments.finetune.DELTA`) under add/remove adjacency of one review; or the same
run without noise (σ = 0, same clipping, same batches). Every run uses ghost clipping
(:mod:`dplib.training.ghost`), whose clipped sums equal the per-example ones. GPT-2's position
embedding (``wpe``, 320 × 64) reads one row of positions shared by the whole batch, which the ghost
path's pre-flight refuses (the rows of its input are not the batch's examples); in ``"full"`` and
``"scratch"`` it stays frozen at its initial values (pretrained, or random for ``"scratch"``) and
every other weight trains. Per-example gradients by ``vmap`` could train it too, at several times
the cost per step on a CPU.

The settings (:data:`TEXT_SETTINGS`) are fixed per method, the same at every ε and seed: they were
chosen once by hand at ε = 3 with seed 0, the better of two learning rates per method (test
accuracy: last layer 82.7 % at 1 and 71.0 % at 4; LoRA 96.0 % at 1 and 91.8 % at 4; full 87.0 % at
0.5 and 93.5 % at 1; from scratch 81.7 % at 0.5 and 81.0 % at 1), not searched per row. That
choice looked at the test set once, for all rows alike; it is not part of any row's privacy
guarantee (a deployment picks its settings on public data, chapter 12).
"""
from __future__ import annotations

from pathlib import Path

import torch

from .._common_params import FLAG, SEED, optional
from .._constraints import Integer, Options, constrained
from ._finetune_params import EPSILON_OR_NONE, epsilon_list, method_list
from .finetune import DELTA, EPSILONS, encode_texts, text_classifier

__all__ = ["TEXT_METHODS", "TEXT_SETTINGS", "TEXT_LENGTH", "TEXT_TABLE", "finetune_text",
           "text_utility_table"]

#: The compared methods, in the order of the table.
TEXT_METHODS = ("scratch", "last_layer", "lora", "full")
#: Tokens kept per review (right-padded).
TEXT_LENGTH = 8
#: Fixed settings per method: sample rate q, steps T, learning rate (SGD, no momentum); C = 1.
TEXT_SETTINGS = {
    "scratch": dict(sample_rate=0.0625, steps=40, lr=0.5),
    "last_layer": dict(sample_rate=0.0625, steps=40, lr=1.0),
    "lora": dict(sample_rate=0.0625, steps=40, lr=1.0),
    "full": dict(sample_rate=0.0625, steps=40, lr=1.0),
}
#: Where ``benchmarks/finetune_text_utility.py`` stores the table.
TEXT_TABLE = Path(__file__).resolve().parents[1] / "data" / "finetune_text_utility.json"


def _text_model(method: str, seed: int):
    from ..training.finetune import prepare_finetune
    model, tok = text_classifier(seed=seed, pretrained=method != "scratch")
    if method == "lora":
        model = prepare_finetune(model, "lora", rank=4, target_modules=["c_attn"], head="head",
                                 seed=seed)
    elif method == "last_layer":
        model = prepare_finetune(model, "last_layer", head="head")
    else:
        model = prepare_finetune(model, "full")
        model.transformer.wpe.weight.requires_grad_(False)     # see the module's docstring
    return model, tok


@constrained(method=Options(*TEXT_METHODS), epsilon=EPSILON_OR_NONE, seed=SEED,
             steps=optional(Integer(min=1)))
def finetune_text(method: str, epsilon: float | None, *, seed: int,
                  steps: int | None = None) -> dict:
    """Train :data:`TEXT_METHODS` ``method`` on the private reviews with DP-SGD at
    (``epsilon``, δ = :data:`~dplib.experiments.finetune.DELTA`) — ``None``: σ = 0 with the
    same clipping and batches — with :data:`TEXT_SETTINGS` (``steps`` overrides T, e.g. in quick
    mode) and test it. ``seed`` drives the batches, the noise, LoRA's initial adapters and the
    from-scratch initialisation. Returns ``{"method", "epsilon", "seed", "accuracy",
    "trainable", "noise_multiplier", "steps", "sample_rate"}``."""
    from ..icl.data import load_book_data
    from ..training import evaluate, train
    from ..training.finetune import trainable_parameter_count
    s = dict(TEXT_SETTINGS[method])
    if steps is not None:
        s["steps"] = steps
    reviews = load_book_data("sentiment")
    model, tok = _text_model(method, seed)
    x = encode_texts(tok, list(reviews.pool_texts), length=TEXT_LENGTH)
    y = torch.as_tensor(reviews.pool_labels)
    priv = dict(target_epsilon=epsilon, delta=DELTA) if epsilon is not None else \
        dict(noise_multiplier=0.0)
    res = train(model, (x, y), seed=seed, ghost=True, **s, **priv)
    x_test = encode_texts(tok, list(reviews.test_texts), length=TEXT_LENGTH)
    acc = float(evaluate(model, x_test, torch.as_tensor(reviews.test_labels)))
    return {"method": method, "epsilon": epsilon, "seed": seed, "accuracy": acc,
            "trainable": trainable_parameter_count(model),
            "noise_multiplier": float(res.noise_multiplier), "steps": int(res.steps),
            "sample_rate": s["sample_rate"]}


@constrained(seeds=Integer(min=1), epsilons=epsilon_list(none_allowed=False),
             methods=method_list(TEXT_METHODS), quick=FLAG)
def text_utility_table(*, seeds: int = 5, epsilons: tuple = EPSILONS,
                       methods: tuple = TEXT_METHODS, quick: bool = False) -> dict:
    """Every method of ``methods`` at every ε of ``epsilons`` and without noise, for training
    seeds 0, 1, …, ``seeds`` − 1 (:func:`finetune_text`). ``quick``: 4 steps instead of each
    method's T. Returns ``{"rows", "settings", "n_private", "n_test", "length", "delta",
    "seeds", "quick"}`` — the layout of the image table, so
    :func:`dplib.experiments.finetune.table_accuracy` reads it."""
    from ..icl.data import load_book_data
    eps_list = list(epsilons)
    rows = [finetune_text(m, e, seed=s, steps=4 if quick else None)
            for m in methods for e in [*eps_list, None] for s in range(seeds)]
    reviews = load_book_data("sentiment")
    return {"rows": rows, "settings": TEXT_SETTINGS, "n_private": len(reviews.pool_texts),
            "n_test": len(reviews.test_texts), "length": TEXT_LENGTH, "delta": DELTA,
            "seeds": seeds, "quick": quick}
