"""Fixtures of the site tests: the built sites (see sitecheck.py for the paths), two browsers.

One headless Chromium as a laptop and one as a phone serve every test of a process (a pytest-xdist
worker runs several test files): starting Chromium costs more than most checks. Before each test
that asks for one, the browser is put back as a fresh one starts: the laptop's window at
``DESKTOP``, the console log emptied. Each test file serves the site from its own server, so no
page of one file is cached or stored (localStorage) for another.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from sitecheck import DESKTOP, SITE, STUDENT_SITE, chromium, require_site


@pytest.fixture(scope="session")
def site() -> Path:
    require_site(SITE, "make test-book (or make book)")
    return SITE


@pytest.fixture(scope="session")
def student_site() -> Path:
    require_site(STUDENT_SITE, "make test-student (or make book-student)")
    return STUDENT_SITE


@pytest.fixture(scope="session")
def _desktop_session():
    driver = chromium()
    yield driver
    driver.quit()


@pytest.fixture(scope="session")
def _phone_session():
    driver = chromium(phone=True)
    yield driver
    driver.quit()


def _reset(driver, desktop: bool):
    if desktop:
        driver.set_window_size(*DESKTOP)
    driver.get_log("browser")   # drop what earlier tests' pages logged
    return driver


@pytest.fixture
def desktop_browser(_desktop_session):
    """Headless Chromium with a DESKTOP window (sitecheck.chromium), network cut off."""
    return _reset(_desktop_session, desktop=True)


@pytest.fixture
def phone_browser(_phone_session):
    """Headless Chromium as a phone: a 390x844 viewport with touch (sitecheck.chromium)."""
    return _reset(_phone_session, desktop=False)
