"""Tactic splitting and first-error mapping, checked against the real Lean REPL's transcripts and by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from trl_verigate.lean_server.tactics import first_error_tactic, offset_of, split_tactics
from trl_verigate.lean_server.types import Tactic

TRANSCRIPTS = Path(__file__).resolve().parent.parent.parent / "shared" / "lean-repl-transcripts"
_DECLARATION_BY = re.compile(r":=\s*by(?![\w'!?])")


def _chunks(path: Path) -> list[dict]:
    """The JSON objects of a transcript file, as the REPL reads them.

    The REPL joins the lines of a request without their line breaks, so a raw newline inside a JSON string
    (invalid_line_break.in, line_breaks.in) does not reach Lean; dropping them reproduces what Lean parsed.
    """
    text = path.read_text(encoding="utf-8")
    return [json.loads(chunk.replace("\n", "")) for chunk in re.split(r"\n\s*\n", text) if chunk.strip()]


def _proof_cases() -> list[tuple[str, str, dict, dict]]:
    """(id, cmd, request, response) for every transcript command with a `:= by` proof."""
    if not TRANSCRIPTS.is_dir():
        return []
    cases = []
    for request_path in sorted(TRANSCRIPTS.glob("*.in")):
        response_path = request_path.with_name(request_path.name[: -len(".in")] + ".expected.out")
        requests = _chunks(request_path)
        responses = _chunks(response_path) if response_path.exists() else []
        if len(responses) != len(requests):
            responses = [{}] * len(requests)
        name = request_path.name[: -len(".in")]
        for k, (request, response) in enumerate(zip(requests, responses, strict=True)):
            cmd = request.get("cmd")
            if isinstance(cmd, str) and _DECLARATION_BY.search(cmd):
                cases.append((f"{name}#{k}", cmd, request, response))
    return cases


PROOF_CASES = _proof_cases()
ALL_TACTICS_CASES = [case for case in PROOF_CASES if case[2].get("allTactics")]


def _body(cmd: str) -> tuple[str, int, int]:
    """The proof body after the declaration's `:= by`, its offset in cmd and the column it starts at."""
    match = _DECLARATION_BY.search(cmd)
    start = match.end()
    return cmd[start:], start, start - (cmd.rfind("\n", 0, start) + 1)


def _span(cmd: str, item: dict, body_start: int) -> tuple[int, int]:
    start = offset_of(cmd, item["pos"]["line"], item["pos"]["column"]) - body_start
    end = offset_of(cmd, item["endPos"]["line"], item["endPos"]["column"]) - body_start
    return start, end


def _outermost(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Spans not strictly inside another span (a nested tactic of the REPL's `allTactics` list)."""

    def inside(a, b):
        return b[0] <= a[0] and a[1] <= b[1] and (a[0], a[1]) != (b[0], b[1])

    return sorted(s for s in spans if not any(inside(s, other) for other in spans))


def _errors(cmd: str, response: dict, body_start: int) -> list[tuple[int, str]]:
    return [
        (offset_of(cmd, m["pos"]["line"], m["pos"]["column"]) - body_start, m["data"])
        for m in response.get("messages", [])
        if m["severity"] == "error"
    ]


def _as_tuples(tactics: list[Tactic]) -> list[tuple[str, int, int]]:
    return [(t.text, t.start, t.end) for t in tactics]


# ----------------------------------------------------------------------------- transcripts


def test_transcripts_have_all_tactics_cases(transcripts_dir):
    """Guards the parametrized tests below against silently finding nothing to compare."""
    assert len(ALL_TACTICS_CASES) >= 4
    assert len(PROOF_CASES) >= 30


@pytest.mark.parametrize("case_id,cmd,request_,response", ALL_TACTICS_CASES, ids=[c[0] for c in ALL_TACTICS_CASES])
def test_outermost_spans_equal_repl_all_tactics(transcripts_dir, case_id, cmd, request_, response):
    body, body_start, column = _body(cmd)
    repl = [(*_span(cmd, t, body_start), t["tactic"]) for t in response["tactics"]]
    expected = _outermost(repl)
    ours = split_tactics(body, start_column=column)
    assert [(t.start, t.end, t.text) for t in ours] == expected
    # Our nested tactics are all real tactics of Lean's info tree.
    repl_spans = {(start, end) for start, end, _ in repl}
    for tactic in split_tactics(body, "all", start_column=column):
        assert (tactic.start, tactic.end) in repl_spans, tactic


@pytest.mark.parametrize("case_id,cmd,request_,response", PROOF_CASES, ids=[c[0] for c in PROOF_CASES])
def test_transcript_proofs_split_consistently(transcripts_dir, case_id, cmd, request_, response):
    body, body_start, column = _body(cmd)
    outer = split_tactics(body, start_column=column)
    every = split_tactics(body, "all", start_column=column)
    for tactic in every:
        assert 0 <= tactic.start < tactic.end <= len(body)
        assert tactic.text == body[tactic.start : tactic.end] == tactic.text.strip()
    assert all(a.end <= b.start for a, b in zip(outer, outer[1:], strict=False))
    assert [(t.start, -t.end) for t in every] == sorted((t.start, -t.end) for t in every)
    assert set(outer) <= set(every)
    assert all(any(o.start <= t.start and t.end <= o.end for o in outer) for t in every)
    # Each tactic-mode `sorry` Lean reports in the body is one of our nested tactics, inside an outer one.
    for sorry in response.get("sorries", []):
        if "pos" not in sorry:
            continue
        start, end = _span(cmd, sorry, body_start)
        if 0 <= start < end:
            assert (start, end) in {(t.start, t.end) for t in every}
            assert sum(o.start <= start and end <= o.end for o in outer) == 1
    assert 0 <= first_error_tactic(outer, _errors(cmd, response, body_start)) <= len(outer)


# Hand-checked against each transcript's source and messages: (outermost tactic texts, first_error_tactic).
TRANSCRIPT_EXPECTATIONS = {
    # `apply Nat.succ` runs; Lean reports "unsolved goals" at the `by`: incomplete, nothing failed.
    "incomplete#0": (["apply Nat.succ"], 1),
    # The unsolved `case pos` is reported inside `{ apply Nat.succ }`, the second tactic.
    "incomplete#1": (["by_cases x", "{ apply Nat.succ }"], 1),
    # "No goals to be solved" at the second `sorry`.
    "no_goal_sorry_2#0": (["sorry", "sorry"], 1),
    # A kernel error reported at the declaration: no tactic can be credited.
    "app_type_mismatch2#0": (["cases 1", "rfl", "have: true := by\n    apply ?succ\n    trivial"], 0),
    "self_proof_check#0": (["exact?"], 0),
    # `sorry` at column 0 is the next command, not part of the proof: no tactics at all.
    "line_breaks#0": ([], 0),
    "line_breaks#1": (["sorry"], 1),
    "line_breaks#2": (["rfl"], 1),
    # The second declaration after the blank line is not part of the first proof.
    "root_goals#0": (["skip", "exact?"], 2),
    "unfinished_tactic_block#0": ([], 0),
    "variables#2": (["sorry"], 1),
    "trace_simp#7": (['trace "!"', "trivial"], 2),
    "all_tactics#0": (["have t := 37", "exact t"], 2),
}


@pytest.mark.parametrize("case_id", sorted(TRANSCRIPT_EXPECTATIONS))
def test_transcript_tactics_and_first_error(transcripts_dir, case_id):
    [(_, cmd, _, response)] = [case for case in PROOF_CASES if case[0] == case_id]
    body, body_start, column = _body(cmd)
    tactics = split_tactics(body, start_column=column)
    texts, first_error = TRANSCRIPT_EXPECTATIONS[case_id]
    assert [t.text for t in tactics] == texts
    assert first_error_tactic(tactics, _errors(cmd, response, body_start)) == first_error
