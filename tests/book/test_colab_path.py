"""The Colab path: what a chapter opened alone in Colab installs, imports and shows.

Every chapter is *run* as Colab runs it by ``make test-notebooks``: nbval executes each one alone
in an empty folder of a Colab-like sandbox (tools/colab_sandbox.py: dplib from a wheel of this
tree, a stand-in for ``google.colab``, pip replaced by a recorder), and the last cell of each copy
asserts the Colab path — the one pinned install, dplib from the wheel, every live panel redrawn,
every widget drawn by Colab's custom widget manager. One run serves three purposes: nbval, the
Colab path, and the quick book's outputs (``make test`` draws the website's frames in it and
builds the quick book from it, tools/execute_chapters.py --executed).

Here: the sandbox itself (its probe must fail when the Colab path is broken), what the wheel
ships and requires, and the setup cells' pins.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from email.parser import Parser
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import colab_sandbox as C  # noqa: E402
import sync_notebooks as S  # noqa: E402

CHAPTERS = S.chapter_notebooks()
#: What a Colab runtime had preinstalled in 2025 (the versions a reader's kernel starts with).
COLAB_PREINSTALLED = {"ipywidgets": "7.7.1", "numpy": "2.0.2", "scipy": "1.14.1",
                      "matplotlib": "3.10.0", "scikit-learn": "1.6.1", "tqdm": "4.67.1",
                      "mpmath": "1.3.0"}


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory) -> dict:
    """The Colab-like sandbox of ``make test-notebooks``, with no chapter in it."""
    out = tmp_path_factory.mktemp("colab")
    C.prepare(out, [])
    site = out / "site"
    meta = next(site.glob("dplib-*.dist-info")) / "METADATA"
    requires = Parser().parsestr(meta.read_text()).get_all("Requires-Dist") or []
    return {"out": out, "site": site, "requires": [Requirement(r) for r in requires]}


@pytest.fixture(scope="session")
def installed(sandbox) -> dict:
    """dplib as ``pip install`` ships it (the sandbox's unpacked wheel)."""
    return sandbox


def _tiny_chapter(pins: list[str], widget_first: bool) -> nbformat.NotebookNode:
    """A two-cell "chapter": pip installs, the custom manager, one live panel (or the panel
    shown before the manager is on)."""
    setup = "\n".join(["import subprocess, sys"] + [
        f"subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', {p!r}])" for p in pins])
    manager = "from google.colab import output\noutput.enable_custom_widget_manager()"
    panel = ("import matplotlib.pyplot as plt\nfrom dplib.widgets import interactive_figure, "
             "slider\n\ndef plot(a):\n    fig, ax = plt.subplots()\n    ax.plot([0, 1], [0, a])"
             "\n    return fig\n\npanel = interactive_figure(plot, a=slider(0.0, 1.0, 0.5))")
    cells = [setup, panel, manager] if widget_first else [setup, manager, panel]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    return nb


def _run_in_sandbox(sandbox: dict, nb: nbformat.NotebookNode, folder: Path,
                    expected: list[list[str]], monkeypatch) -> None:
    nb.cells.append(nbformat.v4.new_code_cell(C.probe_source(expected, sandbox["site"], "")))
    folder.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "DPBOOK_DATA", "DPBOOK_CACHE", "MPLBACKEND")}
    monkeypatch.setenv("JUPYTER_PATH", str(sandbox["out"] / "share" / "jupyter"))
    NotebookClient(nb, timeout=120, kernel_name=C.KERNEL,
                   resources={"metadata": {"path": str(folder)}}).execute(env=env)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["colab-like", "colab-like-frames", "wrong-pin",
                                  "widget-before-manager"])
def test_sandbox_probe_fails_when_the_colab_path_breaks(sandbox, tmp_path, case, monkeypatch):
    """The probe that ends every sandboxed chapter passes on a notebook that does what Colab
    needs and fails on one that installs the wrong thing or shows a widget before Colab's
    custom widget manager is on (four kernel starts, a few seconds each). With the website's
    frames on (as ``make test`` runs nbval) the cells show no live panel, and the probe shows it
    live itself before moving it."""
    want = [["-q", "git+https://example.org/book@" + "a" * 40]]
    pins = {"colab-like": [want[0][1]], "colab-like-frames": [want[0][1]],
            "wrong-pin": [want[0][1], "numpy"], "widget-before-manager": [want[0][1]]}[case]
    nb = _tiny_chapter(pins, widget_first=case == "widget-before-manager")
    if case.startswith("colab-like"):
        if case.endswith("frames"):
            monkeypatch.setenv("DPBOOK_WIDGET_FRAMES", "1")
        _run_in_sandbox(sandbox, nb, tmp_path / "content", want, monkeypatch)
        panel_cell = [o.get("data", {}) for o in nb.cells[-2].outputs]
        live = any(C.WIDGET_VIEW in d for d in panel_cell)
        assert live != case.endswith("frames"), panel_cell     # frames: the website's control
        out = "".join(o.get("text", "") for o in nb.cells[-1].outputs)
        assert "Colab path: dplib from the wheel" in out and "1 panel(s) moved" in out, out
        return
    message = {"wrong-pin": "pip was asked for",
               "widget-before-manager": "a widget was shown before"}[case]
    with pytest.raises(CellExecutionError, match=message):
        _run_in_sandbox(sandbox, nb, tmp_path / "content", want, monkeypatch)


@pytest.mark.slow
def test_nbval_run_is_kept_for_the_quick_book(sandbox, tmp_path):
    """nbval's run of a sandboxed chapter, with the website's frames on, is written to
    ``executed/`` with each cell's outputs, and tools/execute_chapters.py takes it for the
    chapter only while the chapter's code is the code that ran (one kernel start). A cell ending
    in ';' shows nothing, as in Colab and Jupyter (nbval runs cells without storing history)."""
    import execute_chapters as E
    want = [["-q", "git+https://example.org/book@" + "a" * 40]]
    nb = _tiny_chapter([want[0][1]], widget_first=False)
    nb.cells[1:1] = [nbformat.v4.new_code_cell("print('hello')"),
                     nbformat.v4.new_code_cell("x = 41\nx + 1;")]
    chapter = tmp_path / "tiny.ipynb"
    nbformat.write(nb, chapter)
    folder = sandbox["out"] / "chapters" / "tiny"
    folder.mkdir()
    nb.cells.append(nbformat.v4.new_code_cell(C.probe_source(want, sandbox["site"], "")))
    nbformat.write(nb, folder / "tiny.ipynb")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "DPBOOK_DATA", "DPBOOK_CACHE", "MPLBACKEND")}
    env.update(DPBOOK_WIDGET_FRAMES="1", JUPYTER_PATH=str(sandbox["out"] / "share" / "jupyter"))
    proc = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-kernel-name",
                           C.KERNEL, "-p", "no:cacheprovider", "-q", str(folder.parent)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    executed = sandbox["out"] / "executed"
    ran = nbformat.read(executed / "tiny.ipynb", as_version=4)
    assert ran.metadata["dpbook_run"] == {"quick": True, "frames": True, "sandbox": True}
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("DPBOOK_QUICK", "1")
    try:
        got = E.from_executed(chapter, executed)
        assert got is not None
        code = [c for c in got.cells if c.cell_type == "code"]
        assert len(code) == len(nb.cells) - 1                         # the probe is not kept
        assert [o.text for o in code[1].outputs] == ["hello\n"]
        assert code[2].outputs == []                                  # 'x + 1;' shows nothing
        assert "text/html" in code[-1].outputs[0].data                # the website's control
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), chapter)
        assert E.from_executed(chapter, executed) is None             # another chapter's code
        monkeypatch.setenv("DPBOOK_QUICK", "0")
        nbformat.write(nb, chapter)
        assert E.from_executed(chapter, executed) is None             # another mode
    finally:
        monkeypatch.undo()


def test_sandbox_copies_every_chapter_with_its_pin(sandbox, tmp_path):
    """Each sandboxed chapter is the chapter plus the probe, which expects that chapter's pin."""
    made = [C.sandbox_chapter(p, tmp_path / p.stem, sandbox["site"], "") for p in CHAPTERS[:2]]
    for src, copy in zip(CHAPTERS[:2], made):
        a, b = nbformat.read(src, as_version=4), nbformat.read(copy, as_version=4)
        assert copy.parent.name == src.stem and list(copy.parent.iterdir()) == [copy]
        assert [c.source for c in b.cells[:-1]] == [c.source for c in a.cells]
        ref = C.pinned_ref(a)
        assert f"git+{S.repository_url()}@{ref}" in b.cells[-1].source
    nb14 = [p for p in CHAPTERS if p.stem in S.CHAPTER_EXTRAS]
    for src in nb14:
        copy = C.sandbox_chapter(src, tmp_path / src.stem, sandbox["site"], "")
        extra = S.CHAPTER_EXTRAS[src.stem]
        assert f"dplib[{extra}] @ git+" in nbformat.read(copy, as_version=4).cells[-1].source


def test_install_keeps_what_colab_has(installed):
    """pip installs only what is missing or too old: each requirement of the built wheel admits
    the version Colab already has, so the kernel's loaded modules are never replaced."""
    checked = set()
    for req in installed["requires"]:
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue                        # an extra (torch): not installed by the setup cell
        name = req.name.lower()
        assert name in COLAB_PREINSTALLED, f"{req} is not in Colab's runtime: list its version"
        assert req.specifier.contains(COLAB_PREINSTALLED[name], prereleases=True), \
            f"{req} would replace Colab's {name} {COLAB_PREINSTALLED[name]}"
        checked.add(name)
    assert "ipywidgets" in checked


def test_stored_results_are_installed_with_dplib(installed):
    """The benchmark results chapters read are package data: the wheel carries them."""
    from dplib.datasets import load_cached_result
    shipped = installed["site"] / "dplib" / "data" / "encoding_digits.json"
    assert shipped.read_bytes() == (ROOT / "dplib" / "data" / "encoding_digits.json").read_bytes()
    assert load_cached_result("encoding_digits")["provenance"]["command"].startswith(
        "python benchmarks/encoding.py")
    with pytest.raises(ValueError, match="name must be one of .*encoding_digits.*got 'digits'"):
        load_cached_result("digits")


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_setup_cell_is_the_synced_one(path):
    """Every chapter starts with the cell `make sync` writes (its pinned commit included)."""
    source = S.setup_cell(nbformat.read(path, as_version=4)).source
    ref = C.pinned_ref(nbformat.read(path, as_version=4))
    extra = S.CHAPTER_EXTRAS.get(path.stem)
    assert source == S.chapter_setup_source(S.repository_url(), ref, extra), \
        "run `make sync`"


def _git_show(ref: str, rel: str) -> bytes | None:
    proc = subprocess.run(["git", "show", f"{ref}:{rel}"], cwd=ROOT, capture_output=True)
    return proc.stdout if proc.returncode == 0 else None


def test_pinned_commit_ships_this_package_data():
    """What Colab installs is the pinned commit, not this tree: it must carry the same stored
    results (chapters assert numbers read from them) and the same requirements and package-data
    declarations. Fails until the change is committed and `make sync` has pinned that commit."""
    ref = C.pinned_ref(nbformat.read(CHAPTERS[0], as_version=4))
    try:
        known = subprocess.run(["git", "cat-file", "-e", f"{ref}^{{commit}}"], cwd=ROOT,
                               capture_output=True).returncode == 0
    except FileNotFoundError:
        pytest.skip("git is not installed: the pinned commit cannot be read")
    if not known:
        pytest.skip(f"the pinned commit {ref} is not in this clone (shallow or not a checkout)")
    for f in sorted((ROOT / "dplib" / "data").glob("*.json")):
        rel = f.relative_to(ROOT).as_posix()
        assert _git_show(ref, rel) == f.read_bytes(), \
            f"{rel} differs at the pinned commit {ref}: commit it, then `make sync`"
    pinned = _git_show(ref, "pyproject.toml")
    assert pinned is not None, f"no pyproject.toml at the pinned commit {ref}"
    here = tomllib.loads((ROOT / "pyproject.toml").read_text())
    there = tomllib.loads(pinned.decode())
    for keys in (("project", "dependencies"), ("tool", "setuptools", "package-data")):
        a, b = here, there
        for k in keys:
            a, b = a.get(k, {}), b.get(k, {})
        assert a == b, f"pyproject.toml {'.'.join(keys)} differs at {ref}: commit, make sync"
