"""Chapter 5's distributed run, stored: the digits recipe on two processes and on one.

Run:  python benchmarks/dpsgd_distributed.py            # print the runs
      python benchmarks/dpsgd_distributed.py --write    # store them in dplib/data/dpsgd_distributed.json

``dplib.experiments.distributed.digits_recipe`` (chapter 5's logistic regression on digits, q = 0.1,
10 epochs, target ε = 2, C = 1, seed 0) is trained on two local processes
(``dplib.training.distributed.launch``: gloo, one contiguous shard each, the noise drawn once on
rank 0) and in this process on the whole training split. Starting the two processes (each
imports torch) costs more CPU time than the training itself, which is why the chapter's quick
mode reads the two-process run from this file; the chapter runs the one-process recipe itself
and checks that it agrees with the stored run (same σ, T and ε, test accuracy within 0.005).
Every run is seeded: an experiment, not a release.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dplib.experiments.distributed import digits_recipe  # noqa: E402
from dplib.provenance import run_provenance  # noqa: E402
from dplib.training.distributed import launch  # noqa: E402

STORE = ROOT / "dplib" / "data" / "dpsgd_distributed.json"
SEED = 0     # the chapter's seed


def run() -> dict:
    import torch
    torch.set_num_threads(1)
    recipe = partial(digits_recipe, seed=SEED)
    two = launch(recipe, 2, timeout=600)
    one = recipe()
    # every rank returns the same run (its own wall-clock seconds aside)
    same = len({(r["epsilon"], r["noise_multiplier"], r["steps"], r["accuracy"]) for r in two})
    return {"recipe": "digits", "seed": SEED, "one": one, "two": two[0], "ranks_agree": same == 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help=f"store the runs in {STORE}")
    args = parser.parse_args()
    t0 = time.perf_counter()
    out = run()
    out["provenance"] = {**run_provenance("python benchmarks/dpsgd_distributed.py --write", ROOT),
                         "seconds": time.perf_counter() - t0}
    print(json.dumps(out, indent=1))
    if args.write:
        STORE.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {STORE}")


if __name__ == "__main__":
    main()
