"""Private fine-tuning of a pretrained model versus training from scratch (chapter 13's table).

Run:  python benchmarks/finetune_utility.py [--quick] [--seeds 5] [--threads 1] [--json out.json]

Protocol (dplib.experiments.finetune). Public: the 901 scikit-learn digits of the classes 0–4;
private: 500 images of the classes 5–9 (seed-0 shuffle), test: the other 396 images of 5–9.
An MLP 64 → 128 → 128 → 5 (tanh) is pretrained without privacy on the public images; each
method trains on the private images with DP-SGD (Poisson sampling, C = 1, RDP accountant,
δ = 1e-5, σ calibrated to ε ∈ {1, 3, 8}; and without noise, σ = 0 with the same clipping
and batches): from scratch (same network, random init), last layer (new head), bias terms +
head (BitFit), LoRA rank 4 on both hidden layers + head, full fine-tuning. Fixed settings per
method (SETTINGS in the module; not searched per row), five training seeds (noise, batches,
the scratch initialisation, LoRA's adapters). The public model alone cannot name a private
class: its row is a guess. A sweep of LoRA's rank (--ranks, default 1 2 4 8 16 32; 3 seeds,
every ε and without noise; rank 4 reuses the table's runs) shows accuracy against the number
of trainable parameters. Writes dplib/data/finetune_utility.json with the run's provenance. ``--methods lora``
reruns only those methods' rows (and the rank sweep) and merges them into the stored table,
recording the rerun's own provenance under "reruns".
Runtime: about 20 minutes on one CPU thread of a loaded machine (``--quick``: 2 seeds,
10 epochs, ranks 2 and 8 with 1 seed).
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import torch

from dplib.experiments.finetune import (FINETUNE_TABLE, METHODS, load_finetune_table,
                                       rank_accuracy, table_accuracy, utility_table)
from dplib.provenance import run_provenance

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ranks", type=int, nargs="*", default=None)
    ap.add_argument("--rank-seeds", type=int, default=None)
    ap.add_argument("--methods", nargs="*", default=None, choices=METHODS,
                    help="rerun only these methods (and the rank sweep) and replace their rows "
                         "in the stored table, which keeps its other rows and their provenance")
    ap.add_argument("--json", type=Path, default=None,
                    help=f"where to write the table (default {FINETUNE_TABLE} unless --quick)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    seeds = args.seeds or (2 if args.quick else 5)
    t0 = time.perf_counter()
    ranks = tuple(args.ranks) if args.ranks is not None else \
        ((2, 8) if args.quick else (1, 2, 4, 8, 16, 32))
    rank_seeds = args.rank_seeds or (1 if args.quick else 3)
    methods = tuple(args.methods) if args.methods else METHODS
    table = utility_table(seeds=seeds, quick=args.quick, lora_ranks=ranks,
                          rank_repeats=rank_seeds, methods=methods)
    table["seconds"] = round(time.perf_counter() - t0, 1)
    table["threads"] = args.threads
    table["provenance"] = run_provenance(
        "python benchmarks/finetune_utility.py " + shlex.join(argv if argv is not None
                                                              else sys.argv[1:]), ROOT)
    if methods != METHODS:          # merge: the other methods' rows come from the stored run
        old = load_finetune_table(args.json)
        keep = [r for r in old["rows"] if r["method"] not in methods]
        for key in ("seeds", "quick", "delta", "settings", "n_private", "n_test", "hidden"):
            if old[key] != table[key]:
                raise SystemExit(f"cannot merge: the stored table has {key}={old[key]!r}, this "
                                 f"run {table[key]!r}")
        same = all(old[k] == table[k] for k in ("public_only", "pretrained_public_accuracy"))
        if not same:
            print("warning: the pretrained model's accuracies differ from the stored run's")
        rerun = {"methods": list(methods), "rank_sweep": bool(ranks),
                 "same_pretrained_model": same,
                 "seconds": table["seconds"], "threads": args.threads,
                 "provenance": table["provenance"]}
        table = {**old, "rows": keep + table["rows"], "lora_ranks": table["lora_ranks"],
                 "rank_seeds": table["rank_seeds"], "rank_rows": table["rank_rows"],
                 "reruns": [*old.get("reruns", []), rerun]}
    print(f"public model, outputs 0-4 read as 5-9 (a guess): {100 * table['public_only']:.1f}%")
    print(f"{'method':<12}" + "".join(f"{'eps=' + str(e):>14}" for e in (1.0, 3.0, 8.0))
          + f"{'no noise':>14}")
    for m in METHODS:
        cells = [table_accuracy(table, m, e) for e in (1.0, 3.0, 8.0, None)]
        print(f"{m:<12}" + "".join(f"{f'{a:.1f} ± {s:.1f}':>14}" for a, s in cells))
    for r in table["lora_ranks"]:
        cells = [rank_accuracy(table, r, e) for e in (1.0, 3.0, 8.0, None)]
        print(f"{'lora r=' + str(r):<12}" + "".join(f"{f'{a:.1f} ± {s:.1f}':>14}" for a, s in cells))
    print(f"({table['seconds']:.0f} s)")
    out = args.json or (None if args.quick else FINETUNE_TABLE)
    if out is not None:
        Path(out).write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {out}")
    return table


if __name__ == "__main__":
    main()
