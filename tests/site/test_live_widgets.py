"""The website's widgets are live without a kernel: every control of every panel moves the figure.

Each chapter page of the built site (DPBOOK_SITE) is opened in headless Chromium with the network
cut off, served as a plain static host would. On each panel (``.dpbook-live-figure``, written by
``dplib.widget_frames`` when the book is built): every position of every slider and every option
of every dropdown shows a figure other than the default one, which has loaded, and whose readout,
``aria-valuetext`` and caption name the values shown; moving one control of a one-at-a-time panel
returns the others to their defaults; the keyboard moves a slider (focus, ArrowRight/ArrowLeft);
and the page logs no console error while all this happens. Screenshots of a chapter with a moved
slider, on a desktop and on a phone, go to ``<site>/../screenshots``.

A chapter is loaded once for its two tests (they are grouped by chapter): the keyboard test goes
on from the page the control test left, every control back at its default, and loads the page
again only if that test did not finish.
"""
from __future__ import annotations

import json

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from sitecheck import DESKTOP, SITE, chapter_pages, serve

SHOTS = SITE.parent / "screenshots"
PANEL = ".dpbook-live-figure"


@pytest.fixture(scope="module")
def site_url(site):
    with serve(site) as url:
        yield url


@pytest.fixture
def browser(desktop_browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    return desktop_browser


@pytest.fixture(scope="module", params=chapter_pages())
def page(request):
    """A chapter page; module-scoped, so that pytest runs each chapter's tests one after the
    other (the browser stays on the page)."""
    return request.param


# The URL whose page the control test left with every control back at its default.
_AT_DEFAULTS: dict[str, str] = {}


def _open(browser, url: str) -> None:
    browser.get_log("browser")  # drop what earlier pages logged
    browser.get(url)
    WebDriverWait(browser, 30).until(
        lambda b: b.execute_script("return document.readyState") == "complete")


def _errors(browser) -> list[str]:
    # The favicon's 404 (a plain static server has none to give) is test_site's concern.
    return [e["message"] for e in browser.get_log("browser")
            if e["level"] == "SEVERE" and "favicon.ico" not in e["message"]]


# _state in one call to the browser instead of a dozen: text as WebDriver's element text gives it
# (rendered text, no-break spaces as spaces, spaces runs collapsed, lines trimmed). The control
# test checks, on each panel, that it reads what _state reads (and still reads it then).
_STATE = """
const panel = arguments[0];
const img = panel.querySelector('img');
const text = e => (e.innerText || '').replace(/\\u00a0/g, ' ').split('\\n')
    .map(line => line.replace(/[ \\t\\r]+/g, ' ').trim()).join('\\n').trim();
return {
  src: img.src,
  loaded: img.complete && img.naturalWidth > 100,
  alt: img.getAttribute('alt'),
  shown: text(panel.querySelector('.dpbook-live-values')),
  readouts: [...panel.querySelectorAll('output')].map(text),
  valuetext: [...panel.querySelectorAll('input[type=range]')]
               .map(r => r.getAttribute('aria-valuetext')),
  positions: [...panel.querySelectorAll('[data-dpbook-control]')].map(c => String(c.value)),
};
"""


def _quick_state(browser, panel) -> dict:
    """_state, read by one script."""
    return browser.execute_script(_STATE, panel)


def _state(panel) -> dict:
    """What the reader sees of a panel: image, readouts, caption values."""
    img = panel.find_element(By.TAG_NAME, "img")
    return {
        "src": img.get_attribute("src"),
        "loaded": panel.parent.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth > 100", img),
        "alt": img.get_attribute("alt"),
        "shown": panel.find_element(By.CSS_SELECTOR, ".dpbook-live-values").text,
        "readouts": [o.text for o in panel.find_elements(By.TAG_NAME, "output")],
        "valuetext": [r.get_attribute("aria-valuetext")
                      for r in panel.find_elements(By.CSS_SELECTOR, "input[type=range]")],
        "positions": [c.get_attribute("value")
                      for c in panel.find_elements(By.CSS_SELECTOR, "[data-dpbook-control]")],
    }


def _data(panel) -> dict:
    return json.loads(panel.find_element(By.CSS_SELECTOR, "script.dpbook-live-data")
                      .get_attribute("textContent"))


def _move(browser, control, position: int) -> None:
    """Put a control at ``position`` as a reader would: a drag (range) or a choice (select)."""
    if control.tag_name == "select":
        Select(control).select_by_value(str(position))
    else:  # a drag ends with the value set and an input event fired
        browser.execute_script(
            "arguments[0].value = arguments[1];"
            "arguments[0].dispatchEvent(new Event('input', {bubbles: true}));",
            control, str(position))


def _label(panel, control) -> str:
    return panel.find_element(By.CSS_SELECTOR, f"label[for='{control.get_attribute('id')}']").text


def _panels(browser, page: str) -> list:
    panels = browser.find_elements(By.CSS_SELECTOR, PANEL)
    assert panels, f"{page}: no live widget (was the book built with DPBOOK_WIDGET_FRAMES=1?)"
    return panels


def test_every_control_moves_the_figure(browser, site_url, page):
    _AT_DEFAULTS.pop("url", None)
    browser.set_window_size(*DESKTOP)
    _open(browser, f"{site_url}/{page}")
    for panel in _panels(browser, page):
        data, start = _data(panel), _state(panel)
        assert _quick_state(browser, panel) == start, f"{page}: _STATE does not read _state"
        assert start["loaded"], f"{page}: the default figure did not load"
        checked = False
        controls = panel.find_elements(By.CSS_SELECTOR, "[data-dpbook-control]")
        assert len(controls) == len(data["defaults"]), f"{page}: controls and frames disagree"
        for i, control in enumerate(controls):
            label = _label(panel, control)
            assert label, f"{page}: control {i} has no label"
            for pos in range(len(data["readouts"][i])):
                if pos == data["defaults"][i]:
                    continue
                _move(browser, control, pos)
                now = _quick_state(browser, panel)
                if not checked:     # _STATE reads what _state reads on a moved panel, too
                    assert now == _state(panel), f"{page}: _STATE does not read _state"
                    checked = True
                where = f"{page}: {label} at {data['readouts'][i][pos]}"
                assert now["src"] != start["src"], f"{where} shows the default figure"
                assert now["loaded"], f"{where}: the figure did not load"
                assert f"{label} = {data['readouts'][i][pos]}" in now["shown"], where
                assert now["alt"].endswith(now["shown"]), where
                # The other controls are at their defaults unless every combination is drawn.
                if not data["product"]:
                    others = [p for j, p in enumerate(now["positions"]) if j != i]
                    assert others == [str(d) for j, d in enumerate(data["defaults"]) if j != i], \
                        f"{where}: the other controls were not returned to their defaults"
            _move(browser, control, data["defaults"][i])
            assert _quick_state(browser, panel)["src"] == start["src"], \
                f"{page}: {label} back at its default"
    errors = _errors(browser)
    assert not errors, f"{page}: console errors:\n  " + "\n  ".join(errors)
    _AT_DEFAULTS["url"] = browser.current_url


def test_keyboard_moves_a_slider(browser, site_url, page):
    browser.set_window_size(*DESKTOP)
    if _AT_DEFAULTS.pop("url", None) != browser.current_url or \
            browser.current_url != f"{site_url}/{page}":
        _open(browser, f"{site_url}/{page}")
    for panel in _panels(browser, page):
        for rng in panel.find_elements(By.CSS_SELECTOR, "input[type=range]"):
            before = _state(panel)
            at_end = rng.get_attribute("value") == rng.get_attribute("max")
            browser.execute_script("arguments[0].focus();", rng)   # as Tab would
            assert browser.switch_to.active_element == rng, f"{page}: a slider takes no focus"
            rng.send_keys(Keys.ARROW_LEFT if at_end else Keys.ARROW_RIGHT)
            after = _state(panel)
            assert after["src"] != before["src"], f"{page}: an arrow key did not move the figure"
            assert after["valuetext"] != before["valuetext"], f"{page}: stale aria-valuetext"
            assert after["loaded"], f"{page}: the figure did not load"
            rng.send_keys(Keys.HOME)
            assert rng.get_attribute("value") == "0", f"{page}: Home did not reach the minimum"
    assert not _errors(browser), f"{page}: console errors:\n  " + "\n  ".join(_errors(browser))


@pytest.mark.parametrize("name", ["desktop", "phone"])
def test_screenshot_with_a_moved_slider(request, site_url, name):
    """A chapter page with its first slider moved to the end, as a person would look at it."""
    page = chapter_pages()[0]
    driver = request.getfixturevalue(f"{name}_browser")
    _open(driver, f"{site_url}/{page}")
    panel = _panels(driver, page)[0]
    rng = panel.find_element(By.CSS_SELECTOR, "input[type=range]")
    before = _state(panel)
    _move(driver, rng, int(rng.get_attribute("max")))
    assert _state(panel)["src"] != before["src"]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", panel)
    fits = driver.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return r.right <= window.innerWidth + 1;", panel)
    assert fits, f"{page}: the widget is wider than a {name} screen"
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / f"live_widget_{name}.png"))
    assert not _errors(driver), "\n".join(_errors(driver))
