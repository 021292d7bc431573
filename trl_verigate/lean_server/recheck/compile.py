"""What both `lean-recheck` backends (`recheck.backends`) share: their options, the contract batch and the sources
built from its items, the known-good control item, and the sandboxed compile of one module."""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from trl_verigate.lean_server.recheck.contract import CONTRACT_VERSION
from trl_verigate.lean_server.recheck.processes import run_tool

ITEM_FIELDS = ("id", "header", "statement", "theorem", "axiom_whitelist")
OUTPUT_TAIL_CHARS = 1500
# The known-good control item: a checker that cannot compile or replay it is broken, whatever the submissions are.
CONTROL_THEOREM = "verigate_control"
CONTROL_STATEMENT = f"theorem {CONTROL_THEOREM} : True := by"
CONTROL_PROOF = "  trivial"
# Variables a sandboxed compile keeps besides PATH/HOME/TMPDIR: locale, time zone and Lean's own.
ENV_KEEP_PREFIXES = ("LEAN", "LAKE", "ELAN", "LANG", "LC_")


class BatchError(Exception):
    """The batch cannot be checked at all (bad input, no sandbox, the replay program broke): exit non-zero."""


@dataclass
class Options:
    backend: str
    project_dir: Path
    lean_command: list[str]
    comparator_command: list[str]
    comparator_lib: str
    sandbox: str
    compile_timeout: float
    replay_timeout: float
    jobs: int


def read_batch(text: str) -> list[dict]:
    """The items of a contract batch; BatchError naming what is wrong."""
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as error:
        raise BatchError(f"stdin is not JSON: {error}") from None
    if not isinstance(payload, dict) or payload.get("version") != CONTRACT_VERSION:
        raise BatchError(f"stdin must be a JSON object with version {CONTRACT_VERSION} and items")
    items = payload.get("items")
    if not isinstance(items, list):
        raise BatchError("stdin's 'items' must be a list")
    for index, item in enumerate(items):
        missing = [key for key in ITEM_FIELDS if not isinstance(item, dict) or key not in item]
        if missing or (item.get("proof") is None) == (item.get("file") is None):
            raise BatchError(f"items[{index}] needs {list(ITEM_FIELDS)} and exactly one of 'proof' and 'file'")
    return items


def challenge_source(item: dict) -> str:
    return f"{item['header']}\n\n{item['statement']}\n  sorry\n"


def submission_source(item: dict) -> str:
    if item.get("file") is not None:
        return item["file"]
    return f"{item['header']}\n\n{item['statement']}\n{item['proof']}\n"


def verdict_line(item_id: str, ok: bool, message: str, axioms: list[str] | None = None) -> str:
    return json.dumps({"id": item_id, "ok": ok, "axioms": axioms, "message": message}, ensure_ascii=False)


def output_tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= OUTPUT_TAIL_CHARS else "…" + text[-OUTPUT_TAIL_CHARS:]


def control_item(header: str) -> dict:
    """The known-good control item under `header`: a checker that refuses it is broken, whatever the submissions."""
    return {
        "id": "verigate-control",
        "header": header,
        "statement": CONTROL_STATEMENT,
        "theorem": CONTROL_THEOREM,
        "proof": CONTROL_PROOF,
        "file": None,
        "axiom_whitelist": [],
    }


# ---------------------------------------------------------------- sandboxed compile


def _compile_env(scratch: Path) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch), "TMPDIR": str(scratch)}
    env.update({name: value for name, value in os.environ.items() if name.startswith(ENV_KEEP_PREFIXES)})
    # HOME is the scratch directory, so elan's proxies need to be told where the toolchains are.
    elan_home = Path.home() / ".elan"
    if "ELAN_HOME" not in env and elan_home.is_dir():
        env["ELAN_HOME"] = str(elan_home)
    return env


def choose_bubblewrap(mode: str) -> str | None:
    """The bubblewrap path compiles run under, None for `--sandbox none`; BatchError when "bwrap" cannot run."""
    from trl_verigate.prover_pool import sandbox

    try:
        bwrap = sandbox.choose(mode)
    except sandbox.SandboxUnavailable as error:
        raise BatchError(str(error)) from None
    if bwrap is None:
        print(
            "lean-recheck: compiling submissions WITHOUT a sandbox (--sandbox none, or auto without bubblewrap): "
            "code in a submission can change the project's files",
            file=sys.stderr,
        )
    return bwrap


def compile_argv(options: Options, bwrap: str | None, source: Path, olean: Path, env: dict[str, str]) -> list[str]:
    """`<lean-command> -o olean source`, inside a sandbox where only olean's directory is writable."""
    argv = [*options.lean_command, "-o", str(olean), str(source)]
    if bwrap is None:
        return argv
    from trl_verigate.prover_pool import sandbox

    program = shutil.which(argv[0], path=env["PATH"]) or argv[0]
    read_only = sandbox.read_only_paths(argv, program, str(options.project_dir), env)
    return sandbox.bwrap_argv(
        bwrap, argv, read_only=read_only, writable=str(olean.parent), cwd=str(options.project_dir), env=env
    )


def compile_module(options: Options, bwrap: str | None, source: Path, olean: Path) -> str | None:
    """Compile `source` to `olean`; None on success, else why not."""
    olean.parent.mkdir(parents=True, exist_ok=True)
    scratch = olean.parent
    env = _compile_env(scratch)
    argv = compile_argv(options, bwrap, source, olean, env)
    try:
        done = run_tool(argv, cwd=options.project_dir, env=env, timeout=options.compile_timeout)
    except OSError as error:
        raise BatchError(f"cannot run the Lean compiler {argv[0]!r}: {error}") from None
    if done.timed_out:
        return f"compiling took longer than {options.compile_timeout:g} s"
    if done.returncode != 0 or not olean.is_file():
        return f"does not compile (exit {done.returncode}): {output_tail(done.stdout + done.stderr)}"
    return None
