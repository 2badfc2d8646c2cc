"""Private fine-tuning of the tiny GPT-2 on private reviews versus training it from scratch
(chapter 13's text table).

Run:  python benchmarks/finetune_text_utility.py [--quick] [--seeds 5] [--threads 1] [--json out.json]

Protocol (dplib.experiments.finetune_text). Private: the 1,600 reviews of the book's sentiment pool
(first 8 tokens each); test: its 400 test reviews. Each method trains with DP-SGD (Poisson
sampling at q = 1/16, 40 steps, C = 1, ghost clipping, RDP accountant, δ = 1e-5, σ calibrated to
ε ∈ {1, 3, 8}; and without noise, σ = 0 with the same clipping and batches): from scratch (the same
architecture, random init), last layer (the head), LoRA rank 4 on the attention + head, full
fine-tuning (every weight but the position embeddings). Fixed settings per method
(TEXT_SETTINGS), five training seeds (noise, batches, LoRA's adapters, the scratch init). Writes
dplib/data/finetune_text_utility.json with the run's provenance (the rows so far are kept in
the output's .partial file while it runs).
Runtime: about 50 minutes on one CPU thread of a heavily loaded machine (``--quick``: 2 seeds,
4 steps).
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import torch

from dplib.experiments.finetune import table_accuracy
from dplib.experiments.finetune_text import TEXT_METHODS, TEXT_TABLE, text_utility_table
from dplib.provenance import run_provenance

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None,
                    help=f"where to write the table (default {TEXT_TABLE} unless --quick)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    seeds = args.seeds or (2 if args.quick else 5)
    out = args.json or (None if args.quick else TEXT_TABLE)
    t0 = time.perf_counter()
    table: dict = {}
    for m in TEXT_METHODS:            # one method at a time, so a long run keeps its rows
        part = text_utility_table(seeds=seeds, methods=(m,), quick=args.quick)
        table = {**part, "rows": table.get("rows", []) + part["rows"]}
        if out is not None:
            Path(str(out) + ".partial").write_text(json.dumps(table, indent=1) + "\n")
        print(f"{m}: {time.perf_counter() - t0:.0f} s", flush=True)
    table["seconds"] = round(time.perf_counter() - t0, 1)
    table["threads"] = args.threads
    table["provenance"] = run_provenance(
        "python benchmarks/finetune_text_utility.py " + shlex.join(argv if argv is not None
                                                                   else sys.argv[1:]), ROOT)
    print(f"{'method':<12}" + "".join(f"{'eps=' + str(e):>14}" for e in (1.0, 3.0, 8.0))
          + f"{'no noise':>14}")
    for m in TEXT_METHODS:
        cells = [table_accuracy(table, m, e) for e in (1.0, 3.0, 8.0, None)]
        print(f"{m:<12}" + "".join(f"{f'{a:.1f} ± {s:.1f}':>14}" for a, s in cells))
    print(f"({table['seconds']:.0f} s)")
    if out is not None:
        Path(out).write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n")
        Path(str(out) + ".partial").unlink(missing_ok=True)
        print(f"wrote {out}")
    return table


if __name__ == "__main__":
    main()
