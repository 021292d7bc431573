"""What this machine offers the tests: whether CI is set, and which Coq programs are missing."""

import os
import shutil


def ci_is_set() -> bool:
    """True in CI (.ci/run exports CI=true; so do GitHub Actions and GitLab), false for an unset/empty/0/false CI."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def missing_coq_programs() -> list[str]:
    """The Coq programs CoqServer needs (coqidetop, coqc, coqchk) that are not on PATH."""
    idetop = shutil.which("coqidetop.opt") or shutil.which("coqidetop")
    found = {"coqidetop": idetop, "coqc": shutil.which("coqc"), "coqchk": shutil.which("coqchk")}
    return [name for name, path in found.items() if not path]
