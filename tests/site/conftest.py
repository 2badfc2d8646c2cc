"""Fixtures of the site tests: the built sites (see sitecheck.py for the paths), a phone."""
from __future__ import annotations

from pathlib import Path

import pytest

from sitecheck import SITE, STUDENT_SITE, chromium, require_site


@pytest.fixture(scope="session")
def site() -> Path:
    require_site(SITE, "make test-book (or make book)")
    return SITE


@pytest.fixture(scope="session")
def student_site() -> Path:
    require_site(STUDENT_SITE, "make test-student (or make book-student)")
    return STUDENT_SITE


@pytest.fixture(scope="module")
def phone_browser():
    """Headless Chromium as a phone: a 390x844 viewport with touch (sitecheck.chromium)."""
    driver = chromium(phone=True)
    yield driver
    driver.quit()
