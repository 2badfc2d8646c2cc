"""A small Sphinx extension for the book's site, loaded through ``local_extensions`` in _config.yml.

Fixes for what the site checks of tests/site found on the site built by Jupyter Book 1.0.4
(Sphinx 7.4, sphinx-thebe 0.3.1, sphinx-book-theme 1.3, pydata-sphinx-theme 0.17):

* **Duplicated inline scripts.** sphinx-thebe registers its configuration as an inline script with
  ``app.add_js_file`` from an ``env-before-read-docs`` handler; under Sphinx 7 that call reaches
  both the extension registry and the already-initialised HTML builder, so each page listed the
  block twice (once with filename ``None``, once with ``""``) and the browser reported
  ``SyntaxError: Identifier 'THEBE_JS_URL' has already been declared``. Script *files* are
  de-duplicated by Sphinx; inline bodies were not. They are now, page by page.
* **No default colour mode.** Jupyter Book leaves the theme's ``default_mode`` empty, so the
  theme's script logs ``Got invalid theme mode: . Resetting to auto.`` as an error before it
  falls back to "auto". Setting ``html_context['default_mode'] = 'auto'`` is the same
  behaviour without the error.
* **Sidebar buttons that do nothing.** sphinx-book-theme empties pydata-sphinx-theme's navbar so
  that the latter's page header is not drawn, but pydata-sphinx-theme 0.17 fills
  ``navbar_persistent`` with a search field unless the *user* set it. The header is then drawn
  (a second search field on wide screens) with its own, always hidden, menu and contents
  buttons, ahead of the book theme's visible ones. Both themes' scripts bind the *first*
  ``.primary-toggle`` / ``.secondary-toggle`` of the page, so the visible buttons opened nothing
  on a phone and did not collapse the sidebar on a wide screen. Setting ``navbar_persistent``
  to the empty list, as the book theme intends, removes the header and its buttons.
* **Search that depends on accents.** Sphinx indexes "Rényi" and "Renyi" as different words.
  :class:`SearchEnglishFolded` indexes every word without its accents and folds the query the
  same way in the browser, so either spelling finds the same pages. And the bibliography's
  "R{\\'e}nyi" reaches Sphinx as three text nodes, "R", "é", "nyi", which the index took for three
  words; adjacent text nodes are joined before a page is indexed.
* **A drawer that stays open.** On a phone the menu and the contents open as a modal drawer,
  which stayed open over the page after one of its section links was followed.
  ``static/dpbook.js`` closes it.
* **Pages wider than a phone.** Sphinx keeps each word of inline code on one line, so a long
  name or URL in running text, and the generated index of theorems, made the page wider than a
  390 px screen and the reader panned sideways. ``static/dpbook.css`` lets inline code break
  where it must and scrolls the index table in its own box.
* **No favicon.** Browsers then ask for ``/favicon.ico``, a 404 in the console of every page.
  ``static/favicon.svg`` is the site's icon unless ``html.favicon`` is set; the site's root
  ``index.html``, which only sends the browser on to the first page (sphinx-external-toc writes
  it as one ``<meta>`` line), names the icon too.

The files of ``static/`` (next to this file) are found by an absolute path, so the student
edition, built from a copy of the sources elsewhere, gets them too.
"""
from __future__ import annotations

import html
import os
import re
import unicodedata
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.search.en import SearchEnglish, js_porter_stemmer
from sphinx.util import isurl

STATIC = Path(__file__).resolve().parent / "static"


def fold_accents(word: str) -> str:
    """``word`` in compatibility decomposition (NFKD) without its combining marks: é -> e.

    The same folding as ``normalize("NFKD").replace(/\\p{M}/gu, "")`` in the browser (Unicode
    general category M in both), so the index and the query agree.
    """
    return "".join(c for c in unicodedata.normalize("NFKD", word)
                   if not unicodedata.category(c).startswith("M"))


# Appended to Sphinx's JavaScript Porter stemmer: the query word (already lower case) is folded
# as fold_accents folds the indexed words, then stemmed.
_JS_FOLDING = """
/* Accent folding (tools/dpbook_sphinx.py): "Rényi" and "Renyi" are the same search word. */
var DpbookPorterStemmer = Stemmer;
Stemmer = function() {
  var porter = new DpbookPorterStemmer();
  this.stemWord = function(w) {
    return porter.stemWord(w.normalize("NFKD").replace(/\\p{M}/gu, ""));
  };
};
"""


class SearchEnglishFolded(SearchEnglish):
    """Sphinx's English search (Porter stemmer) with accents folded on both sides."""

    js_stemmer_code = js_porter_stemmer + _JS_FOLDING

    def stem(self, word: str) -> str:
        # Lower case first, then fold, then stem: the order of the browser's searchtools.js.
        return super().stem(fold_accents(word.lower()))

    def word_filter(self, word: str) -> bool:
        # Judged folded: "á" is the stop word "a", not a word of its own.
        return super().word_filter(fold_accents(word))


def _join_text_nodes(app, doctree: nodes.document, docname: str) -> None:
    """Join each run of adjacent text nodes into one, so that the search index, which splits
    each text node into words on its own, sees whole words. The HTML is the same."""
    for parent in list(doctree.findall(nodes.Element)):
        kids = parent.children
        if not any(isinstance(a, nodes.Text) and isinstance(b, nodes.Text)
                   for a, b in zip(kids, kids[1:])):
            continue
        joined: list[nodes.Node] = []
        for kid in kids:
            if joined and isinstance(kid, nodes.Text) and isinstance(joined[-1], nodes.Text):
                joined[-1] = nodes.Text(str.__str__(joined[-1]) + str.__str__(kid))
            else:
                joined.append(kid)
        parent[:] = joined


def _dedupe_inline_scripts(app, pagename: str, templatename: str, context: dict[str, Any],
                           doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple[str, ...]] = set()
    kept = []
    for js in scripts:
        attributes = getattr(js, "attributes", None)
        if not getattr(js, "filename", "x") and attributes and "body" in attributes:
            key = tuple(sorted((k, str(v)) for k, v in attributes.items()))
            if key in seen:
                continue
            seen.add(key)
        kept.append(js)
    scripts[:] = kept  # in place: later handlers (MathJax) append to this very list


def _theme_defaults(app, config) -> None:
    # pydata-sphinx-theme reads default_mode from html_context (not from the theme options).
    context = config.html_context
    if isinstance(context, dict) and not context.get("default_mode"):
        context["default_mode"] = "auto"
    # Before the builder exists: pydata-sphinx-theme's builder-inited default sees it as set.
    config.html_theme_options = {"navbar_persistent": [], **config.html_theme_options}
    # Absolute paths: Sphinx joins them to the folder of _config.yml, and the student edition
    # builds from a copy of the sources elsewhere.
    config.html_static_path = [*config.html_static_path, str(STATIC)]
    if not config.html_favicon:
        config.html_favicon = str(STATIC / "favicon.svg")


def _root_redirect(app, exception) -> None:
    """Write the root index.html that sends the browser to the first page, naming the icon.

    Runs before sphinx-external-toc's own ``build-finished`` handler, which then finds the file
    there and leaves it. The icon's name comes from the configuration, not from the builder's
    page context: a rebuild with nothing out of date never makes that context.
    """
    if exception is not None or app.builder.name != "html" or app.config.root_doc == "index":
        return
    first = html.escape(f"{app.config.root_doc}.html", quote=True)
    icon = app.config.html_favicon or ""       # a path or a URL; the file is copied to _static
    if icon and not isurl(icon):
        icon = f"_static/{Path(icon).name}"
    icon_link = f'<link rel="icon" href="{html.escape(icon, quote=True)}">' if icon else ""
    title = html.escape(app.config.html_title or app.config.project)
    Path(app.outdir, "index.html").write_text(
        f'<!DOCTYPE html>\n<html lang="{app.config.language or "en"}"><head><meta charset="utf-8">'
        f'<title>{title}</title>{icon_link}'
        f'<meta http-equiv="Refresh" content="0; url={first}"></head>\n'
        f'<body><a href="{first}">{title}</a></body></html>\n', encoding="utf-8")


def _tab_title(app, pagename: str, templatename: str, context: dict[str, Any],
               doctree) -> None:
    """The browser tab names the book once: Sphinx's layout writes "<page title> — <book
    title>" (``titlesuffix``, made from ``docstitle`` in the template), which on the front page
    (its title is the book's) repeats the name. There the tab shows the book's title alone (the
    student edition's included): the page's ``docstitle`` is emptied, so the template adds no
    suffix, and the navbar keeps the book's title as its logo text."""
    title = re.sub(r"<[^>]*>", "", context.get("title") or "").strip()
    docstitle = context.get("docstitle") or ""
    if title and docstitle.startswith(title):
        logo = dict(context.get("theme_logo") or {})
        logo["text"] = logo.get("text") or docstitle
        context["theme_logo"] = logo
        context["title"], context["docstitle"] = docstitle, ""


def setup(app) -> dict[str, Any]:
    # The notebook kernels this build starts inherit the variable: dplib.widgets then draws each
    # panel's frames (dplib.widget_frames), so its sliders move on the static site (nbval and
    # Jupyter do not set it).
    os.environ.setdefault("DPBOOK_WIDGET_FRAMES", "1")
    app.add_search_language(SearchEnglishFolded)
    app.add_js_file("dpbook.js")
    app.add_css_file("dpbook.css")
    app.connect("build-finished", _root_redirect, priority=400)
    app.connect("config-inited", _theme_defaults)
    # After the post-transforms (which write the bibliography), before the page is indexed.
    app.connect("doctree-resolved", _join_text_nodes)
    # Early: html-page-context is emitted with emit_firstresult, so a handler that returns a
    # template name (the theme's do) stops the handlers after it. The duplicated scripts are
    # registered before any page is written, so they are all there by now.
    app.connect("html-page-context", _dedupe_inline_scripts, priority=100)
    app.connect("html-page-context", _tab_title, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
