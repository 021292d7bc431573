#!/usr/bin/env python3
"""Stand-in `lean` and `comparator` executables for the tests of `trl-verigate lean-recheck` (recheck_backends).

    fake_lean_tools.py lean -o OUT.olean SRC.lean         compile: OUT is JSON {source, argv, time_ns, escape}
    fake_lean_tools.py lean --run PROGRAM MANIFEST.json  the replay program: one verdict line per manifest item
    fake_lean_tools.py comparator CONFIG.json             comparator, run in the project: exit 0 accepts

Its "kernel" reads the theorem's statement from the sources: a submission is refused when its statement differs
from the challenge's (whitespace aside), when it mentions `sorry`, or when the statement is a false closed ℕ
equation (fake_checker's toy kernel). Markers in a source act out attacks and failures:
`COMPILE_ERROR` (the compile fails), `-- ESCAPE_WRITE <path>` (the compile tries to write <path>; the olean records
what happened), `CRASH_REPLAY` (the replay process dies on it, as on a crafted .olean).
Runs that happen outside the sandbox (`--run`, comparator) append {"tool", "argv", ...} to $LEAN_FAKE_LOG.
Environment switches: LEAN_FAKE_VIA_CHILD=1 runs the tool as a child process it waits for, as `lake env lean`
starts lean; LEAN_FAKE_SLEEP=compile|replay|comparator makes that step sleep an hour (a Mathlib import that hangs);
LEAN_FAKE_BROKEN=compile|replay|comparator makes that step fail for every input (no Mathlib; a replay program that does not
compile on the toolchain; comparator without its sandbox tool). Compiles outside the sandbox log {"tool": "lean -o", "source"} too.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPLAY_PROGRAM_NAME = "VerigateReplay.lean"


def log(row: dict) -> None:
    path = os.environ.get("LEAN_FAKE_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps(row) + "\n")


def statement_of(source: str, theorem: str) -> str | None:
    match = re.search(rf"theorem\s+{re.escape(theorem)}\b(.*?):=\s*by", source, flags=re.DOTALL)
    return " ".join(match.group(1).split()) if match else None


def compile_module(output: str, source_path: str) -> int:
    sleep_if_asked("compile")
    source = Path(source_path).read_text(encoding="utf-8")
    try:
        log({"tool": "lean -o", "source": source})
    except OSError:
        pass  # in the sandbox the log is out of reach
    if os.environ.get("LEAN_FAKE_BROKEN") == "compile":
        print("error: unknown package 'Mathlib' (a project without Mathlib built)", file=sys.stderr)
        return 1
    if "COMPILE_ERROR" in source:
        print(f"{source_path}:3:2: error: unknown identifier 'COMPILE_ERROR'")
        return 1
    escape = None
    for target in re.findall(r"-- ESCAPE_WRITE (\S+)", source):
        try:
            Path(target).write_text("written from a compile\n")
            escape = "wrote"
        except OSError as error:
            escape = f"refused: {error.strerror}"
    module = {"source": source, "argv": sys.argv, "time_ns": time.time_ns(), "escape": escape}
    Path(output).write_text(json.dumps(module), encoding="utf-8")
    return 0


def judge(
    theorem: str, challenge: str, submission: str, whitelist: list[str], challenge_theorem: str | None = None
) -> tuple[bool, list[str], str]:
    """The toy kernel's verdict; the challenge declares the claim as `challenge_theorem` (default: `theorem`)."""
    target = statement_of(challenge, challenge_theorem or theorem)
    if target is None:
        return False, [], f"the trusted challenge declares no {theorem}"
    if statement_of(submission, theorem) != target:
        return False, [], f"{theorem} does not state the trusted statement"
    if re.search(r"\bsorry\b", submission):
        return False, ["sorryAx"], f"{theorem} depends on axioms outside the whitelist: [sorryAx]"
    # Imported here: a compile runs in a sandbox that shows this file but not its neighbours.
    from fake_checker import toy_kernel

    why = toy_kernel(f"theorem {theorem} {target} := by")
    if why is not None:
        return False, [], f"the kernel rejects the submission: {why}"
    return True, [a for a in ("propext",) if a in whitelist], "the kernel accepts the replayed proof"


def replay(program: str, manifest_path: str) -> int:
    manifest = json.loads(Path(manifest_path).read_text(encoding="utf-8"))
    log({"tool": "lean --run", "program": program, "ids": [item["id"] for item in manifest["items"]]})
    sleep_if_asked("replay")
    if os.environ.get("LEAN_FAKE_BROKEN") == "replay":
        print("VerigateReplay.lean:140:13: error: unknown constant 'Lean.Environment.replay'", file=sys.stderr)
        return 1
    if Path(program).name != REPLAY_PROGRAM_NAME or not Path(program).is_file():
        print(f"no such program {program}", file=sys.stderr)
        return 1
    for item in manifest["items"]:
        challenge = json.loads(Path(item["challenge"]).read_text(encoding="utf-8"))["source"]
        submission = json.loads(Path(item["submission"]).read_text(encoding="utf-8"))["source"]
        if "CRASH_REPLAY" in submission:
            print("INTERNAL PANIC: corrupted compacted region", file=sys.stderr)
            return 134
        ok, axioms, message = judge(
            item["theorem"], challenge, submission, item["axiom_whitelist"], item.get("challenge_theorem")
        )
        print(json.dumps({"id": item["id"], "ok": ok, "axioms": axioms, "message": message}), flush=True)
    return 0


def comparator(config_path: str) -> int:
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))

    def source(module: str) -> str:
        return (Path.cwd() / (module.replace(".", "/") + ".lean")).read_text(encoding="utf-8")

    log({"tool": "comparator", "cwd": os.getcwd(), "config": config})
    sleep_if_asked("comparator")
    if os.environ.get("LEAN_FAKE_BROKEN") == "comparator":
        print("uncaught exception: no such file or directory (error code: 2) landrun", file=sys.stderr)
        return 1
    [theorem] = config["theorem_names"]
    ok, _, message = judge(
        theorem, source(config["challenge_module"]), source(config["solution_module"]), config["permitted_axioms"]
    )
    print("Your solution is okay!" if ok else f"uncaught exception: {message}")
    return 0 if ok else 1


def sleep_if_asked(step: str) -> None:
    if os.environ.get("LEAN_FAKE_SLEEP") == step:
        time.sleep(3600)


def main(argv: list[str]) -> int:
    if os.environ.get("LEAN_FAKE_VIA_CHILD"):
        # The parent stays, like lake, and waits for the tool it started.
        child_env = {**os.environ, "LEAN_FAKE_VIA_CHILD": ""}
        return subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv], env=child_env).returncode
    tool, *args = argv
    if tool == "lean" and args[:1] == ["-o"]:
        return compile_module(args[1], args[2])
    if tool == "lean" and args[:1] == ["--run"]:
        return replay(args[1], args[2])
    if tool == "comparator":
        return comparator(args[0])
    print(f"fake_lean_tools: unexpected arguments {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
