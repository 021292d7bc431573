"""`trl-verigate lean-doctor`: check the Lean setup step by step (toolchain, project, REPL, Mathlib, a header load,
a trivial proof, the tactics the environment declares against the allow-lists, the recheck backends) and print how
to fix each failing step."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shlex
import shutil
import time
from pathlib import Path

from trl_verigate.lean_server.cli.options import (
    PROJECT_ENV,
    RECHECK_EXAMPLE,
    REPL_BUILD_PATH,
    REPL_ENV,
    absolute_if_path,
    add_lean_options,
    read_header,
    repl_binary_of,
    resolve_project_dir,
    resolve_repl_command,
)
from trl_verigate.lean_server.core import LeanServerConfig, ProofRequest, VerificationResult
from trl_verigate.lean_server.precheck import (
    DECLARED_HEADS_COMMAND,
    TrustedHeader,
    heads_difference,
    policy_for,
    prepare,
)
from trl_verigate.lean_server.recheck import HONEST, checker_key, record_verified, run_self_test
from trl_verigate.lean_server.repl import ReplProcess, WorkerError, WorkerStartError
from trl_verigate.lean_server.verdict import judge
from trl_verigate.prover_pool.checks import Check, tool_version

ELAN_INSTALL = "curl https://raw.githubusercontent.com/leanprover/elan/master/elan-init.sh -sSf | sh"
# The self-test's honest proof, the one the doctor also runs in the REPL.
DOCTOR_STATEMENT, DOCTOR_PROOF, _ = HONEST
# Where a message from the process module points at the doctor; the doctor is already running.
_DOCTOR_HINT = re.compile(r"[;,]?\s*\(?`trl-verigate lean-doctor`(?: checks the setup)?\)?")


def _read_toolchain(directory: Path) -> str | None:
    path = directory / "lean-toolchain"
    return path.read_text(encoding="utf-8").strip() if path.is_file() else None


def _mathlib_oleans(project_dir: Path) -> Path | None:
    mathlib = project_dir / ".lake" / "packages" / "mathlib"
    # Lake moved build outputs from build/lib to .lake/build/lib/lean across versions.
    for olean in (
        mathlib / ".lake" / "build" / "lib" / "lean" / "Mathlib.olean",
        mathlib / ".lake" / "build" / "lib" / "Mathlib.olean",
        mathlib / "build" / "lib" / "Mathlib.olean",
    ):
        if olean.is_file():
            return olean
    return None


def run_doctor(
    project_dir: Path,
    repl_command: list[str] | None,
    header: str,
    timeout: float,
    startup_timeout: float,
    memory_limit_mb: int | None = LeanServerConfig.memory_limit_mb,
    sandbox: str = LeanServerConfig.sandbox,
    recheck_command: list[str] | None = None,
    recheck_mode: str | None = None,
    recheck_timeout: float = LeanServerConfig.recheck_timeout,
) -> list[Check]:
    """Every check of `trl-verigate lean-doctor`, in order; never raises for a broken setup."""
    checks = [
        tool_version("elan", f"install elan: {ELAN_INSTALL}, then open a new shell"),
        tool_version("lake", "lake comes with the toolchain: install elan, then run `elan default stable`"),
        tool_version("lean", "lean comes with the toolchain: install elan, then run `elan default stable`"),
    ]
    project_toolchain = _read_toolchain(project_dir)
    if project_toolchain is None:
        checks.append(
            Check(
                "project",
                False,
                f"no lean-toolchain in {project_dir}",
                f"create a Mathlib project: `lake new proj math && cd proj && lake exe cache get`, then pass "
                f"--project-dir proj or set {PROJECT_ENV}",
            )
        )
    else:
        checks.append(Check("project", True, f"{project_dir} uses {project_toolchain}"))
    runnable = _repl_check(project_dir, project_toolchain, repl_command)
    checks.append(runnable)
    binary = repl_binary_of(repl_command) if repl_command else None
    checks.append(_repl_toolchain_check(project_dir, project_toolchain, binary))
    checks.append(_mathlib_check(project_dir, header))
    if not runnable.ok:
        checks.append(Check("header", None, "not run: no runnable REPL (see `REPL`)"))
        checks.append(Check("proof", None, "not run: no runnable REPL (see `REPL`)"))
    else:
        checks.extend(
            _run_checks_in_repl(project_dir, repl_command, header, timeout, startup_timeout, memory_limit_mb, sandbox)
        )
    checks.extend(_backend_checks(recheck_command))
    checks.append(_recheck_check(header, recheck_command, recheck_mode, recheck_timeout, project_dir))
    return checks


def _repl_check(project_dir: Path, project_toolchain: str | None, repl_command: list[str] | None) -> Check:
    """Whether a REPL is configured and can run; the fix says how to build one for the project's toolchain."""
    # The REPL must be built for the project's toolchain, so without a project there is no file to copy yet.
    if project_toolchain is None:
        toolchain_source = f'"${PROJECT_ENV}/lean-toolchain"'
        project_first = f"first create the Lean project (see `project`) and export {PROJECT_ENV}=<its directory>; then "
    else:
        toolchain_source = shlex.quote(str(project_dir / "lean-toolchain"))
        project_first = ""
    build_fix = (
        f"{project_first}git clone https://github.com/leanprover-community/repl && cd repl && "
        f"cp {toolchain_source} . && lake build; then export {REPL_ENV}=$PWD/{REPL_BUILD_PATH}"
    )
    if repl_command is None:
        return Check(
            "REPL", False, f"none configured (--repl-command, ${REPL_ENV}) or found near the project", build_fix
        )
    repl_problem = _repl_command_problem(repl_command)
    if repl_problem is not None:
        return Check(
            "REPL",
            False,
            f"{repl_problem} (command: {shlex.join(repl_command)}; relative paths are read from the directory "
            "you run this in)",
            f"point --repl-command at the built REPL; to build one: {build_fix}",
        )
    binary = repl_binary_of(repl_command)
    found = f"REPL binary {binary}" if binary is not None else f"executable {shutil.which(repl_command[0])}"
    return Check("REPL", True, f"{found} exists (run as: {shlex.join(repl_command)})")


def _repl_toolchain_check(project_dir: Path, project_toolchain: str | None, binary: Path | None) -> Check:
    repl_toolchain = _read_toolchain(binary.parents[3]) if binary is not None and len(binary.parents) > 3 else None
    if project_toolchain is None or repl_toolchain is None:
        return Check("REPL toolchain", None, "cannot compare: project or REPL toolchain unknown")
    if repl_toolchain != project_toolchain:
        return Check(
            "REPL toolchain",
            False,
            f"REPL built for {repl_toolchain}, project uses {project_toolchain}",
            f"cp {project_dir / 'lean-toolchain'} {binary.parents[3]} && cd {binary.parents[3]} && lake build",
        )
    return Check("REPL toolchain", True, f"both {project_toolchain}")


def _mathlib_check(project_dir: Path, header: str) -> Check:
    if not re.search(r"^\s*import\s+Mathlib\b", header, flags=re.MULTILINE):
        return Check("Mathlib", None, "the header does not import Mathlib")
    if not (project_dir / ".lake" / "packages" / "mathlib").is_dir():
        return Check(
            "Mathlib",
            False,
            f"not in {project_dir / '.lake' / 'packages'}",
            "create the project with `lake new proj math` (or add mathlib to lakefile), then `lake exe cache get`",
        )
    olean = _mathlib_oleans(project_dir)
    if olean is None:
        return Check(
            "Mathlib", False, "present but not built (no Mathlib.olean)", f"cd {project_dir} && lake exe cache get"
        )
    return Check("Mathlib", True, f"cache present ({olean})")


def _repl_command_problem(argv: list[str]) -> str | None:
    """Why `argv` cannot run as given, or None: its program is neither an executable file nor on PATH, or the first
    path among its arguments (what a wrapper such as `lake env X` or `python X` runs) does not exist. Later paths
    may be outputs (a log file) and are not checked. resolve_repl_command made every path argument absolute."""
    if shutil.which(argv[0]) is None:
        return f"{argv[0]} is neither an executable file nor a program on PATH"
    run_path = next((arg for arg in argv[1:] if os.path.isabs(arg)), None)
    if run_path is not None and not os.path.exists(run_path):
        return f"{run_path} does not exist"
    return None


def _backend_checks(recheck_command: list[str] | None) -> list[Check]:
    """Which `lean-recheck` backends this machine has the tools for (found, not run: `recheck` runs the configured one)."""
    from trl_verigate.prover_pool import sandbox

    tools = {tool: shutil.which(tool) for tool in ("lake", "lean", "bwrap", "comparator", "landrun", "lean4export")}
    if tools["bwrap"] is None:
        bubblewrap = "bubblewrap not on PATH (compiles would run unsandboxed; install bubblewrap)"
    else:
        problem = sandbox.probe(tools["bwrap"])
        bubblewrap = "bubblewrap works" if problem is None else f"bubblewrap does not run here: {problem}"
    if tools["lake"] and tools["lean"]:
        replay = Check("backend replay", True, f"lake ({tools['lake']}) and lean ({tools['lean']}) found; {bubblewrap}")
    else:
        missing = " and ".join(tool for tool in ("lake", "lean") if not tools[tool])
        replay = Check("backend replay", None, f"unavailable: {missing} not on PATH (it needs the Lean toolchain)")
    configured = recheck_command is not None and "comparator" in " ".join(recheck_command)
    if tools["comparator"]:
        helpers = ", ".join(
            f"{tool} {'found' if tools[tool] else 'NOT on PATH'}" for tool in ("landrun", "lean4export")
        )
        comparator = Check("backend comparator", True, f"{tools['comparator']} found; {helpers}")
    elif configured:
        comparator = Check("backend comparator", None, "not on PATH, but named in --recheck-command (see `recheck`)")
    else:
        comparator = Check(
            "backend comparator", None, "unavailable: comparator not on PATH (https://github.com/leanprover/comparator)"
        )
    return [replay, comparator]


def _recheck_check(
    header: str,
    recheck_command: list[str] | None,
    recheck_mode: str | None,
    recheck_timeout: float,
    project_dir: Path,
) -> Check:
    """The recheck self-test of the configured checker: it must confirm an honest proof and overturn a forged pass.
    A checker that passes is recorded, so `recheck="auto"` turns it on for this project and header."""
    if not recheck_command or recheck_mode == "none":
        return Check(
            "recheck",
            None,
            "none configured: training will use the REPL verdict alone, which a proof that runs code can forge; "
            f"to confirm passes with the kernel outside the REPL pass --recheck-command '{RECHECK_EXAMPLE}'",
        )
    started = time.monotonic()
    test = asyncio.run(
        run_self_test(recheck_command, header, LeanServerConfig.axiom_whitelist, recheck_timeout, str(project_dir))
    )
    if not test.ok:
        return Check(
            "recheck",
            False,
            f"{shlex.join(recheck_command)}: {test.detail}",
            "fix what the message names (its --project-dir and toolchain); `trl-verigate lean-recheck --help` lists "
            "the backends' options",
        )
    key = checker_key(recheck_command, str(project_dir), TrustedHeader.parse(header).imports)
    record = record_verified(key)
    return Check(
        "recheck",
        True,
        f"{shlex.join(recheck_command)}: {test.detail} in {time.monotonic() - started:.1f}s; recorded in {record}, "
        f"so recheck={recheck_mode!r} uses it",
    )


_PROOF_FIXES = {
    "failed": "Lean refused a trivial proof: check the header's options, and rebuild the REPL with the project's "
    "lean-toolchain",
    "timeout": "raise --timeout (the machine may be overloaded), or lower --workers",
    "crashed": "the REPL died: raise --memory-limit-mb (Mathlib needs several GB per REPL)",
}


def _run_checks_in_repl(
    project_dir: Path,
    repl_command: list[str],
    header: str,
    timeout: float,
    startup_timeout: float,
    memory_limit_mb: int | None,
    sandbox: str,
) -> list[Check]:
    config = LeanServerConfig(
        repl_command=repl_command,
        project_dir=str(project_dir) if project_dir.is_dir() else None,
        header=header,
        workers=1,
        timeout=timeout,
        startup_timeout=startup_timeout,
        memory_limit_mb=memory_limit_mb,
        sandbox=sandbox,
    )
    return asyncio.run(_header_and_proof_checks(config))


async def _header_and_proof_checks(config: LeanServerConfig) -> list[Check]:
    """Load the header in one REPL, then run the doctor's proof in that REPL's env.

    One process for both checks: with Mathlib, loading the header takes minutes.
    """
    process = ReplProcess(config)
    try:
        try:
            # What LeanServer loads: the header's imports (its other lines travel with each command).
            await process.start(TrustedHeader.parse(config.header).imports)
        except WorkerStartError as exc:
            message = _DOCTOR_HINT.sub("", str(exc))
            return [
                Check("header", False, message, _header_fix(message)),
                Check("proof", None, "not run: the header did not load"),
            ]
        first_line = config.header.splitlines()[0] if config.header else "empty header"
        header_check = Check("header", True, f"loaded in {process.startup_s:.1f}s ({first_line})")
        try:
            result = await _doctor_proof(process, config)
        except Exception as exc:  # the doctor reports every failure as a checklist line, never a traceback
            return [
                header_check,
                Check("proof", False, f"the proof check failed: {type(exc).__name__}: {exc}", "see the error above"),
            ]
        return [header_check, _proof_check(result), await _tactic_heads_check(process, config)]
    finally:
        await process.close()


async def _tactic_heads_check(process: ReplProcess, config: LeanServerConfig) -> Check:
    """The allow-lists against the tactic and conv heads the loaded environment declares: a declared head that is
    neither allowed nor excluded by rule is refused in every proof until --allow-tactic adds it."""
    try:
        response = await process.run({"cmd": DECLARED_HEADS_COMMAND, "env": process.header_env}, config.timeout)
        differences = heads_difference(response)
    except Exception as exc:  # a checklist line, never a traceback: the lists still work, unchecked
        return Check("tactics", None, f"could not list the environment's tactics: {str(exc)[:300]}")
    missing = "; ".join(f"{d.category}: {' '.join(d.missing_in_list)}" for d in differences if d.missing_in_list)
    extra = sum(len(d.extra_in_list) for d in differences)
    unused = f"; {extra} allowed heads are not declared here (harmless)" if extra else ""
    if not missing:
        return Check("tactics", True, f"every declared tactic is allowed or excluded by rule{unused}")
    return Check(
        "tactics",
        False,
        f"declared but on no allow-list: {missing}{unused}",
        "add the ones proofs may use with --allow-tactic, or regenerate the lists for this toolchain "
        "(scripts/generate_lean_allowlists.py)",
    )


def _header_fix(message: str) -> str:
    """The fix for a REPL that did not load the header, by what its message says went wrong."""
    if "rejected the header" in message:
        return (
            "a missing module usually means `lake exe cache get` was not run in the project, or the REPL was built "
            "for another toolchain; otherwise fix the header's imports/options"
        )
    if "startup_timeout" in message:
        return "raise --startup-timeout (importing Mathlib from a cold disk cache takes minutes)"
    if "sandbox" in message or "bubblewrap" in message:
        return "install bubblewrap (`apt-get install bubblewrap`) or pass --sandbox none"
    return "fix what the message names (the REPL's exit status and stderr are quoted above)"


async def _doctor_proof(process: ReplProcess, config: LeanServerConfig) -> VerificationResult:
    """The verdict on the doctor's trivial proof, judged exactly as LeanServer judges a request."""
    prepared = prepare(ProofRequest(statement=DOCTOR_STATEMENT, proof=DOCTOR_PROOF), config.header, policy_for(config))
    if isinstance(prepared, VerificationResult):
        return prepared
    started = time.monotonic()
    try:
        response = await process.run({"cmd": prepared.code, "env": process.header_env}, config.timeout)
    except WorkerError as error:
        return VerificationResult(status=error.status, reason=str(error), time_s=error.time_s)
    return judge(prepared, response, config, time.monotonic() - started)


def _proof_check(result: VerificationResult) -> Check:
    if result.passed:
        return Check("proof", True, f"`{DOCTOR_STATEMENT} {DOCTOR_PROOF}` passed in {result.time_s:.2f}s")
    errors = "; ".join(m.text for m in result.messages if m.severity == "error") or result.reason or "no reason given"
    return Check(
        "proof",
        False,
        f"`{DOCTOR_STATEMENT} {DOCTOR_PROOF.strip()}` gave status={result.status}: {errors[:300]}",
        _PROOF_FIXES.get(result.status, "fix what the reason names; check --repl-command and --project-dir"),
    )


def add_parser(subparsers) -> None:
    summary = "check the Lean setup step by step and print how to fix it"
    parser = subparsers.add_parser("lean-doctor", help=summary, description=summary[0].upper() + summary[1:] + ".")
    add_lean_options(parser, server=False)
    # A first import of Mathlib on a cold cache is slower than the server's restarts.
    parser.set_defaults(func=_run_lean_doctor, startup_timeout=600.0, parser=parser)


def _run_lean_doctor(args: argparse.Namespace) -> int:
    project_dir = resolve_project_dir(args.project_dir)
    recheck_command = [absolute_if_path(arg) for arg in shlex.split(args.recheck_command or "")] or None
    try:
        header = read_header(args.header_file)
    except ValueError as error:
        args.parser.error(str(error))
    checks = run_doctor(
        project_dir=project_dir,
        repl_command=resolve_repl_command(args.repl_command, project_dir),
        header=header,
        timeout=args.timeout,
        startup_timeout=args.startup_timeout,
        memory_limit_mb=args.memory_limit_mb or None,
        sandbox=args.sandbox,
        recheck_command=recheck_command,
        recheck_mode=args.recheck,
        recheck_timeout=args.recheck_timeout,
    )
    for check in checks:
        print(check.render())
    failed = [c.name for c in checks if c.ok is False]
    print(f"\n{'all checks passed' if not failed else 'failed: ' + ', '.join(failed)}")
    return 1 if failed else 0
