"""Keep every Colab install cell pinned: ``repository.url`` of ``_config.yml``, at one commit.

``_config.yml`` is the one place the repository's address is written; a notebook opened in Colab
cannot read it, so the address is copied into the ``BOOK_REPO = ...`` line of each chapter's first
code cell, and of each assignment's master notebook, and into ``assignments/requirements.txt``
(what an autograder image installs). Every chapter's first code cell is written whole from
:data:`CHAPTER_SETUP` (one text for all chapters); the assignments' setup cells, which differ,
get only their pinned lines. What Colab installs is pinned too, so that a later push to
the repository (or to PyPI) cannot change what a reader's notebook runs:

* ``BOOK_REF = "<40-hex commit>"``: the commit of the repository the cell installs
  (``git+{BOOK_REPO}@{BOOK_REF}``): ``HEAD`` when ``make sync`` runs, or ``--ref`` (a commit or
  tag, written as the commit it names). A commit hash names its content; a branch or a tag can
  be moved. Commit your changes to ``dplib`` first, then sync, and push that commit.
* ``OTTER = "otter-grader==X.Y.Z"`` in the assignments: the otter-grader installed here, the one
  that writes the tests and the autograder (``tools/assignments.py``).

Run ``make sync`` (``make sync REF=<commit or tag>``) after changing the URL or before
publishing; ``tests/book``, ``tests/assignments`` and ``tests/adversary`` fail while the cells
disagree. It edits only the setup cells (nothing else of a notebook) and ``requirements.txt``.
``make sync`` also links, from the front matter, every planned chapter that has entered the table
of contents (tools/front_matter.py).
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import nbformat
import yaml

ROOT = Path(__file__).resolve().parents[1]
REPO_LINE = re.compile(r'^BOOK_REPO = "[^"]*"', re.M)
REF_LINE = re.compile(r'^BOOK_REF = "[^"]*"', re.M)
OTTER_LINE = re.compile(r'^OTTER = "[^"]*"', re.M)
#: What ``BOOK_REF`` holds: a full commit hash.
COMMIT = re.compile(r"[0-9a-f]{40}")
REQUIREMENTS = ROOT / "assignments" / "requirements.txt"

#: The first code cell of every chapter; ``make sync`` fills in the two pinned lines. In Colab it
#: installs dplib without ``--upgrade``: pip then keeps what the runtime has (its ipywidgets 7.7.1,
#: numpy, torch), since dplib accepts those versions, instead of replacing a module the running
#: kernel may already have loaded. Colab's own widget manager draws core ipywidgets 7 but not 8;
#: its custom widget manager draws both, so the cell turns it on (once dplib is importable; the
#: first ``if`` is the install alone).
CHAPTER_SETUP = """\
# Setup. In Colab: install dplib from the book's repository, at the commit this book was built
# from, keeping Colab's own packages, and let Colab draw the sliders. Everywhere: seed every
# generator and pick the device (GPU when there is one).
import sys

BOOK_REPO = ""  # repository.url, _config.yml
BOOK_REF = ""  # the commit of BOOK_REPO it installs (`make sync`)
if "google.colab" in sys.modules:
    import subprocess
    subprocess.run([sys.executable, "-m", "pip", "install", "-q",
                    f"git+{BOOK_REPO}@{BOOK_REF}"], check=True)

import dplib

if "google.colab" in sys.modules:  # the widget manager that renders ipywidgets 7 and 8
    from google.colab import output
    output.enable_custom_widget_manager()
env = dplib.setup(seed=0)"""


def repository_url() -> str:
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def chapter_notebooks() -> list[Path]:
    return sorted((ROOT / "chapters").glob("*.ipynb"))


def assignment_notebooks() -> list[Path]:
    """The master notebooks of the autograded assignments."""
    return sorted((ROOT / "assignments").glob("*.ipynb"))


def setup_cell(nb) -> nbformat.NotebookNode:
    """The first code cell: the setup cell every chapter starts with."""
    return next(c for c in nb.cells if c.cell_type == "code")


def _git(*args: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    except FileNotFoundError:   # no git on this machine
        return None


def book_ref(ref: str | None = None) -> str:
    """The 40-hex commit the notebooks install: the one ``ref`` names (commit or tag), or HEAD.

    Without git (or without the commit in a shallow clone) only a full commit hash is accepted.
    """
    proc = _git("rev-parse", "--verify", "--quiet", f"{ref or 'HEAD'}^{{commit}}")
    if proc is not None and proc.returncode == 0 and COMMIT.fullmatch(proc.stdout.strip()):
        return proc.stdout.strip()
    if ref is not None and COMMIT.fullmatch(ref):
        return ref
    if ref is None:
        raise ValueError("no git history here: pass --ref <40-hex commit>")
    raise ValueError(f"ref must name a commit of this repository (a commit hash or a tag), "
                     f"got {ref!r}")


def otter_requirement() -> str:
    """``otter-grader==<the version installed here>``: the grader that writes the tests."""
    return f"otter-grader=={metadata.version('otter-grader')}"


def pin_setup_source(source: str, url: str, ref: str, otter: str | None) -> str:
    """The setup cell's source with its ``BOOK_REPO``/``BOOK_REF`` (and ``OTTER``) lines set.

    Raises ``ValueError`` when a line is missing or the cell installs the repository unpinned:
    a new notebook must start from the setup cell of an existing one.
    """
    lines = [(REPO_LINE, f'BOOK_REPO = "{url}"'), (REF_LINE, f'BOOK_REF = "{ref}"')]
    if otter is not None:
        lines.append((OTTER_LINE, f'OTTER = "{otter}"'))
    for pattern, line in lines:
        if not pattern.search(source):
            raise ValueError(f"the setup cell has no {line.split(' =')[0]} line: copy the setup "
                             "cell of an existing notebook")
        source = pattern.sub(lambda _: line, source)
    if 'git+{BOOK_REPO}@{BOOK_REF}"' not in source:
        raise ValueError('the setup cell must install f"git+{BOOK_REPO}@{BOOK_REF}"')
    return source


#: Chapters that need packages beyond dplib's own requirements, by chapter: the extra of
#: pyproject.toml their setup cell installs (``dplib[EXTRA] @ git+...``). Colab has torch and
#: peft but not mbi, for instance.
CHAPTER_EXTRAS = {"13_private_finetuning": "finetune", "14_dp_in_practice": "synthetic"}


def pip_target(url: str, ref: str, extra: str | None = None) -> str:
    """What a setup cell asks pip for: the repository at ``ref`` (with an extra, if any)."""
    return f"dplib[{extra}] @ git+{url}@{ref}" if extra else f"git+{url}@{ref}"


def chapter_setup_source(url: str, ref: str, extra: str | None = None) -> str:
    """:data:`CHAPTER_SETUP` with its ``BOOK_REPO``/``BOOK_REF`` lines set to ``url``/``ref``,
    installing ``dplib[extra]`` when the chapter needs an extra (:data:`CHAPTER_EXTRAS`)."""
    source = CHAPTER_SETUP
    if extra:
        source = source.replace('f"git+{BOOK_REPO}@{BOOK_REF}"',
                                f'f"dplib[{extra}] @ git+{{BOOK_REPO}}@{{BOOK_REF}}"')
    return pin_setup_source(source, url, ref, None)


def _uncommitted_library() -> bool:
    proc = _git("status", "--porcelain", "--", "dplib", "pyproject.toml", "requirements.txt")
    return proc is not None and proc.returncode == 0 and bool(proc.stdout.strip())


def sync_setup_cells(url: str, ref: str, otter: str) -> list[Path]:
    """Write every chapter's setup cell from :data:`CHAPTER_SETUP` and pin every assignment's
    (only that cell, and only if needed; each file is read right before it is written)."""
    changed = []
    for path in chapter_notebooks() + assignment_notebooks():
        nb = nbformat.read(path, as_version=4)
        cell = setup_cell(nb)
        if path.parent.name != "assignments":
            new = chapter_setup_source(url, ref, CHAPTER_EXTRAS.get(path.stem))
        else:
            try:
                new = pin_setup_source(cell.source, url, ref, otter)
            except ValueError as err:
                raise ValueError(f"{path.relative_to(ROOT)}: {err}") from None
        if new != cell.source:
            cell.source = new
            nbformat.write(nb, path)
            changed.append(path)
    return changed


def sync_requirements(url: str, ref: str) -> bool:
    """Pin the ``git+`` line of ``assignments/requirements.txt`` to ``url@ref``."""
    if not REQUIREMENTS.exists():
        return False
    text = REQUIREMENTS.read_text()
    new = re.sub(r"^git\+\S+", lambda _: f"git+{url}@{ref}", text, flags=re.M)
    if new != text:
        REQUIREMENTS.write_text(new)
    return new != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", default=None,
                        help="commit or tag the notebooks install (default: HEAD)")
    args = parser.parse_args(argv)
    url, ref, otter = repository_url(), book_ref(args.ref), otter_requirement()
    if args.ref is None and _uncommitted_library():
        print(f"warning: dplib has uncommitted changes; the notebooks install {ref}, which lacks "
              "them: commit, then run `make sync` again", file=sys.stderr)
    for path in sync_setup_cells(url, ref, otter):
        print(f"updated {path.relative_to(ROOT)}")
    if sync_requirements(url, ref):
        print(f"updated {REQUIREMENTS.relative_to(ROOT)}")
    # Planned chapters that have entered the toc: link them from the front matter.
    from front_matter import link_landed_chapters
    for rel, n in link_landed_chapters().items():
        print(f"updated {rel}: {n} chapter mention(s) now linked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
