"""The model runs behind numbers that chapter 10's solutions quote, stored with provenance.

Run:  python benchmarks/icl_solution_numbers.py --write    (about three minutes on 2 CPU cores)

Three measurements, on the book's data (``load_book_data``) with the offline stand-in
(``OfflineICL()``) and the tiny GPT-2 (``load_model("tiny")``):

* **in context or in the weights** — accuracy (%) on the first 200 test queries of each task with
  4 random demonstrations (seed 0) carrying their true labels, the same with every label flipped
  to the next class, and zero-shot;
* **the tiny model's one-shot attack** — ``mia_one_shot`` at ε = ∞ with 2 000 trials (M = 10,
  100 queries, δ = 1e-5, rng 11): AUC and its standard error;
* **the tiny model's ensemble margins** — the share of the first 100 test queries of each task on
  which all M = 20 voters agree (``dp_icl_classify`` at ε = ∞, 4 shots, rng 2).

``--write`` stores them in ``dplib/data/icl_solution_numbers.json`` with the run's provenance
(command, commit, date, versions, machine, seconds); the chapter asserts the numbers its solutions
quote against that file (``dplib.datasets.load_cached_result("icl_solution_numbers")``), so its
run does not repeat these minutes of model evaluation.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
STORE = ROOT / "dplib" / "data" / "icl_solution_numbers.json"


def flip_gap(lm, ds, k: int = 4, n_q: int = 200, *, seed: int) -> dict:
    """Accuracy (%) with true labels, with flipped labels, and zero-shot (see the docstring)."""
    from dplib.icl import PromptBatch, template_for, zero_shot_predict

    tpl, q = template_for(ds), list(ds.test_texts[:n_q])
    truth = ds.test_labels[:n_q]
    demos = np.random.default_rng(seed).choice(len(ds.pool_texts), (n_q, k))
    acc = {}
    for name, labels in (("true", ds.pool_labels),
                         ("flipped", (ds.pool_labels + 1) % len(ds.labels))):
        pred = lm.predict(PromptBatch(tpl, ds.pool_texts, labels, demos, q))
        acc[name] = float(100 * np.mean(pred == truth))
    acc["zero-shot"] = float(100 * np.mean(zero_shot_predict(lm, tpl, q) == truth))
    return acc


def measure() -> dict:
    import torch

    from dplib.experiments.icl import mia_one_shot
    from dplib.icl import OfflineICL, dp_icl_classify, load_book_data, load_model, template_for

    torch.set_num_threads(1)     # as the chapter on a CPU
    sentiment, topic = load_book_data("sentiment"), load_book_data("topic")
    models = {"offline": OfflineICL(), "tiny": load_model("tiny")}
    out = {"flip_gap": {f"{name}/{ds.name}": flip_gap(m, ds, seed=0)
                        for name, m in models.items() for ds in (sentiment, topic)}}
    r = mia_one_shot(models["tiny"], sentiment, (8.0,), num_trials=2000, num_subsets=10,
                     delta=1e-5, num_queries=100, rng=11)[math.inf]
    out["mia_tiny"] = {"auc": float(r["auc"]), "se": float(r["se"]), "trials": 2000}
    out["tiny_unanimous_share"] = {}
    for ds in (sentiment, topic):
        v = dp_icl_classify(models["tiny"], template_for(ds), ds.pool_texts, ds.pool_labels,
                            list(ds.test_texts[:100]), epsilon=math.inf, delta=1e-5,
                            num_subsets=20, shots=4, rng=2)
        h = np.sort(v.votes.histogram, axis=1)
        out["tiny_unanimous_share"][ds.name] = float(np.mean(h[:, -1] - h[:, -2] == 20))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"store the results in {STORE}")
    args = ap.parse_args()
    from dplib.provenance import run_provenance

    t0 = time.perf_counter()
    out = measure()
    prov = run_provenance("python benchmarks/icl_solution_numbers.py --write", ROOT)
    prov["seconds"] = round(time.perf_counter() - t0, 1)
    out["provenance"] = prov
    print(json.dumps(out, indent=1))
    if args.write:
        STORE.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
        print(f"stored in {STORE}")


if __name__ == "__main__":
    main()
