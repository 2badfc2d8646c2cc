"""How long each chapter takes to run alone, as a reader's Colab or an empty folder runs it.

Every chapter notebook is copied into its own empty temporary folder and executed there, top to
bottom, by nbclient (the executor of Jupyter Book and nbconvert) with a fresh ``python3`` kernel,
once in full mode and once in quick mode (``DPBOOK_QUICK=1``, what the tests use). The time is the
wall-clock time of the execution (kernel start included); the slowest cells are listed too. The
machine's load average before each run is printed, since wall-clock numbers mean little on a busy
one; so is the kernel's CPU time (its process and children): the time the chapter would take
alone on one core for single-threaded work, which a shared machine hardly inflates.

    python benchmarks/chapter_times.py                     # every chapter, full and quick
    python benchmarks/chapter_times.py --chapters 07 10 --modes quick
    python benchmarks/chapter_times.py --json times.json   # also write the table as JSON

The book promises (how-to-run page, closing note) that each chapter runs in at most 60 s alone in
full mode and at most 20 s in quick mode on a 2-core CPU; ``--check`` exits non-zero when a
measured time is above those limits.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"
LIMITS = {"full": 60.0, "quick": 20.0}


def _stamp(value: str | None) -> float | None:
    if not value:
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def run_chapter(path: Path, quick: bool, timeout: float, threads: int | None = None) -> dict:
    """Execute ``path`` alone in an empty temporary folder; its total and per-cell times.

    ``threads`` (if given) caps the kernel's OpenMP/MKL threads (``OMP_NUM_THREADS``, which
    PyTorch and NumPy's BLAS read at start)."""
    import nbformat
    import psutil
    from nbclient import NotebookClient

    env_before = os.environ.get("DPBOOK_QUICK")
    with tempfile.TemporaryDirectory(prefix="dpbook-chapter-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copy(path, copy)
        nb = nbformat.read(copy, as_version=4)
        os.environ["DPBOOK_QUICK"] = "1" if quick else "0"
        saved = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
        if threads:
            os.environ.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        cpu = {"s": None}

        def sample(**_):     # the kernel's CPU time so far (its process and children)
            try:
                t = psutil.Process(client.km.provisioner.process.pid).cpu_times()
                cpu["s"] = t.user + t.system + t.children_user + t.children_system
            except Exception:   # no local kernel process to look at: leave it unknown
                pass

        client = NotebookClient(nb, timeout=int(timeout), kernel_name="python3",
                                resources={"metadata": {"path": tmp}}, record_timing=True,
                                on_cell_executed=sample)
        load = os.getloadavg()[0]
        start = time.perf_counter()
        error = None
        try:
            client.execute()
        except Exception as exc:   # report the failure in the table, keep measuring the others
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
        total = time.perf_counter() - start
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if env_before is None:
        os.environ.pop("DPBOOK_QUICK", None)
    else:
        os.environ["DPBOOK_QUICK"] = env_before
    cells = []
    for i, cell in enumerate(nb.cells):
        ex = cell.get("metadata", {}).get("execution", {})
        a, b = _stamp(ex.get("iopub.execute_input")), _stamp(ex.get("shell.execute_reply"))
        if a is not None and b is not None:
            cells.append((i, b - a))
    cells.sort(key=lambda c: -c[1])
    return {"chapter": path.stem, "mode": "quick" if quick else "full", "seconds": round(total, 1),
            "cpu_seconds": None if cpu["s"] is None else round(cpu["s"], 1),
            "load_before": round(load, 2), "slowest_cells": [(i, round(s, 1)) for i, s in cells[:3]],
            "error": error}


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chapters", nargs="*", default=None,
                    help="chapter number prefixes (e.g. 07 10); default: every chapter")
    ap.add_argument("--modes", nargs="*", choices=["full", "quick"], default=["full", "quick"])
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per cell")
    ap.add_argument("--threads", type=int, default=None,
                    help="cap the kernel's OpenMP/MKL threads (default: the libraries' own)")
    ap.add_argument("--dir", type=Path, default=CHAPTERS, help="where the chapters are")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--check", action="store_true",
                    help=f"exit 1 when a time is above its limit {LIMITS}")
    args = ap.parse_args(argv)
    paths = sorted(args.dir.glob("[0-9][0-9]_*.ipynb"))
    if args.chapters:
        paths = [p for p in paths if any(p.name.startswith(c) for c in args.chapters)]
    if not paths:
        ap.error(f"no chapter matches {args.chapters}")
    print(f"# {platform.node()} | {os.cpu_count()} CPUs | python {platform.python_version()} | "
          f"commit {_commit()} | {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC | "
          f"kernel threads: {args.threads or 'default'}")
    print(f"{'chapter':<28}{'mode':<7}{'seconds':>9}{'cpu s':>8}{'limit':>7}{'load':>6}  "
          f"slowest cells (index: s)")
    results, over = [], []
    for path in paths:
        for mode in args.modes:
            r = run_chapter(path, mode == "quick", args.timeout, args.threads)
            results.append(r)
            flag = ""
            if r["error"] or r["seconds"] > LIMITS[mode]:
                over.append(r)
                flag = "  FAILED " + r["error"] if r["error"] else "  OVER"
            cells = ", ".join(f"{i}: {s}" for i, s in r["slowest_cells"])
            cpu_s = "-" if r["cpu_seconds"] is None else f"{r['cpu_seconds']:.1f}"
            print(f"{r['chapter']:<28}{mode:<7}{r['seconds']:>9.1f}{cpu_s:>8}{LIMITS[mode]:>7.0f}"
                  f"{r['load_before']:>6.1f}  {cells}{flag}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"commit": _commit(), "machine": platform.node(),
                                         "cpus": os.cpu_count(), "results": results},
                                        indent=1) + "\n")
    return 1 if args.check and over else 0


if __name__ == "__main__":
    sys.exit(main())
