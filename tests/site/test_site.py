"""The built website, opened in headless Chromium with the network cut off.

What a reader of the site must see without a kernel and without network (DESIGN.md): every page
loads, its math is typeset by the site's own MathJax, its figures are real images, each widget's
default figure is visible, and no resource is fetched from outside the site. Screenshots of every
page are written to ``<site>/../screenshots`` so a person can look at them.

Run after the book is built: ``make test-site`` (DPBOOK_SITE says which build to check).
"""
from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest
import yaml
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ROOT = Path(__file__).resolve().parents[2]
SITE = (ROOT / os.environ.get("DPBOOK_SITE", "_build/html")).resolve()
SHOTS = SITE.parent / "screenshots"


def _pages() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]] + [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    return [f"{f}.html" for f in files]


def _chapters() -> list[str]:
    return [f"chapters/{p.stem}.html" for p in sorted((ROOT / "chapters").glob("*.ipynb"))]


@pytest.fixture(scope="module")
def site_url():
    if not (SITE / "index.html").exists():
        pytest.fail(f"no built site at {SITE}: run `make test-book` (or `make book`) first")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(SITE))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_path = shutil.which("chromedriver")
    if not binary or not driver_path:
        pytest.fail("Debian's chromium and chromium-driver are needed (make browser installs them)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--window-size=1280,1600",
                 # No network: every host name but the local server fails to resolve.
                 "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=opts)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()


def _open(browser, url: str) -> dict:
    browser.get(url)
    # Wait for MathJax (served by the site) to finish typesetting, if the page has math.
    return browser.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const ready = (window.MathJax && MathJax.startup && MathJax.startup.promise)
                      ? MathJax.startup.promise : Promise.resolve();
        ready.then(() => {
          const imgs = [...document.querySelectorAll('article img')];
          const caps = [...document.querySelectorAll('.dpbook-widget-caption')];
          done({
            title: document.title,
            mathjax: !!window.MathJax,
            math_nodes: document.querySelectorAll('.math').length,
            typeset: document.querySelectorAll('mjx-container').length,
            math_errors: document.querySelectorAll('mjx-merror').length,
            raw_dollars: [...document.querySelectorAll('article p')]
                           .filter(p => /\\$\\$/.test(p.textContent)).length,
            images: imgs.length,
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
    """)


@pytest.mark.parametrize("page", _pages())
def test_page_loads_offline_with_math(browser, site_url, page):
    info = _open(browser, f"{site_url}/{page}")
    browser.save_screenshot(str(SHOTS / page.replace("/", "_").replace(".html", ".png")))
    assert "404" not in info["title"], f"{page} did not load"
    assert info["external"] == [], f"{page} fetched resources from the network"
    assert not info["broken_images"], f"broken images on {page}: {info['broken_images']}"
    if info["math_nodes"]:
        assert info["mathjax"], f"{page} has math but MathJax did not load"
        assert info["typeset"] >= info["math_nodes"], f"untypeset math on {page}"
        assert info["math_errors"] == 0, f"MathJax errors on {page}"


@pytest.mark.parametrize("page", _chapters())
def test_chapter_has_figures_and_visible_widget_default(browser, site_url, page):
    info = _open(browser, f"{site_url}/{page}")
    assert info["typeset"] > 10, f"{page}: expected typeset math, found {info['typeset']}"
    assert info["raw_dollars"] == 0, f"{page}: '$$' left as text"
    assert info["images"] >= 2, f"{page}: expected figures, found {info['images']}"
    assert info["widgets"], f"{page}: no widget default figure found"
    for w in info["widgets"]:
        assert w == {"img": True, "loaded": True, "visible": True}, f"{page}: widget figure {w}"
    # A full-page screenshot of the chapter for a person to look at.
    height = browser.execute_script("return document.body.scrollHeight")
    browser.set_window_size(1280, min(height, 16000))
    browser.save_screenshot(str(SHOTS / ("full_" + page.replace("/", "_").replace(".html", ".png"))))
    browser.set_window_size(1280, 1600)
