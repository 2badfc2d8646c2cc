"""Prepare the source of the book's *student edition*: the same site with every solution removed.

``make book-student`` runs this, then builds the prepared folder with Jupyter Book::

    python tools/student_edition.py --out _build/student --cache _build/.jupyter_cache
    jupyter-book build _build/student/src --path-output _build/student

Why a stripped copy of the source rather than only sphinx-exercise's ``hide_solutions`` switch:
the switch removes solutions from the HTML, but a site also ships its sources (``_sources/``,
the ".ipynb" download button) and a search index; built from sources that never contained the
solutions, none of them can leak one. ``hide_solutions`` is set as well, as a second guard.

What "solution" means here: the ``{solution}`` blocks of the Markdown, and every code cell tagged
``solution-check`` (:data:`SOLUTION_TAG`): the hidden cells that check the numbers and run the code
the solutions quote. Those cells are hidden on the reader's pages (they also carry ``remove-cell``)
but a notebook holds them, and a student opens notebooks (Colab, Binder, the download button). They
must come after every other code cell of their chapter, so that removing them changes nothing the
other cells compute. Before writing anything, :func:`prepare` checks every student notebook with
:func:`revealing_cells` and refuses to write one in which a cell still states an answer (a chapter
that forgot the tag fails loudly rather than leaking).

Why ``--cache``: the copy points at the execution cache of a build that already ran the notebooks
(``make book``'s, or the quick build's in ``make test``). Jupyter Book's cache is keyed on the
code cells only. Removing ``{solution}`` blocks changes only Markdown; removing the
``solution-check`` cells changes the key, so :func:`derive_cache_entries` stores, for each stripped
notebook, the cached run of its original without those cells (they run last, so the other cells'
outputs are the same). Every notebook is a cache hit and nothing is executed again; the student
edition costs one Sphinx pass. From a fresh clone the
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
import copy
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

#: Tag of the hidden code cells that check exercise answers: removed from the student edition.
SOLUTION_TAG = "solution-check"
#: Tags that hide a code cell's source from the reader's page (its notebook still holds it).
HIDDEN_TAGS = {"remove-cell", "remove-input", SOLUTION_TAG}


def strip_solutions(text: str) -> tuple[str, int]:
    """Remove every ``{solution}`` directive from MyST Markdown; return the text and the count.

    A directive ends at the first line holding only a fence of the same character at least as
    long as the opening one (the CommonMark rule MyST follows), so code blocks nested inside a
    solution with a shorter fence, or indented code, do not end it early.
    """
    kept, blocks = split_solutions(text)
    return kept, len(blocks)


def split_solutions(text: str) -> tuple[str, list[str]]:
    """``text`` without its ``{solution}`` directives, and the text of each directive removed."""
    lines = text.split("\n")
    out: list[str] = []
    blocks: list[str] = []
    i = 0
    while i < len(lines):
        match = _OPEN.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        start = i
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
        blocks.append("\n".join(lines[start:i]))
        # Drop the blank line the directive leaves behind, keeping the rest of the layout.
        if out and out[-1].strip() == "" and i < len(lines) and lines[i].strip() == "":
            i += 1
    return "\n".join(out), blocks


# --- What reveals an answer -------------------------------------------------------------------
# A number literal: 11{,}707, 14_062, 9,333, 2.20, 1.6e-3 (the mantissa and exponent together).
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:(?:\{,\}|_|,(?=\d{3}(?!\d)))\d{3})+|\d+)(\.\d+)?"
                     r"(?:[eE][-+]?\d+)?(?![\w])")


def answer_numbers(text: str) -> set[float]:
    """The distinctive numbers of ``text``: decimals with at least two significant digits (2.20,
    0.125, 1.25) and integers with at least three (9,333; 11{,}707). Shorter ones (0.5, 3, 100)
    are parameters and tolerances that any chapter repeats. ``n%`` also counts as ``n/100``."""
    out: set[float] = set()
    for match in _NUMBER.finditer(text):
        literal = re.sub(r"\{,\}|_|,", "", match.group(0))
        value = float(literal)
        integer = match.group(2) is None and "e" not in literal.lower()
        digits = f"{value:.12g}".split("e")[0].replace(".", "").strip("0")
        if len(digits) >= (3 if integer else 2):
            out.add(round(value, 12))
        if text[match.end():match.end() + 1] == "%":
            out.add(round(value / 100, 12))
    return out


def answer_lines(text: str) -> set[str]:
    """The lines of ``text`` long enough to be a statement of code or prose of their own
    (comments cut, spaces collapsed, at least 16 characters, holding "(" or "=")."""
    out = set()
    for line in text.split("\n"):
        line = " ".join(line.split("#")[0].split())
        if len(line) >= 16 and ("(" in line or "=" in line):
            out.add(line)
    return out


def answers(reader: nbformat.NotebookNode, public: str = "") -> tuple[set[float], set[str]]:
    """What the solutions of a chapter state and its visible text does not: the numbers and the
    code lines of its ``{solution}`` blocks, minus those of its Markdown outside the solutions,
    of its code cells shown on the page, and of ``public`` (e.g. the text of the rendered page,
    outputs included)."""
    solutions, shown = [], [public]
    for cell in reader.cells:
        if cell.cell_type == "markdown":
            kept, blocks = split_solutions(cell.source)
            shown.append(kept)
            solutions.extend(blocks)
        elif not set(cell.metadata.get("tags", [])) & HIDDEN_TAGS:
            shown.append(cell.source)
    said, seen = "\n".join(solutions), "\n".join(shown)
    return answer_numbers(said) - answer_numbers(seen), answer_lines(said) - answer_lines(seen)


def revealing_cells(reader: nbformat.NotebookNode, notebook: nbformat.NotebookNode,
                    public: str = "") -> list[tuple[int, str]]:
    """The cells of ``notebook`` (what a student opens) that reveal an answer of the chapter
    ``reader`` (the reader's edition of the same notebook): a ``{solution}`` directive, a code
    line of a solution, or two distinct numbers that only solutions state (one alone may be a
    tolerance that happens to equal one). Sources and stored outputs are both read. Returns
    (cell index, what it reveals)."""
    numbers, lines = answers(reader, public)
    found = []
    for index, cell in enumerate(notebook.cells):
        text = cell.source
        for output in cell.get("outputs", []):
            text += "\n" + "".join(output.get("text", ""))
            text += "\n" + "".join(output.get("data", {}).get("text/plain", ""))
        if re.search(r"\{solution(-start)?\}", text):
            found.append((index, "a {solution} directive"))
            continue
        code = sorted(answer_lines(text) & lines)
        values = sorted(answer_numbers(text) & numbers)
        if code:
            found.append((index, f"solution code: {code[0]!r}"))
        elif len(values) >= 2:
            found.append((index, f"answers {', '.join(f'{v:g}' for v in values[:4])}"))
    return found


def solution_cells(nb: nbformat.NotebookNode) -> list[int]:
    """Indices of the code cells tagged ``solution-check``; ValueError if a code cell without
    the tag follows one (removing them must not change what the other cells compute)."""
    code = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    tagged = [i for i in code if SOLUTION_TAG in nb.cells[i].metadata.get("tags", [])]
    if tagged and any(i > tagged[0] for i in code if i not in tagged):
        raise ValueError(f"cell {tagged[0]} is tagged {SOLUTION_TAG!r} but a code cell without "
                         "the tag follows it: answer checks come after every other code cell")
    return tagged


def strip_cells(nb: nbformat.NotebookNode) -> tuple[nbformat.NotebookNode, int]:
    """A copy of ``nb`` without ``{solution}`` blocks and ``solution-check`` cells; the count."""
    nb = copy.deepcopy(nb)
    drop = set(solution_cells(nb))
    removed = len(drop)
    cells = []
    for index, cell in enumerate(nb.cells):
        if index in drop:
            continue
        if cell.cell_type == "markdown":
            cell.source, n = strip_solutions(cell.source)
            removed += n
        cells.append(cell)
    nb.cells = cells
    return nb, removed


def strip_notebook(path: Path, dest: Path) -> int:
    """Write ``path`` stripped (:func:`strip_cells`) to ``dest``; ValueError if a cell of the
    result still reveals an answer (:func:`revealing_cells`)."""
    reader = nbformat.read(path, as_version=4)
    nb, removed = strip_cells(reader)
    leaks = revealing_cells(reader, nb)
    if leaks:
        where = "; ".join(f"cell {i}: {what}" for i, what in leaks)
        raise ValueError(f"{path.name}: the student edition would reveal answers ({where}): "
                         f"tag the hidden cells that check answers {SOLUTION_TAG!r} and put "
                         "them after every other code cell")
    nbformat.write(nb, dest)
    return removed


def derive_cache_entries(originals: dict[Path, Path], cache: Path) -> int:
    """For each (reader notebook, stripped copy) whose reader notebook has a cached run in
    ``cache``, store that run without the removed cells as the copy's run; return how many.

    Sound because the removed ``solution-check`` cells run after every other code cell
    (:func:`solution_cells`): the cells that are kept compute exactly what they computed."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    if not cache.is_dir():
        return 0
    store = get_cache(str(cache))
    derived = 0
    for original, copy_path in originals.items():
        reader = nbformat.read(original, as_version=4)
        drop = set(solution_cells(reader))
        if not drop:
            continue
        stripped = nbformat.read(copy_path, as_version=4)
        try:
            store.match_cache_notebook(stripped)
            continue                                     # already there
        except KeyError:
            pass
        try:
            _, executed = store.merge_match_into_notebook(reader)
        except KeyError:
            continue                                     # never run: the build runs the copy
        runs = [c for i, c in enumerate(executed.cells)
                if c.cell_type == "code" and i not in drop]
        code = [c for c in stripped.cells if c.cell_type == "code"]
        if len(runs) != len(code) or any(r.source != c.source for r, c in zip(runs, code)):
            continue
        for count, (run, cell) in enumerate(zip(runs, code), start=1):
            cell.outputs = run.get("outputs", [])
            cell.execution_count = count
        store.cache_notebook_bundle(CacheBundleIn(stripped, str(copy_path)),
                                    check_validity=False, overwrite=True)
        derived += 1
    return derived


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
            removed[rel] = strip_notebook(ROOT / rel, path)
        elif path.suffix == ".md":
            text, n = strip_solutions(path.read_text())
            path.write_text(text)
            removed[rel] = n
    (src / "_config.yml").write_text(
        "# Generated by tools/student_edition.py from the book's _config.yml: do not edit.\n"
        + yaml.safe_dump(config, sort_keys=False, allow_unicode=True))
    (src / "requirements.txt").write_text(binder_requirements(src))
    if cache is not None:
        derive_cache_entries({ROOT / rel: src / rel for rel in removed
                              if rel.endswith(".ipynb")}, cache)
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
