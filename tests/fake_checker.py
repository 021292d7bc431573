#!/usr/bin/env python3
"""A stand-in recheck checker for tests: speaks the contract of `trl_verigate.lean_server.recheck.contract`.

It reads the JSON batch on stdin and writes one verdict line per item. Its "kernel" is a toy with one real check,
independent of the REPL's answer: a statement whose claim is an equation between closed natural-number
expressions (`theorem t : (1:ℕ) = 2 := by`, `2 + 2 = 5`) is evaluated, and refused when false. Every other item is
accepted unless a flag refuses it:

- `--accept-all`: accept every item, false claims too (a checker that checks nothing);
- `--refuse PATTERN` (repeatable): refuse items whose statement, proof or file matches the regex;
- `--refuse-id ID` (repeatable): refuse that item id;
- `--refuse-theorems PATH`: refuse items whose theorem is named in that file (one name a line): a checker that
  knows, as the kernel would, that those proofs are no proofs;
- `--axioms a,b`: the axioms reported for an accepted item (default `propext`);
- `--latency SECONDS`: sleep before answering;
- `--behaviour`: break the contract for the whole run: `crash` (exit 3, no output), `hang`, `garbage` (a non-JSON
  line), `missing` (drop the last verdict), `extra` (answer an id that was not sent), `duplicate` (answer the first
  id twice), `exit-nonzero` (all verdicts, then exit 1), `spawn-hang` (all verdicts, then a child that holds stdout
  open and sleeps: the run still never ends);
- `--log PATH`: append `{"pid", "cwd", "payload"}` per run, so tests see how many runs there were and what each got
  (and `{"child_pid"}` for `spawn-hang`).

Run as a program it imports nothing from trl_verigate: it plays an independent program.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

CLOSED_EQUATION = re.compile(r":\s*([0-9+*()\s:ℕ]+?)\s*=\s*([0-9+*()\s:ℕ]+?)\s*:=\s*by\s*$")
NAT_CAST = re.compile(r"\((\d+)\s*:\s*ℕ\)")
ARITHMETIC = re.compile(r"^[0-9+*()\s]+$")


def checker_command(*flags: str) -> list[str]:
    """The argv that runs this stand-in under the current interpreter (for LeanServerConfig.recheck_command)."""
    return [sys.executable, str(Path(__file__).resolve()), *flags]


def read_runs(path: str | Path) -> list[dict]:
    """The `--log` rows, one per checker run: {"pid": ..., "payload": {...}}."""
    return [row for row in _log_rows(path) if "payload" in row]


def spawned_pids(path: str | Path) -> list[int]:
    """The pids of the children `--behaviour spawn-hang` started."""
    return [row["child_pid"] for row in _log_rows(path) if "child_pid" in row]


def _log_rows(path: str | Path) -> list[dict]:
    if not Path(path).exists():
        return []
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def _log(path: str | None, row: dict) -> None:
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(row, ensure_ascii=False) + "\n")


def evaluate(side: str) -> int | None:
    plain = NAT_CAST.sub(r"\1", side)
    if not ARITHMETIC.match(plain):
        return None
    return eval(plain, {"__builtins__": {}})  # digits, +, *, brackets only (checked above)


def toy_kernel(statement: str) -> str | None:
    """Why the statement is false, for a closed ℕ equation that evaluates to false; None otherwise."""
    match = CLOSED_EQUATION.search(statement)
    if match is None:
        return None
    left, right = evaluate(match.group(1)), evaluate(match.group(2))
    if left is None or right is None or left == right:
        return None
    return f"type mismatch: the claim evaluates to {left} = {right}, which is false"


def verdict_for(item: dict, args: argparse.Namespace) -> dict:
    text = "\n".join(str(item.get(key) or "") for key in ("statement", "proof", "file"))
    if item["theorem"] in args.refused_theorems:
        return {"id": item["id"], "ok": False, "axioms": [], "message": f"the kernel rejects {item['theorem']}"}
    if item["id"] in args.refuse_id:
        return {"id": item["id"], "ok": False, "axioms": [], "message": f"refused id {item['id']}"}
    for pattern in args.refuse:
        if re.search(pattern, text):
            return {"id": item["id"], "ok": False, "axioms": [], "message": f"kernel rejects: matched {pattern!r}"}
    why = None if args.accept_all else toy_kernel(item["statement"])
    if why is not None:
        return {"id": item["id"], "ok": False, "axioms": [], "message": why}
    axioms = [a for a in args.axioms.split(",") if a]
    return {"id": item["id"], "ok": True, "axioms": axioms, "message": "ok"}


def check_payload(payload) -> list[dict]:
    if not isinstance(payload, dict) or payload.get("version") != 1 or not isinstance(payload.get("items"), list):
        raise SystemExit("fake_checker: stdin must be {'version': 1, 'items': [...]}")
    for item in payload["items"]:
        keys = {"id", "header", "statement", "theorem", "axiom_whitelist"}
        if not keys <= set(item) or (item.get("proof") is None) == (item.get("file") is None):
            raise SystemExit(f"fake_checker: bad item {item!r}: needs {sorted(keys)} and exactly one of proof/file")
    return payload["items"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accept-all", action="store_true")
    parser.add_argument("--refuse", action="append", default=[])
    parser.add_argument("--refuse-id", action="append", default=[])
    parser.add_argument("--refuse-theorems")
    parser.add_argument("--axioms", default="propext")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--behaviour")
    parser.add_argument("--log")
    args = parser.parse_args(argv)
    args.refused_theorems = set(Path(args.refuse_theorems).read_text().split()) if args.refuse_theorems else set()
    payload = json.loads(sys.stdin.read())
    _log(args.log, {"pid": os.getpid(), "cwd": os.getcwd(), "payload": payload})
    items = check_payload(payload)
    time.sleep(args.latency)
    behaviour = args.behaviour
    if behaviour == "crash":
        sys.stderr.write("fake_checker: scripted crash\n")
        sys.exit(3)
    if behaviour == "hang":
        while True:
            time.sleep(3600)
    lines = [json.dumps(verdict_for(item, args)) for item in items]
    if behaviour == "garbage":
        lines.insert(0, "Lean (version 4) PANIC: not JSON")
    elif behaviour == "missing":
        lines.pop()
    elif behaviour == "extra":
        lines.append(json.dumps({"id": "not-sent", "ok": True, "axioms": [], "message": "ok"}))
    elif behaviour == "duplicate":
        lines.append(lines[0])
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()
    if behaviour == "exit-nonzero":
        sys.exit(1)
    if behaviour == "spawn-hang":
        # A grandchild holding stdout: only killing the process group ends the run.
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        _log(args.log, {"child_pid": child.pid})
        time.sleep(3600)


if __name__ == "__main__":
    main()
