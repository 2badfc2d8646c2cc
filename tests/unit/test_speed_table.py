"""dplib.experiments.dpsgd_tables: the stored DP-SGD speed table the book quotes."""
from __future__ import annotations

import re

import pytest

from dplib.experiments.dpsgd_tables import format_speed_table, load_speed_table, speed_ratios

METHODS = {"non-private", "dplib vmap", "dplib ghost", "vmap baseline", "opacus hooks",
           "opacus ghost"}


def _toy():
    ms = {"non-private": 10.0, "dplib vmap": 50.0, "dplib ghost": 13.0, "vmap baseline": 60.0,
          "opacus hooks": 40.0, "opacus ghost": 20.0}
    return {"results": {"mlp": {"ms_per_step": ms, "peak_mb": {m: 5.0 for m in ms},
                                "noise_ms": 2.0}}}


def test_ratios_and_format_divide_by_the_right_rows():
    t = _toy()
    r = speed_ratios(t, "mlp")
    assert r["dplib ghost"] == pytest.approx(1.3) and r["non-private"] == 1.0
    text = format_speed_table(t)
    ghost = next(line for line in text.splitlines() if "dplib ghost" in line)
    assert "1.30" in ghost and "0.33" in ghost          # × non-private, × Opacus hooks
    assert "(the noise alone)" in text and "0.20" in text


def test_missing_file_and_unknown_model_are_refused(tmp_path):
    with pytest.raises(ValueError, match="path .* does not exist"):
        load_speed_table(tmp_path / "none.json")
    with pytest.raises(ValueError, match="model must be one of"):
        speed_ratios(_toy(), "cnn")


def test_the_stored_table_is_complete_and_has_its_provenance():
    t = load_speed_table()
    assert set(t["results"]) == {"mlp", "cnn", "transformer"}
    for res in t["results"].values():
        assert set(res["ms_per_step"]) == METHODS
        assert set(res["peak_mb"]) == METHODS or res["peak_mb"] == {}
        assert res["noise_ms"] > 0
    prov = t["provenance"]
    assert re.fullmatch(r"[0-9a-f]{40}", prov["commit"])
    assert prov["uncommitted_changes"] is False
    assert "--threads 1" in prov["command"]
