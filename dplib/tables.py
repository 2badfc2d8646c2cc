"""Plain-text and Markdown tables of result rows, for the results tables chapters and benchmarks
print.

One formatter, :func:`format_table`, turns a list of dicts (one per row) into aligned text, so each
experiment module only says which columns to show and how to write each cell, not how to pad them.

>>> print(format_table([{"eps": 1, "acc": 0.912}, {"eps": 8, "acc": 0.9531}],
...                    formats={"acc": ".1%"}))
eps    acc
----------
  1  91.2%
  8  95.3%
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from numbers import Number

from ._validate import check_bool, check_choice, shown

__all__ = ["format_table"]

_ALIGNS = ("<", ">", "^")
_STYLES = ("plain", "markdown")


def _is_sequence(value: object) -> bool:
    return isinstance(value, (Sequence, Iterable)) and not isinstance(value, Mapping)


def _is_number(value: object) -> bool:
    return isinstance(value, Number) and not isinstance(value, bool)


def _cell(value: object, fmt: str | Callable[[object], str] | None) -> str:
    """One cell's text: ``fmt`` applied to ``value``; by default floats in 4 significant digits
    and everything else through ``str``."""
    if callable(fmt):
        return str(fmt(value))
    if fmt is None:
        fmt = ".4g" if isinstance(value, float) else ""
    return format(value, fmt)


def format_table(rows: Sequence[Mapping], columns: Sequence | None = None, *,
                 formats: Mapping | None = None, headers: Mapping | None = None,
                 align: Mapping | None = None, widths: Mapping | None = None,
                 sep: str | Sequence[str] = "  ", rule: str | None = "-",
                 footer: Sequence[str] = (), pad: bool = True, style: str = "plain",
                 missing: str = "") -> str:
    """``rows`` (one dict per row) as a table with one column per key in ``columns``.

    * ``columns`` — the keys to show, in order (default: the keys of all rows, in the order they
      first appear);
    * ``formats`` — per column, a format spec (``".2f"``) or a callable value -> text
      (default: floats as ``.4g``, anything else as ``str``);
    * ``headers`` — per column, the header text (default: the key itself);
    * ``align`` — per column, ``"<"``, ``">"`` or ``"^"`` (default: right for a column whose
      values are all numbers, left otherwise);
    * ``widths`` — per column, a minimum width (a column is always as wide as its widest cell);
    * ``sep`` — the text between columns, or one separator per gap (``len(columns) - 1``);
    * ``rule`` — the character of the line under the header, as wide as the table (plain
      style; None: no line);
    * ``footer`` — lines printed after the table (footnotes);
    * ``pad`` — False leaves cells unpadded (a list of ``sep``-joined fields);
    * ``style`` — ``"plain"``, or ``"markdown"`` for a GitHub-flavoured Markdown table (then
      ``sep`` and ``rule`` are ignored);
    * ``missing`` — the text of a cell whose row lacks the key.

    Returns the table as one string, lines joined by newlines, trailing spaces stripped.
    """
    check_choice("style", style, _STYLES)
    check_bool("pad", pad)
    if rule is not None and (not isinstance(rule, str) or len(rule) != 1):
        raise ValueError(f"rule must be one character or None, got {shown(rule)}")
    if not isinstance(missing, str):
        raise ValueError(f"missing must be a string, got {shown(missing)}")
    if isinstance(footer, str) or not _is_sequence(footer) or \
            not all(isinstance(f, str) for f in footer):
        raise ValueError(f"footer must be a list of strings, got {shown(footer)}")
    if isinstance(rows, (str, bytes, Mapping)) or not _is_sequence(rows):
        raise ValueError(f"rows must be a list of dicts, got {shown(rows)}")
    rows = list(rows)
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ValueError(f"rows[{i}] must be a dict, got {type(row).__name__}")
    if columns is None:
        columns = list(dict.fromkeys(k for row in rows for k in row))
    elif isinstance(columns, (str, bytes)) or not _is_sequence(columns):
        raise ValueError(f"columns must be a list of keys, got {shown(columns)}")
    columns = list(columns)
    if not columns:
        raise ValueError("columns must name at least one column, got none "
                         "(pass columns= or rows with keys)")
    given = {}
    for name, value in (("formats", formats), ("headers", headers), ("align", align),
                        ("widths", widths)):
        if value is not None and not isinstance(value, Mapping):
            raise ValueError(f"{name} must be a dict keyed by column, got {shown(value)}")
        given[name] = dict(value or {})
        unknown = [k for k in given[name] if k not in columns]
        if unknown:
            raise ValueError(f"{name} names columns not in the table: {shown(unknown)} "
                             f"(columns are {shown(columns)})")
    formats, headers, align, widths = (given[k] for k in ("formats", "headers", "align",
                                                          "widths"))
    for key, a in align.items():
        if a not in _ALIGNS:
            raise ValueError(f"align[{shown(key)}] must be one of {_ALIGNS}, got {shown(a)}")
    for key, w in widths.items():
        if isinstance(w, bool) or not isinstance(w, int) or w < 0:
            raise ValueError(f"widths[{shown(key)}] must be an integer >= 0, got {shown(w)}")
    for key, f in formats.items():
        if not (f is None or isinstance(f, str) or callable(f)):
            raise ValueError(f"formats[{shown(key)}] must be a format spec or a callable, got "
                             f"{shown(f)}")
    gaps = len(columns) - 1
    seps = [sep] * gaps if isinstance(sep, str) else list(sep) if _is_sequence(sep) else None
    if seps is None or len(seps) != gaps or not all(isinstance(s, str) for s in seps):
        raise ValueError(f"sep must be a string or {gaps} strings (one per gap between "
                         f"columns), got {shown(sep)}")

    head = [str(headers.get(c, c)) for c in columns]
    body = [[_cell(row[c], formats.get(c)) if c in row else missing for c in columns]
            for row in rows]
    aligns = [align.get(c) or (">" if rows and all(_is_number(r[c]) for r in rows if c in r)
                               and any(c in r for r in rows) else "<") for c in columns]
    if style == "markdown":
        width = [max([len(h), 3] + [len(line[j]) for line in body]) for j, h in enumerate(head)]
        marks = {"<": ":--", ">": "--:", "^": ":-:"}

        def md(cells: list[str]) -> str:
            return "| " + " | ".join(f"{s:{a}{w}}" for s, a, w in zip(cells, aligns, width)) + " |"
        ruler = "| " + " | ".join(marks[a][0] + "-" * (w - 2) + marks[a][2]
                                  for a, w in zip(aligns, width)) + " |"
        return "\n".join([md(head), ruler, *map(md, body), *footer])

    width = [max([widths.get(c, 0), len(h)] + [len(line[j]) for line in body])
             for j, (c, h) in enumerate(zip(columns, head))]

    def line(cells: list[str]) -> str:
        if pad:
            cells = [f"{s:{a}{w}}" for s, a, w in zip(cells, aligns, width)]
        out = cells[0]
        for s, cell in zip(seps, cells[1:]):
            out += s + cell
        return out
    header = line(head)           # the rule spans the full (unstripped) header
    return "\n".join([header.rstrip(), *([rule * len(header)] if rule else []),
                      *(line(cells).rstrip() for cells in body), *footer])
