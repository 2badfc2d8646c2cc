"""Keep the front matter's mentions of planned chapters in step with the table of contents.

The intro, glossary and instructors' pages name chapters that are planned but not yet on the
site as ``<Title> (in preparation)``, without a link (a link to a missing page would break the
build). When such a chapter's notebook enters ``_toc.yml``, ``make sync`` (which runs this)
replaces every ``<Title> (in preparation)`` by a link, ``{doc}`<stem>```, whose text is the
chapter's own title. ``tests/book/test_front_matter.py`` fails while a chapter in the toc is
still called "in preparation".
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]

# The chapters of the design (DESIGN.md) after the first four, by the number their notebook's
# file name starts with, and the title the front matter uses for them until they land.
PLANNED_TITLES = {
    "05": "DP-SGD",
    "07": "DP-SGLD",
    "08": "Gradient encoding",
    "09": "Membership inference",
    "10": "DP in-context learning",
}
FRONT_MATTER = ["intro.md", "chapters/how-to-run.md", "chapters/notation.md",
                "chapters/glossary.md", "chapters/instructors.md", "chapters/references.md"]


def toc_chapters() -> dict[str, str]:
    """Number prefix -> notebook stem, for the chapter notebooks in ``_toc.yml``."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [ch["file"] for part in toc.get("parts", []) for ch in part.get("chapters", [])]
    out = {}
    for f in files:
        name = Path(f).name
        if f.startswith("chapters/") and (ROOT / f"{f}.ipynb").exists() and name[:2].isdigit():
            out[name[:2]] = name
    return out


def link_landed_chapters(write: bool = True) -> dict[str, int]:
    """Replace "<Title> (in preparation)" by a link for every planned chapter now in the toc.

    Returns the number of replacements per file (and writes them when ``write``).
    """
    landed = toc_chapters()
    changes: dict[str, int] = {}
    for rel in FRONT_MATTER:
        path = ROOT / rel
        if not path.exists():
            continue
        text = path.read_text()
        new = text
        for number, title in PLANNED_TITLES.items():
            if number not in landed:
                continue
            stem = landed[number]
            target = stem if rel.startswith("chapters/") else f"chapters/{stem}"
            new, n = re.subn(rf"{re.escape(title)} \(in preparation\)", f"{{doc}}`{target}`", new)
            if n:
                changes[rel] = changes.get(rel, 0) + n
        if new != text and write:
            path.write_text(new)
    return changes


def main() -> int:
    for rel, n in link_landed_chapters().items():
        print(f"updated {rel}: {n} chapter mention(s) now linked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
