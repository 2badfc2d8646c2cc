"""The built website, opened in headless Chromium with the network cut off.

What a reader of the site must see without a kernel and without network (DESIGN.md): every page
(found by walking the built HTML tree, so new pages are covered without editing this file) loads
without JavaScript errors, its math is typeset by the site's own MathJax, every image on it has
loaded, nothing is fetched from outside the site, and each chapter's widget shows its default
figure. The search page answers a query offline. Screenshots of the first screen of every page
are written to ``<site>/../screenshots`` for a person to look at; with ``DPBOOK_FULL_SHOTS=1``,
also each chapter's first 16,000 px (2.4 s a chapter, so not in ``make test``).

One browser session serves every test, and each page is loaded once: a chapter's checks of its
figures and widget read the same load as its check of errors, math and images. Links are checked
without a browser (test_html.py).

Run after the book is built: ``make test-site`` (DPBOOK_SITE says which build to check).
"""
from __future__ import annotations

import functools
import http.server
import os
import threading

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from sitecheck import DESKTOP, SITE, chapter_pages, html_pages

SHOTS = SITE.parent / "screenshots"
FIRST_SCREEN = DESKTOP


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args, **kwargs):
        pass

    def do_GET(self):
        # Browsers ask for /favicon.ico on their own; the book has none. Answer "no content"
        # so that the request does not log a 404 in the console the test reads.
        if self.path == "/favicon.ico":
            self.send_response(204)
            self.end_headers()
            return
        super().do_GET()


@pytest.fixture(scope="module")
def site_url(site):
    handler = functools.partial(_Handler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def browser(desktop_browser):
    # a desktop window of FIRST_SCREEN, network cut off, console kept (conftest.py)
    SHOTS.mkdir(parents=True, exist_ok=True)
    return desktop_browser


_INSPECT = """
    const done = arguments[arguments.length - 1];
    const ready = (window.MathJax && MathJax.startup && MathJax.startup.promise)
                  ? MathJax.startup.promise : Promise.resolve();
    // Images below the fold may be lazy: ask each to load, then wait for all of them.
    const imgs = [...document.querySelectorAll('img')];
    imgs.forEach(i => { i.loading = 'eager'; });
    const loaded = Promise.all(imgs.map(i => i.complete ? null :
        new Promise(r => { i.addEventListener('load', r); i.addEventListener('error', r); })));
    Promise.all([ready, loaded]).then(() => {
      const caps = [...document.querySelectorAll('.dpbook-widget-caption')];
      done({
        title: document.title,
        mathjax: !!window.MathJax,
        math_nodes: document.querySelectorAll('.math').length,
        typeset: document.querySelectorAll('mjx-container').length,
        math_errors: document.querySelectorAll('mjx-merror').length,
        raw_dollars: [...document.querySelectorAll('article p')]
                       .filter(p => /\\$\\$/.test(p.textContent)).length,
        images: document.querySelectorAll('article img').length,
        broken_images: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src),
        widgets: caps.map(c => {
          const cell = c.closest('.cell');
          const img = cell && cell.querySelector('img');
          const r = img && img.getBoundingClientRect();
          return {img: !!img, loaded: !!img && img.complete && img.naturalWidth > 100,
                  visible: !!r && r.width > 100 && r.height > 100};
        }),
        external: performance.getEntriesByType('resource').map(e => e.name)
                    .filter(n => !n.startsWith(location.origin) && !n.startsWith('data:')),
      });
    });
"""


def _shot_name(page: str, prefix: str = "") -> str:
    return prefix + page.replace("/", "_").replace(".html", ".png")


def _open(browser, url: str) -> tuple[dict, list[dict]]:
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(url)
    info = browser.execute_async_script(_INSPECT)
    return info, browser.get_log("browser")


_LOADED: dict[tuple[str, str], tuple[dict, list[dict]]] = {}


def _load(browser, site_url: str, page: str) -> tuple[dict, list[dict]]:
    """``page`` opened at FIRST_SCREEN and inspected, once per server: (what _INSPECT found, the
    console log of the load). The first screen is photographed, and a chapter in full."""
    key = (site_url, page)
    if key not in _LOADED:
        browser.set_window_size(*FIRST_SCREEN)
        info, log = _open(browser, f"{site_url}/{page}")
        browser.save_screenshot(str(SHOTS / _shot_name(page)))
        if page in chapter_pages() and os.environ.get("DPBOOK_FULL_SHOTS") == "1":
            # A long screenshot of the chapter for a person to look at.
            height = browser.execute_script("return document.body.scrollHeight")
            browser.set_window_size(FIRST_SCREEN[0], min(height, 16000))
            browser.save_screenshot(str(SHOTS / _shot_name(page, "full_")))
            browser.set_window_size(*FIRST_SCREEN)
        _LOADED[key] = info, log
    return _LOADED[key]


@pytest.mark.parametrize("page", html_pages(SITE) or ["(no site built)"])
def test_page_loads_offline_without_errors(browser, site_url, page):
    info, log = _load(browser, site_url, page)
    assert "404" not in info["title"], f"{page} did not load"
    severe = [e["message"] for e in log if e["level"] == "SEVERE"]
    assert not severe, f"{page}: JavaScript errors:\n  " + "\n  ".join(severe)
    assert info["external"] == [], f"{page} fetched resources from the network"
    assert not info["broken_images"], f"broken images on {page}: {info['broken_images']}"
    assert info["raw_dollars"] == 0, f"{page}: '$$' left as text"
    if info["math_nodes"]:
        assert info["mathjax"], f"{page} has math but MathJax did not load"
        assert info["typeset"] >= info["math_nodes"], f"untypeset math on {page}"
        assert info["math_errors"] == 0, f"MathJax errors on {page}"


@pytest.mark.parametrize("page", chapter_pages())
def test_chapter_has_figures_and_visible_widget_default(browser, site_url, page):
    info, _ = _load(browser, site_url, page)
    assert info["typeset"] > 10, f"{page}: expected typeset math, found {info['typeset']}"
    assert info["images"] >= 2, f"{page}: expected figures, found {info['images']}"
    assert info["widgets"], f"{page}: no widget default figure found"
    for w in info["widgets"]:
        assert w == {"img": True, "loaded": True, "visible": True}, f"{page}: widget figure {w}"


def test_search_works_offline(browser, site_url, site):
    browser.get(f"{site_url}/search.html?q=randomized+response")
    # Results are listed one at a time; the summary line is written once all of them are.
    WebDriverWait(browser, 30).until(
        lambda b: b.find_element(By.CSS_SELECTOR, "#search-results p.search-summary").text)
    results = browser.find_elements(By.CSS_SELECTOR, "#search-results ul.search li")
    links = [r.find_element(By.TAG_NAME, "a").get_attribute("href") for r in results]
    assert any("01_randomized_response" in link for link in links), links
    browser.save_screenshot(str(SHOTS / "search.png"))
