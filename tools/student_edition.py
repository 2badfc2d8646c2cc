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

Why the launch buttons point elsewhere: Colab and Binder open a notebook from a repository, at
``repository.url``/``repository.branch``. The reader's edition opens the book's own notebooks,
which contain the solutions; the student edition's buttons open branch ``student`` (or
``--branch``) of ``repository.url`` (or of ``--repository``), where the instructor publishes
the stripped tree ``OUT/src`` as it is: its notebooks sit at the paths the buttons name, and its
``requirements.txt`` lets Binder install the book's library at the commit the notebooks pin.
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
sys.path.insert(0, str(Path(__file__).resolve().parent))
from sync_notebooks import REF_LINE, REPO_LINE, setup_cell  # noqa: E402

#: The branch of the repository that the student edition's Colab and Binder buttons open.
STUDENT_BRANCH = "student"

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


def student_config(cache: Path | None, repository: str | None = None,
                   branch: str = STUDENT_BRANCH) -> dict:
    """The book's configuration for the student edition.

    Its launch buttons open ``branch`` of ``repository`` (default: the book's own repository),
    at the root of which the stripped source tree is to be published.
    """
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    reader = config.get("repository", {})
    if (repository or reader.get("url")) == reader.get("url") and branch == reader.get("branch"):
        raise ValueError(f"branch must differ from the reader's edition's {branch!r} of "
                         f"{reader.get('url')}: its notebooks contain the solutions")
    config["title"] = f"{config['title']} (student edition)"
    config["repository"] = {**reader, "url": repository or reader["url"], "branch": branch,
                            "path_to_book": ""}
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


def binder_requirements(src: Path) -> str:
    """``requirements.txt`` of the published tree: the book's, and ``dplib`` at the commit its
    notebooks install (Binder builds the environment from it; Colab's setup cells install it)."""
    chapter = sorted((src / "chapters").glob("*.ipynb"))[0]
    source = setup_cell(nbformat.read(chapter, as_version=4)).source
    repo, ref = (line.search(source).group(0).split('"')[1] for line in (REPO_LINE, REF_LINE))
    return ((ROOT / "requirements.txt").read_text().rstrip("\n")
            + f"\n# the book's library, at the commit the notebooks install\ngit+{repo}@{ref}\n")


def prepare(out: Path, cache: Path | None, repository: str | None = None,
            branch: str = STUDENT_BRANCH) -> dict[str, int]:
    """Write the stripped source tree to ``out/src``; return the solutions removed per file.

    ``repository``/``branch``: where the instructor publishes ``out/src``, which the student
    edition's launch buttons open (see :func:`student_config`).
    """
    config = student_config(cache, repository, branch)
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
        + yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    (src / "requirements.txt").write_text(binder_requirements(src))
    return {k: v for k, v in removed.items() if v}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "student",
                        help="folder for the stripped source (OUT/src) and the build")
    parser.add_argument("--cache", type=Path, default=None,
                        help="execution cache of an earlier build to reuse")
    parser.add_argument("--repository", default=None,
                        help="repository the launch buttons open (default: repository.url)")
    parser.add_argument("--branch", default=STUDENT_BRANCH,
                        help=f"its branch holding OUT/src (default: {STUDENT_BRANCH})")
    args = parser.parse_args(argv)
    try:
        removed = prepare(args.out, args.cache, args.repository, args.branch)
    except ValueError as err:
        parser.error(str(err))
    total = sum(removed.values())
    config = yaml.safe_load((args.out / "src" / "_config.yml").read_text())["repository"]
    print(f"student edition source in {args.out / 'src'}: "
          f"{total} solutions removed from {len(removed)} files\n"
          f"its Colab and Binder buttons open branch {config['branch']} of {config['url']}: "
          f"publish {args.out / 'src'} there")
    return 0


if __name__ == "__main__":
    sys.exit(main())
