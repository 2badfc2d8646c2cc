"""What the site tests share: where the built sites are, their pages, parsed HTML.

(A module of its own, not conftest.py: other test folders have a conftest module too, and
``from conftest import ...`` could pick theirs. The fixtures are in conftest.py.)

``DPBOOK_SITE`` is the built site to check (default ``_build/html``); ``DPBOOK_STUDENT_SITE`` its
student edition (default ``_build/student/_build/html``). ``make test-site`` points both at the
quick builds of ``make test``.
"""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import pytest
import yaml
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from sync_notebooks import chapter_notebooks  # noqa: E402

SITE = (ROOT / os.environ.get("DPBOOK_SITE", "_build/html")).resolve()
STUDENT_SITE = (ROOT / os.environ.get("DPBOOK_STUDENT_SITE",
                                      "_build/student/_build/html")).resolve()


def html_pages(site: Path) -> list[str]:
    """Every HTML page of a built site, relative to it (the pages, not the static assets)."""
    if not site.is_dir():
        return []
    return sorted(str(p.relative_to(site)) for p in site.rglob("*.html")
                  if not str(p.relative_to(site)).startswith(("_static", "_sources", "_images")))


def toc_pages() -> list[str]:
    """The pages the table of contents promises: the root and every entry of every part."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            files.append(chapter["file"])
            files.extend(s["file"] for s in chapter.get("sections", []))
    return [f"{f}.html" for f in files]


def chapter_pages() -> list[str]:
    """The page of every chapter notebook (a new chapter is covered when its notebook lands)."""
    return [f"chapters/{p.stem}.html" for p in chapter_notebooks()]


@functools.lru_cache(maxsize=None)
def soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def require_site(site: Path, how: str) -> None:
    if not (site / "index.html").exists():
        pytest.fail(f"no built site at {site}: run `{how}` first")
