"""Chapter 10's private product summaries, stored with provenance.

Run:  python benchmarks/icl_summaries.py --write    (about ten seconds of CPU time)

The table of chapter 10's section on private summarisation: ``summarise_products`` on the
sentiment pool of the book's data (``load_book_data("sentiment")``) with the offline stand-in
(``OfflineICL()``), for the twelve products of ``dplib.icl.data.PRODUCTS``, each of the methods
per-token noise, ESA, KSA with the joint exponential mechanism and KSA with PTR, at ε = 1, 3, 8
and ∞ (δ = 1e-5), M = 40 subsets of 2 exemplars, 40 public candidates, seeds (``rng``) 0 and 1.
Every run's per-product F1 scores, mean F1 and noise parameter are stored; the chapter prints
the means over the seeds and repeats one run (ESA at ε = 3, seed 0) to check it against the
stored one.

``--write`` stores them in ``dplib/data/icl_summaries.json`` with the run's provenance (command,
commit, date, versions, machine, seconds).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
STORE = ROOT / "dplib" / "data" / "icl_summaries.json"
METHODS = ("per_token", "esa", "ksa_em", "ksa_ptr")
EPSILONS = (1.0, 3.0, 8.0, math.inf)
SEEDS = (0, 1)
SETTING = dict(delta=1e-5, num_subsets=40, shots=2, num_candidates=40)


def run_key(method: str, epsilon: float, seed: int) -> str:
    """The JSON key of one run: ``"esa/3/0"`` (ε = ∞ written ``inf``)."""
    return f"{method}/{epsilon:g}/{seed}"


def measure() -> dict:
    from dplib.experiments.icl import summarise_products
    from dplib.icl import OfflineICL, load_book_data
    from dplib.icl.data import PRODUCTS

    model, sentiment = OfflineICL(), load_book_data("sentiment")
    runs = {}
    for method in METHODS:
        for eps in EPSILONS:
            for seed in SEEDS:
                r = summarise_products(model, sentiment, method=method, epsilon=eps,
                                       products=PRODUCTS, rng=seed, **SETTING)
                runs[run_key(method, eps, seed)] = {
                    "f1": [float(v) for v in r["f1"]], "mean_f1": float(r["mean_f1"]),
                    "noise": float(r["noise"])}
    return {"setting": {**SETTING, "products": list(PRODUCTS), "methods": list(METHODS),
                        "epsilons": [f"{e:g}" for e in EPSILONS], "seeds": list(SEEDS)},
            "runs": runs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"store the results in {STORE}")
    args = ap.parse_args()
    from dplib.provenance import run_provenance

    t0 = time.perf_counter()
    out = measure()
    prov = run_provenance("python benchmarks/icl_summaries.py --write", ROOT)
    prov["seconds"] = round(time.perf_counter() - t0, 1)
    out["provenance"] = prov
    for method in METHODS:
        print(f"{method:10s}" + "".join(
            f"{sum(out['runs'][run_key(method, e, s)]['mean_f1'] for s in SEEDS) / len(SEEDS):8.3f}"
            for e in EPSILONS))
    if args.write:
        STORE.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
        print(f"stored in {STORE}")


if __name__ == "__main__":
    main()
