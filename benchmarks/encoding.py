"""Gradient encoding and denoising (Nasr, Shokri & Houmansadr 2020) on digits: accuracy vs ε,
ℓ1 error vs D₂ per noise family, and encoding throughput.

Run:  python benchmarks/encoding.py [--quick] [--seeds 3] [--epochs 20] [--device cpu|cuda]
                                    [--json dplib/data/encoding_digits.json]

1. Built-in check: Algorithm 1's numerical accountant with Gaussian noise and a code book of
   norm-1 vectors against the closed-form subsampled-Gaussian RDP (integer orders 2…64).
2. Accuracy/ε table (the paper's Figure 2 protocol, fixed epochs): DP-SGD, Algorithm 1 with
   Gaussian and Student-t(9) noise, each with and without KS denoising, at ε ∈ {2, 4, 8}
   (δ = 1e-5). Same data, initialisation and Poisson batches per seed; the learning rate of each
   method is chosen on the validation split (mean of two seeds), test accuracy is mean ± std over
   20 fresh seeds, and differences to DP-SGD are paired by seed (± standard error).
3. ℓ1 error of the privatised gradient against the per-step D₂ (order-2 RDP, q = 1), per noise
   family (the paper's Figure 6), with the small-shift (Fisher) prediction of the ratios.
4. Encoded vectors per second, CPU (and CUDA when present).

Writes everything, with provenance, to ``--json`` (by default the file installed with dplib,
which the chapter reads with ``dplib.datasets.load_cached_result("encoding_digits")``). About
35 minutes on 2 CPU cores; ``--quick`` is a smoke run of a minute. Speed is measured here, never
asserted in tests.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one ε, 1 epoch, 100 codes (smoke run)")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--epochs", type=float, default=10)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--json", default=str(ROOT / "dplib" / "data" / "encoding_digits.json"))
    args = ap.parse_args()

    import dplib
    from dplib.accounting import subsampled_gaussian_rdp
    from dplib.encoding import (INTEGER_ORDERS, GaussianNoise, LaplaceNoise, StudentTNoise,
                                codebook_rdp, flat_grads)
    from dplib.experiments.encoding import (compare_on_digits, digits_problem,
                                           encoding_throughput, format_table, l1_versus_d2,
                                           same_lr_control)
    from dplib.training import per_example_grads

    torch.set_num_threads(max(1, min(torch.get_num_threads(), 4)))
    t_start = time.perf_counter()
    device = torch.device(args.device)
    epsilons = (4.0,) if args.quick else (2.0, 4.0, 8.0)
    epochs = 1 if args.quick else args.epochs
    n_codes = 100 if args.quick else 1000
    seeds = 2 if args.quick else args.seeds
    tune_seeds = (0,) if args.quick else (0, 100)
    print(f"# dplib {dplib.__version__}, python {sys.version.split()[0]}, torch "
          f"{torch.__version__}, {platform.machine()}, {torch.get_num_threads()} threads, "
          f"device {device}")

    # 1. built-in check -------------------------------------------------------------------------
    prob = digits_problem(n_codes=n_codes)
    q = prob["sample_rate"]
    cb = prob["codebook"]
    ours = codebook_rdp(INTEGER_ORDERS, q, cb, GaussianNoise(1.0), method="table")
    ref = subsampled_gaussian_rdp(INTEGER_ORDERS, 1.0 / float(cb.norms.max()), q)
    check = float(np.max(np.abs(ours / ref - 1)))
    print(f"\n1. Gaussian noise, {cb.n_codes} code vectors of d = {cb.dim}: numerical Lemma 4/5 "
          f"vs closed-form subsampled Gaussian, max relative difference {check:.1e}")

    # 2. accuracy / epsilon ---------------------------------------------------------------------
    print(f"\n2. Accuracy (%) at fixed epochs = {epochs:g}, batch 64 (q = {q:.4f}), MLP "
          f"64-32-10 (d = {prob['dim']}), {n_codes} code vectors, delta = 1e-5")
    t0 = time.perf_counter()
    table = compare_on_digits(epsilons=epsilons, epochs=epochs, seeds=seeds, n_codes=n_codes,
                              tune_seeds=tune_seeds, device=device,
                              log=lambda s: print("   ", s, flush=True))
    t_table = time.perf_counter() - t0
    print()
    print(format_table(table))
    for eps in epsilons:
        rows = {r["method"]: r for r in table["rows"] if r["target_epsilon"] == eps}
        g, t = rows["alg1_gaussian"], rows["alg1_student_t"]
        print(f"   eps = {eps:g}: sigma = {g['noise_std']:.3f}; Student-t(9) at the same eps "
              f"has scale {t['noise_scale']:.3f}, std {t['noise_std']:.3f} "
              f"({100 * (t['noise_std'] / g['noise_std'] - 1):+.1f}%); KS factor "
              f"{rows['alg1_gaussian_denoise']['ks_mean']:.4f} (cv "
              f"{rows['alg1_gaussian_denoise']['ks_cv']:.2f})")
    best = {m: max(r["mean"] for r in table["rows"] if r["method"] == m)
            for m in {r["method"] for r in table["rows"]}}
    print(f"   table: {t_table:.0f} s, {table['rows'][0]['seconds_per_run']:.1f} s per DP-SGD "
          f"run, {table['rows'][1]['seconds_per_run']:.1f} s per Algorithm-1 run")
    print("   paired difference to DP-SGD (points, mean ± s.e. over seeds):")
    for r in table["rows"]:
        if "diff_vs_dpsgd" in r:
            print(f"     eps = {r['target_epsilon']:g} {r['method']:24s} "
                  f"{100 * r['diff_vs_dpsgd']:+.2f} ± {100 * r['diff_se']:.2f}")

    print("\n2b. Control: DP-SGD at the learning rate Algorithm 1 (Gaussian) was tuned to, same "
          "seeds (isolates the encoding):")
    control = same_lr_control(table, device=device, log=lambda s: print("   ", s, flush=True))
    for m in ("alg1_student_t", "alg1_gaussian_denoise"):
        print(f"   paired {m} minus alg1_gaussian:")
        for eps in epsilons:
            a = next(r for r in table["rows"] if r["method"] == m and r["target_epsilon"] == eps)
            g = next(r for r in table["rows"] if r["method"] == "alg1_gaussian"
                     and r["target_epsilon"] == eps)
            dd = np.array(a["test_accuracy"]) - np.array(g["test_accuracy"])
            se = dd.std(ddof=1) / math.sqrt(dd.size) if dd.size > 1 else float("nan")
            print(f"     eps = {eps:g}: {100 * dd.mean():+.2f} ± {100 * se:.2f}")

    # 3. l1 error vs D2 ---------------------------------------------------------------------------
    x, y = prob["data"]["train"]
    model = prob["model"](0)
    grads = flat_grads(per_example_grads(model, torch.nn.functional.cross_entropy, x[:64],
                                         y[:64])).detach()
    d2 = (0.1, 0.2, 0.3, 0.4, 0.5)
    fig6 = l1_versus_d2(cb, grads, d2, sample_rate=1.0, num_draws=5 if args.quick else 200,
                        seed=0)
    print("\n3. l1 error per coordinate of the privatised sum (64 per-example gradients at "
          "initialisation) vs per-step D2 (q = 1), the paper's Figure 6:")
    print(f"   {'D2':>5} " + " ".join(f"{f:>12s}" for f in ("gaussian", "laplace", "student_t")))
    for v in d2:
        cells = [next(r for r in fig6 if r["family"] == f and r["d2"] == v)["l1_per_coord"]
                 for f in ("gaussian", "laplace", "student_t")]
        print(f"   {v:5.2f} " + " ".join(f"{c:12.4f}" for c in cells))
    pred = {n.family: n.mean_abs * math.sqrt(n.fisher_information)
            for n in (GaussianNoise(1.0), LaplaceNoise(1.0), StudentTNoise(9, 1.0))}
    print("   small-shift prediction of the noise l1 ratio at equal D2 (E|Z|·sqrt(F)): "
          + ", ".join(f"{k} {v / pred['gaussian']:.4f}" for k, v in pred.items()))

    # 4. throughput -------------------------------------------------------------------------------
    devs = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    tp = []
    for dv in devs:
        dims = (prob["dim"], 100_000) if not args.quick else (prob["dim"],)
        tp += encoding_throughput(dims=dims, n_codes=1000, batch=256, device=dv)
    print("\n4. Encoding throughput (batch 256, 1000 code vectors):")
    for r in tp:
        print(f"   {r['device']:>5} d = {r['dim']:>7,}: {r['vectors_per_second']:>10,.0f} "
              f"vectors/s")
    if "cuda" not in devs:
        print("   (no GPU here; on a CUDA machine run with --device cuda for the GPU row)")

    wall = time.perf_counter() - t_start
    # fixed epochs: the protocol of the paper's Figure 2 (96% at eps = 2.5 for Algorithm 1 vs
    # eps = 5 for DP-SGD on MNIST); its 96.1%-at-3.2 headline is Figure 3, best over
    # hyper-parameters, which this script does not run
    print("\nPaper's Figure 2 (fixed epochs, MNIST: 96% at eps = 2.5 for Algorithm 1 vs eps = 5 "
          "for DP-SGD):")
    print("   best accuracy over the eps grid: " + ", ".join(
        f"{m} {100 * best[m]:.1f}%" for m in sorted(best)))
    print(f"\nwall-clock: {wall:.0f} s")
    out = {"provenance": {"command": "python benchmarks/encoding.py" + (" --quick" if args.quick
                                                                       else ""),
                          "dplib": dplib.__version__, "torch": torch.__version__,
                          "python": sys.version.split()[0], "machine": platform.machine(),
                          "device": str(device), "threads": torch.get_num_threads(),
                          "date": datetime.date.today().isoformat(), "seconds": wall},
           "builtin_check_max_rel_diff": check, "table": table, "same_lr_control": control,
           "figure6": fig6,
           "throughput": tp}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
