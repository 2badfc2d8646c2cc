"""Every command and code snippet that the README and the front matter give a reader works.

Python blocks are executed as they stand, each in a fresh namespace in an empty folder. Shell
blocks and inline commands (`make …`, `python …`, `pip …`, `.venv/bin/…`, `otter …`,
`jupyter-book …`, `git …`) are checked without running them: a `make` target must be a target of
the Makefile, a script must exist and know every `--option` it is given, `python -m` must name an
importable module, any other program must be installed, and the library's install address must
be the repository of _config.yml. Placeholders (`<commit>`) stand for one word.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", "intro.md", "chapters/how-to-run.md", "chapters/instructors.md"]
FENCE = re.compile(r"^(`{3,}|~{3,})\s*\{?(?P<lang>[\w-]*)\}?[^\n]*\n(?P<body>.*?)^\1\s*$",
                   re.M | re.S)
INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
PROGRAMS = ("make ", "python ", "python3 ", "pip ", ".venv/bin/", "otter ", "jupyter-book ",
            "git ")
SHELL_BUILTINS = {"cd", "export", "source", "echo", "set"}


def _blocks(page: str) -> list[tuple[str, str]]:
    return [(m.group("lang"), m.group("body")) for m in FENCE.finditer((ROOT / page).read_text())]


def _commands(page: str) -> list[str]:
    """Every shell command of the page: lines of its bash blocks (continuations joined, comments
    cut) and inline code spans that start with a program name."""
    text = (ROOT / page).read_text()
    found = []
    for lang, body in _blocks(page):
        if lang in ("bash", "sh", "shell", "console"):
            for line in body.replace("\\\n", " ").splitlines():
                found.extend(part.strip() for part in re.split(r"&&|;|\|\|", line.split(" #")[0])
                             if part.strip() and not part.strip().startswith("#"))
    prose = FENCE.sub("", text)
    found.extend(span.strip() for span in INLINE.findall(prose) if span.startswith(PROGRAMS))
    return found


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", text, re.M))


def _problem(command: str) -> str | None:
    """Why ``command`` would fail as written, or None."""
    try:
        words = shlex.split(re.sub(r"<[^<>]*>", "PLACEHOLDER", command))
    except ValueError as err:
        return f"cannot be parsed: {err}"
    program, args = words[0], words[1:]
    if program in SHELL_BUILTINS:
        return None
    if program == "make":
        missing = [a for a in args if "=" not in a and not a.startswith("-")
                   and a not in _make_targets()]
        return f"no Makefile target {missing}" if missing else None
    if program in ("python", "python3") or program.endswith("/python"):
        if args[:1] == ["-m"]:
            module = args[1]
            return None if importlib.util.find_spec(module) else f"no module {module}"
        script = ROOT / args[0]
        if not script.is_file():
            return f"no script {args[0]}"
        source = script.read_text()
        unknown = [a.split("=")[0] for a in args[1:] if a.startswith("--")
                   and f'"{a.split("=")[0]}"' not in source]
        return f"{args[0]} has no option {unknown}" if unknown else None
    if program == "pip":
        for arg in args:
            if arg == "-e" or arg == ".":
                continue
            if arg.startswith("git+"):
                url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
                where = arg[4:].split("@")[0]
                if where not in (url, "PLACEHOLDER"):
                    return f"installs from {where}, the book's repository is {url}"
        if "-e" in args and not (ROOT / "pyproject.toml").is_file():
            return "pip install -e . needs pyproject.toml"
        return None
    path = ROOT / program
    if "/" in program:
        return None if path.is_file() and os.access(path, os.X_OK) else f"no program {program}"
    venv = ROOT / ".venv" / "bin" / program
    return None if shutil.which(program) or venv.is_file() else f"no program {program}"


COMMANDS = [(page, c) for page in PAGES for c in _commands(page)]
SNIPPETS = [(page, body) for page in PAGES for lang, body in _blocks(page)
            if lang in ("python", "python3", "py")]


def test_the_pages_have_commands_and_snippets():
    assert len(COMMANDS) >= 15 and SNIPPETS
    assert any(c.startswith("make book") for _, c in COMMANDS)


@pytest.mark.parametrize("page,command", COMMANDS, ids=[f"{p}:{c[:40]}" for p, c in COMMANDS])
def test_every_command_names_something_that_exists(page, command):
    assert _problem(command) is None, f"{page}: `{command}`: {_problem(command)}"


@pytest.mark.parametrize("command,why", [
    ("make no-such-target", "no Makefile target"),
    ("python benchmarks/no_such_script.py", "no script"),
    ("python tools/student_edition.py --no-such-option", "has no option"),
    ("python -m dplib.book sync", "no module"),
    ("no-such-program --help", "no program"),
])
def test_a_command_that_does_not_exist_is_caught(command, why):
    assert why in (_problem(command) or "")


@pytest.mark.parametrize("page,snippet", SNIPPETS, ids=[p for p, _ in SNIPPETS])
def test_every_python_snippet_runs(page, snippet, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet, f"{page} snippet", "exec"), {"__name__": "__snippet__"})
