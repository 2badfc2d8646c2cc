"""Membership inference on the book's data: every attack against a non-private model and DP-SGD
models at several ε, the empirical ε lower bounds, and batched vs one-at-a-time shadow training.

Run:  python benchmarks/mia.py [--shadows 64] [--targets 4] [--epsilons 1 3 8]
                               [--canary-runs 128] [--time-models 64] [--threads 1]
                               [--device cpu|cuda] [--quick] [--json out.json]

Setting. The pool is scikit-learn's 1,797 digits (dplib.datasets.load_digits, all splits joined,
standardised). Every model is the book's MLP (64 → 64 tanh → 10) trained on a random half of
the pool with DP-Adam (Poisson rate q = 0.1, 20 epochs, lr 0.02, C = 1, δ = 1e-5) at each ε,
or with the same recipe without clipping and noise. ``--targets`` target models and
``--shadows`` shadow models (balanced halves) are trained in one batched call per setting.

Printed per setting and attack (loss threshold, shadow-model classifier, LiRA offline/online,
with per-example and fixed variance): AUC, TPR at 0.1% and 1% FPR over all (target, example)
pairs, and the ε lower bound at 95% confidence from those pairs (threshold chosen on half of
them). That bound treats the pairs as independent trials although they share the target
models: its confidence is nominal (see dplib.experiments.attacks). The canary audit is the
rigorous one: ``--canary-runs`` models with and as many without one mislabelled record, its
score in each run an i.i.d. trial (Jagielski et al. 2020).

Speed: ``--time-models`` shadow models trained batched (dplib.attacks.train_models_batched)
and one at a time (dplib.training.train in a loop, the same algorithm), non-private and at the
largest ε, with the largest parameter difference between the two results. Measured here, never
asserted in tests.
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import time

import torch

from dplib.attacks import (attack_summary, membership_masks, population_epsilon_lower_bound,
                           train_models_batched, train_models_sequential)
from dplib.experiments.attacks import (ATTACKS, MIA_RECIPE, canary_audit, digits_pool, mia_model,
                                       run_attacks, train_population)

RECIPE = MIA_RECIPE
pool = digits_pool
model_fn = mia_model


def attack_table(x, y, eps, args) -> dict:
    t0 = time.perf_counter()
    pop = train_population(x, y, model_fn=model_fn, n_targets=args.targets,
                           n_shadows=args.shadows, epsilon=eps, device=args.device,
                           seed=1, **RECIPE)
    train_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    scores, member = run_attacks(pop)
    attack_s = time.perf_counter() - t0
    rows = {}
    for name in ATTACKS:
        r = attack_summary(scores[name], member)
        lb = population_epsilon_lower_bound(scores[name], member, delta=pop.delta, rng=0)
        rows[name] = dict(auc=r["auc"], tpr_0_1=r["tpr@0.001"], tpr_1=r["tpr@0.01"],
                          eps_lb=lb.epsilon_lower)
    return dict(epsilon=pop.epsilon, epsilon_replace_one=pop.epsilon_replace_one,
                sigma=pop.noise_multiplier,
                train_acc=float(pop.train_accuracy.mean()),
                test_acc=float(pop.test_accuracy.mean()), models=args.targets + args.shadows,
                train_seconds=train_s, attack_seconds=attack_s, attacks=rows,
                pairs=int(member.size))


def canary(x, y, eps, args) -> dict:
    """Audit with one mislabelled digit (pool image 0, label + 1) added to a fixed training
    set of 500 other pool records."""
    cx, cy = x[0], int((y[0] + 1) % 10)
    base_x, base_y = x[1:501], y[1:501]
    t0 = time.perf_counter()
    res = canary_audit(base_x, base_y, cx, cy, runs=args.canary_runs, model_fn=model_fn,
                       epsilon=eps, device=args.device, seed=2, **RECIPE)
    a = res.audit
    return dict(epsilon=res.epsilon, eps_lb=a.epsilon_lower, tpr=a.tpr, fpr=a.fpr,
                runs=args.canary_runs, seconds=time.perf_counter() - t0,
                mean_in=float(res.scores_in.mean()), mean_out=float(res.scores_out.mean()))


def speed(x, y, eps, args) -> dict:
    m = args.time_models
    masks = membership_masks(m, x.shape[0], rng=3, design="balanced")
    models = [model_fn(s) for s in range(m)]
    kw = dict(RECIPE, seeds=list(range(m)))      # the same seeds for both trainers
    if eps is None:
        kw.update(noise_multiplier=0.0, max_grad_norm=math.inf)
    else:
        kw.update(target_epsilon=eps)
    t0 = time.perf_counter()
    a = train_models_batched(models, x, y, masks, device=args.device, **kw)
    if a.device.type == "cuda":
        torch.cuda.synchronize()
    tb = time.perf_counter() - t0
    t0 = time.perf_counter()
    b = train_models_sequential(models, x, y, masks, device=args.device, **kw)
    ts = time.perf_counter() - t0
    diff = max(float((a.params[k] - b.params[k]).abs().max()) for k in a.params)
    return dict(models=m, batched_s=tb, sequential_s=ts, speedup=ts / tb, max_param_diff=diff,
                steps=a.steps)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shadows", type=int, default=64)
    ap.add_argument("--targets", type=int, default=4)
    ap.add_argument("--epsilons", type=float, nargs="*", default=[8.0, 3.0, 1.0])
    ap.add_argument("--canary-runs", type=int, default=128)
    ap.add_argument("--time-models", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default=None)
    ap.add_argument("--quick", action="store_true", help="8 shadows, 2 targets, 16 runs")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    args = ap.parse_args()
    if args.quick:
        args.shadows, args.targets, args.canary_runs, args.time_models = 8, 2, 16, 8
    if args.threads:
        torch.set_num_threads(args.threads)
    from dplib.device import get_device
    args.device = str(get_device(args.device))
    torch.manual_seed(0)
    x, y = pool()
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, device "
          f"{args.device}, threads {torch.get_num_threads()}; pool {x.shape[0]} digits, "
          f"{args.targets} targets + {args.shadows} shadows per setting")
    out = {"settings": {}, "speed": {}, "canary": {}}
    for eps in [None, *args.epsilons]:
        tag = "non-private" if eps is None else f"eps={eps:g}"
        res = attack_table(x, y, eps, args)
        out["settings"][tag] = res
        print(f"\n## {tag}: accountant eps = {res['epsilon']:.3g} (add/remove; replace-one, "
              f"the relation of the fixed halves: {res['epsilon_replace_one']:.3g}; "
              f"sigma = {res['sigma']:.3g}), "
              f"train acc {res['train_acc']:.3f}, held-out acc {res['test_acc']:.3f}; "
              f"{res['models']} models trained in {res['train_seconds']:.1f} s, attacks "
              f"{res['attack_seconds']:.1f} s, {res['pairs']} (target, example) pairs")
        print(f"{'attack':<20}{'AUC':>7}{'TPR@0.1%':>10}{'TPR@1%':>9}{'eps_lb*':>9}")
        for name, r in res["attacks"].items():
            print(f"{name:<20}{r['auc']:>7.3f}{r['tpr_0_1']:>10.4f}{r['tpr_1']:>9.4f}"
                  f"{r['eps_lb']:>9.3f}")
        c = canary(x, y, eps, args)
        out["canary"][tag] = c
        print(f"canary audit ({c['runs']} runs with + {c['runs']} without, "
              f"{c['seconds']:.1f} s): eps_lb = {c['eps_lb']:.3f} at 95% "
              f"(held-out TPR {c['tpr']:.3f}, FPR {c['fpr']:.3f}; mean score in "
              f"{c['mean_in']:.2f}, out {c['mean_out']:.2f}) vs accountant eps "
              f"{c['epsilon']:.3g}")
    print("\n* eps_lb from pooled (target, example) pairs: nominal 95% confidence (the pairs "
          "share models); the canary audit's bound is a valid 95% bound.")
    if not args.skip_speed:
        for eps in (None, max(args.epsilons) if args.epsilons else None):
            tag = "non-private" if eps is None else f"DP eps={eps:g}"
            s = speed(x, y, eps, args)
            out["speed"][tag] = s
            print(f"\nspeed, {s['models']} shadow models ({tag}, {s['steps']} steps each): "
                  f"batched {s['batched_s']:.1f} s, one at a time (dplib.training.train) "
                  f"{s['sequential_s']:.1f} s -> {s['speedup']:.1f}x faster batched "
                  f"(max parameter difference {s['max_param_diff']:.1e})")
            if eps is None and len(args.epsilons) == 0:
                break
    if args.json:
        out["provenance"] = dict(command="python benchmarks/mia.py " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if v not in
            (None, False)), torch=torch.__version__, device=args.device,
            date=time.strftime("%Y-%m-%d"))
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, default=float)


if __name__ == "__main__":
    main()
