"""Generate the student and autograder versions of the assignments with otter-grader.

Every ``assignments/*.ipynb`` is a master notebook in Otter Assign's format: questions, their
solutions, public tests (which students can run) and hidden tests (which only the autograder
has). ``make assignments`` runs::

    python tools/assignments.py --out _build/assignments [--url https://host/path]

and writes, for each master ``NAME.ipynb``::

    OUT/NAME/student/NAME.ipynb       hand this out (solutions and hidden tests removed)
    OUT/NAME/student/tests/           the public tests, used by grader.check(...)
    OUT/NAME/student/tests.zip        the same tests, for Colab (upload it, or publish it)
    OUT/NAME/autograder/NAME.ipynb    the solutions
    OUT/NAME/autograder/NAME-autograder_*.zip   grade with: otter run -a <zip> submission.ipynb

The student notebook's ``TESTS_SHA256`` is set to the SHA-256 of its ``tests.zip``: in Colab its
first cell unpacks a ``tests.zip`` (uploaded or downloaded) only if it has that hash, since the
grader runs the tests' code. Its ``OTTER`` pin is set to the otter-grader that wrote the tests.
With ``--url``, the student notebook's ``TESTS_URL`` is set to ``URL/NAME/tests.zip`` so that in
Colab its first cell downloads the public tests by itself (publish ``student/tests.zip`` there).

``OUT`` is taken relative to the folder the command runs in (Otter itself runs in
``assignments/``). Otter Assign grades each assignment's solutions with its autograder zip before
it writes anything (a broken master fails here); ``--no-run-tests``, or the environment variable
``DPBOOK_ASSIGN_NO_RUN_TESTS=1``, skips that run, for a caller that grades the solutions with
the same zip itself (``tests/assignments`` does, and checks every question's points). The autograder zip's environment installs ``assignments/requirements.txt``:
every package the notebooks import, and ``dplib`` at the commit the notebooks pin.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sync_notebooks import OTTER_LINE, otter_requirement  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = ROOT / "assignments"
TESTS_URL_LINE = re.compile(r'^TESTS_URL = "[^"]*"', re.M)
TESTS_SHA256_LINE = re.compile(r'^TESTS_SHA256 = "[^"]*"', re.M)


def master_notebooks() -> list[Path]:
    """Every master notebook in ``assignments/`` (sorted by name)."""
    return sorted(ASSIGNMENTS.glob("*.ipynb"))


@dataclass
class Generated:
    name: str
    student: Path        # the student notebook
    solution: Path       # the autograder's copy of the notebook, with solutions
    autograder: Path     # the autograder zip file
    tests_zip: Path      # the public tests, for Colab
    tests_sha256: str    # its SHA-256, written into the student notebook's setup cell


def _otter() -> list[str]:
    return [sys.executable, "-m", "otter"]


def generate(master: Path, out: Path, *, url: str | None = None,
             run_tests: bool = True) -> Generated:
    """Run Otter Assign on one master notebook into ``out/<name>``.

    ``run_tests`` makes Otter execute the solutions against every test (public and hidden)
    before writing anything, so a broken master fails here rather than in a student's hands.
    """
    # Otter runs in the master's folder (below), so a relative ``out`` would be read from there:
    # both paths are made absolute first, relative to the caller's working folder.
    master, out = Path(master).resolve(), Path(out).resolve()
    name = master.stem
    dest = out / name
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    cmd = _otter() + ["assign", str(master), str(dest)]
    if not run_tests:
        cmd.append("--no-run-tests")
    # Otter runs from the master's folder so that relative `files:` entries resolve.
    proc = subprocess.run(cmd, cwd=master.parent, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"otter assign failed for {master.name}:\n{proc.stdout}\n{proc.stderr}")
    student = dest / "student" / master.name
    # The public tests as one zip: uploaded next to the notebook in Colab, or published at URL.
    with zipfile.ZipFile(dest / "student" / "tests.zip", "w") as zf:
        for test in sorted((dest / "student" / "tests").glob("*.py")):
            zf.write(test, f"tests/{test.name}")
    generated = read_generated(dest, name)
    _pin_student_setup(student, generated.tests_sha256,
                       f"{url.rstrip('/')}/{name}/tests.zip" if url else None)
    return generated


def read_generated(dest: Path, name: str) -> Generated:
    """The files of one assignment generated into ``dest`` (``OUT/NAME``), checked to be there."""
    student = dest / "student" / f"{name}.ipynb"
    solution = dest / "autograder" / f"{name}.ipynb"
    tests_zip = dest / "student" / "tests.zip"
    zips = sorted((dest / "autograder").glob(f"{name}-autograder_*.zip"))
    if not (student.exists() and solution.exists() and tests_zip.exists() and len(zips) == 1):
        raise RuntimeError(f"otter assign wrote an unexpected layout in {dest}")
    sha = hashlib.sha256(tests_zip.read_bytes()).hexdigest()
    return Generated(name, student, solution, zips[0], tests_zip, sha)


def environment_requirements(autograder_zip: Path) -> list[str]:
    """What the autograder zip's environment installs with pip: the ``pip:`` list of its
    ``environment.yml`` (Otter writes otter-grader and ``requirements.txt`` there)."""
    with zipfile.ZipFile(autograder_zip) as zf:
        env = yaml.safe_load(zf.read("environment.yml"))
    pip = [d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d]
    return [str(r) for r in (pip[0] if pip else [])]


def _pin_student_setup(student: Path, tests_sha256: str, tests_url: str | None) -> None:
    """Write the tests' SHA-256, this otter-grader's version and (if given) the tests' URL into
    the student notebook's setup cell."""
    nb = nbformat.read(student, as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code")
    lines = [(TESTS_SHA256_LINE, f'TESTS_SHA256 = "{tests_sha256}"'),
             (OTTER_LINE, f'OTTER = "{otter_requirement()}"')]
    if tests_url:
        lines.append((TESTS_URL_LINE, f'TESTS_URL = "{tests_url}"'))
    for pattern, line in lines:
        if not pattern.search(cell.source):
            raise RuntimeError(f"the setup cell of {student.name} has no {line.split(' =')[0]} "
                               "line: copy the setup cell of an existing assignment")
        cell.source = pattern.sub(lambda _: line, cell.source)
    nbformat.write(nb, student)


@dataclass
class Grade:
    score: float
    possible: float
    per_question: dict[str, tuple[float, float]]   # name -> (score, possible)
    outputs: dict[str, str]                         # name -> the tests' report

    def report(self) -> str:
        return "\n".join(f"{q}: {s:g}/{p:g}\n{self.outputs[q]}"
                         for q, (s, p) in self.per_question.items())


def grade(autograder_zip: Path, submission: Path) -> Grade:
    """Grade one submission locally, without Docker (``otter run``), and return the scores."""
    return grade_many({None: (autograder_zip, submission)}, workers=1)[None]


def grade_many(jobs: dict, workers: int = 2) -> dict:
    """Grade every submission of ``jobs`` (key -> (autograder zip, submission)), ``workers`` at a
    time, in the order given; return key -> :class:`Grade`.

    Each worker is a process that imports Otter once and then runs, for each submission it is
    handed, what ``otter run -a ZIP SUBMISSION`` runs (:func:`otter.run.main`): the autograder
    unpacked into a fresh folder and the submission executed in a fresh kernel, then every test.
    Nothing but the imported Otter is shared between two gradings.
    """
    import multiprocessing

    # Forked, not spawned: a spawned worker would import the caller's __main__ again.
    ctx = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(max(1, workers), mp_context=ctx) as pool:
        futures = {key: pool.submit(_otter_run, str(Path(zip_).resolve()),
                                    str(Path(submission).resolve()))
                   for key, (zip_, submission) in jobs.items()}
        return {key: _grade_of(f.result()) for key, f in futures.items()}


def _otter_run(autograder_zip: str, submission: str) -> dict:
    """``otter run -a autograder_zip --no-logo submission`` in this process: its results JSON."""
    import traceback

    from otter.run import capture_run_output, main as otter_run

    with _tempdir() as tmp, capture_run_output() as output:
        try:
            otter_run(submission, autograder=autograder_zip, output_dir=str(tmp), no_logo=True)
        except Exception:
            raise RuntimeError(f"otter run failed on {submission}:\n{output.getvalue()}\n"
                               f"{traceback.format_exc()}") from None
        results = tmp / "results.json"
        if not results.exists():
            raise RuntimeError(f"otter run wrote no results for {submission}:\n"
                               f"{output.getvalue()}")
        return json.loads(results.read_text())


def _grade_of(data: dict) -> Grade:
    per_question: dict[str, tuple[float, float]] = {}
    outputs: dict[str, str] = {}
    for test in data["tests"]:
        if "max_score" not in test:     # the "Public Tests" summary entry has no score
            continue
        per_question[test["name"]] = (float(test.get("score") or 0.0), float(test["max_score"]))
        outputs[test["name"]] = test.get("output", "")
    score = sum(s for s, _ in per_question.values())
    possible = sum(p for _, p in per_question.values())
    return Grade(score, possible, per_question, outputs)


class _tempdir:
    def __enter__(self) -> Path:
        import tempfile
        self._dir = tempfile.TemporaryDirectory(prefix="dpbook-grade-")
        return Path(self._dir.name)

    def __exit__(self, *exc) -> None:
        self._dir.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "assignments")
    parser.add_argument("--url", default=None,
                        help="where OUT/NAME/student/tests.zip will be published (for Colab)")
    parser.add_argument("--no-run-tests", action="store_true",
                        default=os.environ.get("DPBOOK_ASSIGN_NO_RUN_TESTS", "") not in ("", "0"),
                        help="skip Otter's check of the solutions against the tests (also "
                             "DPBOOK_ASSIGN_NO_RUN_TESTS=1)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="assignments generated at a time (each runs its solutions)")
    parser.add_argument("names", nargs="*", help="only these assignments (file stems)")
    args = parser.parse_args(argv)
    masters = [m for m in master_notebooks() if not args.names or m.stem in args.names]
    if not masters:
        print("no assignments found", file=sys.stderr)
        return 1
    # Otter Assign runs in its own process per assignment and writes only OUT/NAME: several at
    # a time is the same as one after another, in about half the time on two cores.
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        done = pool.map(lambda m: generate(m, args.out, url=args.url,
                                           run_tests=not args.no_run_tests), masters)
        for g in done:
            print(f"{g.name}:\n  student notebook  {g.student}\n  autograder zip    {g.autograder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
