"""The book's Sphinx extension (tools/dpbook_sphinx.py) on a tiny project built by Sphinx itself.

`make book` is run again and again by an author; a second run with nothing changed must succeed
as the first did (it once failed: the root page's handler read a page context that Sphinx only
makes when some page is out of date), and every build must ship the extension's static files.
"""
from pathlib import Path

from sphinx.application import Sphinx

ROOT = Path(__file__).resolve().parents[2]


def _build(src: Path, out: Path) -> None:
    app = Sphinx(str(src), str(src), str(out), str(out / ".doctrees"), "html",
                 status=None, warning=None, freshenv=False)
    app.build()
    assert app.statuscode == 0


def test_a_second_build_with_nothing_changed_succeeds_and_keeps_the_root_page(tmp_path):
    src, out = tmp_path / "src", tmp_path / "html"
    src.mkdir()
    (src / "conf.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT / 'tools')!r})\n"
        "extensions = ['dpbook_sphinx']\n"
        "root_doc = 'intro'\n"
        "project = 'Tiny'\n")
    (src / "intro.rst").write_text("Tiny\n====\n\nSome ``dplib.figures.composition.x`` text.\n")
    _build(src, out)
    first = (out / "index.html").read_text()
    (out / "index.html").unlink()
    _build(src, out)                                   # nothing out of date this time
    root = (out / "index.html").read_text()
    assert root == first
    assert 'url=intro.html' in root and 'href="_static/favicon.svg"' in root
    for name in ("dpbook.css", "dpbook.js", "favicon.svg"):
        assert (out / "_static" / name).is_file(), name
    assert "_static/dpbook.css" in (out / "intro.html").read_text()
