"""Execute the book's chapter notebooks into Jupyter Book's execution cache, several at a time.

``make book`` and ``make test`` run this before ``jupyter-book build``::

    python tools/execute_chapters.py --cache _build/.jupyter_cache --jobs 2

Why: Jupyter Book 1.x (myst-nb) executes the notebooks of a build one after another, so on a
two-core machine one core waits while a chapter runs. This script executes every chapter that the
cache does not already hold, ``--jobs`` at a time, exactly as myst-nb's ``execute_notebooks:
cache`` mode would (jupyter-cache's ``single_nb_execution`` in the notebook's own folder, with the
timeout and ``allow_errors`` of ``_config.yml``), and stores each run in the same cache under the
same key (jupyter-cache hashes the code cells and the kernel spec). The build then finds every
chapter in the cache and executes nothing. Nothing else changes: a chapter edited after this
script ran is simply executed by the build, as before.

``--executed DIR`` takes a chapter's outputs from ``DIR/NAME.ipynb`` instead of executing it,
when that notebook is the chapter's nbval run in the Colab-like sandbox in the same mode (quick,
the website's frames; tools/colab_sandbox.py writes it), newer than every file of dplib, and its
code cells are the chapter's:
``make test`` then executes every chapter once, not twice. The outputs are stored for the
chapter's own notebook, so the cache key is the one the build computes.

A chapter that raises is reported with its traceback and the script exits 1 (the build would
fail on it too, later). The environment is inherited: ``DPBOOK_QUICK=1`` gives the quick run,
which is why the quick build keeps its own cache folder. Like the build (tools/dpbook_sphinx.py),
this script sets ``DPBOOK_WIDGET_FRAMES=1`` for the kernels, so each interactive figure is drawn
as the website's frames: the outputs stored are the ones the build would have made.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import sys
import time
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]


def toc_notebooks(root: Path = ROOT) -> list[Path]:
    """The ``.ipynb`` files that ``_toc.yml`` names, in reading order."""
    toc = yaml.safe_load((root / "_toc.yml").read_text())
    found: list[Path] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "file" in node:
                path = root / f"{node['file']}.ipynb"
                if path.exists():
                    found.append(path)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(toc)
    return found


def _settings(root: Path = ROOT) -> dict:
    """The ``execute`` section of ``_config.yml`` (timeout, allow_errors)."""
    return yaml.safe_load((root / "_config.yml").read_text()).get("execute", {})


def _execute(path: str, timeout: int, allow_errors: bool) -> tuple[str, object, float, str]:
    """Run one notebook in its folder (a worker process); return it or the traceback."""
    from jupyter_cache.executors.utils import single_nb_execution
    nb = nbformat.read(path, as_version=4)
    result = single_nb_execution(nb, cwd=str(Path(path).parent), timeout=timeout,
                                 allow_errors=allow_errors, meta_override=True)
    return path, nb, result.time, (result.exc_string or "") if result.err else ""


def _newest_change(folder: Path) -> float:
    """The latest modification time of a source or data file under ``folder`` (not bytecode)."""
    return max((f.stat().st_mtime for f in folder.rglob("*")
                if f.is_file() and "__pycache__" not in f.parts), default=0.0)


def from_executed(path: Path, executed: Path) -> nbformat.NotebookNode | None:
    """Chapter ``path`` with the outputs of its sandboxed nbval run in ``executed``, or None when
    there is no such run in this mode (quick or not; frames on) or its code is not the chapter's."""
    from dplib.device import quick_mode
    run = executed / path.name
    if not run.exists() or run.stat().st_mtime < _newest_change(ROOT / "dplib"):
        return None                 # no run, or one older than a change to dplib
    done = nbformat.read(run, as_version=4)
    mode = done.metadata.get("dpbook_run", {})
    if mode.get("frames") is not True or mode.get("quick") != quick_mode():
        return None
    nb = nbformat.read(path, as_version=4)
    mine = [c for c in nb.cells if c.cell_type == "code"]
    theirs = [c for c in done.cells if c.cell_type == "code"][:len(mine)]  # then the probe
    if [c.source for c in theirs] != [c.source for c in mine]:
        return None
    for cell, ran in zip(mine, theirs):
        cell.outputs, cell.execution_count = ran.outputs, ran.execution_count
    return nb


def execute_into_cache(cache_dir: Path, notebooks: list[Path], jobs: int,
                       executed: Path | None = None) -> int:
    """Execute the notebooks the cache lacks, ``jobs`` at a time (those with a run in
    ``executed`` are stored from it); return the number of failures."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    cache = get_cache(str(cache_dir))
    todo = []
    for path in notebooks:
        nb = from_executed(path, executed) if executed else None
        if nb is not None:        # this run's nbval outputs replace an older cached run
            cache.add_nb_to_project(str(path))
            cache.cache_notebook_bundle(CacheBundleIn(nb, str(path), data={"from": str(executed)}),
                                        check_validity=False, overwrite=True)
            print(f"stored {path.name} from its nbval run in {executed}", flush=True)
            continue
        try:
            cache.match_cache_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            todo.append(path)
    if not todo:
        print(f"every chapter is in {cache_dir}: nothing to execute")
        return 0
    conf = _settings()
    timeout, allow = int(conf.get("timeout", 600)), bool(conf.get("allow_errors", False))
    failures = 0
    start = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(max(1, jobs)) as pool:
        futures = [pool.submit(_execute, str(p), timeout, allow) for p in todo]
        for future in concurrent.futures.as_completed(futures):
            path, nb, seconds, error = future.result()
            name = Path(path).relative_to(ROOT) if Path(path).is_relative_to(ROOT) else path
            if error:
                failures += 1
                print(f"FAILED {name} after {seconds:.1f} s:\n{error}", flush=True)
                continue
            cache.add_nb_to_project(path)
            cache.cache_notebook_bundle(CacheBundleIn(nb, path, data={"execution_seconds":
                                                                       seconds}),
                                        check_validity=False, overwrite=True)
            print(f"executed {name} in {seconds:.1f} s", flush=True)
    print(f"{len(todo) - failures} of {len(todo)} chapters executed into {cache_dir} in "
          f"{time.perf_counter() - start:.0f} s ({jobs} at a time)")
    return failures


def main(argv: list[str] | None = None) -> int:
    from dplib.widget_frames import FRAMES_ENV
    os.environ.setdefault(FRAMES_ENV, "1")      # as the book's Sphinx extension does
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", required=True, type=Path,
                        help="the build's execution cache (PATH_OUTPUT/_build/.jupyter_cache)")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks executed at a time")
    parser.add_argument("--executed", type=Path, default=None,
                        help="chapters run by nbval in the Colab-like sandbox (_build/colab/executed)")
    args = parser.parse_args(argv)
    return 1 if execute_into_cache(args.cache, toc_notebooks(), args.jobs, args.executed) else 0


if __name__ == "__main__":
    sys.exit(main())
