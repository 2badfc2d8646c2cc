"""Where a stored result came from: the command, the commit (and whether the tree had
uncommitted changes), the date and the versions — recorded next to every table the book quotes,
so that a reader can re-run it and a reviewer can tell a stale table from a fresh one."""
from __future__ import annotations

import datetime
import os
import platform
import subprocess
from pathlib import Path

from ._common_params import DIRECTORY, TEXT
from ._constraints import constrained

__all__ = ["run_provenance"]


@constrained(command=TEXT, root=DIRECTORY)
def run_provenance(command: str, root: str | Path) -> dict:
    """``{"command", "commit", "uncommitted_changes", "date", "python", "torch", "machine",
    "cpus"}`` for a run of ``command`` from the git checkout at ``root`` (commit "unknown" outside
    one). Tracked files only decide ``uncommitted_changes``."""
    root = Path(root)

    def git(*args: str) -> str:
        try:
            out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
        except OSError:
            return ""
        return out.stdout.strip() if out.returncode == 0 else ""
    commit = git("rev-parse", "HEAD") or "unknown"
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    try:
        import torch
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    return {"command": command, "commit": commit, "uncommitted_changes": dirty,
            "date": datetime.date.today().isoformat(), "python": platform.python_version(),
            "torch": torch_version, "machine": platform.machine(), "cpus": os.cpu_count()}
