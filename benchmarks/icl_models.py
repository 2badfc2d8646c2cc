"""DP-ICL on each language model of the chapter, stored as one table with its provenance.

Run:  python benchmarks/icl_models.py                      (offline stand-in and the tiny GPT-2;
                                                            a minute or two on 2 CPU cores)
      python benchmarks/icl_models.py --model gpt2          (in Colab with a GPU: adds GPT-2 on
                                                            SST-2 / AG News to the table)
      python benchmarks/icl_models.py --model NAME --revision <40-hex hub commit>
      python benchmarks/icl_models.py --check               (recompute, compare with the table)

Each model gets the same experiments (dplib.experiments.icl_report.model_report: accuracy against ε on a
sentiment and a topic task, 4-shot prompts, M = 20, δ = 1e-5, noise for 100 queries; the 1-shot
MIA AUC at ε = ∞ and 8), and its row in dplib/data/icl_models.json records the command, commit,
library versions, device, data and the time taken. Rows of other models are kept.
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def run_model(name: str, revision: str | None, seed: int) -> tuple[dict, dict]:
    """(report, provenance) for one model."""
    import torch

    from dplib import __version__
    from dplib.experiments.icl_report import REPORT_SETTINGS, model_report
    from dplib.icl import load_datasets, load_model

    t0 = time.perf_counter()
    model = load_model(name, revision=revision)
    sentiment, topic = load_datasets(name)
    rep = model_report(model, sentiment, topic, num_runs=REPORT_SETTINGS["num_runs"],
                       num_queries=REPORT_SETTINGS["num_queries"],
                       mia_trials=REPORT_SETTINGS["mia_trials"], rng=seed)
    seconds = time.perf_counter() - t0
    versions = {"dplib": __version__, "torch": torch.__version__,
                "python": platform.python_version()}
    try:
        import transformers
        versions["transformers"] = transformers.__version__
    except ImportError:
        pass
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    device = getattr(model, "device", None)
    prov = {"command": f"python benchmarks/icl_models.py --model {name}"
                       + (f" --revision {revision}" if revision else ""),
            "revision": revision or getattr(model, "revision", None),
            "data": f"{sentiment.name}, {topic.name}", "seed": seed, "commit": commit,
            "date": datetime.date.today().isoformat(), "seconds": round(seconds, 1),
            "device": str(device) if device is not None else "cpu (numpy)",
            "settings": {k: list(v) if isinstance(v, tuple) else v
                         for k, v in REPORT_SETTINGS.items()}, **versions}
    return rep, prov


def main(argv: list[str] | None = None) -> dict:
    from dplib.experiments.icl_report import MODEL_TABLE, format_model_table

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", help="offline, tiny or a hub name (repeatable)")
    ap.add_argument("--revision", default=None, help="hub commit for a model the book does not pin")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=str(MODEL_TABLE))
    ap.add_argument("--check", action="store_true", help="recompute and compare, write nothing")
    args = ap.parse_args(argv)
    names = args.model or ["offline", "tiny"]
    out = Path(args.out)
    table = json.loads(out.read_text()) if out.exists() else {"provenance": {}, "models": {}}
    for name in names:
        rep, prov = run_model(name, args.revision, args.seed)
        if args.check:
            old = table["models"][name]
            worst = max(abs(rep[t][c]["mean"] - old[t][c]["mean"])
                        for t in rep if t != "mia_auc" for c in rep[t])
            print(f"{name}: largest difference from the stored table {worst:.2f} points")
            continue
        table["models"][name], table["provenance"][name] = rep, prov
        print(f"{name}: {prov['seconds']} s")
    if not args.check:
        out.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n")
    print(format_model_table(table))
    return table


if __name__ == "__main__":
    main()
