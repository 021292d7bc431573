"""Checkers that implement the recheck contract (`lean_server.recheck`): `trl-verigate lean-recheck --backend ...`.

Both read the contract's JSON batch on stdin and print one verdict line per item. An item's challenge is the
trusted ``header`` + ``statement`` + ``sorry``; its submission is ``header`` + ``statement`` + ``proof`` (or the
``file``). The tests run the orchestration against stand-in ``lake``/``lean``/``comparator`` executables
(tests/lean_server/recheck/test_recheck.py); the Lean side runs where a Lean toolchain is installed
(tests/lean_server/service/test_real_lean.py). This module holds the command line and the comparator backend; the
replay backend is `recheck.replay`, what both share (options, sources, the control item, the sandboxed compile)
`recheck.compile`, and how no tool outlives the checker `recheck.processes`.

``replay`` (lean4checker / SafeVerify style, Lean reference manual "Validating a Lean Proof"):

1. the challenges, then every submission, are compiled to ``.olean`` files with ``<lean-command> -o X.olean
   X.lean`` (default ``lake env lean``) in the project directory, each compile in its own bubblewrap sandbox
   (`prover_pool.sandbox`: no network, own PID namespace, the project and toolchain read-only, only that module's
   output directory writable), ``--jobs`` at a time. The ``proof`` items of one header share ONE challenge module,
   each trusted statement declared there under its own name (``<theorem>_verigate_challenge_<token>_<n>``; see
   `combinable_statement` for which statements qualify); a ``file`` item's challenge (a plain file's statement
   carries its helpers) and a statement with an attribute are compiled alone. A submission is always compiled
   alone: no submission's code can touch another's verdict. A submission that does not compile is refused;
2. then, OUTSIDE any sandbox and in ONE process per batch, the shipped Lean program ``lean/VerigateReplay.lean``
   (``<lean-command> --run VerigateReplay.lean manifest.json``) imports the header's modules once, replays each
   submission's declarations through the kernel, compares the theorem's type with the challenge's and collects its
   axioms. The replay reads ``.olean`` files the sandboxed compile wrote: it trusts Lean's loader with them.

Mathlib imports per batch of N items under one header: 1 (the shared challenge module) + N (submissions) + 1 (the
replay) = N + 2, plus one per ``file`` item or attribute-carrying statement; 64 passes cost 66 imports, not 129.

Only a verdict about a SUBMISSION is ``ok: false``; when the checker's own machinery fails it exits non-zero, so
the server fails the batch closed (``error``, `lean/recheck_checker_failures`) instead of overturning true proofs.
A known-good control item (`CONTROL_STATEMENT` with `CONTROL_PROOF`, compiled only when something failed) tells
the two apart: a challenge or submission that does not compile refuses its item only if the control compiles
(else: no Mathlib, a missing tool, a tool unreachable in the sandbox, … exit 1); a trusted (``proof`` item)
statement that the REPL elaborated but the checker cannot compile is exit 1 (the checker's project differs from
the REPL's); if the batch replay dies, the control is replayed alone first: should it fail, the replay program is
broken (exit 1), else each item is replayed alone and only the one that crashes it (a crafted ``.olean``) is
refused.

The project is read-only inside the compile sandbox, so lake must not need to write there: run ``lake build`` (or
``lake env true``) in it once beforehand. A compile sees the project and the toolchain, so neither may hold secrets.

``comparator`` (leanprover/comparator, the manual's gold standard): per item, writes ``<Lib>/Challenge_<token>.lean``
and ``<Lib>/Solution_<token>.lean`` into the project (which must declare ``lean_lib <Lib>`` with
``globs = ["<Lib>.+"]``; default ``VerigateRecheck``), a config naming them, the theorem and the permitted axioms,
and runs ``<comparator-command> config.json`` (default ``lake env comparator``) in the project. Comparator sandboxes
its own builds (landrun) and replays exported terms; exit status 0 is a pass (it reports no axiom list, so
``axioms`` is null). One comparator run per item: it takes one solution module, so items do not share an import of
Mathlib. Its README's assumptions hold for the deployment: no earlier adversarial build may have touched the
project's ``.lake`` (run it as a user that cannot write ``.lake/packages``); module names carry a random token and
are deleted after the run.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
from pathlib import Path

from trl_verigate.lean_server.recheck.compile import (
    CONTROL_PROOF,
    CONTROL_STATEMENT,
    BatchError,
    Options,
    challenge_source,
    control_item,
    output_tail,
    read_batch,
    submission_source,
    verdict_line,
)
from trl_verigate.lean_server.recheck.processes import (
    become_subreaper,
    install_signal_handlers,
    kill_descendants,
    kill_started_tools,
    restore_signal_handlers,
    run_tool,
)
from trl_verigate.lean_server.recheck.replay import check_replay

DEFAULT_LEAN_COMMAND = ("lake", "env", "lean")
DEFAULT_COMPARATOR_COMMAND = ("lake", "env", "comparator")
DEFAULT_COMPARATOR_LIB = "VerigateRecheck"
LAKEFILES = ("lakefile.lean", "lakefile.toml")


# ---------------------------------------------------------------- comparator backend


def _remove_token_files(project_dir: Path, lib: str, token: str) -> None:
    for path in [*(project_dir / lib).glob(f"*{token}*"), *(project_dir / ".lake").glob(f"build/**/*{token}*")]:
        if path.is_file():
            path.unlink()


def _run_comparator(options: Options, lib_dir: Path, workdir: Path, item: dict) -> tuple[bool, str]:
    """One comparator run on `item`: whether it accepts the solution, and why not."""
    token = secrets.token_hex(8)
    (lib_dir / f"Challenge_{token}.lean").write_text(challenge_source(item), encoding="utf-8")
    (lib_dir / f"Solution_{token}.lean").write_text(submission_source(item), encoding="utf-8")
    config = workdir / f"config_{token}.json"
    config.write_text(
        json.dumps(
            {
                "challenge_module": f"{options.comparator_lib}.Challenge_{token}",
                "solution_module": f"{options.comparator_lib}.Solution_{token}",
                "theorem_names": [item["theorem"]],
                "permitted_axioms": list(item["axiom_whitelist"]),
            }
        ),
        encoding="utf-8",
    )
    argv = [*options.comparator_command, str(config)]
    try:
        done = run_tool(argv, cwd=options.project_dir, timeout=options.compile_timeout)
    except OSError as error:
        raise BatchError(f"cannot run comparator {argv[0]!r}: {error}") from None
    finally:
        _remove_token_files(options.project_dir, options.comparator_lib, token)
    if done.timed_out:
        return False, f"comparator took longer than {options.compile_timeout:g} s"
    if done.returncode != 0:
        output = output_tail(done.stdout + "\n" + done.stderr)
        return False, f"comparator exit {done.returncode}: {output}"
    return True, "comparator accepts the solution"


def check_comparator(options: Options, items: list[dict]) -> list[str]:
    lib_dir = options.project_dir / options.comparator_lib
    if not lib_dir.is_dir():
        raise BatchError(
            f"{lib_dir} does not exist: the comparator backend needs `lean_lib {options.comparator_lib}` with "
            f'globs = ["{options.comparator_lib}.+"] in the project\'s lakefile and that directory'
        )
    with tempfile.TemporaryDirectory(prefix="lean-recheck-") as tmp:
        verdicts = [_run_comparator(options, lib_dir, Path(tmp), item) for item in items]
        if not all(ok for ok, _ in verdicts):
            # A refusal is about the submission only if comparator accepts a known-good item here.
            control_ok, why = _run_comparator(options, lib_dir, Path(tmp), control_item(items[0]["header"]))
            if not control_ok:
                raise BatchError(
                    f"comparator refuses a known-good control item ({CONTROL_STATEMENT} {CONTROL_PROOF.strip()}): "
                    f"{why}. Check --project-dir, --comparator-command and the toolchain"
                )
    return [verdict_line(item["id"], ok, message) for item, (ok, message) in zip(items, verdicts, strict=True)]


# ---------------------------------------------------------------- command line


def project_directory(text: str) -> Path:
    """`--project-dir`: an existing directory with a lakefile (the Lean project whose Mathlib the checks import)."""
    path = Path(text).expanduser().resolve()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is not a directory: pass the Lean project (with Mathlib built)")
    if not any((path / name).is_file() for name in LAKEFILES):
        raise argparse.ArgumentTypeError(
            f"{path} has no {' or '.join(LAKEFILES)}: pass the Lean project's directory (the REPL's project_dir)"
        )
    return path


def positive(kind):
    """An argparse type: a number of `kind` above zero (a timeout of -1 s would refuse every submission)."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a{'n integer' if kind is int else ' number'}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", required=True, choices=("replay", "comparator"), help="how to check")
    parser.add_argument(
        "--project-dir",
        type=project_directory,
        default=".",
        help="the Lean project (with Mathlib built, holding a lakefile); every tool runs there "
        "(default: '.', the current directory, which LeanServer sets to LeanServerConfig.project_dir)",
    )
    parser.add_argument(
        "--lean-command",
        default=" ".join(DEFAULT_LEAN_COMMAND),
        help="argv prefix that runs lean in the project (replay; default: 'lake env lean')",
    )
    parser.add_argument(
        "--comparator-command",
        default=" ".join(DEFAULT_COMPARATOR_COMMAND),
        help="argv prefix that runs comparator in the project (default: 'lake env comparator')",
    )
    parser.add_argument(
        "--comparator-lib",
        default=DEFAULT_COMPARATOR_LIB,
        help="the project's lean_lib the comparator modules are written into (default: VerigateRecheck)",
    )
    parser.add_argument(
        "--sandbox",
        default="auto",
        choices=("auto", "bwrap", "none"),
        help="sandbox for compiling submissions (replay; default: auto = bubblewrap when it works)",
    )
    parser.add_argument(
        "--compile-timeout", type=positive(float), default=300.0, help="seconds per compile (default: 300)"
    )
    parser.add_argument(
        "--replay-timeout", type=positive(float), default=1800.0, help="seconds for the replay (default: 1800)"
    )
    parser.add_argument(
        "--jobs", type=positive(int), default=2, help="compiles at a time (default: 2; each loads Mathlib)"
    )


def options_from(args: argparse.Namespace) -> Options:
    import shlex

    return Options(
        backend=args.backend,
        project_dir=args.project_dir,
        lean_command=shlex.split(args.lean_command),
        comparator_command=shlex.split(args.comparator_command),
        comparator_lib=args.comparator_lib,
        sandbox=args.sandbox,
        compile_timeout=args.compile_timeout,
        replay_timeout=args.replay_timeout,
        jobs=args.jobs,
    )


def run(args: argparse.Namespace, stdin=None, stdout=None) -> int:
    """A batch on stdin, verdict lines on stdout; 1 (and stderr) when the checker cannot check it. Every tool it
    started is killed before it returns; safe to call inside another program (see `command` for the CLI)."""
    stdin = stdin if stdin is not None else sys.stdin
    stdout = stdout if stdout is not None else sys.stdout
    options = options_from(args)
    try:
        items = read_batch(stdin.read())
        check = check_replay if options.backend == "replay" else check_comparator
        lines = check(options, items) if items else []
    except BatchError as error:
        print(f"lean-recheck: {error}", file=sys.stderr)
        return 1
    finally:
        kill_started_tools()
    stdout.write("".join(line + "\n" for line in lines))
    stdout.flush()
    return 0


def command(args: argparse.Namespace) -> int:
    """`trl-verigate lean-recheck` as its own process: `run`, as the child subreaper of its tools' orphans, with
    SIGTERM/SIGINT killing every descendant, and none left when it exits (see `recheck.processes`)."""
    become_subreaper()
    previous_handlers = install_signal_handlers()
    try:
        return run(args)
    finally:
        # Whatever is still below us (a tool started as a signal came, an adopted orphan) goes with us.
        kill_descendants()
        restore_signal_handlers(previous_handlers)
