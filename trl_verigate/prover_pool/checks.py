"""The steps of a setup doctor (`trl-verigate lean-doctor`, `coq-doctor`): one check, rendered as a ✓/✗ line with
its fix, the version check of a program on PATH, and whether a command's program can run at all (`program_problem`,
which the recipes, `evaluate` and `lean-server` ask before anything loads)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass


@dataclass
class Check:
    name: str
    ok: bool | None  # None: not applicable or not checkable because an earlier check failed
    detail: str
    fix: str | None = None

    def render(self) -> str:
        mark = {True: "✓", False: "✗", None: "-"}[self.ok]
        lines = [f"{mark} {self.name}: {self.detail}"]
        if self.ok is False and self.fix:
            lines.append(f"    fix: {self.fix}")
        return "\n".join(lines)


def tool_version(tool: str, fix: str) -> Check:
    path = shutil.which(tool)
    if path is None:
        return Check(tool, False, "not found on PATH", fix)
    try:
        run = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(tool, False, f"{path} --version failed: {exc}", fix)
    if run.returncode != 0:
        return Check(tool, False, f"{path} --version exited {run.returncode}: {run.stderr.strip()[:200]}", fix)
    version = (run.stdout or run.stderr).strip()
    if not version:
        return Check(tool, False, f"{path} --version printed nothing: it is not {tool}", fix)
    return Check(tool, True, f"{version.splitlines()[0]} ({path})")


def program_problem(argv: list[str]) -> str | None:
    """Why ``argv`` cannot be started as a command, or None: its program (a path, or a name looked up on PATH) must
    be an executable file. For `lake env PROGRAM ...` the program lake runs is held to the same rule.

    Checked before anything loads, so a misspelled REPL path fails in a second rather than as an `error` status on
    every proof of a run.
    """
    if not argv:
        return "is empty"
    program = argv[0]
    if "/" in program:
        if not os.path.exists(program):
            return f"runs {program}, which does not exist"
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            return f"runs {program}, which is not an executable file (chmod +x it, or give the program that runs it)"
    elif shutil.which(program) is None:
        return f"runs {program}, which is not on PATH"
    if os.path.basename(program) == "lake" and argv[1:2] == ["env"] and len(argv) > 2:
        return program_problem(argv[2:])
    return None
