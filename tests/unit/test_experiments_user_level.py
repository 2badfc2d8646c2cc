"""Chapter 13's user-level utility sweep (dplib.experiments.user_level): the stored table's
loader refuses what is not a sweep, the helpers read it right, the stored table is complete and
consistent, and the driver reproduces a stored cell."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dplib.experiments import user_level as UL


def _row(unit="user", cap=2, eps=1.0, seed=0, acc=0.5):
    return {"unit": unit, "cap": cap, "epsilon": eps, "seed": seed, "accuracy": acc,
            "noise_multiplier": 3.0}


def _table(rows=None):
    return {"rows": rows if rows is not None else [_row(), _row(seed=1, acc=0.7)],
            "privacy": [{"epsilon": 1.0, "cap": 2, "noise_multiplier": 3.0, "user_epsilon": 1.0,
                         "group_epsilon": math.inf, "els_epsilon": 2.0}],
            "provenance": {"commit": "abc"}, "caps": [2], "epsilons": [1.0]}


@pytest.mark.parametrize("bad", [
    [1, 2],                                                     # not a dict
    {"rows": [], "privacy": []},                                # no provenance
    {**_table(), "rows": "rows"},                               # rows not a list
    _table([_row(acc=1.5)]),                                    # accuracy outside [0, 1]
    _table([_row(unit="device")]),                              # unknown unit
    _table([{k: v for k, v in _row().items() if k != "seed"}]), # a row without its seed
    _table([_row(cap=2.0)]),                                    # a float cap
    {**_table(), "privacy": [{"epsilon": 1.0, "cap": 2}]},      # privacy entry incomplete
])
def test_loader_refuses_what_is_not_a_sweep(tmp_path, bad):
    p = tmp_path / "t.json"
    p.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="path"):
        UL.load_user_level_table(p)


def test_loader_refuses_missing_and_non_json_files(tmp_path):
    with pytest.raises(ValueError, match="path"):
        UL.load_user_level_table(tmp_path / "none.json")
    p = tmp_path / "t.json"
    p.write_text("{not json")
    with pytest.raises(ValueError, match="path"):
        UL.load_user_level_table(p)
    p.write_text(json.dumps(_table()))                         # a valid sweep reads back
    t = UL.load_user_level_table(p)
    assert t["rows"][1]["accuracy"] == 0.7 and math.isinf(t["privacy"][0]["group_epsilon"])


def test_accuracy_and_privacy_helpers():
    t = _table()
    m, s = UL.user_level_accuracy(t, "user", 2, 1.0)
    assert m == pytest.approx(60.0) and s == pytest.approx(100 * np.std([0.5, 0.7], ddof=1))
    with pytest.raises(ValueError, match="cap"):
        UL.user_level_accuracy(t, "record", 2, 1.0)             # no record-level rows
    with pytest.raises(ValueError, match="epsilon"):
        UL.user_level_accuracy(t, "user", 2, 3.0)
    assert UL.user_level_privacy(t, 2, 1.0)["els_epsilon"] == 2.0
    with pytest.raises(ValueError, match="cap"):
        UL.user_level_privacy(t, 5, 1.0)


def test_stored_sweep_is_complete_and_consistent():
    t = UL.load_user_level_table()
    assert t["provenance"]["command"].startswith("python benchmarks/user_level_utility.py")
    assert t["provenance"]["commit"] != "unknown" and t["seeds"] == 5
    assert t["caps"] == list(UL.CAPS) and t["epsilons"] == [*UL.EPSILONS, None]
    assert t["settings"] == UL.SETTINGS and t["delta"] == UL.DELTA
    for eps in t["epsilons"]:
        for cap in t["caps"]:
            for unit in UL.UNITS:
                rows = [r for r in t["rows"]
                        if (r["unit"], r["cap"], r["epsilon"]) == (unit, cap, eps)]
                assert sorted(r["seed"] for r in rows) == list(range(5))
            # one record per writer: the two units are the same algorithm on the same records
            if cap == 1:
                u, r = (sorted((x["seed"], x["accuracy"]) for x in t["rows"]
                               if (x["unit"], x["cap"], x["epsilon"]) == (k, 1, eps))
                        for k in UL.UNITS)
                assert u == r
    for p in t["privacy"]:
        assert p["user_epsilon"] == pytest.approx(p["epsilon"], rel=1e-3)
        # the group lemma never beats the tight analysis, which never beats the user-level run
        # by more than the accountants' difference (ELS by PLD, the run's ε by RDP)
        assert p["group_epsilon"] >= p["els_epsilon"] * (1 - 1e-9)
        if p["cap"] == 1:
            assert p["group_epsilon"] == pytest.approx(p["user_epsilon"], rel=1e-6)


def test_driver_reproduces_a_stored_cell():
    import torch
    torch.set_num_threads(1)
    t = UL.load_user_level_table()
    stored = next(r for r in t["rows"]
                  if (r["unit"], r["cap"], r["epsilon"], r["seed"]) == ("user", 2, 8.0, 0))
    run = UL.user_level_run(UL.writer_split(seed=0), "user", 2, 8.0, seed=0)
    assert run["noise_multiplier"] == pytest.approx(stored["noise_multiplier"], rel=1e-12)
    # the same run: equal up to one test digit (390), for floating-point differences between
    # machines; on the machine that stored it the accuracy is the same number
    assert run["accuracy"] == pytest.approx(stored["accuracy"], abs=1.01 / 390)
