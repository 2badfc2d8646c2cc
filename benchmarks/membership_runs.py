"""Chapter 9's membership-inference runs, stored: targets, shadows, attacks, widget, canary.

Run:  python benchmarks/membership_runs.py [--json out.json] [--threads 1]

Trains, with the chapter's recipe (``dplib.experiments.attacks.MIA_RECIPE``: DP-Adam, q = 0.1, 20 epochs,
lr 0.02, C = 1, δ = 1e-5), 4 targets and 32 shadows on the 1,797-digit pool for no DP and for
ε = 8, 3, 1; 64 shadows once more without DP; the explore widget's 8 populations; and the canary
audit's 2 × 64 runs per setting; attacks them and writes what chapter 9 quotes and draws
(:func:`dplib.experiments.membership.membership_runs`) to dplib/data/membership_runs.json with
the run's provenance. Runs on the CPU with one thread, like a CPU run of the chapter, so the
stored numbers are those the chapter's code gives there.
Runtime: about a minute of CPU time on one thread (65 s; 12 minutes of wall-clock time on a
heavily shared 2-core machine).
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import torch

from dplib.experiments.membership import membership_runs
from dplib.provenance import run_provenance

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "dplib" / "data" / "membership_runs.json"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=OUT, help=f"where to write (default {OUT})")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0, c0 = time.perf_counter(), time.process_time()
    rec = membership_runs(device="cpu")
    rec["provenance"] = {
        **run_provenance(("python benchmarks/membership_runs.py " + shlex.join(
            argv if argv is not None else sys.argv[1:])).strip(), ROOT),
        "seconds": round(time.perf_counter() - t0, 1),
        "cpu_seconds": round(time.process_time() - c0, 1), "threads": args.threads}
    args.json.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {args.json} ({args.json.stat().st_size / 1e3:.0f} kB) in "
          f"{rec['provenance']['seconds']:.0f} s")
    return rec


if __name__ == "__main__":
    main()
