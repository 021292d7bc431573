"""What this machine offers the tests: whether CI is set, which Coq programs are missing, which processes run."""

import os
import shutil
from pathlib import Path


def ci_is_set() -> bool:
    """True in CI (.ci/run exports CI=true; so do GitHub Actions and GitLab), false for an unset/empty/0/false CI."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing_coq_programs() -> list[str]:
    """The Coq programs CoqServer needs (coqidetop, coqc, coqchk) that are not on PATH."""
    idetop = shutil.which("coqidetop.opt") or shutil.which("coqidetop")
    found = {"coqidetop": idetop, "coqc": shutil.which("coqc"), "coqchk": shutil.which("coqchk")}
    return [name for name, path in found.items() if not path]


def processes_with(marker: str) -> list[int]:
    """The live processes whose command line holds `marker` (a zombie's command line is empty)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found
