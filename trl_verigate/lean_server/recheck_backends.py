"""Checkers that implement the recheck contract (`lean_server.recheck`): `trl-verigate lean-recheck --backend ...`.

Both read the contract's JSON batch on stdin and print one verdict line per item. An item's challenge is the
trusted ``header`` + ``statement`` + ``sorry``; its submission is ``header`` + ``statement`` + ``proof`` (or the
``file``). Only the orchestration below was run where this was written, against stand-in ``lake``/``lean``/
``comparator`` executables (tests/test_recheck.py); the Lean side was never run there (no Lean toolchain).

``replay`` (lean4checker / SafeVerify style, Lean reference manual "Validating a Lean Proof"):

1. every challenge, then every submission, is compiled to an ``.olean`` with ``<lean-command> -o X.olean X.lean``
   (default ``lake env lean``) in the project directory, each in its own bubblewrap sandbox
   (`lean_server.sandbox`: no network, own PID namespace, the project and toolchain read-only, only that file's
   output directory writable), ``--jobs`` at a time; a submission that does not compile is refused;
2. then, OUTSIDE any sandbox and in ONE process per batch, the shipped Lean program ``lean/VerigateReplay.lean``
   (``<lean-command> --run VerigateReplay.lean manifest.json``) imports the header's modules once, replays each
   submission's declarations through the kernel, compares the theorem's type with the challenge's and collects its
   axioms. Should that process die (a crafted ``.olean``), each item is replayed alone, so only the culprit is
   refused. The replay reads ``.olean`` files the sandboxed compile wrote: it trusts Lean's loader with them.

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
import concurrent.futures
import json
import os
import secrets
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from trl_verigate.lean_server.recheck import CONTRACT_VERSION, CheckerFailure, parse_verdicts
from trl_verigate.lean_server.recheck_processes import (
    become_subreaper,
    install_signal_handlers,
    kill_descendants,
    restore_signal_handlers,
    run_tool,
)

REPLAY_PROGRAM = Path(__file__).resolve().parent / "lean" / "VerigateReplay.lean"
DEFAULT_LEAN_COMMAND = ("lake", "env", "lean")
DEFAULT_COMPARATOR_COMMAND = ("lake", "env", "comparator")
DEFAULT_COMPARATOR_LIB = "VerigateRecheck"
LAKEFILES = ("lakefile.lean", "lakefile.toml")
ITEM_FIELDS = ("id", "header", "statement", "theorem", "axiom_whitelist")
OUTPUT_TAIL_CHARS = 1500
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


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= OUTPUT_TAIL_CHARS else "…" + text[-OUTPUT_TAIL_CHARS:]


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
    from trl_verigate.lean_server import sandbox

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
    from trl_verigate.lean_server import sandbox

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
        return f"does not compile (exit {done.returncode}): {_tail(done.stdout + done.stderr)}"
    return None


# ---------------------------------------------------------------- replay backend


def run_replay_program(options: Options, entries: list[dict], workdir: Path, name: str) -> dict[str, dict]:
    """Run VerigateReplay once on `entries`; its verdict rows by id, or BatchError."""
    manifest = workdir / f"{name}.json"
    manifest.write_text(json.dumps({"items": entries}), encoding="utf-8")
    argv = [*options.lean_command, "--run", str(REPLAY_PROGRAM), str(manifest)]
    try:
        done = run_tool(argv, cwd=options.project_dir, timeout=options.replay_timeout)
    except OSError as error:
        raise BatchError(f"cannot run {argv[0]!r}: {error}") from None
    if done.timed_out:
        raise BatchError(f"the replay took longer than {options.replay_timeout:g} s")
    if done.returncode != 0:
        raise BatchError(f"the replay exited {done.returncode}: {_tail(done.stderr or done.stdout)}")
    try:
        verdicts = parse_verdicts(done.stdout, [entry["id"] for entry in entries])
    except CheckerFailure as error:
        raise BatchError(f"the replay's output: {error}") from None
    return {item_id: {"ok": v.ok, "axioms": v.axioms, "message": v.message} for item_id, v in verdicts.items()}


def check_replay(options: Options, items: list[dict]) -> list[str]:
    bwrap = choose_bubblewrap(options.sandbox)
    with tempfile.TemporaryDirectory(prefix="lean-recheck-") as tmp:
        workdir = Path(tmp)
        sources, refused = {}, {}
        for index, item in enumerate(items):
            stem = f"Item{index}"
            challenge = workdir / "src" / f"{stem}Challenge.lean"
            submission = workdir / "src" / f"{stem}Submission.lean"
            challenge.parent.mkdir(exist_ok=True)
            challenge.write_text(challenge_source(item), encoding="utf-8")
            submission.write_text(submission_source(item), encoding="utf-8")
            sources[item["id"]] = (
                (challenge, workdir / "out" / stem / "challenge" / f"{stem}Challenge.olean"),
                (submission, workdir / "out" / stem / "submission" / f"{stem}Submission.olean"),
            )
        with concurrent.futures.ThreadPoolExecutor(max(1, options.jobs)) as threads:
            # Every trusted challenge is built before any submission, so no submission's build precedes one.
            challenges = {
                item_id: threads.submit(compile_module, options, bwrap, *pair[0]) for item_id, pair in sources.items()
            }
            for item_id, future in challenges.items():
                if (problem := future.result()) is not None:
                    refused[item_id] = f"the trusted statement {problem}"
            submissions = {
                item_id: threads.submit(compile_module, options, bwrap, *pair[1])
                for item_id, pair in sources.items()
                if item_id not in refused
            }
            for item_id, future in submissions.items():
                if (problem := future.result()) is not None:
                    refused[item_id] = f"the submission {problem}"
        entries = [
            {
                "id": item["id"],
                "theorem": item["theorem"],
                "challenge": str(sources[item["id"]][0][1]),
                "submission": str(sources[item["id"]][1][1]),
                "axiom_whitelist": list(item["axiom_whitelist"]),
            }
            for item in items
            if item["id"] not in refused
        ]
        replayed: dict[str, dict] = {}
        if entries:
            try:
                replayed = run_replay_program(options, entries, workdir, "batch")
            except BatchError as batch_error:
                if len(entries) == 1:
                    raise
                print(f"lean-recheck: batch replay failed ({batch_error}); replaying each item alone", file=sys.stderr)
                for entry in entries:
                    try:
                        replayed.update(run_replay_program(options, [entry], workdir, f"item-{entry['id']}"))
                    except BatchError as error:
                        refused[entry["id"]] = f"the replay failed on this submission alone: {error}"
    lines = []
    for item in items:
        if item["id"] in refused:
            lines.append(verdict_line(item["id"], False, refused[item["id"]], []))
        else:
            row = replayed[item["id"]]
            lines.append(verdict_line(item["id"], row["ok"], row["message"], row["axioms"]))
    return lines


# ---------------------------------------------------------------- comparator backend


def _remove_token_files(project_dir: Path, lib: str, token: str) -> None:
    for path in [*(project_dir / lib).glob(f"*{token}*"), *(project_dir / ".lake").glob(f"build/**/*{token}*")]:
        if path.is_file():
            path.unlink()


def check_comparator(options: Options, items: list[dict]) -> list[str]:
    lib_dir = options.project_dir / options.comparator_lib
    if not lib_dir.is_dir():
        raise BatchError(
            f"{lib_dir} does not exist: the comparator backend needs `lean_lib {options.comparator_lib}` with "
            f'globs = ["{options.comparator_lib}.+"] in the project\'s lakefile and that directory'
        )
    lines = []
    with tempfile.TemporaryDirectory(prefix="lean-recheck-") as tmp:
        for item in items:
            token = secrets.token_hex(8)
            challenge_module = f"{options.comparator_lib}.Challenge_{token}"
            solution_module = f"{options.comparator_lib}.Solution_{token}"
            (lib_dir / f"Challenge_{token}.lean").write_text(challenge_source(item), encoding="utf-8")
            (lib_dir / f"Solution_{token}.lean").write_text(submission_source(item), encoding="utf-8")
            config = Path(tmp) / f"config_{token}.json"
            config.write_text(
                json.dumps(
                    {
                        "challenge_module": challenge_module,
                        "solution_module": solution_module,
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
                lines.append(
                    verdict_line(item["id"], False, f"comparator took longer than {options.compile_timeout:g} s")
                )
                continue
            if done.returncode == 0:
                lines.append(verdict_line(item["id"], True, "comparator accepts the solution"))
            else:
                output = _tail(done.stdout + "\n" + done.stderr)
                lines.append(verdict_line(item["id"], False, f"comparator exit {done.returncode}: {output}"))
    return lines


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
    """`trl-verigate lean-recheck`: a batch on stdin, verdict lines on stdout; 1 (and stderr) when it cannot."""
    stdin = stdin if stdin is not None else sys.stdin
    stdout = stdout if stdout is not None else sys.stdout
    options = options_from(args)
    become_subreaper()
    previous_handlers = install_signal_handlers()
    try:
        items = read_batch(stdin.read())
        check = check_replay if options.backend == "replay" else check_comparator
        lines = check(options, items) if items else []
    except BatchError as error:
        print(f"lean-recheck: {error}", file=sys.stderr)
        return 1
    finally:
        # Whatever is still below us (a tool started as a signal came, an adopted orphan) goes with us.
        kill_descendants()
        restore_signal_handlers(previous_handlers)
    stdout.write("".join(line + "\n" for line in lines))
    stdout.flush()
    return 0
