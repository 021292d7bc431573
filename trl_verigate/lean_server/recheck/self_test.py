"""The recheck self-test, and the record of checkers that passed it.

`recheck="auto"` (the default) turns the audit sample on only for a checker shown to work: `trl-verigate lean-doctor`
sends it two candidates, an honest proof it must confirm and a forged pass (a false statement the REPL "passed")
it must overturn. A checker that does both is recorded in `verified-checkers.json` under
`$TRL_VERIGATE_CACHE` (default `~/.cache/trl-verigate`), keyed by its argv, the project directory and the header's
imports; `LeanServer` looks the key up when it starts. Any change to the three needs a new self-test.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from trl_verigate.lean_server.precheck import TrustedHeader
from trl_verigate.lean_server.recheck.contract import CheckerFailure, RecheckItem, overturned, run_checker

HONEST = ("theorem doctor_check : 1 + 1 = 2 := by", "  decide", "doctor_check")
FORGED = ("theorem doctor_forged : (1 : ℕ) = 2 := by", "  rfl", "doctor_forged")
RECORD_NAME = "verified-checkers.json"


def cache_dir() -> Path:
    return Path(os.environ.get("TRL_VERIGATE_CACHE") or Path.home() / ".cache" / "trl-verigate")


def checker_key(recheck_command: list[str], project_dir: str | None, imports: str) -> str:
    identity = json.dumps([list(recheck_command), project_dir or "", imports])
    return hashlib.sha256(identity.encode()).hexdigest()


@dataclass
class SelfTest:
    ok: bool
    detail: str


async def run_self_test(
    recheck_command: list[str], header: str, whitelist: tuple[str, ...], timeout: float, project_dir: str | None
) -> SelfTest:
    """Send the honest proof and the forged pass to the checker in one run: it must confirm the first and overturn
    the second."""
    items = [
        RecheckItem(id=name, header=header, statement=statement, theorem=name, axiom_whitelist=whitelist, proof=proof)
        for statement, proof, name in (HONEST, FORGED)
    ]
    try:
        verdicts = await run_checker(recheck_command, items, timeout, cwd=project_dir)
    except CheckerFailure as error:
        return SelfTest(False, f"the checker failed: {error}")
    refused_honest = overturned(verdicts[HONEST[2]], whitelist)
    if refused_honest is not None:
        return SelfTest(False, f"it refused the honest proof `{HONEST[0]}{HONEST[1]}`: {refused_honest}")
    if overturned(verdicts[FORGED[2]], whitelist) is None:
        return SelfTest(False, f"it confirmed the forged pass `{FORGED[0]}{FORGED[1]}`: it checks nothing")
    return SelfTest(True, "it confirmed the honest proof and overturned the forged pass")


def record_verified(key: str) -> Path:
    """Record the checker of `key` as verified; returns the record's path."""
    path = cache_dir() / RECORD_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    record = _read(path)
    record[key] = {"verified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(record, indent=1), encoding="utf-8")
    temporary.replace(path)
    return path


def is_verified(key: str) -> bool:
    return key in _read(cache_dir() / RECORD_NAME)


def _read(path: Path) -> dict:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def effective_recheck(config) -> tuple[str, str | None]:
    """The recheck mode a `LeanServerConfig` runs with, and why the recheck is off (None when it is on): "auto" is
    "sample" (the escalating audit sample, `recheck.audit`) for a checker the self-test verified, else "none"."""
    if config.recheck != "auto":
        return config.recheck, "recheck='none' was asked for" if config.recheck == "none" else None
    if not config.recheck_command:
        return "none", (
            "no recheck_command is set (e.g. ['trl-verigate', 'lean-recheck', '--backend', 'replay', '--project-dir', "
            "'/path/to/project']; CLI --recheck-command), and `trl-verigate lean-doctor` verifies it"
        )
    key = checker_key(config.recheck_command, config.project_dir, TrustedHeader.parse(config.header).imports)
    if not is_verified(key):
        return "none", (
            "recheck_command has not passed `trl-verigate lean-doctor`'s self-test (confirm an honest proof, overturn "
            "a forged pass) for this project and header: run lean-doctor with it once, or set recheck='passed'"
        )
    return "sample", None
