"""tools/student_edition.py: solutions are cut from the sources, and nothing else is.

Fast checks on text (no build); the built student edition is checked in tests/site.
"Reveals an answer" is defined once, in ``student_edition.revealing_cells``: a ``{solution}``
directive, a code line of a solution, or two numbers that only the solutions state. The tests
below show that it catches each kind on a made-up chapter and stays quiet on body checks, and
that no notebook of the student edition reveals anything while the reader's edition does.
"""
import re
import sys
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from student_edition import (SOLUTION_TAG, STUDENT_BRANCH, derive_cache_entries,  # noqa: E402
                             prepare, revealing_cells, solution_cells, strip_cells,
                             strip_notebook, strip_solutions, student_config)
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


# --- answers in hidden cells ------------------------------------------------------------------

def _chapter(*hidden: str, tagged: bool = False, after: str | None = None):
    """A made-up chapter: body text quoting 0.75, an exercise, a solution that states 0.9, 2.20
    and 1.25 and holds a line of code, then hidden code cells with the given sources."""
    new = nbformat.v4
    cells = [
        new.new_markdown_cell("# A chapter\n\nThe fair coin tells the truth 75% of the time."),
        new.new_code_cell("p = coin_flip_p_truth(0.5)\nprint(round(p, 2))   # 0.75"),
        new.new_markdown_cell(
            f"{EXERCISE}\n\n```{{solution}} ex-a\n:class: dropdown\n\n"
            "$p = 0.9$, so ε = ln 9 ≈ 2.20 and the estimator is 1.25 π̂′ − 0.125:\n\n"
            "    eps = rr_epsilon(coin_flip_p_truth(0.8))\n```"),
    ]
    tags = ["remove-cell"] + ([SOLUTION_TAG] if tagged else [])
    cells += [new.new_code_cell(src, metadata={"tags": list(tags)}) for src in hidden]
    if after is not None:
        cells.append(new.new_code_cell(after))
    return new.new_notebook(cells=cells)


@pytest.mark.parametrize("hidden", [
    "assert round(np.log(9), 2) == 2.20 and np.isclose(1 / (2 * p9 - 1), 1.25)",  # two answers
    "eps = rr_epsilon(coin_flip_p_truth(0.8))  # the solution's code",           # its code
    "# see the ```{solution} ex-a``` block",                                     # the directive
])
def test_a_hidden_cell_that_states_answers_is_caught(hidden):
    nb = _chapter(hidden)
    assert [i for i, _ in revealing_cells(nb, nb) if i == 3] == [3]


@pytest.mark.parametrize("hidden", [
    "assert abs(p - 0.75) < 1e-12          # quoted in the body, not an answer",
    "assert abs(ratio - 2.20) < 0.5        # one number alone may be a tolerance",
    "assert coin_flip_p_truth(0.8) > 0.5",
])
def test_a_hidden_check_of_the_body_is_not_an_answer(hidden):
    nb = _chapter(hidden)
    assert [i for i, _ in revealing_cells(nb, nb) if i != 2] == []


def test_tagged_answer_checks_leave_and_untagged_ones_stop_the_tool(tmp_path):
    check = "assert round(np.log(9), 2) == 2.20 and abs(slope - 1.25) < 1e-12"
    src, dest = tmp_path / "ch.ipynb", tmp_path / "student.ipynb"
    nbformat.write(_chapter(check), src)
    with pytest.raises(ValueError, match="reveal answers.*cell 3"):
        strip_notebook(src, dest)
    assert not dest.exists()
    reader = _chapter(check, tagged=True)
    nbformat.write(reader, src)
    assert strip_notebook(src, dest) == 2                      # one solution, one check cell
    student = nbformat.read(dest, as_version=4)
    assert [c.source for c in student.cells if c.cell_type == "code"] == [reader.cells[1].source]
    assert revealing_cells(reader, student) == []
    assert {i for i, _ in revealing_cells(reader, reader)} == {2, 3}        # the control


def test_answer_checks_must_run_last():
    """Removing them must not change what the other cells compute (nor the cached outputs)."""
    with pytest.raises(ValueError, match="after every other code cell"):
        solution_cells(_chapter("assert 2.20 > 1.25", tagged=True, after="x = 1"))
    assert solution_cells(_chapter("assert 2.20 > 1.25", "x = 2", tagged=True)) == [3, 4]


@pytest.mark.parametrize("path", chapter_notebooks(), ids=lambda p: p.stem)
def test_no_student_notebook_reveals_an_answer(path):
    """The notebook the student edition ships (what Colab, Binder and the download button
    open) reveals no answer; in the reader's notebook every code cell that reveals one is an
    answer check the student edition removes."""
    reader = nbformat.read(path, as_version=4)
    student, _ = strip_cells(reader)
    assert revealing_cells(reader, student) == []
    shown = revealing_cells(reader, reader)
    assert shown, "control: the reader's notebook states its answers"
    code = [i for i, _ in shown if reader.cells[i].cell_type == "code"]
    assert set(code) <= set(solution_cells(reader)), \
        f"hidden cells that reveal answers without the {SOLUTION_TAG!r} tag: {code}"


def test_the_chapters_check_answers_in_hidden_cells():
    """The check above is live: chapters do hold hidden cells that state answers."""
    tagged = [p.stem for p in chapter_notebooks()
              if solution_cells(nbformat.read(p, as_version=4))]
    assert len(tagged) >= 5, tagged


def test_the_stripped_notebook_reuses_the_cached_run(tmp_path):
    """derive_cache_entries: the student copy is a cache hit, with the kept cells' outputs."""
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    reader = _chapter("assert 2.20 > 1.25", tagged=True)
    reader.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
    src, dest = tmp_path / "ch.ipynb", tmp_path / "student.ipynb"
    nbformat.write(reader, src)
    strip_notebook(src, dest)
    executed = nbformat.read(src, as_version=4)
    for count, cell in enumerate((c for c in executed.cells if c.cell_type == "code"), 1):
        cell.execution_count = count
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"run {count}\n")]
    store = get_cache(str(tmp_path / "cache"))
    store.cache_notebook_bundle(CacheBundleIn(executed, str(src)))
    with pytest.raises(KeyError):
        store.match_cache_notebook(nbformat.read(dest, as_version=4))
    assert derive_cache_entries({src: dest}, tmp_path / "cache") == 1
    _, merged = store.merge_match_into_notebook(nbformat.read(dest, as_version=4))
    code = [c for c in merged.cells if c.cell_type == "code"]
    assert [c.outputs[0]["text"] for c in code] == ["run 1\n"]
    assert derive_cache_entries({src: dest}, tmp_path / "cache") == 0       # already there
