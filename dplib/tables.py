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

from ._common_params import FLAG, MAPPING_OR_NONE
from ._constraints import Custom, Options, constrained
from ._validate import shown

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


def _rows(name: str, value: object) -> list:
    if isinstance(value, (str, bytes, Mapping)) or not _is_sequence(value):
        raise ValueError(f"{name} must be a list of dicts, got {shown(value)}")
    rows = list(value)
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ValueError(f"{name}[{i}] must be a dict, got {type(row).__name__}")
    return rows


def _columns(name: str, value: object) -> list | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not _is_sequence(value):
        raise ValueError(f"{name} must be a list of keys, got {shown(value)}")
    return list(value)


def _rule(name: str, value: object) -> str | None:
    if value is not None and (not isinstance(value, str) or len(value) != 1):
        raise ValueError(f"{name} must be one character or None, got {shown(value)}")
    return value


def _string(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, got {shown(value)}")
    return value


def _footer(name: str, value: object) -> list:
    if isinstance(value, str) or not _is_sequence(value) or \
            not all(isinstance(f, str) for f in value):
        raise ValueError(f"{name} must be a list of strings, got {shown(value)}")
    return list(value)


def _sep(name: str, value: object) -> str | list:
    if isinstance(value, str):
        return value
    if not _is_sequence(value) or not all(isinstance(s, str) for s in value):
        raise ValueError(f"{name} must be a string or a list of strings (one per gap between "
                         f"columns), got {shown(value)}")
    return list(value)


@constrained(rows=Custom(_rows, "a list of dicts", [None, "abc", [1, 2], 3, {"a": 1}]),
             columns=Custom(_columns, "None or a list of keys", [3, "ab", 2.5]),
             formats=MAPPING_OR_NONE, headers=MAPPING_OR_NONE, align=MAPPING_OR_NONE,
             widths=MAPPING_OR_NONE,
             sep=Custom(_sep, "a string or a list of strings", [3, [1], None]),
             rule=Custom(_rule, "one character or None", ["--", 3, ""]),
             footer=Custom(_footer, "a list of strings", [3, "abc", [1], None]),
             pad=FLAG, style=Options(*_STYLES), missing=Custom(_string, "a string", [3, None]))
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
    if columns is None:
        columns = list(dict.fromkeys(k for row in rows for k in row))
    if not columns:
        raise ValueError("columns must name at least one column, got none "
                         "(pass columns= or rows with keys)")
    given = {}
    for name, value in (("formats", formats), ("headers", headers), ("align", align),
                        ("widths", widths)):
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
    seps = [sep] * gaps if isinstance(sep, str) else sep
    if len(seps) != gaps:
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
