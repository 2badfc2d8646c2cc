"""What the site tests share: where the built sites are, their pages, parsed HTML.

(A module of its own, not conftest.py: other test folders have a conftest module too, and
``from conftest import ...`` could pick theirs. The fixtures are in conftest.py.)

``DPBOOK_SITE`` is the built site to check (default ``_build/html``); ``DPBOOK_STUDENT_SITE`` its
student edition (default ``_build/student/_build/html``). ``make test-site`` points both at the
quick builds of ``make test``.
"""
from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import sys
import threading
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from bs4 import BeautifulSoup

ROOT = Path(__file__).resolve().parents[2]
# A phone's viewport in CSS pixels (a 6.1-inch phone), and a laptop's window.
PHONE = (390, 844)
DESKTOP = (1280, 900)
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


def head(path: Path) -> BeautifulSoup:
    """The page's ``<head>`` alone, parsed (a chapter page is half a megabyte of figures)."""
    text = path.read_text(encoding="utf-8")
    end = text.find("</head>")
    return BeautifulSoup(text if end < 0 else text[:end + len("</head>")], "html.parser")


def require_site(site: Path, how: str) -> None:
    if not (site / "index.html").exists():
        pytest.fail(f"no built site at {site}: run `{how}` first")


def fold_accents(text: str) -> str:
    """``text`` without accents (NFKD, combining marks dropped): Rényi -> Renyi."""
    return "".join(c for c in unicodedata.normalize("NFKD", text)
                   if not unicodedata.category(c).startswith("M"))


class _Handler(http.server.SimpleHTTPRequestHandler):
    answered: list[tuple[str, int]]

    def log_message(self, *args, **kwargs):
        pass

    def log_request(self, code="-", size="-"):
        self.answered.append((self.path, int(code)))


@contextlib.contextmanager
def serve(site: Path, answered: list[tuple[str, int]] | None = None) -> Iterator[str]:
    """Serve ``site`` over HTTP on localhost as a plain static host would (404 for what is
    missing, /favicon.ico included); yield its base URL. Each request's path and status are
    appended to ``answered``."""
    handler_class = type("Handler", (_Handler,), {"answered": [] if answered is None
                                                  else answered})
    handler = functools.partial(handler_class, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def chromium(phone: bool = False):
    """Headless Chromium with the network cut off (only 127.0.0.1 resolves) and its console
    log kept. ``phone=True`` emulates a phone: a PHONE viewport, 3 device pixels per CSS
    pixel, touch events; otherwise a DESKTOP window."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not binary or not driver_path:
        pytest.fail("Debian's chromium and chromium-driver are needed (make browser)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--hide-scrollbars",
                 f"--window-size={DESKTOP[0]},{DESKTOP[1]}",
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"):
        opts.add_argument(flag)
    if phone:
        opts.add_experimental_option("mobileEmulation", {"deviceMetrics": {
            "width": PHONE[0], "height": PHONE[1], "pixelRatio": 3.0, "touch": True}})
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=opts)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    return driver
