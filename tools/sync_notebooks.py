"""Keep every chapter's Colab install cell pointing at ``repository.url`` in ``_config.yml``.

``_config.yml`` is the one place the repository's address is written; a notebook opened in Colab
cannot read it, so the address is copied into the ``BOOK_REPO = ...`` line of each chapter's first
code cell, and of each assignment's master notebook, and into ``assignments/requirements.txt``
(what an autograder image installs). Run ``make sync`` after changing the URL; ``tests/book`` and
``tests/assignments`` fail while they disagree. ``make sync`` also links, from the front matter,
every planned chapter that has entered the table of contents (tools/front_matter.py).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
REPO_LINE = re.compile(r'^BOOK_REPO = "[^"]*"', re.M)


def repository_url() -> str:
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def chapter_notebooks() -> list[Path]:
    return sorted((ROOT / "chapters").glob("*.ipynb"))


def assignment_notebooks() -> list[Path]:
    """The master notebooks of the autograded assignments."""
    return sorted((ROOT / "assignments").glob("*.ipynb"))


def setup_cell(nb) -> nbformat.NotebookNode:
    """The first code cell: the setup cell every chapter starts with."""
    return next(c for c in nb.cells if c.cell_type == "code")


def main() -> int:
    url = repository_url()
    for path in chapter_notebooks() + assignment_notebooks():
        nb = nbformat.read(path, as_version=4)
        cell = setup_cell(nb)
        new = REPO_LINE.sub(f'BOOK_REPO = "{url}"', cell.source)
        if new != cell.source:
            cell.source = new
            nbformat.write(nb, path)
            print(f"updated {path.relative_to(ROOT)}")
    requirements = ROOT / "assignments" / "requirements.txt"
    if requirements.exists():
        text = requirements.read_text()
        new = re.sub(r"^git\+\S+", f"git+{url}", text, flags=re.M)
        if new != text:
            requirements.write_text(new)
            print(f"updated {requirements.relative_to(ROOT)}")
    # Planned chapters that have entered the toc: link them from the front matter.
    from front_matter import link_landed_chapters
    for rel, n in link_landed_chapters().items():
        print(f"updated {rel}: {n} chapter mention(s) now linked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
