"""Finding one's way on the built website: menus on a phone, the sidebar on a laptop, search.

Each test does what a reader does, in headless Chromium with the network cut off, on the site
served as a plain static host serves it (a missing file is a 404 in the console):

* on a phone (390x844), the menu button opens the chapter menu and a chapter link in it leads to
  that chapter; the contents button opens the page's contents and a section link in it leads to
  that section, the drawer out of the way;
* on a laptop, the sidebar button hides the chapter menu (the text gets the room) and shows it
  again;
* the site's own search finds the same pages for "Renyi" and "Rényi", every page that has the
  word among them;
* the browser finds the site's icon (no 404 for ``/favicon.ico``), and every page loads on a
  phone without a console error.

Screenshots (``nav_*.png``) go to ``<site>/../screenshots`` with those of test_site.py.
Run after the book is built: ``make test-site``.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote, urljoin, urlsplit

import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from sitecheck import (PHONE, SITE, chapter_pages, chromium, fold_accents, html_pages, serve,
                       soup, toc_pages)

SHOTS = SITE.parent / "screenshots"
# A chapter page, and the chapter its menu link leads to.
PAGE, NEXT = chapter_pages()[:2]
# A word the book writes with its accent; readers type it with or without.
WORD = "Rényi"


@pytest.fixture(scope="module")
def answered() -> list[tuple[str, int]]:
    """Every request the site's server answered: (path, HTTP status)."""
    return []


@pytest.fixture(scope="module")
def site_url(site, answered):
    with serve(site, answered) as url:
        yield url


def _shot(browser, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SHOTS / f"nav_{name}.png"))


_SETTLED = """
    const done = arguments[arguments.length - 1];
    const typeset = (window.MathJax && MathJax.startup && MathJax.startup.promise)
                    ? MathJax.startup.promise : Promise.resolve();
    typeset.then(() => document.fonts.ready).then(() => setTimeout(done, 0));
"""


# The page's width, and the elements that stick out of the viewport without an ancestor that
# scrolls or clips them (what makes the browser widen the page; a drawer parked off-screen,
# position: fixed, does not).
_TOO_WIDE = """
const held = e => { for (let a = e; a; a = a.parentElement) { const s = getComputedStyle(a);
    if (s.position === "fixed" || (a !== e && ["auto", "scroll", "hidden", "clip"].includes(
      s.overflowX))) return true; }
  return false; };
const wide = [...document.querySelectorAll("body *")].filter(e => {
    const r = e.getBoundingClientRect(); return r.width > 0 && r.right > arguments[0] + 0.5
      && !held(e); }).slice(0, 5).map(e => `<${e.tagName.toLowerCase()} class="${e.className}">`
      + ` ${(e.textContent || "").trim().slice(0, 60)}`);
return [document.documentElement.scrollWidth, wide];
"""


def _load(browser, url: str) -> None:
    """Open ``url`` and wait until its math is typeset and its fonts loaded: the page's layout
    has settled, as it has before a reader reaches for a menu."""
    browser.get(url)
    browser.execute_async_script(_SETTLED)


def _visible_toggle(browser, which: str) -> WebElement:
    """The ``which`` ("primary" or "secondary") sidebar button a reader can see."""
    shown = [b for b in browser.find_elements(By.CSS_SELECTOR, f".{which}-toggle")
             if b.is_displayed()]
    assert len(shown) == 1, f"expected one visible {which} sidebar button, found {len(shown)}"
    return shown[0]


def _drawer_open(browser, which: str) -> bool:
    return browser.execute_script(
        "const d = document.getElementById(arguments[0]); return !!(d && d.open);",
        f"pst-{which}-sidebar-modal")


def _open_drawer(browser, which: str) -> WebElement:
    """Tap the visible ``which`` sidebar button; return the drawer (a modal dialog) it opens."""
    _visible_toggle(browser, which).click()
    try:
        WebDriverWait(browser, 10).until(lambda b: _drawer_open(b, which))
    except TimeoutException:
        pytest.fail(f"the {which} sidebar button opened nothing")
    return browser.find_element(By.ID, f"pst-{which}-sidebar-modal")


def _in_viewport(browser, element: WebElement) -> bool:
    return browser.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return r.width > 0 && r.left >= 0 && r.right <= innerWidth"
        "       && r.top >= 0 && r.bottom <= innerHeight;", element)


def test_phone_menu_opens_and_a_chapter_link_navigates(phone_browser, site_url):
    browser = phone_browser
    _load(browser, f"{site_url}/{PAGE}")
    assert browser.execute_script("return [innerWidth, innerHeight]") == list(PHONE)
    drawer = _open_drawer(browser, "primary")
    target = f"{site_url}/{NEXT}"
    links = [a for a in drawer.find_elements(By.CSS_SELECTOR, "nav a[href]")
             if a.get_attribute("href").split("#")[0] == target]
    assert links, f"the chapter menu has no link to {NEXT}"
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", links[0])
    assert _in_viewport(browser, links[0]), "the link to the next chapter is off screen"
    _shot(browser, "phone_menu")
    links[0].click()
    WebDriverWait(browser, 30).until(lambda b: b.current_url.split("#")[0] == target)
    assert browser.find_element(By.CSS_SELECTOR, "article h1").is_displayed()
    assert not _drawer_open(browser, "primary")


def test_phone_contents_open_and_a_section_link_leads_there(phone_browser, site_url):
    browser = phone_browser
    _load(browser, f"{site_url}/{PAGE}")
    drawer = _open_drawer(browser, "secondary")
    links = [a for a in drawer.find_elements(By.CSS_SELECTOR, "nav a[href*='#']")
             if a.is_displayed()]
    assert len(links) >= 3, f"{PAGE}: expected sections in the contents, found {len(links)}"
    _shot(browser, "phone_contents")
    link = links[len(links) // 2]  # a section well down the page
    anchor = link.get_attribute("href").split("#", 1)[1]
    link.click()
    WebDriverWait(browser, 10).until(lambda b: b.execute_script("return location.hash")
                                     == f"#{anchor}")
    # The drawer must not stay over the section the reader asked for.
    WebDriverWait(browser, 10).until(lambda b: not _drawer_open(b, "secondary"))
    # The section (the element the link names) starts in the upper half of the screen.
    top = browser.execute_script(
        "return document.getElementById(arguments[0]).getBoundingClientRect().top", anchor)
    assert browser.execute_script("return scrollY") > 0, "the page did not scroll"
    assert 0 <= top < PHONE[1] / 2, f"section #{anchor} starts {top:.0f} px down the screen"
    _shot(browser, "phone_section")


def test_desktop_sidebar_toggle_collapses_and_expands(desktop_browser, site_url):
    browser = desktop_browser
    _load(browser, f"{site_url}/{PAGE}")
    sidebar = browser.find_element(By.ID, "pst-primary-sidebar")
    main = browser.find_element(By.CSS_SELECTOR, "main.bd-main")
    assert sidebar.is_displayed(), "the chapter menu is not shown on a wide screen"
    width = main.rect["width"]
    toggle = _visible_toggle(browser, "primary")
    toggle.click()
    try:
        WebDriverWait(browser, 10).until(lambda _: not sidebar.is_displayed()
                                         and main.rect["width"] > width + 100)
    except TimeoutException:
        pytest.fail("the sidebar button did not collapse the chapter menu")
    assert not _drawer_open(browser, "primary"), "a wide screen got the phone's drawer"
    _shot(browser, "desktop_collapsed")
    toggle.click()
    WebDriverWait(browser, 10).until(lambda _: sidebar.is_displayed()
                                     and abs(main.rect["width"] - width) < 1)
    _shot(browser, "desktop_expanded")


def _search(browser, site_url: str, query: str) -> dict[str, list[str]]:
    """The pages the site's search page lists for ``query``, each with its excerpts."""
    browser.get(f"{site_url}/search.html?q={quote(query)}")
    # The summary line is written once every result is listed.
    WebDriverWait(browser, 30).until(
        lambda b: b.find_element(By.CSS_SELECTOR, "#search-results p.search-summary").text)
    found: dict[str, list[str]] = {}
    for item in browser.find_elements(By.CSS_SELECTOR, "#search-results ul.search > li"):
        page = urlsplit(item.find_element(By.TAG_NAME, "a").get_attribute("href")).path
        excerpts = [p.text for p in item.find_elements(By.CSS_SELECTOR, "p.context")]
        found.setdefault(page.lstrip("/"), []).extend(excerpts)
    return found


def _pages_with_word(site: Path, word: str) -> set[str]:
    """Pages whose article text has ``word`` as a whole word, with or without accents."""
    pattern = re.compile(rf"(?<!\w){re.escape(fold_accents(word).lower())}(?!\w)")
    found = set()
    for page in html_pages(site):
        article = soup(site / page).select_one("article")
        if article is None:
            continue
        text = " ".join(t for t in article.find_all(string=True)
                        if t.parent.name not in ("script", "style", "template"))
        if pattern.search(fold_accents(text).lower()):
            found.add(page)
    return found


def test_search_finds_the_same_pages_with_or_without_accents(desktop_browser, site_url, site):
    expected = _pages_with_word(site, WORD) & set(toc_pages())
    assert expected, f"no page of the book has the word {WORD!r} to search for"
    accented = _search(desktop_browser, site_url, WORD)
    plain = _search(desktop_browser, site_url, fold_accents(WORD))
    _shot(desktop_browser, "search_plain")
    assert set(plain) == set(accented), (f"{fold_accents(WORD)!r} finds {sorted(plain)}, "
                                         f"{WORD!r} finds {sorted(accented)}")
    assert expected <= set(accented), f"search missed pages: {expected - set(accented)}"
    # Each result's excerpt shows the page where the word is, whichever spelling was typed.
    word = fold_accents(WORD).lower()
    for results in (plain, accented):
        blind = [page for page, excerpts in results.items()
                 if not any(word in fold_accents(e).lower() for e in excerpts)]
        assert not blind, f"excerpts without the word {WORD!r}: {blind}"


def _is_redirect(html) -> bool:
    # Jupyter Book's root index.html only sends the browser on to the first page.
    return html.find("meta", attrs={"http-equiv": re.compile("refresh", re.I)}) is not None


@pytest.mark.parametrize("edition", ["site", "student_site"])
def test_both_editions_ship_the_navigation_fix_icon_and_folded_index(request, edition):
    site = request.getfixturevalue(edition)
    for page in html_pages(site):
        html = soup(site / page)
        icon = html.select_one("link[rel~=icon]")
        assert icon is not None, f"{edition} {page}: no favicon"
        assert (site / page).parent.joinpath(icon["href"]).resolve().is_file(), icon["href"]
        if _is_redirect(html):
            continue
        assert not html.select("header.bd-header .primary-toggle"), (
            f"{edition} {page}: the hidden page header is back; its buttons capture the "
            "theme's sidebar scripts")
        assert html.select("script[src*='dpbook.js']"), f"{edition} {page}: no dpbook.js"
    index = (site / "searchindex.js").read_text(encoding="utf-8")
    terms = json.loads(index[index.index("(") + 1:index.rindex(")")])["terms"]
    accented = [t for t in terms if fold_accents(t) != t]
    assert not accented, f"{edition}: words indexed with their accents: {accented[:10]}"


def test_browser_finds_the_site_icon(site, answered, site_url):
    """A browser with nothing cached opens the site's root and asks for an icon: the one the
    first page declares, which the site has, not a missing /favicon.ico."""
    first = toc_pages()[0]
    icon = soup(site / first).select_one("link[rel~=icon]")
    asked = {"/favicon.ico"}
    if icon is not None:
        asked.add(urlsplit(urljoin(f"{site_url}/{first}", icon["href"])).path)
    fresh = chromium()
    try:
        answered.clear()
        fresh.get(f"{site_url}/")
        WebDriverWait(fresh, 30).until(lambda _: any(path in asked for path, _ in answered))
        log = [e["message"] for e in fresh.get_log("browser") if e["level"] == "SEVERE"]
    finally:
        fresh.quit()
    failed = [(path, code) for path, code in answered if code >= 400]
    assert not failed, f"requests the site could not answer: {failed}"
    assert not log, log


@pytest.mark.parametrize("page", html_pages(SITE) or ["(no site built)"])
def test_page_loads_on_a_phone_without_console_errors(phone_browser, site_url, page):
    browser = phone_browser
    browser.get_log("browser")  # drop what earlier pages logged
    _load(browser, f"{site_url}/{page}")
    assert "404" not in browser.title, f"{page} did not load"
    severe = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, f"{page} on a phone: console errors:\n  " + "\n  ".join(severe)
    # Nothing wider than the phone outside a box that scrolls on its own (code, tables, display
    # math): else the browser widens the whole page and the reader pans sideways to read a line.
    width, wide = browser.execute_script(_TOO_WIDE, PHONE[0])
    assert width == PHONE[0], \
        f"{page} on a phone is {width} px wide (viewport {PHONE[0]}); too wide: {wide}"
