"""Structure every chapter promises (DESIGN.md, "The chapters"), checked on the notebook files.

These do not execute anything (nbval does); they check what a reader and an instructor rely on:
the Colab setup cell, the table of contents, exercises with solutions, a widget, references.
"""
import re
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from sync_notebooks import REPO_LINE, chapter_notebooks, repository_url, setup_cell  # noqa: E402

NOTEBOOKS = chapter_notebooks()


def _markdown(nb) -> str:
    return "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")


def _toc_files() -> set[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return {ch["file"] for part in toc["parts"] for ch in part["chapters"]}


def test_there_are_chapters():
    assert NOTEBOOKS, "no chapter notebooks found in chapters/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_setup_cell_installs_from_configured_repository(path):
    nb = nbformat.read(path, as_version=4)
    cell = setup_cell(nb)
    match = REPO_LINE.search(cell.source)
    assert match, "the first code cell must define BOOK_REPO"
    assert match.group(0) == f'BOOK_REPO = "{repository_url()}"', "run `make sync`"
    assert '"google.colab" in sys.modules' in cell.source
    assert "dplib.setup(" in cell.source
    assert "hide-cell" in cell.metadata.get("tags", [])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_chapter_is_in_toc(path):
    assert f"chapters/{path.stem}" in _toc_files()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_chapter_has_the_teaching_parts(path):
    nb = nbformat.read(path, as_version=4)
    md = _markdown(nb)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "Learning objectives" in md
    assert "## What can go wrong" in md
    assert ":class: important" in md and "Summary" in md
    exercises = re.findall(r"```\{exercise\}.*\n:label: (\S+)", md)
    solutions = re.findall(r"```\{solution\} (\S+)\n:class: dropdown", md)
    assert len(exercises) >= 3 and sorted(exercises) == sorted(solutions)
    assert "## References" in md and "{cite" in md
    assert "interactive_figure(" in code, "each chapter has at least one widget"
    assert "$$" in md, "key formulas also in plain $$…$$ so they read in Colab"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
        "strip outputs: the book build executes the notebooks"


def test_every_citation_is_in_the_bibliography():
    bib = (ROOT / "references.bib").read_text()
    keys = set(re.findall(r"@\w+\{(\w+),", bib))
    cited = set()
    texts = [_markdown(nbformat.read(path, 4)) for path in NOTEBOOKS]
    pages = [ROOT / "intro.md", *sorted((ROOT / "chapters").glob("*.md"))]
    texts += [p.read_text() for p in pages]
    for text in texts:
        for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", text):
            cited.update(k.strip() for k in group.split(","))
    assert cited and cited <= keys, f"missing from references.bib: {sorted(cited - keys)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_exercises_are_graded_and_every_grade_is_there(path):
    """Every exercise title starts with its grade: ★ (check understanding), ★★ (derive or
    implement), ★★★ (research-level); each chapter has at least one of each, and a Summary."""
    md = _markdown(nbformat.read(path, as_version=4))
    titles = re.findall(r"```\{exercise\} ?(.*)\n:label:", md)
    grades = [re.match(r"(★{1,3}) \S", t) for t in titles]
    assert titles and all(grades), [t for t, g in zip(titles, grades) if not g]
    assert {g.group(1) for g in grades} == {"★", "★★", "★★★"}, titles
    assert re.search(r"^## Summary$", md, flags=re.M)
