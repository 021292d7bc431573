"""What a run record carries about the code that produced it: start and end time (UTC), the git commit, whether
the experiment's code differed from that commit, and a hash of that code."""

from __future__ import annotations

import functools
import hashlib
import subprocess
from datetime import datetime, timezone
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
# The code a run executes: the experiment and the trainers it drives.
CODE_FOLDERS = ("experiments/toy_arithmetic", "trl_verigate")


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def code_hash(root: Path = REPO_ROOT, folders: tuple[str, ...] = CODE_FOLDERS) -> str:
    """SHA-256 over the ``*.py`` files under ``folders`` of ``root``, each as its relative path and its bytes, in
    path order."""
    digest = hashlib.sha256()
    files = sorted(path for folder in folders for path in (root / folder).rglob("*.py"))
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def git_state(root: Path = REPO_ROOT, folders: tuple[str, ...] = CODE_FOLDERS) -> dict:
    """{"git_commit": HEAD or None outside a repository, "git_dirty": whether the Python files of ``folders``, the
    ones `code_hash` covers, differ from it (an untracked one counts; a warm-start cache or notes do not)}."""

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    python_files = [f":(glob){folder}/**/*.py" for folder in folders]
    status = git("status", "--porcelain", "--untracked-files=all", "--", *python_files) if commit else None
    return {"git_commit": commit, "git_dirty": bool(status)}


@functools.cache
def process_provenance() -> dict:
    """The commit and code hash of this process, taken once: the code it imported at its start."""
    return {**git_state(), "code_hash": code_hash()}


def stamped(compute):
    """``compute`` wrapped so that its dict result also holds ``started_at``, ``ended_at`` and
    `process_provenance`."""

    def run() -> dict:
        started = utc_now()
        value = compute()
        return {**value, "started_at": started, "ended_at": utc_now(), **process_provenance()}

    return run
