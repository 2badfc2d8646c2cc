"""One table for every language model the chapter runs DP-ICL on, cached with its provenance.

:func:`model_report` runs the same experiments on any model of :mod:`dplib.icl.loader` —
accuracy against ε on a sentiment and a topic task (:func:`~dplib.experiments.icl.accuracy_table`)
and the 1-shot membership-inference AUC (:func:`~dplib.experiments.icl.mia_one_shot`) — and
``benchmarks/icl_models.py`` stores the results in ``dplib/data/icl_models.json`` with the
command, commit, library versions and device that produced them. The chapter prints the stored
table (:func:`format_model_table`): numbers are never typed by hand.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from .._constraints import Integer, constrained, unconstrained
from .._validate import shown
from ..icl._params import COUNT, RNG
from ..icl._records import DATASET
from ..icl.data import TextDataset
from ..tables import format_table as tables_format
from .icl import accuracy_table, mia_one_shot

__all__ = ["MODEL_TABLE", "REPORT_SETTINGS", "model_report", "load_model_table",
           "format_model_table"]

#: Where ``benchmarks/icl_models.py`` writes the table.
MODEL_TABLE = Path(__file__).resolve().parents[1] / "data" / "icl_models.json"
#: The settings every stored row uses (the chapter's: 4-shot prompts, M = 20, δ = 1e-5).
REPORT_SETTINGS = {"epsilons": (1.0, 3.0, 8.0), "delta": 1e-5, "num_subsets": 20, "shots": 4,
                   "num_runs": 2, "num_queries": 100, "mia_trials": 400, "mia_epsilons": (8.0,)}


@constrained(sentiment=DATASET, topic=DATASET, num_runs=COUNT, num_queries=COUNT,
             mia_trials=Integer(min=4), rng=RNG)
def model_report(model, sentiment: TextDataset, topic: TextDataset, *, num_runs: int = 2,
                 num_queries: int = 100, mia_trials: int = 400, rng) -> dict:
    """Accuracy (%) against ε on both tasks and the 1-shot MIA AUC on ``sentiment``, as JSON.

    Columns as in Wu et al. 2024, Table 1 ("ε = 0 (0-shot)", "ε = 1", …, "ε = ∞ (Agg)", the
    single prompt "ε = ∞"), mean and std over ``num_runs``; MIA AUC at ε = ∞ (one 1-shot
    prompt) and ε = 8 (DP-ICL, 10 subsets, noise for 100 queries; Wu et al. 2024, Table 15).
    """
    runs, queries, trials, gen = num_runs, num_queries, mia_trials, rng
    s = REPORT_SETTINGS
    out: dict = {}
    for ds in (sentiment, topic):
        rows = accuracy_table(model, ds, epsilons=s["epsilons"], delta=s["delta"],
                              num_subsets=s["num_subsets"], shots=s["shots"], num_runs=runs,
                              num_queries=queries, rng=gen)
        out[ds.name] = {k: {"mean": round(v["mean"], 2), "std": round(v["std"], 2)}
                        for k, v in rows.items()}
    mia = mia_one_shot(model, sentiment, s["mia_epsilons"], num_trials=trials, num_subsets=10,
                       delta=s["delta"], num_queries=100, rng=gen)
    out["mia_auc"] = {("inf" if math.isinf(e) else f"{e:g}"): round(100 * r["auc"], 2)
                      for e, r in mia.items()}
    return out


@unconstrained("reads the stored JSON table at a path (any path-like); a missing file is "
               "refused naming the path")
def load_model_table(path: str | Path = MODEL_TABLE) -> dict:
    """The stored table: ``{"provenance": {model: {...}}, "models": {model: report}}``."""
    p = Path(path)
    if not p.exists():
        raise ValueError(f"path {shown(str(p))} does not exist; run `python "
                         f"benchmarks/icl_models.py`")
    return json.loads(p.read_text())


@unconstrained("formats the dict load_model_table or model_report returns; no numeric input "
               "of its own")
def format_model_table(table: dict) -> str:
    """One row per (model, data set): accuracy per column, then the MIA AUC on sentiment."""
    rows, cols = [], None
    for name, rep in table["models"].items():
        for task, accs in rep.items():
            if task == "mia_auc":
                continue
            cols = cols or list(accs)
            mia = rep.get("mia_auc", {}) if task == "sentiment" else {}
            rows.append({"model": name, "data set": task,
                         **{c: f"{accs[c]['mean']:.1f}" for c in cols},
                         "MIA AUC (∞ / 8)": (f"{mia['inf']:.1f} / {mia['8']:.1f}" if mia
                                             else "")})
    return tables_format(rows, ["model", "data set", *(cols or []), "MIA AUC (∞ / 8)"],
                         sep=" | ", pad=False, rule=None)
