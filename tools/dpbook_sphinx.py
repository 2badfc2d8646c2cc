"""A small Sphinx extension for the book's site, loaded through ``local_extensions`` in _config.yml.

Two fixes for JavaScript errors that the console check of tests/site/test_site.py found on every
page of the site built by Jupyter Book 1.0.4 (Sphinx 7.4, sphinx-thebe 0.3.1,
pydata-sphinx-theme 0.17):

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
"""
from __future__ import annotations

from typing import Any


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


def _default_mode(app, config) -> None:
    # pydata-sphinx-theme reads it from html_context (not from the theme options).
    context = config.html_context
    if isinstance(context, dict) and not context.get("default_mode"):
        context["default_mode"] = "auto"


def setup(app) -> dict[str, Any]:
    app.connect("config-inited", _default_mode)
    # Early: html-page-context is emitted with emit_firstresult, so a handler that returns a
    # template name (the theme's do) stops the handlers after it. The duplicated scripts are
    # registered before any page is written, so they are all there by now.
    app.connect("html-page-context", _dedupe_inline_scripts, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
