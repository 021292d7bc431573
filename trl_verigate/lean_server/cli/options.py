"""The Lean setup shared by the `trl-verigate` Lean subcommands: where the REPL and the project are (read as a
shell would, from the caller's directory), the header file, and the flags that become a `LeanServerConfig`."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
from pathlib import Path

from trl_verigate.lean_server.core import MINIF2F_HEADER, RECHECKS, LeanServerConfig
from trl_verigate.prover_pool.checks import program_problem
from trl_verigate.prover_pool.config import SANDBOXES

REPL_ENV = "TRL_VERIGATE_LEAN_REPL"
PROJECT_ENV = "TRL_VERIGATE_LEAN_PROJECT"
REPL_BUILD_PATH = Path(".lake") / "build" / "bin" / "repl"
RECHECK_EXAMPLE = "trl-verigate lean-recheck --backend replay --project-dir /path/to/project"


def resolve_project_dir(project_dir: str | None) -> Path:
    """--project-dir, else $TRL_VERIGATE_LEAN_PROJECT, else the current directory."""
    return Path(project_dir or os.environ.get(PROJECT_ENV) or ".").expanduser().resolve()


def find_repl_binary(project_dir: Path) -> Path | None:
    """A built REPL next to, inside, or as a lake dependency of the project, where the setup guide puts it."""
    for repl_dir in (project_dir.parent / "repl", project_dir / "repl", project_dir / ".lake" / "packages" / "repl"):
        candidate = repl_dir / REPL_BUILD_PATH
        if candidate.is_file():
            return candidate
    return None


def resolve_repl_command(repl: str | None, project_dir: Path) -> list[str] | None:
    """The REPL argv from --repl-command / $TRL_VERIGATE_LEAN_REPL / a built REPL found near the project.

    A single path to a binary is wrapped in `lake env` so the REPL sees the project's packages (Mathlib);
    anything else is taken as a full argv (shell-quoted). None when nothing is configured or found.
    """
    text = repl or os.environ.get(REPL_ENV)
    if text is None:
        binary = find_repl_binary(project_dir)
        if binary is None:
            return None
        text = shlex.quote(str(binary))
    # Paths are read as a shell would, from the caller's directory: the REPL itself runs in the project directory.
    argv = [absolute_if_path(arg) for arg in shlex.split(text)]
    if len(argv) == 1 and Path(argv[0]).is_file():
        return ["lake", "env", argv[0]] if shutil.which("lake") else [argv[0]]
    return argv


def absolute_if_path(arg: str) -> str:
    """`arg` made absolute from the current directory when it is a relative path (it holds a `/`); `~` expanded."""
    if arg.startswith("-"):
        return arg
    expanded = os.path.expanduser(arg)
    if os.sep in expanded and not os.path.isabs(expanded):
        return os.path.abspath(expanded)
    return expanded


def repl_binary_of(argv: list[str]) -> Path | None:
    """The REPL executable inside an argv such as `lake env /x/repl`, when it is a file path."""
    for arg in reversed(argv):
        path = Path(arg).expanduser()
        if path.name == "repl" and path.is_file():
            return path.resolve()
    return None


def read_header(header_file: str | None) -> str:
    if header_file is None:
        return MINIF2F_HEADER
    path = Path(header_file)
    if not path.is_file():
        raise ValueError(
            f"--header-file {header_file}: no such file (it should hold the imports/options, e.g. 'import Mathlib')"
        )
    return path.read_text(encoding="utf-8").rstrip("\n")


def config_from_args(args: argparse.Namespace, workers: int) -> LeanServerConfig:
    """The server's config from the flags; a ValueError names the flag to fix when no REPL can run (none configured,
    or its program missing or not executable) or a setting is invalid."""
    project_dir = resolve_project_dir(args.project_dir)
    repl_command = resolve_repl_command(args.repl_command, project_dir)
    if repl_command is None:
        raise ValueError(
            f"no Lean REPL configured: pass --repl-command or set {REPL_ENV}=/path/to/repl/.lake/build/bin/repl "
            "(run `trl-verigate lean-doctor` to check the setup)"
        )
    problem = program_problem(repl_command)
    if problem is not None:
        raise ValueError(
            f"--repl-command {shlex.join(repl_command)} {problem}; give a built REPL, e.g. --repl-command "
            "/path/to/repl/.lake/build/bin/repl (run `trl-verigate lean-doctor` to check the setup)"
        )
    return LeanServerConfig(
        repl_command=repl_command,
        project_dir=str(project_dir),
        header=read_header(args.header_file),
        workers=workers,
        timeout=args.timeout,
        memory_limit_mb=args.memory_limit_mb or None,
        **_safety_settings(args),
    )


def _safety_settings(args: argparse.Namespace) -> dict:
    """The sandbox, recheck and size-limit settings from the flags, for LeanServerConfig."""
    settings = {
        "sandbox": args.sandbox,
        "recheck": args.recheck,
        "recheck_command": shlex.split(args.recheck_command) if args.recheck_command else None,
        "max_request_bytes": args.max_request_bytes,
        "max_batch_bytes": args.max_batch_bytes,
        "startup_timeout": args.startup_timeout,
        "recheck_timeout": args.recheck_timeout,
        "recheck_seed": args.recheck_seed,
        "max_heartbeats": args.max_heartbeats,
        "extra_tactics": tuple(args.allow_tactic or ()),
        "extra_namespaces": tuple(args.allow_namespace or ()),
    }
    if args.recheck_sample_rate is not None:
        settings["recheck_sample_rate"] = args.recheck_sample_rate
    return settings


def add_lean_options(parser: argparse.ArgumentParser, server: bool = True) -> None:
    """The Lean setup's flags; with ``server``, also those only a serving pool reads (the precheck's allow-list
    additions, size limits, the audit sample's rate and seed)."""
    parser.add_argument(
        "--repl-command",
        help=f"REPL binary path or full argv (default: ${REPL_ENV}, else a built repl next to the project)",
    )
    parser.add_argument("--project-dir", help=f"Lean project with Mathlib (default: ${PROJECT_ENV}, else the cwd)")
    parser.add_argument(
        "--header-file", help="file with the imports/options run once per REPL (default: miniF2F header)"
    )
    parser.add_argument("--timeout", type=float, default=15.0, help="seconds per proof (default: 15)")
    parser.add_argument(
        "--memory-limit-mb", type=int, default=8192, help="address-space limit per REPL; 0 for none (default: 8192)"
    )
    parser.add_argument(
        "--startup-timeout",
        type=float,
        default=LeanServerConfig.startup_timeout,
        help=f"seconds for a REPL to load the header (default: {LeanServerConfig.startup_timeout:g}; lean-doctor: 600)",
    )
    _add_safety_options(parser, LeanServerConfig(), server)
    _add_recheck_options(parser, LeanServerConfig(), server)


def _add_safety_options(parser: argparse.ArgumentParser, defaults: LeanServerConfig, server: bool) -> None:
    """The sandbox; with ``server``, the precheck's allow-list additions and the size limits."""
    parser.add_argument(
        "--sandbox",
        choices=SANDBOXES,
        default=defaults.sandbox,
        help="run each REPL in bubblewrap: auto (when it works here), bwrap (required) or none (default: auto)",
    )
    if not server:
        return
    parser.add_argument(
        "--allow-tactic",
        action="append",
        metavar="NAME",
        help="add a tactic to the precheck's allow-list (repeatable; LeanServerConfig.extra_tactics; default: none)",
    )
    parser.add_argument(
        "--allow-namespace",
        action="append",
        metavar="NAME",
        help="add a namespace a proof may `open` (repeatable; LeanServerConfig.extra_namespaces; default: none)",
    )
    parser.add_argument(
        "--max-heartbeats",
        type=int,
        default=defaults.max_heartbeats,
        help=f"largest maxHeartbeats a proof or file header may set (default: {defaults.max_heartbeats})",
    )
    parser.add_argument(
        "--max-request-bytes",
        type=int,
        default=defaults.max_request_bytes,
        help=f"largest request in UTF-8 bytes; larger ones are rejected unrun (default: {defaults.max_request_bytes})",
    )
    parser.add_argument(
        "--max-batch-bytes",
        type=int,
        default=defaults.max_batch_bytes,
        help=f"largest batch of requests in UTF-8 bytes, and the largest HTTP body (413 above it) "
        f"(default: {defaults.max_batch_bytes})",
    )


def _add_recheck_options(parser: argparse.ArgumentParser, defaults: LeanServerConfig, server: bool) -> None:
    """The checker that confirms REPL passes outside the REPL, and which passes it confirms; with ``server``, the
    audit sample's rate and seed."""
    parser.add_argument(
        "--recheck-command",
        help=f"argv of a checker that confirms REPL passes outside the REPL, e.g. '{RECHECK_EXAMPLE}' "
        "(default: none: the REPL's verdict alone)",
    )
    parser.add_argument(
        "--recheck",
        choices=RECHECKS,
        default=defaults.recheck,
        help="which passes the checker confirms: auto (the audit sample, once `trl-verigate lean-doctor` has verified "
        "the checker; else none), none, passed (all) or sample (the audit sample with any checker) (default: auto)",
    )
    parser.add_argument(
        "--recheck-timeout",
        type=float,
        default=defaults.recheck_timeout,
        help=f"seconds for one checker run (default: {defaults.recheck_timeout:g})",
    )
    if not server:
        return
    parser.add_argument(
        "--recheck-sample-rate",
        type=float,
        help="share of passes the audit sample rechecks with --recheck auto or sample, until the first overturn "
        f"turns on rechecking every pass (default: {defaults.recheck_sample_rate})",
    )
    parser.add_argument(
        "--recheck-seed",
        type=int,
        default=defaults.recheck_seed,
        help=f"seed of the reproducible sample with --recheck sample (default: {defaults.recheck_seed})",
    )
