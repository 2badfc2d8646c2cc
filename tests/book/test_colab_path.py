"""Each chapter as Colab runs it: one downloaded notebook, alone in an empty folder.

Colab opens a single ``.ipynb`` (no repository, no ``data/`` folder), with ``google.colab``
already imported and its own packages preinstalled (ipywidgets 7.7.1, numpy 2, torch). The
setup cell installs dplib from the repository at the pinned commit; here that install is stubbed
(the stub records what pip was asked for, and the test checks the pins), and dplib is importable
from a wheel built from this working tree and unpacked apart from it, so only what
``pip install`` ships (package data included) is there. Every chapter must then run top to
bottom in quick mode, with its widgets drawn through Colab's custom widget manager.

The fake ``google.colab`` mirrors what a notebook uses of it:
``output.enable_custom_widget_manager`` registers a display hook that tags every widget view
with the manager's address, as Colab's does (google/colab/output/_widgets.py). A probe cell run
after the chapter moves one control of every live panel. ``$DPBOOK_COLAB_PACKAGES``, when set, is
a folder put first on the kernel's path: Colab's ipywidgets, for instance, made with
``pip install --no-deps --target /tmp/colab77 ipywidgets==7.7.1 ipython_genutils``.

The chapters take about two minutes of CPU in all (as long as nbval's quick run); the
pinned-commit check fails until a change to the package data is committed and synced.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import sync_notebooks as S  # noqa: E402

CHAPTERS = S.chapter_notebooks()
#: Each test here runs a whole chapter: left out of `make test-fast`.
pytestmark = pytest.mark.slow
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
MANAGER_URL = "https://colab.example/custom-widget-manager.js"
PROBE = "DPBOOK_COLAB_PROBE "
#: What a Colab runtime had preinstalled in 2025 (the versions a reader's kernel starts with).
COLAB_PREINSTALLED = {"ipywidgets": "7.7.1", "numpy": "2.0.2", "scipy": "1.14.1",
                      "matplotlib": "3.10.0", "scikit-learn": "1.6.1", "tqdm": "4.67.1",
                      "mpmath": "1.3.0"}

FAKE_OUTPUT = f'''"""Colab's output module, as far as notebooks use it."""
_installed_url = None


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
# replaced by a recorder (nothing is downloaded).
SITECUSTOMIZE = '''import json, os, subprocess, sys
import google.colab  # noqa: F401

_run = subprocess.run


def _recording_run(cmd, *args, **kwargs):
    argv = [str(a) for a in cmd]
    if argv[1:4] == ["-m", "pip", "install"]:
        with open(os.environ["DPBOOK_FAKE_PIP_LOG"], "a") as log:
            log.write(json.dumps(argv) + "\\n")
        return subprocess.CompletedProcess(argv, 0)
    return _run(cmd, *args, **kwargs)


subprocess.run = _recording_run
'''


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> dict:
    """dplib as ``pip install`` ships it: a wheel of this tree, unpacked into its own folder."""
    base = tmp_path_factory.mktemp("colab_install")
    src = base / "src"
    shutil.copytree(ROOT / "dplib", src / "dplib",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index",
                    "--no-build-isolation", "--disable-pip-version-check", "-w",
                    str(base / "wheel"), str(src)], check=True, capture_output=True)
    wheel = next((base / "wheel").glob("dplib-*.whl"))
    site = base / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    meta = next(site.glob("dplib-*.dist-info")) / "METADATA"
    requires = Parser().parsestr(meta.read_text()).get_all("Requires-Dist") or []
    return {"site": site, "requires": [Requirement(r) for r in requires]}


@pytest.fixture(scope="session")
def fake_colab(tmp_path_factory) -> Path:
    """A folder with ``google/colab`` (a namespace portion) and the kernel's sitecustomize."""
    d = tmp_path_factory.mktemp("fake_colab")
    (d / "google" / "colab").mkdir(parents=True)
    (d / "google" / "colab" / "__init__.py").write_text('"""A stand-in for Colab."""\n')
    (d / "google" / "colab" / "output.py").write_text(FAKE_OUTPUT)
    (d / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return d


@pytest.fixture(scope="session")
def home(tmp_path_factory) -> Path:
    """A fresh home directory (no download caches), shared so matplotlib builds its cache once."""
    return tmp_path_factory.mktemp("colab_home")


# Appended to the chapter: moves the first control of every panel shown with sliders (as a reader
# would; a failing redraw raises here) and reports where dplib and ipywidgets were loaded from.
PROBE_CELL = f"""
import gc, json, dplib, ipywidgets
from dplib.widgets import FigurePanel

def is_panel(o):
    try:                   # a dead weakref.proxy (torch and transformers leave some) raises here
        return isinstance(o, FigurePanel) and bool(o.sliders)
    except ReferenceError:
        return False


moved = 0
for panel in [o for o in gc.get_objects() if is_panel(o)]:
    name, c = next(iter(panel.controls.items()))
    old = panel.values[name]
    if c.kind == "choice":
        new = next(v for v in c.options if v != c.value)
    else:
        far = c.max if c.value < c.max else c.min
        new = c.cast((c.value * far) ** 0.5 if c.kind == "log" else (c.value + far) / 2)
    panel.sliders[name].value = new
    assert panel.values[name] != old, (name, old, new)
    moved += 1
print({PROBE!r} + json.dumps({{"dplib": dplib.__file__, "ipywidgets": ipywidgets.__file__,
                              "version": ipywidgets.__version__, "moved": moved}}))
"""


def _pinned_ref(path: Path) -> str:
    """The ``BOOK_REF`` of a notebook's setup cell."""
    source = S.setup_cell(nbformat.read(path, as_version=4)).source
    return S.REF_LINE.search(source).group(0).split('"')[1]


def _run_alone(path: Path, folder: Path, env: dict) -> nbformat.NotebookNode:
    """Execute a copy of ``path`` in ``folder`` (which holds nothing else), plus the probe."""
    shutil.copy2(path, folder / path.name)
    nb = nbformat.read(folder / path.name, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE_CELL))
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(folder)}}).execute(env=env)
    return nb


def _outputs(nb) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_runs_alone_as_in_colab(path, tmp_path, installed, fake_colab, home):
    folder = tmp_path / "content"
    folder.mkdir()
    pip_log = tmp_path / "pip.jsonl"
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "DPBOOK_DATA", "DPBOOK_CACHE", "MPLBACKEND")}
    extra = [p for p in [os.environ.get("DPBOOK_COLAB_PACKAGES", "")] if p]
    env.update(PYTHONPATH=os.pathsep.join([*extra, str(fake_colab), str(installed["site"])]),
               PYTHONNOUSERSITE="1", HOME=str(home), DPBOOK_QUICK="1",
               DPBOOK_FAKE_PIP_LOG=str(pip_log))
    start = time.perf_counter()
    nb = _run_alone(path, folder, env)      # raises CellExecutionError on the first failing cell
    wall = time.perf_counter() - start

    # The one install: the repository at the commit `make sync` wrote, nothing else, no upgrade.
    ref = _pinned_ref(path)
    assert re.fullmatch(r"[0-9a-f]{40}", ref), f"BOOK_REF {ref!r} is not a commit: make sync"
    calls = [json.loads(line) for line in pip_log.read_text().splitlines()]
    assert [c[4:] for c in calls] == [["-q", f"git+{S.repository_url()}@{ref}"]], calls

    # dplib came from the installed copy, not from the repository; ipywidgets from Colab's
    # packages when they are given; a control of every live panel moved and its figure redrew.
    probe = next(json.loads(t[len(PROBE):]) for o in _outputs(nb)
                 for t in str(o.get("text", "")).splitlines() if t.startswith(PROBE))
    print(f"\n{path.stem}: {wall:.1f} s from an empty folder, ipywidgets {probe['version']}, "
          f"{probe['moved']} panel(s) moved")
    assert Path(probe["dplib"]).is_relative_to(installed["site"]), probe
    if extra:
        assert Path(probe["ipywidgets"]).is_relative_to(extra[0]), probe
    assert probe["moved"] >= 1

    # The sliders are drawn by Colab's custom widget manager (turned on before any widget).
    views = [o for o in _outputs(nb) if WIDGET_VIEW in o.get("data", {})]
    assert views, "no widget was displayed"
    for o in views:
        meta = o.get("metadata", {}).get(WIDGET_VIEW, {}).get("colab", {})
        assert meta == {"custom_widget_manager": {"url": MANAGER_URL}}, \
            "a widget was shown before output.enable_custom_widget_manager()"


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
    assert source == S.chapter_setup_source(S.repository_url(), _pinned_ref(path)), \
        "run `make sync`"


def _git_show(ref: str, rel: str) -> bytes | None:
    proc = subprocess.run(["git", "show", f"{ref}:{rel}"], cwd=ROOT, capture_output=True)
    return proc.stdout if proc.returncode == 0 else None


def test_pinned_commit_ships_this_package_data():
    """What Colab installs is the pinned commit, not this tree: it must carry the same stored
    results (chapters assert numbers read from them) and the same requirements and package-data
    declarations. Fails until the change is committed and `make sync` has pinned that commit."""
    ref = _pinned_ref(CHAPTERS[0])
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
