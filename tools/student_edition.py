"""Prepare the source of the book's *student edition*: the same site with every solution removed.

``make book-student`` runs this, then builds the prepared folder with Jupyter Book::

    python tools/student_edition.py --out _build/student --cache _build/.jupyter_cache
    jupyter-book build _build/student/src --path-output _build/student

Why a stripped copy of the source rather than only sphinx-exercise's ``hide_solutions`` switch:
the switch removes solutions from the HTML, but a site also ships its sources (``_sources/``,
the ".ipynb" download button) and a search index; built from sources that never contained the
solutions, none of them can leak one. ``hide_solutions`` is set as well, as a second guard.

Why ``--cache``: the copy points at the execution cache of a build that already ran the notebooks
(``make book``'s, or the quick build's in ``make test``). Jupyter Book's cache is keyed on the
code cells only, and removing solutions changes only Markdown, so every notebook is a cache hit
and nothing is executed again; the student edition costs one Sphinx pass. From a fresh clone the
cache is simply empty: the notebooks are executed once and cached for the next build.

What stays outside the site's control: the Colab and Binder buttons open the repository's own
notebooks, which contain the solutions (see the instructors' page).
"""
from __future__ import annotations

import argparse
import re
import shutil
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]

# Not part of the book's source (kept in step with exclude_patterns in _config.yml).
SKIP = {".git", ".venv", "_build", "tests", "tools", "benchmarks", "assignments", "dplib",
        "__pycache__", ".pytest_cache", ".ipynb_checkpoints", ".ci", ".whl", ".gl"}

# Top-level files that can belong to the book (the Makefile, pyproject.toml, ... do not).
BOOK_FILES = {".md", ".yml", ".yaml", ".bib", ".ipynb", ".png", ".jpg", ".svg"}

# Opening line of a solution directive, with backtick or colon fences (MyST), including the
# gated form {solution-start} ... {solution-end} of sphinx-exercise.
_OPEN = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|:{3,})\{solution(?P<kind>-start)?\}")
_GATED_END = re.compile(r"^\s*(`{3,}|:{3,})\{solution-end\}")


def strip_solutions(text: str) -> tuple[str, int]:
    """Remove every ``{solution}`` directive from MyST Markdown; return the text and the count.

    A directive ends at the first line holding only a fence of the same character at least as
    long as the opening one (the CommonMark rule MyST follows), so code blocks nested inside a
    solution with a shorter fence, or indented code, do not end it early.
    """
    lines = text.split("\n")
    out: list[str] = []
    removed = 0
    i = 0
    while i < len(lines):
        match = _OPEN.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        removed += 1
        fence = match.group("fence")
        gated = bool(match.group("kind"))
        close = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        i += 1
        if gated:
            # {solution-start} is a directive of its own: skip it, the content after it, and the
            # {solution-end} directive, whose closing fence the loop below consumes.
            while i < len(lines) and not close.match(lines[i]):
                i += 1
            i += 1
            while i < len(lines) and not _GATED_END.match(lines[i]):
                i += 1
            if i < len(lines):
                end_fence = _GATED_END.match(lines[i]).group(1)
                close = re.compile(rf"^\s*{re.escape(end_fence[0])}{{{len(end_fence)},}}\s*$")
                i += 1
        while i < len(lines) and not close.match(lines[i]):
            i += 1
        i += 1  # the closing fence
        # Drop the blank line the directive leaves behind, keeping the rest of the layout.
        if out and out[-1].strip() == "" and i < len(lines) and lines[i].strip() == "":
            i += 1
    return "\n".join(out), removed


def strip_notebook(path: Path, dest: Path) -> int:
    nb = nbformat.read(path, as_version=4)
    removed = 0
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source, n = strip_solutions(cell.source)
            removed += n
    nbformat.write(nb, dest)
    return removed


def student_config(cache: Path | None) -> dict:
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["title"] = f"{config['title']} (student edition)"
    html = config.setdefault("html", {})
    html["announcement"] = "Student edition: the exercises are here, their solutions are not."
    sphinx = config.setdefault("sphinx", {})
    sphinx.setdefault("config", {})["hide_solutions"] = True
    # Local extensions are found relative to the config file: point at the repository's.
    for name, path in (sphinx.get("local_extensions") or {}).items():
        sphinx["local_extensions"][name] = str((ROOT / path).resolve())
    if cache is not None:
        config.setdefault("execute", {})["cache"] = str(cache.resolve())
    return config


def prepare(out: Path, cache: Path | None) -> dict[str, int]:
    """Write the stripped source tree to ``out/src``; return the solutions removed per file."""
    src = out / "src"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    removed: dict[str, int] = {}
    for path in sorted(ROOT.iterdir()):
        if path.name in SKIP or path.name.startswith(".") or path.suffix == ".egg-info":
            continue
        if path.is_dir():
            shutil.copytree(path, src / path.name,
                            ignore=shutil.ignore_patterns(*SKIP, "*.pyc"))
        elif path.suffix in BOOK_FILES:
            shutil.copy2(path, src / path.name)
    for path in sorted(src.rglob("*")):
        rel = str(path.relative_to(src))
        if path.suffix == ".ipynb":
            removed[rel] = strip_notebook(path, path)
        elif path.suffix == ".md":
            text, n = strip_solutions(path.read_text())
            path.write_text(text)
            removed[rel] = n
    (src / "_config.yml").write_text(
        "# Generated by tools/student_edition.py from the book's _config.yml: do not edit.\n"
        + yaml.safe_dump(student_config(cache), sort_keys=False, allow_unicode=True))
    return {k: v for k, v in removed.items() if v}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "student",
                        help="folder for the stripped source (OUT/src) and the build")
    parser.add_argument("--cache", type=Path, default=None,
                        help="execution cache of an earlier build to reuse")
    args = parser.parse_args(argv)
    removed = prepare(args.out, args.cache)
    total = sum(removed.values())
    print(f"student edition source in {args.out / 'src'}: "
          f"{total} solutions removed from {len(removed)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
