"""The adversarial corpus, tests/data/adversarial_proofs.jsonl, for every test that replays it.

A row is one attack, of one of two kinds:
- a ProofRequest row: `statement` (trusted, ends in `:= by`) and `proof` (the attack);
- a file row: `file`, a complete Lean file sent as a str request, the way every kimina `/check`
  snippet arrives, so its header lines are untrusted too; with `statement` and/or `header` it is sent as a
  `FileRequest` held to that trusted statement/header (a prover restating the dataset's theorem).

Both kinds carry `id`, `attack` (what it tries), `expect` ("rejected" by the precheck before Lean runs,
"failed" once Lean's answer is judged, or "timeout"), `behaviour` (null, "hang": Lean spins, or "oom":
Lean exhausts memory) and, unless rejected, `lean_response`: what real Lean answers to the full command
sent to the REPL, the prepared code including the appended `#print axioms`. Newer rows add `why`: the reason
the attack must not pass.

The file is append-only (several people add rows at once), so a row that a policy change makes wrong is not
edited: a later row names it in `supersedes`, and `load_corpus` leaves the superseded row out.
"""

import copy
import json
from pathlib import Path

from tests.lean_helpers import prepare
from trl_verigate.lean_server.core.types import FileRequest, ProofRequest, Request
from trl_verigate.lean_server.precheck.prepared import Prepared

CORPUS = Path(__file__).resolve().parent / "data" / "adversarial_proofs.jsonl"


def load_raw_corpus() -> list[dict]:
    """Every row of the file in file order, superseded ones included."""
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_corpus() -> list[dict]:
    """Every row of the corpus in file order, less the rows a later row `supersedes`."""
    rows = load_raw_corpus()
    superseded = {row["supersedes"] for row in rows if "supersedes" in row}
    return [row for row in rows if row["id"] not in superseded]


def is_file_row(row: dict) -> bool:
    return "file" in row


def request_of(row: dict) -> Request:
    """The request a row stands for: the file text (a FileRequest when the row holds a trusted statement or header)
    for a file row, else a ProofRequest."""
    if is_file_row(row):
        if "statement" in row or "header" in row:
            return FileRequest(row["file"], row.get("statement"), row.get("header"))
        return row["file"]
    return ProofRequest(row["statement"], row["proof"])


def fake_repl_script(rows: list[dict], default_header: str, allow_native_decide: bool = False) -> list[dict]:
    """`tests/fake_repl.py --script` rows that act out real Lean for each row the precheck lets through.

    Each matches the row's whole prepared code, so no row's answer can land on another's command
    (every corpus theorem has its own name).
    """
    script = []
    for row in rows:
        prepared = prepare(request_of(row), default_header, allow_native_decide)
        if isinstance(prepared, Prepared):
            if "lean_response" not in row:
                raise ValueError(
                    f"corpus row {row['id']!r} passes the precheck, so it needs the `lean_response` Lean gives"
                )
            action = {"behaviour": row["behaviour"]} if row["behaviour"] else {"response": lean_response(row, prepared)}
            script.append({"match": prepared.code, **action})
    return script


def preamble_lines(prepared: Prepared) -> int:
    """The whole lines the preamble (the header's `open`/`set_option` lines, sent with the command) puts before the
    statement."""
    return prepared.code.count("\n", 0, prepared.preamble_length)


def lean_response(row: dict, prepared: Prepared) -> dict:
    """The row's recorded answer, for the command as the server now sends it: the corpus records Lean's answer to
    the statement and proof alone, and the preamble's whole lines before them shift every position down."""
    shift = preamble_lines(prepared)
    response = copy.deepcopy(row["lean_response"])
    for item in response.get("messages", []) + response.get("sorries", []):
        for key in ("pos", "endPos"):
            if isinstance(item.get(key), dict):
                item[key]["line"] += shift
    return response
