"""What the speed benchmarks share (``dpsgd_speed.py``, ``lora_step.py``): the timing loop, and
the import of an older checkout's ``dplib`` so that its steps are timed in the same run.

Methods are interleaved round by round — each round times ``steps`` calls of every method in
turn, after ``warmup`` calls of each — and each method's median round is reported, so a machine
shared with other jobs slows all methods alike instead of whichever ran during a burst. On CUDA
the device is synchronised around every timed round. Speed is measured, never asserted in tests.
"""
from __future__ import annotations

import importlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Callable

import torch

__all__ = ["sync", "time_rounds", "time_methods", "import_checkout"]


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA); nothing on a CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize()


def time_rounds(fns: dict[str, Callable[[], object]], device: torch.device, steps: int,
                rounds: int, warmup: int, clocks: dict[str, Callable[[], float]] | None = None
                ) -> dict[str, dict[str, list[float]]]:
    """Milliseconds per call of every method in every round, by every clock of ``clocks``
    (default ``{"wall": time.perf_counter}``; ``time.process_time`` gives this process's CPU
    time, which on a shared machine does not count the time spent waiting for a core):
    ``{clock: {method: [ms per round]}}``."""
    clocks = clocks or {"wall": time.perf_counter}
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    per_round = {c: {m: [] for m in fns} for c in clocks}
    for _ in range(rounds):
        for m, fn in fns.items():
            sync(device)
            t0 = {c: clock() for c, clock in clocks.items()}
            for _ in range(steps):
                fn()
            sync(device)
            for c, clock in clocks.items():
                per_round[c][m].append((clock() - t0[c]) / steps * 1e3)
    return per_round


def time_methods(fns: dict[str, Callable[[], object]], device: torch.device, steps: int,
                 rounds: int, warmup: int) -> dict[str, float]:
    """Each method's median milliseconds per call over the rounds (module docstring)."""
    return {m: statistics.median(v)
            for m, v in time_rounds(fns, device, steps, rounds, warmup)["wall"].items()}


def import_checkout(checkout: str, name: str = "dplib_before") -> ModuleType:
    """Import ``checkout``/dplib as the package ``name`` (a copy in a temporary folder: its
    imports inside the package are relative) and return its ``training`` subpackage, so that an
    older version's steps run beside the current ones."""
    src = Path(checkout) / "dplib"
    if not (src / "__init__.py").is_file():
        raise ValueError(f"--before must be a checkout with a dplib package, got {checkout!r}")
    dest = Path(tempfile.mkdtemp()) / name
    shutil.copytree(src, dest)
    sys.path.insert(0, str(dest.parent))
    return importlib.import_module(f"{name}.training")
