"""Chapter 5's distributed experiment driver (dplib.experiments.distributed): the command line
passes its settings to the recipe, runs it in one process without torchrun, and refuses bad
input; ``python -m dplib.experiments.distributed`` is the command the chapter prints. (The
distributed DP-SGD itself, on two processes, is tested in tests/unit/test_distributed.py.)"""
from __future__ import annotations

import subprocess
import sys

import pytest

from dplib.experiments.distributed import digits_recipe, main


def test_main_runs_the_recipe_in_one_process(capsys, monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)          # no torchrun: one process
    out = main(["--epochs", "1", "--sample-rate", "0.2", "--target-epsilon", "4", "--seed", "3"])
    assert out["world_size"] == 1
    assert out["steps"] == 5                                  # T = epochs / q
    assert 3.5 < out["epsilon"] <= 4.0 + 1e-6                # calibrated to the target from below
    assert 0.0 <= out["accuracy"] <= 1.0
    printed = capsys.readouterr().out
    assert "1 process(es), 5 steps" in printed and f"ε = {out['epsilon']:.3f}" in printed
    # the same settings through the function: the command line adds nothing to the run
    again = digits_recipe(epochs=1, sample_rate=0.2, target_epsilon=4.0, seed=3)
    assert again["accuracy"] == out["accuracy"]
    assert again["noise_multiplier"] == out["noise_multiplier"]


def test_recipe_refuses_an_unknown_data_set():
    with pytest.raises(ValueError, match="data"):
        digits_recipe(data="cifar", seed=1)


def test_module_is_the_command_line():
    res = subprocess.run([sys.executable, "-m", "dplib.experiments.distributed", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "--data" in res.stdout and "--target-epsilon" in res.stdout
    bad = subprocess.run([sys.executable, "-m", "dplib.experiments.distributed", "--data", "x"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "--data" in bad.stderr
