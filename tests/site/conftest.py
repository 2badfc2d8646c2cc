"""Fixtures of the site tests: the built sites (see sitecheck.py for the paths)."""
from __future__ import annotations

from pathlib import Path

import pytest

from sitecheck import SITE, STUDENT_SITE, require_site


@pytest.fixture(scope="session")
def site() -> Path:
    require_site(SITE, "make test-book (or make book)")
    return SITE


@pytest.fixture(scope="session")
def student_site() -> Path:
    require_site(STUDENT_SITE, "make test-student (or make book-student)")
    return STUDENT_SITE
