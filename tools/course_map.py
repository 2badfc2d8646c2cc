"""Draw the chapter map of the book, ``chapters/images/course_map.svg``, from ``chapters/_course.yml``.

The map is the figure of the front page and of the instructors' page: one box per chapter (and
per project), an arrow from a chapter to each chapter that builds on it directly, and under each
chapter the assignment that goes with it. It is drawn as plain SVG text, with no plotting library
and nothing that changes from run to run, so the committed file can be compared with a fresh
drawing (``tests/book/test_course_map.py`` does)::

    python tools/course_map.py            # rewrite chapters/images/course_map.svg
    python tools/course_map.py --check    # exit 1 if the committed figure is out of date

Layout: a chapter sits one row below the lowest chapter it needs (row = length of the longest
chain of prerequisites above it); within a row, boxes are ordered by the mean position of the
boxes their arrows come from, and placed as close to it as the spacing allows. Only the arrows
that are not implied by others are drawn: an arrow from A to C is left out when C needs B and B
needs A. Projects are drawn like chapters, with a dashed border.
"""
from __future__ import annotations

import argparse
import sys
from html import escape
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "chapters" / "_course.yml"
FIGURE = ROOT / "chapters" / "images" / "course_map.svg"

BOX_W, BOX_H = 240, 48          # a box
GAP_X, GAP_Y = 20, 34           # between boxes of a row, and between rows
MARGIN = 12
MAX_SHORT = 28                  # characters of a box's name (13 px bold type fits 240 px)
COLORS = {"chapter": "#DCEBF7", "project": "#FBEBD0", "stroke": "#0072B2",
          "project_stroke": "#B36B00", "edge": "#7A7A7A", "text": "#1A1A1A", "sub": "#4D4D4D"}


def load(path: Path = DATA) -> dict:
    """The course data: ``{"chapters": {...}, "projects": {...}, "assignments": {...}}``."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for key in ("chapters", "projects", "assignments"):
        data[key] = data.get(key) or {}
    return data


def nodes(data: dict) -> dict[str, dict]:
    """Every box of the map, chapters first (in the order of the file), then projects."""
    out = {}
    for stem, info in data["chapters"].items():
        out[stem] = {"short": info["short"], "needs": list(info.get("needs") or []),
                     "kind": "chapter"}
    for name, info in data["projects"].items():
        out[name] = {"short": info["short"], "needs": list(info.get("needs") or []),
                     "kind": "project"}
    for name, node in out.items():
        if len(node["short"]) > MAX_SHORT:
            raise ValueError(f"{name}: the name {node['short']!r} is longer than {MAX_SHORT} "
                             "characters and would not fit its box")
        unknown = [n for n in node["needs"] if n not in data["chapters"]]
        if unknown:
            raise ValueError(f"{name} needs {unknown}, which are not chapters of {DATA.name}")
    return out


def ancestors(graph: dict[str, dict]) -> dict[str, set[str]]:
    """Everything each box needs, directly or not; raises on a cycle."""
    memo: dict[str, set[str]] = {}

    def visit(name: str, path: tuple[str, ...]) -> set[str]:
        if name in path:
            raise ValueError(f"the chapter map has a cycle: {' -> '.join(path + (name,))}")
        if name not in memo:
            found: set[str] = set()
            for parent in graph[name]["needs"]:
                found |= {parent} | visit(parent, path + (name,))
            memo[name] = found
        return memo[name]

    for name in graph:
        visit(name, ())
    return memo


def reduced_edges(graph: dict[str, dict]) -> list[tuple[str, str]]:
    """(parent, child) for every direct need that no other need of the child implies."""
    anc = ancestors(graph)
    edges = []
    for child, node in graph.items():
        for parent in node["needs"]:
            implied = any(parent in anc[other] for other in node["needs"] if other != parent)
            if not implied:
                edges.append((parent, child))
    return edges


def layout(graph: dict[str, dict]) -> dict[str, tuple[float, float]]:
    """The centre (x, y) of every box, in pixels, with the top-left box at the margin."""
    anc = ancestors(graph)
    drawn: dict[str, list[str]] = {name: [] for name in graph}
    for parent, child in reduced_edges(graph):
        drawn[child].append(parent)
    row: dict[str, int] = {}
    for name in sorted(graph, key=lambda n: len(anc[n])):
        row[name] = 1 + max((row[p] for p in graph[name]["needs"]), default=-1)
    order = list(graph)
    x: dict[str, float] = {}
    step = BOX_W + GAP_X
    for r in range(max(row.values()) + 1):
        names = [n for n in order if row[n] == r]
        want = {n: sum(x[p] for p in drawn[n]) / len(drawn[n]) if drawn[n] else 0.0
                for n in names}
        names.sort(key=lambda n: (want[n], order.index(n)))
        placed: list[float] = []
        for n in names:
            placed.append(want[n] if not placed else max(want[n], placed[-1] + step))
        shift = sum(want[n] - p for n, p in zip(names, placed)) / len(names)
        for n, p in zip(names, placed):
            x[n] = p + shift
    left = min(x.values())
    return {n: (MARGIN + BOX_W / 2 + x[n] - left, MARGIN + BOX_H / 2 + row[n] * (BOX_H + GAP_Y))
            for n in graph}


def chapter_number(stem: str) -> str:
    return stem.split("_", 1)[0].lstrip("0")


def assignment_labels(data: dict) -> dict[str, str]:
    """Box name -> "assignment a1" (or "assignments a1, a2"), from the assignments' chapters."""
    names: dict[str, list[str]] = {}
    for stem, chapters in data["assignments"].items():
        for chapter in chapters or []:
            names.setdefault(chapter, []).append(stem.split("_", 1)[0])
    return {c: ("assignment " if len(a) == 1 else "assignments ") + ", ".join(sorted(a))
            for c, a in names.items()}


def draw(data: dict) -> str:
    """The map as an SVG document (text)."""
    graph = nodes(data)
    pos = layout(graph)
    labels = assignment_labels(data)
    width = round(max(x for x, _ in pos.values()) + BOX_W / 2 + MARGIN)
    height = round(max(y for _, y in pos.values()) + BOX_H / 2 + MARGIN)
    c = COLORS
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-labelledby="course-map-title" '
        'font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
        '<title id="course-map-title">Which chapter builds on which: '
        + escape("; ".join(f"{graph[b]['short']} builds on {graph[a]['short']}"
                           for a, b in reduced_edges(graph))) + "</title>",
        "<defs>",
        '<marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse">',
        f'<path d="M 0 0 L 10 5 L 0 10 z" fill="{c["edge"]}"/>',
        "</marker>",
        "</defs>",
    ]
    for parent, child in reduced_edges(graph):
        (x1, y1), (x2, y2) = pos[parent], pos[child]
        y1, y2 = y1 + BOX_H / 2, y2 - BOX_H / 2
        mid = (y1 + y2) / 2
        out.append(f'<path d="M {x1:g} {y1:g} C {x1:g} {mid:g}, {x2:g} {mid:g}, {x2:g} '
                   f'{y2 - 1:g}" fill="none" stroke="{c["edge"]}" stroke-width="1.6" '
                   'marker-end="url(#arrow)"/>')
    for name, node in graph.items():
        x, y = pos[name]
        project = node["kind"] == "project"
        fill, stroke = ((c["project"], c["project_stroke"]) if project
                        else (c["chapter"], c["stroke"]))
        dash = ' stroke-dasharray="5 3"' if project else ""
        out.append(f'<rect x="{x - BOX_W / 2:g}" y="{y - BOX_H / 2:g}" width="{BOX_W}" '
                   f'height="{BOX_H}" rx="7" fill="{fill}" stroke="{stroke}" '
                   f'stroke-width="1.5"{dash}/>')
        title = node["short"] if project else f"{chapter_number(name)}. {node['short']}"
        sub = "project" if project else labels.get(name, "")
        ty = y - 4 if sub else y + 5
        out.append(f'<text x="{x:g}" y="{ty:g}" text-anchor="middle" font-size="13" '
                   f'font-weight="bold" fill="{c["text"]}">{escape(title)}</text>')
        if sub:
            out.append(f'<text x="{x:g}" y="{y + 14:g}" text-anchor="middle" font-size="11" '
                       f'fill="{c["sub"]}">{escape(sub)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if the figure differs from a fresh drawing")
    args = parser.parse_args(argv)
    svg = draw(load())
    if args.check:
        current = FIGURE.read_text(encoding="utf-8") if FIGURE.exists() else None
        if current != svg:
            print(f"{FIGURE.relative_to(ROOT)} is out of date: run python tools/course_map.py",
                  file=sys.stderr)
            return 1
        return 0
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    FIGURE.write_text(svg, encoding="utf-8")
    print(f"wrote {FIGURE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
