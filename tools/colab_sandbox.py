"""A Colab-like place to run the chapters under nbval: each notebook alone, dplib as pip ships it.

``make test-notebooks`` runs::

    python tools/colab_sandbox.py --out _build/colab
    JUPYTER_PATH=_build/colab/share/jupyter pytest --nbval-lax \\
        --nbval-kernel-name dpbook-colab _build/colab/chapters

so every chapter is executed once, in quick mode, the way Colab opens it — and that one run is
both the nbval check of the book and the check of the Colab path (the chapters used to be run
twice for the two). What the sandbox holds:

* ``site/`` — dplib as ``pip install`` ships it: a wheel built from this tree and unpacked, so only
  the package and its declared package data are there (no ``data/`` folder, no repository);
* ``colab/`` — a stand-in for Colab's ``google.colab`` (imported when the kernel starts, as in
  Colab) whose ``output.enable_custom_widget_manager`` tags every widget view with the manager's
  address as Colab's display hook does (google/colab/output/_widgets.py), and a
  ``sitecustomize`` that replaces pip by a recorder (nothing is downloaded);
* ``home/`` — an empty home (no download caches) whose IPython start-up file notes, for every
  widget view displayed, whether the custom widget manager was on by then;
* ``share/jupyter/kernels/dpbook-colab`` — the kernel: this interpreter with that path, home and
  ``DPBOOK_QUICK=1`` (``$DPBOOK_COLAB_PACKAGES``, when set, goes first on the path: Colab's
  ipywidgets, e.g. ``pip install --no-deps --target /tmp/colab77 ipywidgets==7.7.1
  ipython_genutils``);
* ``chapters/NAME/NAME.ipynb`` — each chapter alone in its folder, plus a last cell (the probe)
  that moves one control of every live panel and asserts what Colab relies on: the setup cell
  asked pip for exactly the repository at its pinned commit, dplib came from ``site/``, every
  widget view was drawn by the custom widget manager. A failing probe fails that notebook's nbval
  run with the assertion's message.
* ``chapters/conftest.py`` — records what every cell printed and drew under nbval; a chapter whose
  cells all passed is written, with those outputs, to ``executed/NAME.ipynb``.

One run for two checks. ``make test`` runs nbval with ``DPBOOK_WIDGET_FRAMES=1`` (inherited by
the kernels), so each interactive figure is drawn as the website draws it, over its grid of
frames, and ``tools/execute_chapters.py --executed`` puts ``executed/`` into the quick book's
execution cache instead of executing every chapter a second time (about 190 s on two cores).
With frames on, no cell shows a live panel, so the probe shows each panel live itself, under
the custom widget manager, before it moves a control: the ipywidgets path is still walked in
every chapter, after the setup cell, as a reader's Colab walks it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sync_notebooks as S  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
KERNEL = "dpbook-colab"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
MANAGER_URL = "https://colab.example/custom-widget-manager.js"

FAKE_OUTPUT = f'''"""Colab's output module, as far as notebooks use it."""
_installed_url = None
#: The manager's address (None: not on yet) at each widget view displayed (home's start-up file).
views = []


def enable_custom_widget_manager(version="5.0.0a"):
    """Tag every widget view with the custom manager's address (Colab's display hook)."""
    global _installed_url
    import IPython
    if _installed_url is None:
        IPython.get_ipython().display_pub.register_hook(_hook)
    _installed_url = {MANAGER_URL!r}


def _hook(msg):
    data = msg.get("content", {{}}).get("data", {{}})
    if {WIDGET_VIEW!r} in data:
        meta = msg["content"].setdefault("metadata", {{}}).setdefault({WIDGET_VIEW!r}, {{}})
        meta["colab"] = {{"custom_widget_manager": {{"url": _installed_url}}}}
    return msg
'''

# Runs when the kernel starts: Colab's kernel has imported google.colab by then, and pip is
# replaced by a recorder (nothing is downloaded) that notes which kernel asked.
SITECUSTOMIZE = '''import json, os, subprocess, sys
import google.colab  # noqa: F401

_run = subprocess.run


def _recording_run(cmd, *args, **kwargs):
    argv = [str(a) for a in cmd]
    if argv[1:4] == ["-m", "pip", "install"]:
        with open(os.environ["DPBOOK_FAKE_PIP_LOG"], "a") as log:
            log.write(json.dumps({"pid": os.getpid(), "argv": argv}) + "\\n")
        return subprocess.CompletedProcess(argv, 0)
    return _run(cmd, *args, **kwargs)


subprocess.run = _recording_run
'''

# IPython start-up file of the sandbox's home: registered before any cell runs, so it sees every
# widget view, including one shown before the setup cell turns the custom manager on.
STARTUP = f'''import IPython
from google.colab import output as _output


def _note_widget_view(msg):
    if {WIDGET_VIEW!r} in msg.get("content", {{}}).get("data", {{}}):
        _output.views.append(_output._installed_url)
    return msg


IPython.get_ipython().display_pub.register_hook(_note_widget_view)

# nbval executes cells with store_history=False, so IPython's test for a final ';' reads the
# input history's last cell, not the one running, and a cell ending in `ax.legend();` would show
# its value. Read the running cell, as Colab's and Jupyter's kernels (history stored) do.
_running = {{"cell": ""}}


def _note_cell(info):
    _running["cell"] = info.raw_cell or ""


_shell = IPython.get_ipython()
_shell.events.register("pre_run_cell", _note_cell)
_shell.displayhook.quiet = lambda: _shell.displayhook.semicolon_at_end_of_expression(
    _running["cell"])
'''

# The last cell of every sandboxed chapter. EXPECTED_PIP, SITE and EXTRA are filled in.
PROBE = '''
import gc, json, os
from pathlib import Path
import dplib, ipywidgets
from dplib.widgets import FigurePanel
from google.colab import output as _colab_output


from dplib.widget_frames import FRAMES_ENV, frames_enabled


def _is_panel(o, live):
    try:                   # a dead weakref.proxy (torch and transformers leave some) raises here
        return isinstance(o, FigurePanel) and bool(o.sliders if live else o.controls)
    except ReferenceError:
        return False


# With the website's frames on, the cells drew no live panel: show each one live now, as Colab
# does (the custom widget manager is on since the setup cell).
if frames_enabled():
    os.environ[FRAMES_ENV] = "0"
    for _panel in [o for o in gc.get_objects() if _is_panel(o, live=False)]:
        _panel.show()

# A reader moves a control of every live panel: its figure must redraw without an error.
_moved = 0
for _panel in [o for o in gc.get_objects() if _is_panel(o, live=True)]:
    _name, _c = next(iter(_panel.controls.items()))
    _old = _panel.values[_name]
    if _c.kind == "choice":
        _new = next(v for v in _c.options if v != _c.value)
    else:
        _far = _c.max if _c.value < _c.max else _c.min
        _new = _c.cast((_c.value * _far) ** 0.5 if _c.kind == "log" else (_c.value + _far) / 2)
    _panel.sliders[_name].value = _new
    assert _panel.values[_name] != _old, (_name, _old, _new)
    _moved += 1
assert _moved >= 1, "no live panel with sliders was found"

# The one install: the repository at the commit `make sync` wrote, nothing else, no upgrade.
with open(os.environ["DPBOOK_FAKE_PIP_LOG"]) as _log:
    _calls = [json.loads(line) for line in _log]
_mine = [c["argv"][4:] for c in _calls if c["pid"] == os.getpid()]     # this kernel's
assert _mine == EXPECTED_PIP, f"pip was asked for {_mine}, not {EXPECTED_PIP}: run `make sync`"

# dplib came from the installed copy, not from the repository; ipywidgets from Colab's packages
# when they are given.
assert Path(dplib.__file__).is_relative_to(SITE), f"dplib was imported from {dplib.__file__}"
assert not EXTRA or Path(ipywidgets.__file__).is_relative_to(EXTRA), ipywidgets.__file__

# The sliders are drawn by Colab's custom widget manager (turned on before any widget).
assert _colab_output.views, "no widget was displayed"
assert None not in _colab_output.views, \\
    "a widget was shown before output.enable_custom_widget_manager()"
print(f"Colab path: dplib from the wheel, ipywidgets {ipywidgets.__version__}, "
      f"{_moved} panel(s) moved, {len(_colab_output.views)} widget view(s)")
'''


def pinned_ref(nb: nbformat.NotebookNode) -> str:
    """The ``BOOK_REF`` of a notebook's setup cell."""
    return S.REF_LINE.search(S.setup_cell(nb).source).group(0).split('"')[1]


def build_site(base: Path) -> Path:
    """dplib as ``pip install`` ships it: a wheel of this tree, unpacked into ``base/site``."""
    src = base / "src"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(ROOT / "dplib", src / "dplib",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    wheels = base / "wheel"
    shutil.rmtree(wheels, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index",
                    "--no-build-isolation", "--disable-pip-version-check", "-w", str(wheels),
                    str(src)], check=True, capture_output=True)
    site = base / "site"
    shutil.rmtree(site, ignore_errors=True)
    with zipfile.ZipFile(next(wheels.glob("dplib-*.whl"))) as z:
        z.extractall(site)
    return site


def write_colab(base: Path) -> Path:
    """The fake ``google.colab`` and the kernel's ``sitecustomize`` in ``base/colab``."""
    d = base / "colab"
    (d / "google" / "colab").mkdir(parents=True, exist_ok=True)
    (d / "google" / "colab" / "__init__.py").write_text('"""A stand-in for Colab."""\n')
    (d / "google" / "colab" / "output.py").write_text(FAKE_OUTPUT)
    (d / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return d


def write_home(base: Path) -> Path:
    """An empty home whose IPython start-up file notes every widget view."""
    home = base / "home"
    startup = home / ".ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-colab-widget-views.py").write_text(STARTUP)
    return home


def write_kernel(base: Path, path: list[Path], home: Path, pip_log: Path) -> Path:
    """The ``dpbook-colab`` kernel spec under ``base/share/jupyter`` (put it on JUPYTER_PATH)."""
    spec = base / "share" / "jupyter" / "kernels" / KERNEL
    spec.mkdir(parents=True, exist_ok=True)
    env = {"PYTHONPATH": os.pathsep.join(str(p) for p in path), "PYTHONNOUSERSITE": "1",
           "HOME": str(home), "DPBOOK_QUICK": "1", "DPBOOK_FAKE_PIP_LOG": str(pip_log),
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (Colab-like sandbox)", "language": "python", "env": env},
        indent=1))
    return spec


# The conftest.py of the sandbox's chapters folder; EXECUTED (a folder) is added at its end.
RECORDER = '''"""Keeps what each chapter's cells printed and drew under nbval (tools/colab_sandbox.py).

A chapter whose every code cell ran and passed is written to EXECUTED/NAME.ipynb with nbval's
record of each cell's outputs, and with the run's mode in its metadata (dpbook_run), for
tools/execute_chapters.py --executed. nbval's items are read through their attributes
cell_num and test_outputs (nbval >= 0.11).
"""
import os
from pathlib import Path

import nbformat
import pytest

_runs = {}


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if not hasattr(item, "cell_num"):
        return
    run = _runs.setdefault(str(item.path), {"outputs": {}, "failed": False})
    if report.failed or report.skipped:
        run["failed"] = True
    elif report.when == "call":
        run["outputs"][item.cell_num] = item.test_outputs


def pytest_sessionfinish(session):
    frames = os.environ.get("DPBOOK_WIDGET_FRAMES", "").strip().lower() not in (
        "", "0", "false", "no")
    for path, run in _runs.items():
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        if run["failed"] or sorted(run["outputs"]) != list(range(len(code))):
            continue
        for i, cell in enumerate(code):
            cell.outputs = [nbformat.from_dict(dict(o)) for o in run["outputs"][i]]
        nb.metadata["dpbook_run"] = {"quick": True, "frames": frames, "sandbox": True}
        Path(EXECUTED).mkdir(exist_ok=True)
        nbformat.write(nb, Path(EXECUTED) / Path(path).name)
'''


def probe_source(expected_pip: list[list[str]], site: Path, extra: str) -> str:
    """The probe cell with what this sandbox expects filled in."""
    return (f"EXPECTED_PIP = {expected_pip!r}\nSITE = {str(site)!r}\nEXTRA = {extra!r}\n"
            + PROBE)


def sandbox_chapter(path: Path, folder: Path, site: Path, extra: str) -> Path:
    """A copy of chapter ``path`` alone in ``folder``, with the probe as its last cell."""
    nb = nbformat.read(path, as_version=4)
    ref = pinned_ref(nb)
    if not re.fullmatch(r"[0-9a-f]{40}", ref):
        raise SystemExit(f"{path.name}: BOOK_REF {ref!r} is not a commit: run `make sync`")
    expected = [["-q", S.pip_target(S.repository_url(), ref, S.CHAPTER_EXTRAS.get(path.stem))]]
    nb.cells.append(nbformat.v4.new_code_cell(probe_source(expected, site, extra)))
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / path.name)
    return folder / path.name


def prepare(out: Path, chapters: list[Path], extra: str = "") -> list[Path]:
    """Build the sandbox in ``out``; return the sandboxed chapter notebooks."""
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    site = build_site(out)
    pip_log = out / "pip.jsonl"
    pip_log.write_text("")
    path = [Path(extra)] if extra else []
    write_kernel(out, [*path, write_colab(out), site], write_home(out), pip_log)
    executed = out / "executed"
    shutil.rmtree(executed, ignore_errors=True)
    (out / "chapters").mkdir(exist_ok=True)
    (out / "chapters" / "conftest.py").write_text(RECORDER + f"\n\nEXECUTED = {str(executed)!r}\n")
    return [sandbox_chapter(p, out / "chapters" / p.stem, site, extra) for p in chapters]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "colab")
    parser.add_argument("chapters", nargs="*", type=Path,
                        help="chapter notebooks (default: every chapter)")
    args = parser.parse_args(argv)
    made = prepare(args.out, args.chapters or S.chapter_notebooks(),
                   os.environ.get("DPBOOK_COLAB_PACKAGES", ""))
    print(f"{len(made)} chapters in the Colab-like sandbox {args.out}; run them with "
          f"JUPYTER_PATH={args.out / 'share' / 'jupyter'} pytest --nbval-lax "
          f"--nbval-kernel-name {KERNEL} {args.out / 'chapters'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
