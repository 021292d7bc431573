"""`trl-verigate` command line: one argparse subcommand per tool.

Add a subcommand by writing `add_parser(subparsers)` (or `_add_<name>` here) that registers its parser with
`func=<handler>`, and listing it in `_SUBCOMMANDS`. Every parser is a `OneLineErrorParser`: bad input is one line
naming the flag, exit status 2; a handler refuses input it finds bad with its parser's `error` (the `parser` default
of its namespace), before anything loads.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import sys

from trl_verigate.cli_parser import OneLineErrorParser, port_number
from trl_verigate.coq.doctor import add_parser as _add_coq_doctor
from trl_verigate.es.export import add_parser as _add_es_export
from trl_verigate.evaluate.command import add_parser as _add_evaluate
from trl_verigate.lean_server.cli.doctor import add_parser as _add_lean_doctor
from trl_verigate.lean_server.cli.options import add_lean_options, config_from_args
from trl_verigate.lean_server.core.types import LeanServerConfig
from trl_verigate.lean_server.recheck import backends as recheck_backends

# ---------------------------------------------------------------- lean-server


def _add_lean_server(subparsers) -> None:
    summary = "serve Lean verification over HTTP (kimina-lean-server compatible POST /check, GET /health)"
    parser = subparsers.add_parser("lean-server", help=summary, description=summary[0].upper() + summary[1:] + ".")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=port_number,
        default=8000,
        help="port (default: 8000; 0: a free one the OS picks); once it accepts connections the server prints "
        "`listening on http://HOST:PORT` on stdout",
    )
    parser.add_argument(
        "--port-file",
        help="write the port here once the server accepts connections (removed when it stops; default: none)",
    )
    parser.add_argument(
        "--workers", type=int, default=LeanServerConfig().workers, help="REPL processes (default: cpus-1)"
    )
    parser.add_argument(
        "--api-keys",
        help="JSON file mapping each accepted API key (sent as `Authorization: Bearer <key>`) to its owner, "
        '{"<key>": "<owner>"}: REPLs, quotas and precheck queues are per owner (default: none; owners by address)',
    )
    parser.add_argument(
        "--max-workers-per-owner",
        type=int,
        help="REPL quota per owner; within it no other owner evicts its REPLs (default: --workers)",
    )
    add_lean_options(parser)
    parser.set_defaults(func=_run_lean_server, parser=parser)


def _run_lean_server(args: argparse.Namespace) -> int:
    from trl_verigate.lean_server.service.http import serve
    from trl_verigate.lean_server.service.owners import load_api_keys

    try:
        config = config_from_args(args, workers=args.workers)  # refuses a REPL it cannot run, before serving
        config = dataclasses.replace(config, max_workers_per_owner=args.max_workers_per_owner)
        api_keys = load_api_keys(args.api_keys) if args.api_keys else None
    except (ValueError, TypeError) as error:
        args.parser.error(str(error))
    serve(config, host=args.host, port=args.port, port_file=args.port_file, api_keys=api_keys)
    return 0


# ---------------------------------------------------------------- lean-recheck


def _add_lean_recheck(subparsers) -> None:
    parser = subparsers.add_parser(
        "lean-recheck",
        help="confirm REPL passes with the Lean kernel outside the REPL: the recheck contract's checker "
        "(a JSON batch on stdin, one verdict line per item on stdout; see trl_verigate.lean_server.recheck.contract)",
        description="Read a recheck batch (JSON, contract version 1) on stdin and print one verdict line per item: "
        "each REPL pass is rebuilt outside the REPL and its proof checked by the Lean kernel against the trusted "
        "statement (--backend replay: sandboxed compiles, then a kernel replay; --backend comparator: "
        "leanprover/comparator). Exit 0 with every verdict, non-zero when the checker itself cannot work (the "
        "server then fails the batch closed). Use it as LeanServerConfig.recheck_command / --recheck-command.",
    )
    recheck_backends.add_arguments(parser)
    parser.set_defaults(func=recheck_backends.command)


# ---------------------------------------------------------------- entry point

_SUBCOMMANDS = (_add_lean_server, _add_lean_doctor, _add_coq_doctor, _add_lean_recheck, _add_es_export, _add_evaluate)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="trl-verigate", description="trl-verigate tools")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _SUBCOMMANDS:
        add(subparsers)
    return parser


def _check_coq_doctor_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """coq-doctor's flags as the config it builds takes them: a bad one is a usage error, not a failed doctor step."""
    from trl_verigate.coq.config import CoqServerConfig

    try:
        CoqServerConfig(workers=1, spare_workers=0, header=args.header, sandbox=args.sandbox, recheck=args.recheck)
    except ValueError as error:
        subparsers = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
        subparsers.choices["coq-doctor"].error(f"--header: {error}")


def _refuse_unknown_command(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """An unknown subcommand is one line naming the closest known one (argparse lists them all, with no
    suggestion)."""
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction)).choices
    if argv and not argv[0].startswith("-") and argv[0] not in commands:
        close = difflib.get_close_matches(argv[0], commands, n=1)
        hint = f"did you mean {close[0]}?" if close else f"the commands are {', '.join(commands)}"
        parser.error(f"unknown command {argv[0]!r}; {hint}")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    _refuse_unknown_command(parser, argv)
    args = parser.parse_args(argv)
    if args.command == "coq-doctor":
        _check_coq_doctor_flags(parser, args)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
