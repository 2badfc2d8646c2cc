"""The student edition (``make book-student``): the same chapters and exercises, no solutions.

The reader's edition is the positive control: every check that something is absent from the
student edition first checks that it is present in the reader's edition, so the test cannot pass
because the thing looked for was never there.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from sitecheck import chapter_pages, html_pages, soup, toc_pages

TEXT_SUFFIXES = {".html", ".js", ".ipynb", ".md", ".txt", ".json"}


def _text(path: Path) -> str:
    return " ".join(soup(path).get_text(" ").split())


def _solution_paragraphs(html) -> list[str]:
    """The prose of every solution on a page (paragraphs and list items of 40+ characters)."""
    out = []
    for sol in html.select("div.solution"):
        for el in sol.select("section p, section li"):
            text = " ".join(el.get_text(" ").split())
            if len(text) >= 40:
                out.append(text)
    return out


def test_every_page_of_the_book_is_in_the_student_edition(site, student_site):
    missing = [p for p in html_pages(site) if not (student_site / p).exists()]
    assert not missing, f"pages missing from the student edition: {missing}"
    title = soup(student_site / toc_pages()[0]).title.get_text()
    assert "student edition" in title.lower()


@pytest.mark.parametrize("page", chapter_pages())
def test_chapter_keeps_exercises_and_loses_solutions(site, student_site, page):
    reader, student = soup(site / page), soup(student_site / page)
    n_exercises = len(reader.select("div.exercise"))
    assert n_exercises >= 3 and len(reader.select("div.solution")) >= 3
    assert len(student.select("div.exercise")) == n_exercises, "an exercise went missing"
    assert not student.select("div.solution"), "a solution box is in the student edition"
    assert "Solution to" in _text(site / page) and "Solution to" not in _text(student_site / page)
    paragraphs = _solution_paragraphs(reader)
    assert paragraphs, f"{page}: the reader's edition shows no solution text"
    text = _text(student_site / page)
    leaked = [p for p in paragraphs if p in text]
    assert not leaked, f"{page}: solution text in the student edition: {leaked[:2]}"


def test_no_file_of_the_student_edition_carries_a_solution(site, student_site):
    """Sources offered for download, the search index, every page: no solution anywhere."""
    paragraphs = [p for page in chapter_pages() for p in _solution_paragraphs(soup(site / page))]
    assert paragraphs
    reader_sources = "\n".join(p.read_text(errors="ignore")
                               for p in (site / "_sources").rglob("*") if p.is_file())
    assert "{solution}" in reader_sources, "positive control: the reader's sources have them"
    leaks = []
    for path in student_site.rglob("*"):
        if not path.is_file() or path.suffix not in TEXT_SUFFIXES:
            continue
        raw = path.read_text(errors="ignore")
        if "{solution}" in raw or "{solution-start}" in raw:
            leaks.append(f"{path.relative_to(student_site)}: a solution directive")
        if path.suffix == ".html":
            text = _text(path)
            leaks.extend(f"{path.relative_to(student_site)}: {p[:60]}…"
                         for p in paragraphs if p in text)
    assert not leaks, "solutions in the student edition:\n  " + "\n  ".join(leaks[:20])
