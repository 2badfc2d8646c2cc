"""Chapter 5's stored results of the DP-SGD benchmarks, which the book quotes: the speed table
(``benchmarks/dpsgd_speed.py --save``) and the accuracy-per-ε table
(``benchmarks/dpsgd_utility.py --save``), each with its provenance.

The speed benchmark times one full step (forward, backward, per-example clipping, noise, update) of
each implementation on the same model and batch, interleaved round by round, and records peak
memory, the time to draw the noise alone, the ghost path's choice per layer, and the command,
commit and versions it ran with. Speed depends on the machine: the table says where it was
measured, and the benchmark re-measures it anywhere.
"""
from __future__ import annotations

import json
from pathlib import Path

from .._common_params import NONNEGATIVE, PATH, TEXT, optional
from .._constraints import Custom, constrained
from .._validate import shown
from ..tables import format_table

__all__ = ["SPEED_TABLE", "UTILITY_TABLE", "load_speed_table", "format_speed_table",
           "speed_ratios", "load_utility_table", "utility_accuracy"]

#: Where ``benchmarks/dpsgd_speed.py --save`` stores its table (package data).
SPEED_TABLE = Path(__file__).resolve().parents[1] / "data" / "dpsgd_speed.json"
#: Where ``benchmarks/dpsgd_utility.py --save`` stores its table (package data).
UTILITY_TABLE = Path(__file__).resolve().parents[1] / "data" / "dpsgd_utility.json"


def _load(path: str | Path, script: str) -> dict:
    p = Path(path)
    if not p.exists():
        raise ValueError(f"path {shown(str(p))} does not exist; run `python benchmarks/{script}`")
    return json.loads(p.read_text())


def _table(kind: str, key: str, types: tuple) -> Custom:
    """A stored table: a dict whose ``key`` entry is of one of ``types``."""
    what = f"a stored {kind} table (a dict with '{key}')"

    def check(name: str, value: object) -> dict:
        if not isinstance(value, dict) or not isinstance(value.get(key), types):
            raise ValueError(f"{name} must be {what}, got {shown(value)}"[:300])
        return value
    return Custom(check, what, [None, {}, "abc", 3, {key: "x"}])


_UTILITY = _table("utility", "results", (list,))
_SPEED = _table("speed", "results", (dict,))


@constrained(path=PATH)
def load_speed_table(path: str | Path = SPEED_TABLE) -> dict:
    """The stored speed table: ``{"device", "threads", "batch", "results": {model: {...}},
    "provenance": {...}}``."""
    return _load(path, "dpsgd_speed.py --threads 1 --save")


@constrained(path=PATH)
def load_utility_table(path: str | Path = UTILITY_TABLE) -> dict:
    """The stored accuracy-per-ε table: ``{"protocol", "results": [one row per (recipe, ε)],
    "provenance": {...}, ...}``."""
    return _load(path, "dpsgd_utility.py --save")


@constrained(table=_UTILITY, recipe=TEXT, epsilon=optional(NONNEGATIVE))
def utility_accuracy(table: dict, recipe: str, epsilon: float | None) -> tuple[float, float]:
    """(mean, std) test accuracy in % of ``recipe`` at ``epsilon`` (None: non-private; 0: the
    public-data-only row); the pair must be one of the table's rows."""
    for row in table["results"]:
        if row["recipe"] == recipe and row["epsilon"] == epsilon:
            return 100 * row["test_accuracy_mean"], 100 * row["test_accuracy_std"]
    have = sorted({(r["recipe"], r["epsilon"]) for r in table["results"]}, key=str)
    raise ValueError(f"(recipe, epsilon) must be one of {have}, got "
                     f"{shown((recipe, epsilon))}"[:600])


@constrained(table=_SPEED, model=TEXT)
def speed_ratios(table: dict, model: str) -> dict[str, float]:
    """Milliseconds per step of every method of ``model`` (one of the table's models) divided by
    the non-private step's."""
    if model not in table["results"]:
        raise ValueError(f"model must be one of {sorted(table['results'])} (a stored speed "
                         f"table's models), got {shown(model)}")
    ms = table["results"][model]["ms_per_step"]
    return {m: v / ms["non-private"] for m, v in ms.items()}


@constrained(table=_SPEED)
def format_speed_table(table: dict) -> str:
    """One row per (model, method): ms per step, × non-private, × Opacus hooks, peak MB."""
    rows = []
    for model, res in table["results"].items():
        ms, mem = res["ms_per_step"], res.get("peak_mb", {})
        for m, v in ms.items():
            rows.append({"model": model, "method": m, "ms/step": f"{v:.1f}",
                         "× non-private": f"{v / ms['non-private']:.2f}",
                         "× Opacus hooks": f"{v / ms['opacus hooks']:.2f}",
                         "peak MB": f"{mem[m]:.0f}" if m in mem else ""})
        rows.append({"model": model, "method": "(the noise alone)",
                     "ms/step": f"{res['noise_ms']:.1f}",
                     "× non-private": f"{res['noise_ms'] / ms['non-private']:.2f}"})
    numbers = ("ms/step", "× non-private", "× Opacus hooks", "peak MB")
    return format_table(rows, ["model", "method", *numbers], align=dict.fromkeys(numbers, ">"))
