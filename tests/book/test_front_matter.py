"""The pages around the chapters: intro, how to run, notation, glossary, instructors, bibliography.

Checked on the sources (the built pages are checked in tests/site). The instructors' page must
keep up with the book: it links every chapter notebook and names every assignment, so adding a
chapter or an assignment without updating the course plans fails here.
"""
import re
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from assignments import master_notebooks  # noqa: E402
import front_matter  # noqa: E402
from front_matter import PLANNED_TITLES  # noqa: E402
from sync_notebooks import chapter_notebooks  # noqa: E402

FRONT = ["chapters/how-to-run", "chapters/notation", "chapters/glossary",
         "chapters/instructors", "chapters/references"]
# The ten chapters of the design (DESIGN.md): a chapter is either a notebook in the toc, linked,
# or named by its planned title, marked "(in preparation)" (tools/front_matter.py).


def _toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [toc["root"]] + [ch["file"] for part in toc["parts"] for ch in part["chapters"]]


def _read(name: str) -> str:
    return (ROOT / f"{name}.md").read_text()


def test_front_matter_pages_are_in_the_toc():
    files = _toc_files()
    assert files[0] == "intro"
    for page in FRONT:
        assert page in files, f"{page} is not in _toc.yml"
        assert (ROOT / f"{page}.md").exists()


def test_intro_says_who_it_is_for_and_how_to_run_it():
    intro = _read("intro")
    for heading in ("## Who it is for", "## Prerequisites", "## How to read and run it"):
        assert heading in intro
    for word in ("Colab", "CPU", "GPU", "Binder", "make book"):
        assert word in intro, f"the intro does not mention {word}"
    for page in ("chapters/how-to-run", "chapters/notation", "chapters/glossary",
                 "chapters/instructors", "chapters/01_randomized_response"):
        assert f"{{doc}}`{page}`" in intro, f"the intro does not link {page}"


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    nxt = re.search(r"^#{1,3} ", text[start + len(heading):], re.M)
    return text[start:start + len(heading) + (nxt.start() if nxt else len(text))]


def test_instructors_page_covers_every_chapter_and_assignment():
    page = _read("chapters/instructors")
    for cmd in ("make book-student", "make assignments", "ASSIGNMENTS_URL", "otter run"):
        assert cmd in page, f"the instructors' page does not explain {cmd}"
    for master in master_notebooks():
        assert f"`{master.stem}`" in page, f"assignment {master.stem} is not described"
    # A chapter has landed when its notebook is in the table of contents (a notebook still being
    # written is not on the site yet: test_chapters asks for its toc entry).
    toc = set(_toc_files())
    existing = {p.stem[:2]: p.stem for p in chapter_notebooks() if f"chapters/{p.stem}" in toc}
    for heading in ("### A 6-week module", "### A 14-week course"):
        plan = _section(page, heading)
        for stem in existing.values():
            assert f"{{doc}}`{stem}`" in plan, f"{heading!r} does not link {stem}"
        for number, title in PLANNED_TITLES.items():
            if number not in existing:
                assert f"{title} (in preparation)" in plan, f"{heading!r} lacks {title}"
    # A chapter that has landed is no longer "in preparation" anywhere in the front matter.
    for number, title in PLANNED_TITLES.items():
        if number in existing:
            for name in ["intro", *FRONT]:
                assert f"{title} (in preparation)" not in _read(name), \
                    f"{name}.md still calls {title} 'in preparation': run `make sync`"


def test_make_sync_links_a_chapter_when_it_enters_the_toc(monkeypatch, tmp_path):
    # On a scratch copy: the real pages may already have every landed chapter linked.
    (tmp_path / "chapters").mkdir()
    mention = "DP-SGD (in preparation)"
    (tmp_path / "chapters/instructors.md").write_text(f"{mention}, {mention} and {mention}.\n")
    (tmp_path / "intro.md").write_text(f"See {mention}.\n")
    monkeypatch.setattr(front_matter, "ROOT", tmp_path)
    monkeypatch.setattr(front_matter, "toc_chapters", lambda: {})
    assert front_matter.link_landed_chapters(write=False) == {}
    monkeypatch.setattr(front_matter, "toc_chapters", lambda: {"05": "05_dpsgd"})
    changes = front_matter.link_landed_chapters(write=True)
    assert changes == {"chapters/instructors.md": 3, "intro.md": 1}
    assert (tmp_path / "chapters/instructors.md").read_text().count("{doc}`05_dpsgd`") == 3
    assert "{doc}`chapters/05_dpsgd`" in (tmp_path / "intro.md").read_text()


def test_glossary_terms_are_sorted_and_defined():
    text = _read("chapters/glossary")
    body = text.split("```{glossary}", 1)[1].rsplit("```", 1)[0]
    terms = [line for line in body.split("\n") if line and not line.startswith(" ")]
    assert len(terms) >= 25
    assert terms == sorted(terms, key=str.lower), "keep the glossary in alphabetical order"
    labels = set()
    for path in chapter_notebooks():
        cells = nbformat.read(path, as_version=4).cells
        labels.update(re.findall(r":label: (\S+)", "\n".join(c.source for c in cells)))
    for ref in re.findall(r"\{prf:ref\}`([^`]+)`", text):
        assert ref in labels, f"the glossary points at {ref}, which no chapter defines"


def test_notation_has_a_table_per_topic():
    text = _read("chapters/notation")
    for heading in ("## Data", "## Mechanisms", "## Accounting", "## Training", "## Attacks"):
        assert heading in text
