"""Chapter 13's stored text table (dplib/data/finetune_text_utility.json): its layout, and the
driver reproducing stored rows exactly (same code, same seeds, one CPU thread)."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from dplib.experiments.finetune import table_accuracy  # noqa: E402
from dplib.experiments.finetune_text import (TEXT_METHODS, TEXT_SETTINGS,  # noqa: E402
                                             TEXT_TABLE, finetune_text, text_utility_table)


@pytest.fixture(scope="module")
def table() -> dict:
    return json.loads(TEXT_TABLE.read_text())


def test_the_stored_table_holds_every_method_level_and_seed(table):
    rows = table["rows"]
    assert table["seeds"] == 5 and not table["quick"] and table["delta"] == 1e-5
    assert table["settings"] == TEXT_SETTINGS
    cells = {(r["method"], r["epsilon"], r["seed"]) for r in rows}
    assert cells == {(m, e, s) for m in TEXT_METHODS for e in (1.0, 3.0, 8.0, None)
                     for s in range(5)}
    assert len(rows) == len(cells)
    assert all(0.0 <= r["accuracy"] <= 1.0 and r["steps"] == 40 for r in rows)
    # what each recipe trains: the head (64·2 + 2), LoRA rank 4 on c_attn of 2 layers + head,
    # every weight but the 320 × 64 position table
    trainable = {r["method"]: r["trainable"] for r in rows}
    assert trainable == {"last_layer": 130, "lora": 130 + 2 * 4 * (64 + 192),
                         "full": 132_994 - 320 * 64, "scratch": 132_994 - 320 * 64}
    # σ is calibrated to the same (ε, δ, q, T) for every method; no noise without ε
    for e in (1.0, 3.0, 8.0):
        assert len({round(r["noise_multiplier"], 9) for r in rows if r["epsilon"] == e}) == 1
    assert all(r["noise_multiplier"] == 0.0 for r in rows if r["epsilon"] is None)
    a, _ = table_accuracy(table, "lora", 1.0)
    assert 50.0 < a <= 100.0         # percent


@pytest.mark.slow
@pytest.mark.parametrize("method, epsilon, seed", [("lora", 1.0, 2)])
def test_the_driver_reproduces_stored_rows(table, method, epsilon, seed):
    """One row re-run (about 10 s on one idle thread; slow: it trains a transformer for 40
    DP-SGD steps): LoRA's seeded adapters, the noise and the batches must give the stored row
    to the last digit."""
    torch.set_num_threads(1)
    stored = next(r for r in table["rows"] if (r["method"], r["epsilon"], r["seed"])
                  == (method, epsilon, seed))
    assert finetune_text(method, epsilon, seed=seed) == stored


@pytest.mark.parametrize("kwargs", [dict(seeds=0), dict(epsilons=()), dict(epsilons=(0.0,)),
                                    dict(methods=("bias",)), dict(quick="yes")])
def test_the_table_driver_refuses_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        text_utility_table(**kwargs)


def test_finetune_text_refuses_bad_arguments():
    with pytest.raises(ValueError, match="method"):
        finetune_text("bias", 1.0, seed=0)
    with pytest.raises(ValueError, match="epsilon"):
        finetune_text("lora", -1.0, seed=0)
    with pytest.raises(ValueError, match="seed"):
        finetune_text("lora", 1.0, seed=-1)
