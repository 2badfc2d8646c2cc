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


def execute_into_cache(cache_dir: Path, notebooks: list[Path], jobs: int) -> int:
    """Execute the notebooks the cache lacks, ``jobs`` at a time; return the number of failures."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    cache = get_cache(str(cache_dir))
    todo = []
    for path in notebooks:
        try:
            cache.match_cache_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            todo.append(path)
    if not todo:
        print(f"every chapter is already in {cache_dir}")
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
    args = parser.parse_args(argv)
    return 1 if execute_into_cache(args.cache, toc_notebooks(), args.jobs) else 0


if __name__ == "__main__":
    sys.exit(main())
