"""The student edition (``make book-student``): the same chapters and exercises, no solutions.

The reader's edition is the positive control: every check that something is absent from the
student edition first checks that it is present in the reader's edition, so the test cannot pass
because the thing looked for was never there.
"""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest
import yaml

from bs4 import BeautifulSoup

from sitecheck import ROOT, chapter_pages, head, html_pages, soup, toc_pages
from student_edition import revealing_cells  # tools/ is on the path (sitecheck)

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


def test_the_tab_names_the_book_once(site, student_site):
    """Sphinx writes "<page title> — <book title>"; the front page's heading is the book's
    title, and its tab must not repeat it (tools/dpbook_sphinx.py)."""
    book = yaml.safe_load((ROOT / "_config.yml").read_text())["title"]
    for where in (site, student_site):
        for page in toc_pages():
            title = head(where / page).title.get_text()
            assert title.count(book) == 1, f"{page}: tab title {title!r}"


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


SOLUTION = re.compile(r"^\s*[`:]{3,}\{solution(-start)?\}", re.M)


def _launch_targets(html) -> list[tuple[str, str, str, str]]:
    """(service, repository, branch, path in it) of every Colab and Binder link on a page."""
    launch = yaml.safe_load((ROOT / "_config.yml").read_text())["launch_buttons"]
    colab = re.compile(rf"^{re.escape(launch['colab_url'].rstrip('/'))}"
                       r"/github/([^/]+)/([^/]+)/blob/([^/]+)/(.+)$")
    binder = re.compile(rf"^{re.escape(launch['binderhub_url'].rstrip('/'))}"
                        r"/v2/gh/([^/]+)/([^/]+)/([^?]+)\?urlpath=(?:lab/)?tree/(.+)$")
    targets = []
    for a in html.select("a[href]"):
        for service, pattern in (("Colab", colab), ("Binder", binder)):
            if m := pattern.match(a["href"]):
                org, repo, branch, path = m.groups()
                targets.append((service, f"https://github.com/{org}/{repo}", branch, path))
    return targets


def _where(config: Path) -> tuple[str, str]:
    repo = yaml.safe_load(config.read_text())["repository"]
    return repo["url"].rstrip("/").removesuffix(".git"), repo["branch"]


def _solutions(notebook: Path) -> int:
    nb = nbformat.read(notebook, as_version=4)
    return sum(len(SOLUTION.findall(c.source)) for c in nb.cells if c.cell_type == "markdown")


def test_launch_buttons_open_notebooks_without_solutions(site, student_site):
    """Every Colab and Binder button of the student edition opens a notebook of the stripped
    tree (``src/`` next to the build, which the instructor publishes at the repository and
    branch of its _config.yml), and that notebook has no solution. The reader's edition's buttons
    open the book's own notebooks, which have them (the control)."""
    src = student_site.parent.parent / "src"
    reader_at, student_at = _where(ROOT / "_config.yml"), _where(src / "_config.yml")
    assert student_at != reader_at, "the student edition opens the reader's notebooks"
    for page in chapter_pages():
        reader = _launch_targets(soup(site / page))
        assert {t[0] for t in reader} == {"Colab", "Binder"}, f"{page}: no launch buttons"
        for _, repo, branch, path in reader:
            assert (repo, branch) == reader_at and _solutions(ROOT / path) >= 3
    opened = []
    for page in html_pages(student_site):
        for service, repo, branch, path in _launch_targets(soup(student_site / page)):
            assert (repo, branch) == student_at, \
                f"{page}: {service} opens {repo} at {branch}, not where src/ is published"
            notebook = src / path
            assert notebook.is_file(), f"{page}: {service} opens {path}, which src/ lacks"
            assert _solutions(notebook) == 0, f"{page}: {service} opens {path} with solutions"
            opened.append((page, service))
    for page in chapter_pages():
        assert {s for p, s in opened if p == page} == {"Colab", "Binder"}, \
            f"{page}: the student edition lost its launch buttons"


def _downloads(site: Path, page: str) -> list[Path]:
    """The notebooks a page's download button offers (links to an .ipynb file of the site)."""
    found = []
    for a in soup(site / page).select("a[href]"):
        href = a["href"].split("#")[0].split("?")[0]
        if href.endswith(".ipynb") and "://" not in href:
            found.append(((site / page).parent / href).resolve())
    return found


def _public_text(site: Path, page: str) -> str:
    """What the reader's page shows outside its solutions (outputs of the shown cells too)."""
    html = BeautifulSoup((site / page).read_text(encoding="utf-8"), "html.parser")
    for solution in html.select("div.solution"):
        solution.decompose()
    return html.get_text("\n")


@pytest.mark.parametrize("page", chapter_pages())
def test_no_notebook_a_student_can_open_reveals_an_answer(site, student_site, page):
    """Every notebook a student reaches — the stripped tree the Colab and Binder buttons open
    (``src/``) and the site's downloadable notebooks — has no cell that reveals an exercise's
    answer: no ``{solution}`` directive, no code line of a solution, no two numbers that only the
    solutions state (``student_edition.revealing_cells``; hidden answer checks included, which no
    page shows but every notebook holds). The reader's downloads are the control: the same
    check finds the answers there."""
    chapter = Path(page).with_suffix(".ipynb").as_posix()
    reader = nbformat.read(ROOT / chapter, as_version=4)
    public = _public_text(site, page)
    reader_downloads = _downloads(site, page)
    assert reader_downloads, f"{page}: the reader's page offers no notebook"
    for path in reader_downloads:
        assert revealing_cells(reader, nbformat.read(path, as_version=4), public), \
            f"control: {path.name} of the reader's edition reveals nothing"
    student_downloads = _downloads(student_site, page)
    assert student_downloads, f"{page}: the student edition offers no notebook"
    opened = [student_site.parent.parent / "src" / chapter, *student_downloads]
    for path in opened:
        assert path.is_file(), f"{page}: {path} is missing"
        leaks = revealing_cells(reader, nbformat.read(path, as_version=4), public)
        assert not leaks, f"{path}: cells reveal answers: {leaks[:3]}"
