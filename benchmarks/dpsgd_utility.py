"""Test accuracy of DP-SGD on scikit-learn's digits, with the recipes that narrow the gap.

Run:  python benchmarks/dpsgd_utility.py [--quick] [--seeds 5] [--threads 1] [--json out.json]

Protocol (printed with the results). Hyper-parameters are chosen on PUBLIC data only, so the
search costs no privacy and the ε reported is that of the one released run.

1. Data: :func:`dplib.datasets.load_digits` (seed 0), stratified: the "train" split (60 %,
   1,077 images) is PRIVATE; the "val" split (20 %, 360 images) is declared PUBLIC (never a
   record of the private set); the "test" split (360 images) is used once per table row.
   Pixels are scaled by their fixed range (x / 16, blank = 0): no statistic of private data.
2. Search, per recipe and privacy level, on the public split alone, in three folds: each
   configuration is trained on two folds (240 images) and scored on the third; the folds' mean
   validation accuracy ranks it (recipes with public pretraining pretrain on one fold, train on
   the next and score on the third; features fit on public images are fit on the two folds not
   scored). To rehearse the private run, a search run uses the same q,
   T and C and the noise multiplier σ · n_search / n_private, where σ is calibrated for the
   private run: the noise std in the averaged gradient, σC/(q·n), is the same in both.
3. The chosen configuration is trained on the PRIVATE split with ``--seeds`` training seeds
   (noise, batches, initialisation), (ε, δ = 1e-5)-DP by the RDP accountant (add/remove
   adjacency, Poisson sampling; σ calibrated for q, T), and evaluated on the test split:
   mean ± std over the seeds. Non-private rows: σ = 0 and C = ∞ on the same Poisson batches.
   Only these runs read private data, so the ε printed is the whole privacy cost.

Recipes (rows): baseline (logistic regression or an MLP with 64 tanh units; q ∈ {0.25, 1}; 10–60
epochs; SGD with momentum 0.9, C = 1); large batches and long training (q = 1, 100 or 300 steps);
parameter averaging (debiased EMA of the iterates, free in privacy; De et al. 2022); augmentation
multiplicity (K = 5 shifted copies, gradients averaged before clipping; De et al. 2022); features
from public data (PCA fit on the public images, or the normalised Gaussian-kernel similarities to
each public image, γ ∈ {0.5, 1}, with up to 100 epochs; Tramèr & Boneh 2021); public pretraining
(non-private training on the public images and labels, then DP-SGD from there; Tramèr & Boneh
2021); a combination (pretraining + EMA, on pixels or on kernel features with γ = 1); and, as the
bar that every use of public data must clear, the model trained on the public images alone. Three
more rows, run only when named (``--recipes "cnn,cnn + augmult,cnn + augmult + pretraining +
EMA"``), use a small convolutional network (:func:`dplib.training.make_cnn`: two 3×3 convolutions
of 16 and 32 channels, GroupNorm, tanh, global average pooling), alone, with augmentation
multiplicity (a convolution is shift-invariant, a linear layer on pixels is not), and with public
pretraining (q = 0.25, 100 epochs, lr 0.1) + EMA. Weight standardisation (De et al. 2022) is not
tried: it is a recipe for deep convolutional networks.
Runtime: about 6 minutes on one CPU thread, and 11 more for the three CNN rows (``--quick``:
2 seeds, smaller grids).
"""
from __future__ import annotations

import argparse
import copy
import itertools
import json
import math
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from dplib.accounting import calibrate_noise
from dplib.provenance import run_provenance
from dplib.datasets import load_digits
from dplib.training import (evaluate, make_cnn, make_logistic_regression, make_mlp,
                            steps_for_epochs, train)
from dplib.experiments.dpsgd_tables import UTILITY_TABLE as STORE
from dplib.training.recipes import (AugMult, PublicKernelFeatures, PublicPCA,
                                    augmult_cross_entropy)

ROOT = Path(__file__).resolve().parents[1]

EPSILONS = [None, 1.0, 3.0, 8.0]
DELTA = 1e-5
BASE = {"model": ["logreg", "mlp"], "sample_rate": [0.25, 1.0], "epochs": [10, 30, 60],
        "lr": [0.5, 1.0, 2.0]}
RECIPES = {
    "baseline": BASE,
    "large batches": {"model": ["logreg", "mlp"], "sample_rate": [1.0], "epochs": [100, 300],
                      "lr": [0.5, 1.0, 2.0]},
    "+ EMA": {**BASE, "epochs": [30, 60], "lr": [1.0, 2.0], "ema": [0.9, 0.99]},
    "+ augmult": {**BASE, "sample_rate": [1.0], "epochs": [30, 60], "lr": [1.0, 2.0],
                  "augmult": [5]},
    "+ public PCA": {**BASE, "epochs": [30, 60], "lr": [1.0, 2.0], "pca": [16, 32]},
    "+ public kernel features": {**BASE, "epochs": [30, 100], "lr": [1.0, 3.0],
                                 "kernel": [0.5, 1.0]},
    "+ public pretraining": {"model": ["logreg", "mlp"], "sample_rate": [0.25, 1.0],
                             "epochs": [10, 30], "lr": [0.1, 0.3, 1.0], "pretrain": [True]},
    "combination": {"model": ["logreg", "mlp"], "sample_rate": [0.25, 1.0], "epochs": [10, 30],
                    "lr": [0.3, 1.0], "pretrain": [True], "ema": [0.9], "kernel": [0, 1.0]},
}

#: Rows run only when named in ``--recipes`` (about 11 minutes together).
EXTRA_RECIPES = {
    # a convolutional network, shift-invariant up to its borders: where augmult should pay
    "cnn": {"model": ["cnn"], "sample_rate": [0.25], "epochs": [30, 60], "lr": [0.3, 1.0]},
    "cnn + augmult": {"model": ["cnn"], "sample_rate": [0.25], "epochs": [30, 60],
                      "lr": [0.3, 1.0], "augmult": [5]},
    "cnn + augmult + pretraining + EMA": {"model": ["cnn"], "sample_rate": [0.25],
                                          "epochs": [10], "lr": [0.1, 0.3], "augmult": [5],
                                          "pretrain": [True], "ema": [0.9]},
}


def build(cfg: dict, seed: int, x_public: torch.Tensor) -> nn.Module:
    """The model of a configuration; PCA or kernel features (from the public images ``x_public``)
    and AugMult as asked. The
    CNN sees the flat images as [B, 1, 8, 8] (AugMult hands it its copies in that shape)."""
    if cfg["model"] == "cnn":
        cnn = make_cnn(1, 10, 8, groups=4, width=16, seed=seed)
        if cfg.get("augmult"):
            return AugMult(cnn, (8, 8), cfg["augmult"], fill=0.0, channels_first=True)
        return nn.Sequential(nn.Unflatten(1, (1, 8, 8)), cnn)
    k, gamma = cfg.get("pca", 0), cfg.get("kernel", 0)
    d = k if k else len(x_public) if gamma else 64
    head = make_logistic_regression(d, 10) if cfg["model"] == "logreg" else \
        make_mlp(d, 10, (64,), seed=seed)
    model = nn.Sequential(PublicPCA(x_public, k), head) if k else \
        nn.Sequential(PublicKernelFeatures(x_public, gamma), head) if gamma else head
    return AugMult(model, (8, 8), cfg["augmult"], fill=0.0) if cfg.get("augmult") else model


def use_ghost(cfg: dict) -> bool:
    """Ghost clipping where it applies and pays: not with AugMult (it needs per-example
    gradients), not for the small CNN (vmap is about twice as fast on one CPU thread)."""
    return not cfg.get("augmult") and cfg["model"] != "cnn"


_PRETRAINED: dict = {}
PRETRAIN_LR = {"logreg": 0.5, "mlp": 0.1, "cnn": 0.1}


def pretrain(model: nn.Module, cfg: dict, public: tuple, seed: int) -> None:
    """Non-private training on PUBLIC images and labels (fixed recipe: q = 0.25, 100 epochs,
    lr 0.5 for logistic regression and 0.1 for the MLP and the CNN — chosen by cross-validation
    on the public split for pixel inputs, and reused untuned on PCA and kernel features).
    Cached: the same (model, features, public set, seed) is pretrained once."""
    key = (repr({k: v for k, v in cfg.items() if k in ("model", "pca", "kernel", "augmult")}),
           seed, len(public[1]), float(public[0].sum()),
           sum(float(b.double().sum()) for b in model.buffers()))     # the features' public fit
    if key not in _PRETRAINED:
        aug = bool(cfg.get("augmult"))
        train(model, public, sample_rate=0.25, lr=PRETRAIN_LR[cfg["model"]],
              epochs=100, momentum=0.9, noise_multiplier=0.0, max_grad_norm=math.inf,
              ghost=use_ghost(cfg), loss_fn=augmult_cross_entropy if aug else None,
              device="cpu", seed=seed)
        _PRETRAINED[key] = copy.deepcopy(model.state_dict())
    model.load_state_dict(_PRETRAINED[key])


def run(cfg, eps, data, x_public, seed, n_private, test, pre=None):
    """Train one configuration on ``data``; σ calibrated for the PRIVATE run (n_private) and
    rescaled by n / n_private; ``pre``: the public (X, y) to pretrain on, if the recipe asks."""
    private = eps is not None
    q = cfg["sample_rate"]
    steps = steps_for_epochs(cfg["epochs"], q)
    sigma = calibrate_noise(eps, DELTA, q, steps, "rdp") if private else 0.0
    n = len(data[1])
    model = build(cfg, seed, x_public)
    if cfg.get("pretrain"):
        pretrain(model, cfg, pre, seed)
    aug = bool(cfg.get("augmult"))
    res = train(model, data, sample_rate=q, lr=cfg["lr"], steps=steps, momentum=0.9,
                noise_multiplier=sigma * n / n_private, delta=DELTA,
                max_grad_norm=1.0 if private else math.inf, ghost=use_ghost(cfg),
                loss_fn=augmult_cross_entropy if aug else None, ema_decay=cfg.get("ema"),
                device="cpu", seed=seed)
    return evaluate(model, *test, device="cpu"), res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=None, help="final seeds (5; --quick: 2)")
    ap.add_argument("--quick", action="store_true", help="2 seeds, small grids")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--recipes", default=None, help="comma-separated subset of the rows")
    ap.add_argument("--json", default=None)
    ap.add_argument("--save", action="store_true",
                    help=f"store the table, with its provenance, in {STORE.relative_to(ROOT)} "
                         "(the DP-SGD chapter quotes it)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    seeds = args.seeds or (2 if args.quick else 5)
    every = {**RECIPES, **EXTRA_RECIPES}
    recipes = RECIPES if not args.recipes else {k: every[k] for k in args.recipes.split(",")
                                                if k in every}
    if args.quick:
        recipes = {k: {**v, **{a: b[:1] for a, b in v.items() if a in ("ema", "pca")},
                       "epochs": v["epochs"][-2:], "lr": v["lr"][1:3], "model": v["model"][:1]}
                   for k, v in recipes.items()}
    t0 = time.perf_counter()
    d = load_digits(seed=0, standardize=False)
    scale = lambda split: (d[split][0] / 16.0, d[split][1])   # noqa: E731  fixed range
    private, public, test = scale("train"), scale("val"), scale("test")
    n_private = len(private[1])
    folds = np.array_split(np.random.default_rng(0).permutation(len(public[1])), 3)
    print(f"digits: private {n_private}, public {len(public[1])} (search: 3 folds), test "
          f"{len(test[1])}; δ = {DELTA}; RDP accountant; {seeds} seeds; torch "
          f"{torch.__version__}, python {platform.python_version()}, {args.threads} thread(s)")
    print("hyper-parameters chosen on the public split only (noise scaled to the private n); "
          "ε is that of the released run")
    out = []
    if not args.recipes or "public data only" in args.recipes:
        # the bar every recipe using public data must clear: the public images alone, no DP
        scores = []
        for model, gamma in itertools.product(("logreg", "mlp"), (0, 0.5, 1.0)):
            cfg, val = {"model": model, "kernel": gamma}, []
            for f in range(3):
                tr = np.concatenate([folds[g] for g in range(3) if g != f])
                m = build(cfg, 100 + f, public[0][tr])
                pretrain(m, cfg, (public[0][tr], public[1][tr]), 100 + f)
                val.append(evaluate(m, public[0][folds[f]], public[1][folds[f]], device="cpu"))
            scores.append((statistics.mean(val), cfg))
        best_val, best = max(scores, key=lambda s: s[0])
        accs = []
        for seed in range(seeds):
            m = build(best, seed, public[0])
            pretrain(m, best, public, seed)
            accs.append(evaluate(m, *test, device="cpu"))
        mean, sd = statistics.mean(accs), statistics.stdev(accs) if seeds > 1 else 0.0
        print(f"{'public data only':<14} {'ε = 0':<12} {100 * mean:5.1f} ± {100 * sd:3.1f} %  "
              f"(public val {100 * best_val:5.1f} %; model={best['model']}, kernel="
              f"{best['kernel']}; the public images "
              "alone, no private data)", flush=True)
        out.append({"recipe": "public data only", "epsilon": 0.0, "test_accuracy_mean": mean,
                    "test_accuracy_std": sd, "test_accuracies": accs,
                    "public_val_accuracy": best_val, "config": best, "noise_multiplier": None,
                    "steps": None, "epsilon_reached": 0.0, "grid_size": len(scores)})
    for name, grid in recipes.items():
        configs = [dict(zip(grid, v)) for v in itertools.product(*grid.values())]
        for eps in EPSILONS:
            scores = []
            for cfg in configs:
                val = []
                for f in range(3):
                    va = folds[f]
                    if cfg.get("pretrain"):     # pretrain on one fold, DP on the next
                        pre, tr = folds[(f + 1) % 3], folds[(f + 2) % 3]
                    else:
                        pre, tr = None, np.concatenate([folds[g] for g in range(3) if g != f])
                    landmarks = public[0][np.concatenate([folds[g] for g in range(3) if g != f])]
                    val.append(run(cfg, eps, (public[0][tr], public[1][tr]), landmarks, 100 + f,
                                   n_private, (public[0][va], public[1][va]),
                                   None if pre is None else (public[0][pre], public[1][pre]))[0])
                scores.append((statistics.mean(val), cfg))
            best_val, best = max(scores, key=lambda s: s[0])
            accs = []
            for seed in range(seeds):
                acc, res = run(best, eps, private, public[0], seed, n_private, test, public)
                accs.append(acc)
            mean = statistics.mean(accs)
            sd = statistics.stdev(accs) if len(accs) > 1 else 0.0
            label = "non-private" if eps is None else f"ε = {eps:g}"
            cfg_s = ", ".join(f"{k}={v}" for k, v in best.items())
            print(f"{name:<14} {label:<12} {100 * mean:5.1f} ± {100 * sd:3.1f} %  (public val "
                  f"{100 * best_val:5.1f} %; {cfg_s}; steps {res.steps}, σ = "
                  f"{res.noise_multiplier:.3g}, ε reached {res.epsilon:.3f})", flush=True)
            out.append({"recipe": name, "epsilon": eps, "test_accuracy_mean": mean,
                        "test_accuracy_std": sd, "test_accuracies": accs,
                        "public_val_accuracy": best_val, "config": best,
                        "noise_multiplier": res.noise_multiplier, "steps": res.steps,
                        "epsilon_reached": res.epsilon, "grid_size": len(configs)})
    elapsed = time.perf_counter() - t0
    print(f"{elapsed:.0f} s in total")
    table = {"delta": DELTA, "accountant": "rdp", "seeds": seeds, "quick": args.quick,
             "protocol": __doc__.split("Protocol")[1].split("Recipes")[0].strip(),
             "grids": recipes, "results": out, "seconds": elapsed,
             "provenance": run_provenance("python benchmarks/dpsgd_utility.py "
                                          + shlex.join(sys.argv[1:]), ROOT)}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)
    if args.save:
        STORE.write_text(json.dumps(table, indent=1) + "\n")
        print(f"stored in {STORE.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
