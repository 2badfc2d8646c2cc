"""The map of the course (chapters/_course.yml), its figure, and the course plans built on it.

* the map names every chapter of the table of contents and nothing else, its prerequisites are
  chapters, it has no cycle, its projects exist, and it lists every assignment with chapters
  that exist;
* the committed figure is what tools/course_map.py draws from the map now, and the front page
  and the instructors' page show it;
* every week of the two course plans on the instructors' page is a chapter that exists (one or
  more) or the capstone project, no chapter is taught before a chapter it needs, every
  assignment the plans hand out exists and is handed out only once its chapters have been
  taught, and the long plan teaches every chapter.
"""
import re
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import course_map  # noqa: E402
from assignments import master_notebooks  # noqa: E402

PLANS = {"### A 6-week module": 6, "### A 14-week course": 14}
CAPSTONE = "the capstone project"


def _toc_chapters() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    return [Path(f).name for f in files
            if f.startswith("chapters/") and (ROOT / f"{f}.ipynb").exists()]


@pytest.fixture(scope="module")
def data():
    return course_map.load()


def test_the_map_names_exactly_the_chapters_of_the_book(data):
    chapters = _toc_chapters()
    assert chapters, "no chapter notebook in _toc.yml"
    assert list(data["chapters"]) == chapters, \
        "chapters/_course.yml must list the chapters of _toc.yml, in its order"
    for stem, info in data["chapters"].items():
        assert set(info) <= {"short", "needs"}, f"{stem}: unknown keys {set(info)}"
        assert info["short"] and len(info["short"]) <= course_map.MAX_SHORT
        for need in info["needs"]:
            assert need in data["chapters"], f"{stem} needs {need}, which is no chapter"
            assert need != stem


def test_the_map_has_no_cycle_and_starts_somewhere(data):
    graph = course_map.nodes(data)
    anc = course_map.ancestors(graph)            # raises on a cycle
    assert all(name not in anc[name] for name in graph)
    assert any(not node["needs"] for node in graph.values())


def test_a_cycle_is_refused(data):
    broken = {"chapters": {k: dict(v) for k, v in data["chapters"].items()},
              "projects": {}, "assignments": {}}
    first, last = list(broken["chapters"])[0], list(broken["chapters"])[-1]
    broken["chapters"][first]["needs"] = [last]
    with pytest.raises(ValueError, match="cycle"):
        course_map.ancestors(course_map.nodes(broken))


def test_projects_exist(data):
    for name, info in data["projects"].items():
        assert set(info) <= {"short", "needs", "notebook"}, f"{name}: unknown keys {set(info)}"
        assert info["needs"], f"project {name} needs no chapter"
        assert all(need in data["chapters"] for need in info["needs"])
        notebook = ROOT / "assignments" / f"{info['notebook']}.ipynb"
        assert notebook.exists(), f"project {name}: no {notebook.relative_to(ROOT)}"


def test_every_assignment_is_on_the_map(data):
    masters = {m.stem for m in master_notebooks()}
    listed = set(data["assignments"]) | {p["notebook"] for p in data["projects"].values()}
    assert listed == masters, (f"assignments missing from chapters/_course.yml: "
                               f"{sorted(masters - listed)}; listed but absent: "
                               f"{sorted(listed - masters)}")
    for stem, chapters in data["assignments"].items():
        assert chapters and all(c in data["chapters"] for c in chapters), stem


def test_the_figure_is_drawn_from_the_map(data):
    assert course_map.FIGURE.exists(), "run python tools/course_map.py"
    assert course_map.FIGURE.read_text(encoding="utf-8") == course_map.draw(data), \
        "chapters/images/course_map.svg is out of date: run python tools/course_map.py"


def test_the_figure_draws_the_map(data):
    svg = course_map.draw(data)
    graph = course_map.nodes(data)
    assert svg.count("<rect ") == len(graph)
    edges = course_map.reduced_edges(graph)
    assert svg.count('marker-end="url(#arrow)"') == len(edges)
    anc = course_map.ancestors(graph)
    # every need is drawn or implied by the arrows drawn
    drawn = {}
    for parent, child in edges:
        drawn.setdefault(child, set()).add(parent)
    for name, node in graph.items():
        reach = set()
        todo = list(drawn.get(name, ()))
        while todo:
            p = todo.pop()
            if p not in reach:
                reach.add(p)
                todo.extend(drawn.get(p, ()))
        assert reach == anc[name], name
    # boxes do not overlap, and each row lies below the rows it needs
    pos = course_map.layout(graph)
    for a in graph:
        for b in graph:
            if a < b:
                (xa, ya), (xb, yb) = pos[a], pos[b]
                assert abs(xa - xb) >= course_map.BOX_W or abs(ya - yb) >= course_map.BOX_H
        for p in graph[a]["needs"]:
            assert pos[p][1] < pos[a][1]


@pytest.mark.parametrize("page, target", [("intro.md", "chapters/images/course_map.svg"),
                                          ("chapters/instructors.md", "images/course_map.svg")])
def test_the_front_page_and_instructors_page_show_the_figure(page, target):
    text = (ROOT / page).read_text()
    match = re.search(r"^```\{figure\} (\S+)\n((?::\w+:.*\n)+)", text, re.M)
    assert match and match.group(1) == target, f"{page} does not show {target}"
    assert (ROOT / page).parent.joinpath(target).resolve() == course_map.FIGURE
    assert ":alt: " in match.group(2), f"{page}: give the figure an alt text"


def _plan_rows(page: str, heading: str) -> list[tuple[int, str, str]]:
    start = page.index(heading)
    nxt = re.search(r"^#{1,3} ", page[start + len(heading):], re.M)
    section = page[start:start + len(heading) + (nxt.start() if nxt else len(page))]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].isdigit():
            assert len(cells) == 3, f"{heading}: a row is week | covers | assignments: {line}"
            rows.append((int(cells[0]), cells[1], cells[2]))
    return rows


def _week_items(cell: str) -> list[str]:
    """The chapters (stems) and projects a week covers; anything else fails."""
    items = re.findall(r"\{doc\}`([^`]+)`", cell)
    rest = re.sub(r"\{doc\}`[^`]+`", "", cell)
    if CAPSTONE in rest:
        items.append(CAPSTONE)
        rest = rest.replace(CAPSTONE, "")
    leftover = re.sub(r"\(continued\)|\band\b|[;,\s]", "", rest)
    assert not leftover, f"a week is a chapter or a project, not {cell!r}"
    return items


def _capstone(data) -> dict | None:
    """The capstone project of the map (a project whose notebook exists), or None."""
    for info in data["projects"].values():
        if info["notebook"].startswith("capstone") and \
                (ROOT / "assignments" / f"{info['notebook']}.ipynb").exists():
            return info
    return None


def test_every_week_is_a_chapter_or_a_project_in_an_order_that_works(data):
    page = (ROOT / "chapters/instructors.md").read_text()
    chapters = set(_toc_chapters())
    anc = course_map.ancestors(course_map.nodes(data))
    masters = {m.stem.split("_", 1)[0]: m.stem for m in master_notebooks()}
    for heading, weeks in PLANS.items():
        assert heading in page, f"the instructors' page has no plan {heading!r}"
        rows = _plan_rows(page, heading)
        assert [w for w, _, _ in rows] == list(range(1, weeks + 1)), \
            f"{heading}: weeks 1 to {weeks}, one row each"
        taught: dict[str, int] = {}
        for week, cover, handed in rows:
            items = _week_items(cover)
            assert items, f"{heading}, week {week} covers nothing"
            for item in items:
                if item == CAPSTONE:
                    assert _capstone(data), "the plans name a capstone project that is not there"
                    continue
                assert item in chapters, f"{heading}, week {week}: {item} is not a chapter"
                missing = [c for c in anc[item] if taught.get(c, weeks + 1) > week]
                assert not missing, f"{heading}, week {week}: {item} needs {missing} first"
                taught.setdefault(item, week)
            for name in re.findall(r"\ba(\d+)\b", handed):
                assert f"a{name}" in masters, f"{heading}, week {week}: no assignment a{name}"
            for name in re.findall(r"\ba(\d+) out\b", handed):
                stem = masters[f"a{name}"]
                late = [c for c in data["assignments"][stem] if taught.get(c, weeks + 1) > week]
                assert not late, f"{heading}: a{name} is handed out before {late} is taught"
            if "capstone" in handed:
                project = _capstone(data)
                assert project, "the plans name a capstone project that is not there"
                if f"{CAPSTONE} out" in handed:
                    late = [c for c in project["needs"] if taught.get(c, weeks + 1) > week]
                    assert not late, f"{heading}: the capstone goes out before {late} is taught"
        if weeks == 14:
            assert set(taught) == chapters, \
                f"{heading} leaves out {sorted(chapters - set(taught))}"


def test_week_parser_rejects_a_week_that_is_no_chapter():
    with pytest.raises(AssertionError):
        _week_items("DP-SGD on a GPU runtime: training a real model to a target ε")
    assert _week_items("{doc}`03_composition` (continued)") == ["03_composition"]
    assert _week_items("{doc}`06_langevin`; {doc}`07_sgld`") == ["06_langevin", "07_sgld"]
