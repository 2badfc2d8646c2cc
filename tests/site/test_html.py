"""The built site, read as HTML files (no browser): what a reader clicks and counts on.

* every page the table of contents promises is built;
* every chapter page shows at least three exercises, each with its solution (counted in the
  HTML, and as many as the notebook has);
* no internal link is broken: every local href/src names a file of the site and every
  ``#fragment`` an id in that file;
* definitions, theorems, ... are numbered "<chapter>.<n>" per kind, and every cross-reference
  shows the number of its target;
* each chapter has the Colab and Binder launch buttons and the repository and issue buttons,
  built from ``repository`` in ``_config.yml``;
* the search page and index cover every page; the bibliography lists every cited work.
"""
from __future__ import annotations

import functools
import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
import yaml

from sitecheck import ROOT, SITE, chapter_pages, html_pages, soup, toc_pages

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
PROOF_KINDS = ("definition", "theorem", "lemma", "corollary", "proposition", "conjecture",
               "axiom", "criterion", "algorithm", "example", "remark", "property",
               "observation", "assumption", "notation")


def _page(site: Path, page: str):
    path = site / page
    assert path.exists(), f"{page} is not in the built site"
    return soup(path)


def test_every_toc_page_is_built(site):
    missing = [p for p in toc_pages() if not (site / p).exists()]
    assert not missing, f"pages in _toc.yml but not built: {missing}"


def _exercises_in_notebook(page: str) -> int:
    nb = nbformat.read(ROOT / page.replace(".html", ".ipynb"), as_version=4)
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    return len(re.findall(r"^[`:]{3,}\{exercise\}", md, re.M))


@pytest.mark.parametrize("page", chapter_pages())
def test_chapter_page_has_exercises_with_solutions(site, page):
    html = _page(site, page)
    exercises = html.select("div.exercise")
    assert len(exercises) >= 3, f"{page}: {len(exercises)} exercises, the book promises >= 3"
    assert len(exercises) == _exercises_in_notebook(page), f"{page}: exercises lost in the build"
    ids = [e.get("id") for e in exercises]
    assert all(ids), f"{page}: every exercise needs a :label:"
    solved = []
    for sol in html.select("div.solution"):
        assert "dropdown" in sol.get("class", []), f"{page}: solutions are folded (dropdown)"
        link = sol.select_one(".admonition-title a[href^='#']")
        assert link is not None, f"{page}: a solution that names no exercise"
        solved.append(link["href"][1:])
        assert len(sol.get_text(" ", strip=True)) > len(link.get_text(" ", strip=True)) + 20, \
            f"{page}: empty solution to {link['href']}"
    assert sorted(solved) == sorted(ids), f"{page}: exercises without a solution: " \
                                          f"{sorted(set(ids) - set(solved))}"


@functools.lru_cache(maxsize=None)
def _anchors(path: Path) -> tuple[dict, frozenset[str]]:
    """A page's elements by ``id`` (the first of each, as ``soup.find(id=...)`` gives it) and
    the values of its ``name`` attributes: read once per page, not once per link to it."""
    ids: dict = {}
    names = set()
    for el in soup(path).find_all(True):
        if el.get("id") is not None:
            ids.setdefault(el["id"], el)
        if el.get("name") is not None:
            names.add(el["name"])
    return ids, frozenset(names)


def _local_target(page: str, url: str) -> tuple[str, str] | None:
    """(site-relative file, fragment) of a local URL, or None for external/special URLs."""
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or url.startswith(("javascript:", "mailto:", "data:")):
        return None
    if not parts.path:
        return page, unquote(parts.fragment)
    base = Path(page).parent
    target = (base / unquote(parts.path)).as_posix()
    # normalise "a/../b"
    stack: list[str] = []
    for piece in target.split("/"):
        if piece == "..":
            if stack:
                stack.pop()
        elif piece not in ("", "."):
            stack.append(piece)
    path = "/".join(stack)
    if url.endswith("/") or (SITE / path).is_dir():
        path = f"{path}/index.html".lstrip("/")
    return path, unquote(parts.fragment)


@pytest.mark.parametrize("page", html_pages(SITE) or ["(no site built)"])
def test_no_broken_internal_link(site, page):
    html = _page(site, page)
    broken = []
    for tag, attr in (("a", "href"), ("link", "href"), ("img", "src"), ("script", "src")):
        for el in html.find_all(tag):
            url = el.get(attr)
            if not url:
                continue
            target = _local_target(page, url)
            if target is None:
                continue
            path, fragment = target
            file = site / path
            if not file.is_file():
                broken.append(f"{url} (no file {path})")
            elif fragment and file.suffix == ".html":
                ids, names = _anchors(file)
                if fragment not in ids and fragment not in names:
                    broken.append(f"{url} (no id {fragment!r} in {path})")
    assert not broken, f"{page}: broken links:\n  " + "\n  ".join(sorted(set(broken)))


def _caption(el) -> str | None:
    number = el.select_one(".admonition-title .caption-number")
    return number.get_text(" ", strip=True) if number else None


@pytest.mark.parametrize("page", chapter_pages())
def test_statements_are_numbered_and_cross_referenced(site, page):
    html = _page(site, page)
    section = html.select_one("h1 .section-number")
    assert section is not None, f"{page}: chapter is not numbered in the toc"
    chapter = section.get_text(strip=True).rstrip(".")
    seen: dict[str, list[int]] = {}
    for box in html.select("div.proof"):
        kinds = [k for k in box.get("class", []) if k in PROOF_KINDS]
        if not kinds:
            continue  # a proof: not numbered
        caption = _caption(box)
        assert caption, f"{page}: unnumbered {kinds[0]} {box.get('id')}"
        match = re.fullmatch(r"(\w+) (\d+)\.(\d+)", caption)
        assert match, f"{page}: caption {caption!r} is not '<Kind> <chapter>.<n>'"
        assert match.group(2) == chapter, f"{page}: {caption} outside chapter {chapter}"
        seen.setdefault(match.group(1), []).append(int(match.group(3)))
    for kind, numbers in seen.items():
        assert numbers == list(range(1, len(numbers) + 1)), f"{page}: {kind} numbers {numbers}"
    # every {prf:ref} shows its target's number
    for link in html.select("a.reference.internal[href]"):
        target = _local_target(page, link["href"])
        if not target or not target[1]:
            continue
        path, fragment = target
        if not (site / path).is_file():
            continue  # reported by the link test
        box = _anchors(site / path)[0].get(fragment)
        if box is None or box.name != "div" or "proof" not in box.get("class", []):
            continue
        caption = _caption(box)
        if caption:
            assert link.get_text(" ", strip=True) == caption, \
                f"{page}: reference to {caption} reads {link.get_text(strip=True)!r}"


def _repo_parts() -> tuple[str, str, str]:
    url = CONFIG["repository"]["url"].rstrip("/")
    org, repo = url.split("/")[-2:]
    return org, repo, CONFIG["repository"].get("branch", "main")


@pytest.mark.parametrize("page", chapter_pages())
def test_launch_and_repository_buttons(site, page):
    html = _page(site, page)
    hrefs = [a.get("href", "") for a in html.find_all("a")]
    org, repo, branch = _repo_parts()
    nb = page.replace(".html", ".ipynb")
    launch = CONFIG["launch_buttons"]
    colab = f"{launch['colab_url'].rstrip('/')}/github/{org}/{repo}/blob/{branch}/{nb}"
    binder = f"{launch['binderhub_url'].rstrip('/')}/v2/gh/{org}/{repo}/{branch}?urlpath=tree/{nb}"
    assert colab in hrefs, f"{page}: no Colab button ({colab})"
    assert binder in hrefs, f"{page}: no Binder button ({binder})"
    url = CONFIG["repository"]["url"].rstrip("/")
    assert url in hrefs, f"{page}: no repository button"
    assert any(h.startswith(f"{url}/issues/new") for h in hrefs), f"{page}: no issue button"


def test_search_page_and_index_cover_every_page(site):
    search = _page(site, "search.html")
    assert search.select_one("script[src*='searchtools.js']"), "search.html lacks its script"
    index = (site / "searchindex.js").read_text(encoding="utf-8")
    docnames = re.search(r'"docnames":\s*\[([^\]]*)\]', index).group(1)
    for page in toc_pages():
        assert f'"{page[:-5]}"' in docnames, f"{page} is not in the search index"


def _cited_keys() -> set[str]:
    texts = [p.read_text() for p in [ROOT / "intro.md", *(ROOT / "chapters").glob("*.md")]]
    for nb in (ROOT / "chapters").glob("*.ipynb"):
        texts.extend(c.source for c in nbformat.read(nb, 4).cells if c.cell_type == "markdown")
    keys = set()
    for group in re.findall(r"\{cite(?::\w+)?\}`([^`]+)`", "\n".join(texts)):
        keys.update(k.strip() for k in group.split(","))
    return keys


def _bib_titles() -> dict[str, str]:
    bib = (ROOT / "references.bib").read_text()
    titles = {}
    for key, body in re.findall(r"@\w+\{(\w+),(.*?)\n\}", bib, re.S):
        m = re.search(r"\btitle\s*=\s*[{\"](.*?)[}\"],?\s*\n", body, re.S)
        if m:
            title = re.sub(r"\\['\"`^~=.]", "", m.group(1))   # LaTeX accents: R{\'e}nyi
            titles[key] = re.sub(r"[{}\\]", "", " ".join(title.split()))
    return titles


def _words(text: str) -> str:
    """Lower-case ASCII words only: the bibliography style changes case, accents, punctuation."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def test_bibliography_lists_every_cited_work(site):
    page = next(p for p in toc_pages() if "references" in p or "bibliography" in p)
    text = _words(_page(site, page).get_text(" "))
    titles = _bib_titles()
    cited = _cited_keys()
    assert cited, "no citations found"
    assert cited <= set(titles), f"cited keys without a title: {sorted(cited - set(titles))}"
    missing = [k for k in sorted(cited)
               if " ".join(_words(titles[k]).split()[:6]) not in text]
    assert not missing, f"cited but not in the bibliography page: {missing}"
