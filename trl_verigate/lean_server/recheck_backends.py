"""Checkers that implement the recheck contract (`lean_server.recheck`): `trl-verigate lean-recheck --backend ...`.

Both read the contract's JSON batch on stdin and print one verdict line per item. An item's challenge is the
trusted ``header`` + ``statement`` + ``sorry``; its submission is ``header`` + ``statement`` + ``proof`` (or the
``file``). Only the orchestration below was run where this was written, against stand-in ``lake``/``lean``/
``comparator`` executables (tests/test_recheck.py); the Lean side was never run there (no Lean toolchain).

``replay`` (lean4checker / SafeVerify style, Lean reference manual "Validating a Lean Proof"):

1. the challenges, then every submission, are compiled to ``.olean`` files with ``<lean-command> -o X.olean
   X.lean`` (default ``lake env lean``) in the project directory, each compile in its own bubblewrap sandbox
   (`lean_server.sandbox`: no network, own PID namespace, the project and toolchain read-only, only that module's
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
import concurrent.futures
import itertools
import json
import os
import secrets
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from trl_verigate.lean_server.lexer import PrecheckError, lex
from trl_verigate.lean_server.prepared import DECLARATIONS, declared_name
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


def combinable_statement(item: dict, suffix: str) -> str | None:
    """The item's trusted statement declaring `<theorem><suffix>` instead of `<theorem>`, for a challenge module
    shared with other items; None when it must be compiled alone.

    Only a `proof` item (its statement is the dataset's, trusted) whose statement is one `theorem`/`lemma` and
    nothing else before it but comments: an attribute (`@[simp]`), a second declaration or a command could change
    how the next challenges in the module elaborate. A plain file's statement carries the file's helpers.
    """
    if item.get("proof") is None:
        return None
    statement = item["statement"]
    try:
        code = [token for token in lex(statement) if token.kind != "comment"]
    except PrecheckError:
        return None
    keywords = [token for token in code if token.kind == "ident" and token.text in DECLARATIONS]
    if len(keywords) != 1 or code[0] is not keywords[0] or keywords[0].text not in ("theorem", "lemma"):
        return None
    name = code[1] if len(code) > 1 and code[1].kind == "ident" else None
    if name is None or "«" in name.text or declared_name(name) != item["theorem"]:
        return None
    return statement[: name.end] + suffix + statement[name.end :]


class ReplayBatch:
    """One `--backend replay` run: compiles, the controls that tell a broken checker from a bad submission, and
    the kernel replay (see the module docstring)."""

    def __init__(self, options: Options, bwrap: str | None, workdir: Path):
        self.options, self.bwrap, self.workdir = options, bwrap, workdir
        self.token = secrets.token_hex(4)
        self.control_id = f"verigate-control-{self.token}"
        self._stems = itertools.count(1)  # compiles run on several threads: next() hands out distinct numbers
        self._controls: dict[str, dict] = {}
        self.refused: dict[str, str] = {}

    def compile_source(self, text: str, label: str) -> tuple[Path, str | None]:
        """Compile `text` as a module of its own (own output directory); its .olean and None, or why not."""
        stem = f"M{next(self._stems)}{label}"
        source = self.workdir / "src" / f"{stem}.lean"
        source.parent.mkdir(exist_ok=True)
        source.write_text(text, encoding="utf-8")
        olean = self.workdir / "out" / stem / f"{stem}.olean"
        return olean, compile_module(self.options, self.bwrap, source, olean)

    def control(self, header: str) -> dict:
        """The known-good control item under `header` (`theorem verigate_control : True := by trivial`), compiled
        once per header; BatchError when even its challenge or submission does not compile: then nothing this
        checker says about a submission would be about the submission."""
        if header not in self._controls:
            item = control_item(header)
            for part, source in (("challenge", challenge_source(item)), ("submission", submission_source(item))):
                olean, problem = self.compile_source(source, f"Control{part.title()}")
                if problem is not None:
                    raise BatchError(
                        f"the checker cannot compile a trivial {part} under this header ({CONTROL_STATEMENT} "
                        f"{CONTROL_PROOF.strip()}): it {problem}. Check --project-dir, --lean-command and the "
                        "toolchain (and for --sandbox bwrap, that they are reachable inside the sandbox)"
                    )
                item[part] = olean
            self._controls[header] = item
        return self._controls[header]

    def challenges(self, items: list[dict], threads) -> dict[str, tuple[Path, str]]:
        """Each item's challenge .olean and the theorem name it declares; refusals and BatchErrors as documented."""
        built: dict[str, tuple[Path, str]] = {}
        alone: list[dict] = []
        groups: dict[str, list[tuple[dict, str, str]]] = {}
        for index, item in enumerate(items):
            suffix = f"_verigate_challenge_{self.token}_{index}"
            renamed = combinable_statement(item, suffix)
            if renamed is None:
                alone.append(item)
            else:
                groups.setdefault(item["header"], []).append((item, renamed, suffix))
        shared = {
            header: threads.submit(
                self.compile_source,
                header + "\n\n" + "".join(f"{renamed}\n  sorry\n\n" for _, renamed, _ in members),
                "Challenges",
            )
            for header, members in groups.items()
        }
        for header, future in shared.items():
            olean, problem = future.result()
            for item, _, suffix in groups[header]:
                if problem is None:
                    built[item["id"]] = (olean, item["theorem"] + suffix)
                else:
                    alone.append(item)  # which statement broke the shared module: each is compiled alone
        single = {
            item["id"]: threads.submit(self.compile_source, challenge_source(item), "Challenge") for item in alone
        }
        for item in alone:
            olean, problem = single[item["id"]].result()
            if problem is None:
                built[item["id"]] = (olean, item["theorem"])
                continue
            self.control(item["header"])  # BatchError when the checker cannot compile anything here
            if item.get("proof") is not None:
                raise BatchError(
                    f"the trusted statement of item {item['id']!r} {problem}, although the REPL elaborated it and a "
                    "trivial challenge compiles: the checker's project or toolchain differs from the REPL's"
                )
            self.refused[item["id"]] = f"the file's statement (header + statement + sorry) {problem}"
        return built

    def check(self, items: list[dict]) -> list[str]:
        """The verdict lines for `items`, in order."""
        submissions: dict[str, Path] = {}
        with concurrent.futures.ThreadPoolExecutor(max(1, self.options.jobs)) as threads:
            # Every trusted challenge is built before any submission, so no submission's build precedes one.
            challenges = self.challenges(items, threads)
            futures = {
                item["id"]: threads.submit(self.compile_source, submission_source(item), "Submission")
                for item in items
                if item["id"] not in self.refused
            }
            for item in items:
                if item["id"] not in futures:
                    continue
                olean, problem = futures[item["id"]].result()
                if problem is None:
                    submissions[item["id"]] = olean
                else:
                    self.control(item["header"])  # a compile that fails for every submission is the checker's
                    self.refused[item["id"]] = f"the submission {problem}"
        entries = [
            {
                "id": item["id"],
                "theorem": item["theorem"],
                "challenge": str(challenges[item["id"]][0]),
                "challenge_theorem": challenges[item["id"]][1],
                "submission": str(submissions[item["id"]]),
                "axiom_whitelist": list(item["axiom_whitelist"]),
            }
            for item in items
            if item["id"] in submissions
        ]
        headers = {item["id"]: item["header"] for item in items}
        replayed = self.replay(entries, headers[entries[0]["id"]]) if entries else {}
        lines = []
        for item in items:
            if item["id"] in self.refused:
                lines.append(verdict_line(item["id"], False, self.refused[item["id"]], []))
            else:
                row = replayed[item["id"]]
                lines.append(verdict_line(item["id"], row["ok"], row["message"], row["axioms"]))
        return lines

    def replay(self, entries: list[dict], header: str) -> dict[str, dict]:
        """The replay's verdicts, from one process for the batch; should it fail, each item alone, but only if it
        works on the control item under `header` (else the replay program itself is broken: BatchError)."""
        try:
            return run_replay_program(self.options, entries, self.workdir, "batch")
        except BatchError as batch_error:
            print(f"lean-recheck: the batch replay failed ({batch_error}); trying a control item", file=sys.stderr)
        control = self.control(header)
        control_entry = {
            "id": self.control_id,
            "theorem": CONTROL_THEOREM,
            "challenge": str(control["challenge"]),
            "challenge_theorem": CONTROL_THEOREM,
            "submission": str(control["submission"]),
            "axiom_whitelist": [],
        }
        try:
            [control_verdict] = run_replay_program(self.options, [control_entry], self.workdir, "control").values()
        except BatchError as error:
            raise BatchError(f"the replay program fails on a known-good control item: {error}") from None
        if not control_verdict["ok"]:
            raise BatchError(f"the replay program refuses a known-good control item: {control_verdict['message']}")
        replayed = {}
        for entry in entries:
            try:
                replayed.update(run_replay_program(self.options, [entry], self.workdir, f"item-{entry['id']}"))
            except BatchError as error:
                self.refused[entry["id"]] = f"the replay failed on this submission alone: {error}"
        return replayed


def check_replay(options: Options, items: list[dict]) -> list[str]:
    bwrap = choose_bubblewrap(options.sandbox)
    with tempfile.TemporaryDirectory(prefix="lean-recheck-") as tmp:
        return ReplayBatch(options, bwrap, Path(tmp)).check(items)


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
        output = _tail(done.stdout + "\n" + done.stderr)
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
