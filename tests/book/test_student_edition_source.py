"""tools/student_edition.py: solutions are cut from the sources, and nothing else is.

Fast checks on text (no build); the built student edition is checked in tests/site.
"""
import re
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from student_edition import (STUDENT_BRANCH, prepare, strip_solutions,  # noqa: E402
                             student_config)
from sync_notebooks import REF_LINE, REPO_LINE, chapter_notebooks, setup_cell  # noqa: E402

EXERCISE = "```{exercise} Title\n:label: ex-a\n\nDo it.\n```"


@pytest.mark.parametrize("solution", [
    "```{solution} ex-a\n:class: dropdown\n\nThe answer is 42.\n```",
    ":::{solution} ex-a\n:class: dropdown\nThe answer is 42.\n:::",
    # a code block nested with a shorter fence does not end the directive early
    "````{solution} ex-a\n:class: dropdown\n\nThe answer is 42:\n```python\nx = 42\n```\n"
    "Done.\n````",
    # indented code inside, as the chapters write it
    "```{solution} ex-a\n:class: dropdown\n\nThe answer is 42:\n\n    x = 42\n\nDone.\n```",
    # the gated form of sphinx-exercise
    "```{solution-start} ex-a\n:class: dropdown\n```\nThe answer is 42.\n```{python}\nx = 42\n```\n"
    "```{solution-end}\n```",
])
def test_strip_removes_the_solution_and_keeps_the_rest(solution):
    text = f"Intro.\n\n{EXERCISE}\n\n{solution}\n\nOutro: 41 is not it."
    stripped, n = strip_solutions(text)
    assert n == 1
    assert "42" not in stripped and "solution" not in stripped
    assert EXERCISE in stripped and stripped.startswith("Intro.")
    assert stripped.endswith("Outro: 41 is not it.")


def test_strip_leaves_text_without_solutions_alone():
    text = f"# Title\n\n{EXERCISE}\n\n```python\nprint('solution')\n```\n"
    assert strip_solutions(text) == (text, 0)


@pytest.mark.parametrize("path", chapter_notebooks(), ids=lambda p: p.stem)
def test_every_chapter_loses_exactly_its_solutions(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        stripped, n = strip_solutions(cell.source)
        assert n == len(re.findall(r"^\s*[`:]{3,}\{solution(-start)?\}", cell.source, re.M))
        assert "{solution" not in stripped
        assert stripped.count("{exercise}") == cell.source.count("{exercise}")
        # what is left is the cell minus the solution blocks, line for line
        kept = [line for line in stripped.split("\n") if line.strip()]
        original = [line for line in cell.source.split("\n") if line.strip()]
        assert all(line in original for line in kept)


def test_student_config_hides_solutions_and_reuses_the_cache(tmp_path):
    config = student_config(tmp_path / "cache")
    assert config["sphinx"]["config"]["hide_solutions"] is True
    assert config["execute"]["cache"] == str((tmp_path / "cache").resolve())
    assert "student edition" in config["title"]
    reader = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["sphinx"]["extra_extensions"] == reader["sphinx"]["extra_extensions"]


def test_student_launch_buttons_open_the_published_stripped_tree():
    """Colab and Binder open repository.url at repository.branch/path_to_book: in the student
    edition, the root of the branch where the stripped tree is published, not the reader's."""
    reader = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    config = student_config(None)["repository"]
    assert config["url"] == reader["url"]
    assert config["branch"] == STUDENT_BRANCH != reader["branch"]
    assert config["path_to_book"] == ""
    other = student_config(None, "https://github.com/someone/course", "fall")["repository"]
    assert (other["url"], other["branch"]) == ("https://github.com/someone/course", "fall")
    with pytest.raises(ValueError, match="branch"):
        student_config(None, None, reader["branch"])


def test_prepare_copies_the_book_without_solutions(tmp_path):
    removed = prepare(tmp_path, None)
    src = tmp_path / "src"
    toc = yaml.safe_load((src / "_toc.yml").read_text())
    assert toc == yaml.safe_load((ROOT / "_toc.yml").read_text())
    for path in chapter_notebooks():
        copy = src / "chapters" / path.name
        assert copy.exists()
        text = copy.read_text()
        assert "{solution}" not in text and "{exercise}" in text
        assert removed[f"chapters/{path.name}"] >= 3
    assert not (src / "tests").exists() and not (src / "dplib").exists()
    config = yaml.safe_load((src / "_config.yml").read_text())
    assert config["repository"]["branch"] == STUDENT_BRANCH


def test_published_tree_installs_what_its_notebooks_pin(tmp_path):
    """Binder builds the published branch from its requirements.txt: the book's runtime needs
    and dplib at the commit the setup cells install."""
    prepare(tmp_path, None)
    lines = (tmp_path / "src" / "requirements.txt").read_text().splitlines()
    setup = setup_cell(nbformat.read(chapter_notebooks()[0], as_version=4)).source
    repo, ref = (p.search(setup).group(0).split('"')[1] for p in (REPO_LINE, REF_LINE))
    assert f"git+{repo}@{ref}" in lines
    book = [line for line in (ROOT / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    assert set(book) <= set(lines)
