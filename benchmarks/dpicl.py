"""DP in-context learning on the book's data: the ε table of Wu et al. (2024) and the MIA AUC per ε.

Run:  python benchmarks/dpicl.py                 (about a minute on 2 CPU cores)
      python benchmarks/dpicl.py --quick         (fewer runs and queries, a few seconds)
      python benchmarks/dpicl.py --model tiny    (the book's 2-layer GPT-2, offline)
      python benchmarks/dpicl.py --model gpt2    (a Hugging Face causal LM; needs `transformers`
                                                  and the weights, e.g. in Colab)
      python benchmarks/dpicl.py --data online   (SST-2 and AG News, downloaded once)

Prints, for the sentiment (SST-2 stand-in) and topic (AG News stand-in) sets: test accuracy (%)
at ε = 0 (zero-shot), 1, 3, 8, ∞ (noiseless ensemble, "Agg") and ∞ (one 4-shot prompt) as
mean ± standard deviation over runs — the form of Wu et al. 2024, Table 1 — with M = 20 subsets of
at most 4 demonstrations, Poisson sampling ρ = 80/n, δ = 1e-5, Gaussian noise calibrated by the
RDP accountant for the Q test queries. Then the membership-inference AUC against 1-shot prompts
(Wu et al. 2024, Table 15) at ε = 1, 2, 4, 8, ∞, with the analytic ceiling Φ(1/s), and the time
each part took. The paper's own numbers are printed for comparison, labelled as such.
"""
from __future__ import annotations

import argparse
import math
import platform
import time

import numpy as np

PAPER_TABLE = """Wu et al. 2024, Table 1 (GPT-3, 4-shot; reported by the paper, not measured here)
data set | model | ε = 0 (0-shot) | ε = 1 | ε = 3 | ε = 8 | ε = ∞ (Agg) | ε = ∞
SST-2 | Babbage | 86.58 | 91.97 ± 0.49 | 92.83 ± 0.28 | 92.90 ± 0.24 | 92.87 ± 0.09 | 91.89 ± 1.23
SST-2 | Davinci | 94.15 | 95.11 ± 0.35 | 95.80 ± 0.21 | 95.83 ± 0.21 | 95.73 ± 0.13 | 95.49 ± 0.37
Amazon | Babbage | 93.80 | 93.83 ± 0.33 | 94.10 ± 0.22 | 94.12 ± 0.20 | 94.10 ± 0.11 | 93.58 ± 0.64
AGNews | Babbage | 52.60 | 75.49 ± 1.46 | 81.00 ± 1.14 | 81.86 ± 1.22 | 82.22 ± 2.16 | 68.77 ± 11.31
TREC | Babbage | 23.00 | 24.48 ± 3.58 | 26.36 ± 5.19 | 26.26 ± 5.61 | 26.32 ± 5.33 | 27.00 ± 7.72
Wu et al. 2024, Table 15 (1-shot MIA on Babbage): AUC 50.56, 50.58, 50.55, 50.53, 81.84 % at
ε = 1, 2, 4, 8, ∞"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 runs, 100 queries, 600 MIA trials")
    ap.add_argument("--model", default="offline",
                    help="'offline' (dplib.icl.OfflineICL), 'tiny' (the book's 2-layer GPT-2) "
                         "or a Hugging Face model name")
    ap.add_argument("--data", choices=("book", "online"), default="book",
                    help="the book's data sets, or SST-2 / AG News (downloaded)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    from dplib import __version__
    from dplib.experiments.icl import accuracy_table, format_table, mia_one_shot
    from dplib.icl import load_agnews, load_book_data, load_model, load_sst2

    runs, queries, trials = (2, 100, 600) if args.quick else (5, 200, 2000)
    t0 = time.perf_counter()
    model = load_model(args.model)
    t_model = time.perf_counter() - t0
    if args.data == "book":
        sets = [load_book_data("sentiment"), load_book_data("topic")]
    else:
        sets = [load_sst2(n_pool=1600, n_test=queries), load_agnews(n_pool=1600, n_test=queries)]
    print(f"dplib {__version__} | python {platform.python_version()} | model {args.model} | "
          f"data {args.data} | runs {runs} | queries {queries} | δ = 1e-5")
    print(f"model ready in {t_model:.1f} s\n")

    tables, timing = {}, {}
    for ds in sets:
        t0 = time.perf_counter()
        tables[ds.name] = accuracy_table(model, ds, epsilons=(1, 3, 8), delta=1e-5,
                                         num_subsets=20, shots=4, num_runs=runs,
                                         num_queries=queries, rng=args.seed)
        timing[ds.name] = time.perf_counter() - t0
    print("Measured here (test accuracy %, mean ± std over runs):")
    print(format_table(tables))
    for name, rows in tables.items():
        noise = ", ".join(f"{k}: s = {v['noise_std']:.2f}" for k, v in rows.items()
                          if "noise_std" in v and v["noise_std"] > 0)
        print(f"  {name}: sampling rate ρ = {rows['ε = 1']['sample_rate']:.3g}; "
              f"noise std per vote count — {noise}; {timing[name]:.1f} s")

    t0 = time.perf_counter()
    mia = mia_one_shot(model, sets[0], (1, 2, 4, 8), num_trials=trials, num_subsets=10,
                       delta=1e-5, num_queries=100, rng=args.seed)
    t_mia = time.perf_counter() - t0
    print(f"\nMembership inference on 1-shot prompts ({sets[0].name}, {trials} trials; finite ε: "
          f"DP-ICL with 10 one-shot prompts, noise for 100 queries):")
    print(f"{'ε':>5s} {'AUC %':>7s} {'± s.e.':>7s} {'ceiling Φ(1/s) %':>17s}")
    for eps in (1.0, 2.0, 4.0, 8.0, math.inf):
        r = mia[eps]
        ceil = f"{100 * r['bound']:.2f}" if "bound" in r else "—"
        print(f"{eps:>5g} {100 * r['auc']:7.2f} {100 * r['se']:7.2f} {ceil:>17s}")
    print(f"  {t_mia:.1f} s\n")
    print(PAPER_TABLE)
    assert all(np.isfinite(v["mean"]) for t in tables.values() for v in t.values())


if __name__ == "__main__":
    main()
