"""Private synthetic data on the offline Adult-like table: MWEM and MST at several ε.

Run:  python benchmarks/synthetic_utility.py            # print the table
      python benchmarks/synthetic_utility.py --write    # store it in dplib/data/synthetic_utility.json

For each ε in ``EPSILONS`` and each seed in ``SEEDS``: MWEM (all 2-way marginals as the workload,
``MWEM_ROUNDS`` rounds, pure ε-DP) and MST (δ = ``DELTA``) are run on the training split of
``dplib.synthetic.load_adult_like()`` (5000 records, 25 % held out with ``split(0.25, rng=0)``),
and each synthetic set is scored by its mean and largest L1 error on the 2-way marginals, its
mean L1 error on the 3-way marginals (``marginal_error``), and the held-out accuracy of a
logistic regression trained on it (``downstream_accuracy``; the same on the real training split
is the baseline). Also stored: the membership audits of both generators on a 100-record,
3-column slice with its rarest record as the target (``synthetic_membership_audit``), and
MWEM's audit at each ε of ``AUDIT_LADDER`` (``LADDER_RUNS`` runs per side). MST's
Private-PGM step is compiled by jax once per tree shape (20–35 s each on two busy cores), which
is why a chapter reads these runs instead of repeating them (about 6 minutes in all). Every run
is seeded: an experiment, not a release.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dplib import synthetic as S  # noqa: E402
from dplib.provenance import run_provenance  # noqa: E402

STORE = ROOT / "dplib" / "data" / "synthetic_utility.json"
EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)
SEEDS = (0, 1, 2)
DELTA = 1e-5
MWEM_ROUNDS = 15
AUDIT = dict(epsilon=2.0, runs=200, rounds=2, mst_runs=80, rng=11)
#: MWEM's audit at several ε (the same slice, target and settings): what the attack certifies.
AUDIT_LADDER = (0.5, 2.0, 8.0, 32.0)
LADDER_RUNS = 1000


def audit_slice() -> tuple[S.TabularData, int]:
    """100 records, 3 columns of an independent draw (rng=0), and the index of the rarest."""
    data = S.load_adult_like(2000, rng=0).select(("age", "sex", "income"))
    data = data.with_records(data.records[:100])
    counts = data.marginal(data.columns)[tuple(data.records.T)]
    return data, int(np.argmin(counts))


def scores(train: S.TabularData, test: S.TabularData, synth: S.TabularData) -> dict:
    wl2, wl3 = S.all_marginals(train, 2), S.all_marginals(train, 3)
    e2 = S.marginal_error(train, synth, wl2)
    return {"two_way_mean": e2.mean, "two_way_max": e2.max,
            "three_way_mean": S.marginal_error(train, synth, wl3).mean,
            "accuracy": S.downstream_accuracy(synth, test)}


def run() -> dict:
    data = S.load_adult_like()
    train, test = data.split(0.25, rng=0)
    wl2 = S.all_marginals(train, 2)
    out = {"epsilons": list(EPSILONS), "seeds": list(SEEDS), "delta": DELTA,
           "mwem_rounds": MWEM_ROUNDS, "n_train": train.n, "n_test": test.n,
           "real_accuracy": S.downstream_accuracy(train, test),
           "majority_accuracy": float(max(np.mean(test.records[:, -1] == v) for v in (0, 1))),
           "mwem": [], "mst": []}
    for eps in EPSILONS:
        for seed in SEEDS:
            t0 = time.perf_counter()
            r = S.mwem(train, wl2, eps, rounds=MWEM_ROUNDS, rng=seed)
            row = {"epsilon": eps, "seed": seed, "seconds": time.perf_counter() - t0,
                   **scores(train, test, r.synthetic)}
            out["mwem"].append(row)
            print("mwem", row, flush=True)
            t0 = time.perf_counter()
            m = S.mst(train, eps, DELTA, rng=seed)
            row = {"epsilon": eps, "seed": seed, "seconds": time.perf_counter() - t0,
                   "rho": m.rho, "tree": [list(e) for e in m.tree],
                   **scores(train, test, m.synthetic)}
            out["mst"].append(row)
            print("mst", row, flush=True)
    small, target = audit_slice()
    audits = {}
    for method, runs in (("mwem", AUDIT["runs"]), ("mst", AUDIT["mst_runs"])):
        t0 = time.perf_counter()
        a = S.synthetic_membership_audit(small, target, method=method, epsilon=AUDIT["epsilon"],
                                         delta=DELTA, runs=runs, rounds=AUDIT["rounds"],
                                         rng=AUDIT["rng"])
        audits[method] = {"epsilon": a.epsilon, "delta": a.delta, "runs": a.runs,
                          "epsilon_lower": a.epsilon_lower, "refutes": a.refutes,
                          "tpr": a.audit.tpr, "fpr": a.audit.fpr,
                          "seconds": time.perf_counter() - t0}
        print("audit", method, audits[method], flush=True)
    ladder = []
    for eps in AUDIT_LADDER:
        a = S.synthetic_membership_audit(small, target, method="mwem", epsilon=eps,
                                         runs=LADDER_RUNS, rounds=AUDIT["rounds"],
                                         rng=AUDIT["rng"])
        ladder.append({"epsilon": eps, "runs": LADDER_RUNS, "epsilon_lower": a.epsilon_lower,
                       "refutes": a.refutes,
                       "tpr": a.audit.tpr, "fpr": a.audit.fpr})
        print("audit ladder", ladder[-1], flush=True)
    out["audits"] = {"target": target, "columns": list(small.columns), "n": small.n,
                     "settings": AUDIT, **audits, "mwem_ladder": ladder}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help=f"store the run in {STORE}")
    args = parser.parse_args()
    warnings.simplefilter("ignore")          # mbi's notes on jax's float32 mode
    t0 = time.perf_counter()
    out = run()
    out["provenance"] = {**run_provenance("python benchmarks/synthetic_utility.py --write", ROOT),
                         "seconds": time.perf_counter() - t0}
    if args.write:
        STORE.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {STORE}")


if __name__ == "__main__":
    main()
