"""The ``replay`` backend of `trl-verigate lean-recheck` (see `recheck.backends` for what it does and why):
sandboxed compiles, challenges shared per header, the control item, and the kernel replay by
``lean/VerigateReplay.lean``."""

from __future__ import annotations

import concurrent.futures
import itertools
import json
import secrets
import sys
import tempfile
from pathlib import Path

from trl_verigate.lean_server.precheck import DECLARATIONS, PrecheckError, declared_name, tokenize
from trl_verigate.lean_server.recheck.compile import (
    CONTROL_PROOF,
    CONTROL_STATEMENT,
    CONTROL_THEOREM,
    BatchError,
    Options,
    challenge_source,
    choose_bubblewrap,
    compile_module,
    control_item,
    output_tail,
    submission_source,
    verdict_line,
)
from trl_verigate.lean_server.recheck.contract import CheckerFailure, parse_verdicts
from trl_verigate.lean_server.recheck.processes import run_tool

REPLAY_PROGRAM = Path(__file__).resolve().parent / "lean" / "VerigateReplay.lean"


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
        raise BatchError(f"the replay exited {done.returncode}: {output_tail(done.stderr or done.stdout)}")
    try:
        verdicts = parse_verdicts(done.stdout, [entry["id"] for entry in entries])
    except CheckerFailure as error:
        raise BatchError(f"the replay's output: {error}") from None
    return {item_id: {"ok": v.ok, "axioms": v.axioms, "message": v.message} for item_id, v in verdicts.items()}


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
        code = tokenize(statement)
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

    def challenges(self, items: list[dict], threads: concurrent.futures.Executor) -> dict[str, tuple[Path, str]]:
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
        for number, entry in enumerate(entries):
            # Manifests are named by position: an item id is any string, a path separator included.
            try:
                replayed.update(run_replay_program(self.options, [entry], self.workdir, f"item-{number}"))
            except BatchError as error:
                self.refused[entry["id"]] = f"the replay failed on this submission alone: {error}"
        return replayed


def check_replay(options: Options, items: list[dict]) -> list[str]:
    bwrap = choose_bubblewrap(options.sandbox)
    with tempfile.TemporaryDirectory(prefix="lean-recheck-") as tmp:
        return ReplayBatch(options, bwrap, Path(tmp)).check(items)
