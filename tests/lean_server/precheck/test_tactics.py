"""Tactic splitting and first-error mapping, checked against the real Lean REPL's transcripts and by hand."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.fake_repl import DEFAULT_TRANSCRIPTS as TRANSCRIPTS
from trl_verigate.lean_server.core.types import Tactic
from trl_verigate.lean_server.precheck.grammar import BLOCK_ENDING_WORDS
from trl_verigate.lean_server.precheck.layout import parse_proof, split_tactics
from trl_verigate.lean_server.precheck.tokens import PrecheckError, tokenize
from trl_verigate.lean_server.verdict.judging import first_error_tactic_of as first_error_tactic

COMMAND_WORDS = BLOCK_ENDING_WORDS - {"#"}


def offset_of(text: str, line: int, column: int) -> int:
    """The offset in `text` of a Lean position (line 1-based, column 0-based in code points); a column past its line's
    end clamps to the line's end (before a "\\r\\n"), a line past the last to `len(text)`."""
    if line < 1:
        raise ValueError(f"offset_of(line=...) is 1-based, got {line}")
    if column < 0:
        raise ValueError(f"offset_of(column=...) is 0-based and >= 0, got {column}")
    lines = text.split("\n")
    if line > len(lines):
        return len(text)
    start = sum(len(previous) + 1 for previous in lines[: line - 1])
    length = len(lines[line - 1]) - lines[line - 1].endswith("\r")
    return start + min(column, length)


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
if not TRANSCRIPTS.is_dir():
    # One placeholder case each, so these tests still ask for `transcripts_dir`, which skips them (fails them when
    # CI is set), instead of pytest skipping an empty parameter set whatever CI says.
    PROOF_CASES = ALL_TACTICS_CASES = [("transcripts-missing", "", {}, {})]


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


# ----------------------------------------------------------------------------- hand-written layout cases


def _spans(proof: str, granularity: str = "outermost", start_column: int = 0) -> list[tuple[str, int, int]]:
    tactics = split_tactics(proof, granularity, start_column=start_column)
    for tactic in tactics:
        assert tactic.text == proof[tactic.start : tactic.end] == tactic.text.strip()
    return _as_tuples(tactics)


def test_indented_block_one_tactic_per_line():
    assert _spans("\n  intro x\n  simp\n") == [("intro x", 3, 10), ("simp", 13, 17)]


def test_body_on_the_by_line():
    assert _spans(" exact h") == [("exact h", 1, 8)]
    assert _spans(" exact h", start_column=30) == [("exact h", 1, 8)]


def test_semicolons_separate_tactics():
    assert _spans(" have t := 37; exact t", start_column=17) == [("have t := 37", 1, 13), ("exact t", 15, 22)]
    # A trailing `;` belongs to no tactic.
    assert _spans("\n  simp;\n  ring") == [("simp", 3, 7), ("ring", 11, 15)]


def test_deeper_lines_continue_the_tactic():
    proof = "\n  rw [foo,\n    bar] at h\n  exact\n    foo\n      bar\n  simp"
    assert _spans(proof) == [
        ("rw [foo,\n    bar] at h", 3, 25),
        ("exact\n    foo\n      bar", 28, 51),
        ("simp", 54, 58),
    ]


def test_brackets_span_lines_at_any_column():
    proof = "\n  nlinarith [sq_nonneg (a - b),\n  sq_nonneg (a + b),\nmul_pos ha hb]\n  done"
    assert _spans(proof) == [
        ("nlinarith [sq_nonneg (a - b),\n  sq_nonneg (a + b),\nmul_pos ha hb]", 3, 68),
        ("done", 71, 75),
    ]


def test_unfinished_line_continues_at_the_block_column():
    # `:=` and a leading `=`/`<;>` need more: Lean's parser reads on whatever the column.
    proof = "\n  have h : a = b :=\n  foo\n  constructor\n  <;> simp\n  done"
    assert _spans(proof) == [("have h : a = b :=\n  foo", 3, 26), ("constructor\n  <;> simp", 29, 51), ("done", 54, 58)]


def test_focus_combinator_is_one_tactic_with_nested_operands():
    proof = "\n  constructor <;> simp; ring"
    assert _spans(proof) == [("constructor <;> simp", 3, 23), ("ring", 25, 29)]
    assert _spans(proof, "all") == [
        ("constructor <;> simp", 3, 23),
        ("constructor", 3, 14),
        ("simp", 19, 23),
        ("ring", 25, 29),
    ]
    # Left-associative: ((a <;> b) <;> c).
    assert _spans(" a <;> b <;> c", "all") == [
        ("a <;> b <;> c", 1, 14),
        ("a <;> b", 1, 8),
        ("a", 1, 2),
        ("b", 7, 8),
        ("c", 13, 14),
    ]


def test_split_focus_list_after_focus_combinator_is_one_tactic():
    # Batteries' `t <;> [t1; t2]` runs t1 on the first goal t made and t2 on the second: the `;` inside the list
    # separates its tactics, not those of the block.
    proof = "\n  constructor <;> [exact hp; exact hq]\n  done"
    assert _spans(proof) == [("constructor <;> [exact hp; exact hq]", 3, 39), ("done", 42, 46)]
    assert _spans(proof, "all") == [
        ("constructor <;> [exact hp; exact hq]", 3, 39),
        ("constructor", 3, 14),
        ("[exact hp; exact hq]", 19, 39),
        ("exact hp", 20, 28),
        ("exact hq", 30, 38),
        ("done", 42, 46),
    ]
    proof = "\n  rcases h with h | h\n  <;> [left; right]\n  <;> linarith"
    assert _spans(proof) == [("rcases h with h | h\n  <;> [left; right]\n  <;> linarith", 3, 57)]
    assert [t for t, _, _ in _spans(proof, "all")] == [
        "rcases h with h | h\n  <;> [left; right]\n  <;> linarith",
        "rcases h with h | h\n  <;> [left; right]",
        "rcases h with h | h",
        "[left; right]",
        "left",
        "right",
        "linarith",
    ]


def test_bullets_with_their_blocks():
    proof = "\n  constructor\n  · intro h\n    simp at h\n    exact h\n  · ring"
    assert _spans(proof) == [
        ("constructor", 3, 14),
        ("· intro h\n    simp at h\n    exact h", 17, 52),
        ("· ring", 55, 61),
    ]
    assert _spans(proof, "all") == [
        ("constructor", 3, 14),
        ("· intro h\n    simp at h\n    exact h", 17, 52),
        ("intro h", 19, 26),
        ("simp at h", 31, 40),
        ("exact h", 45, 52),
        ("· ring", 55, 61),
        ("ring", 57, 61),
    ]
    ascii_bullets = "\n  constructor\n  . simp\n  . exact h.1"
    assert _spans(ascii_bullets) == [("constructor", 3, 14), (". simp", 17, 23), (". exact h.1", 26, 37)]


def test_nested_bullets():
    proof = "\n  · constructor\n    · simp\n    · ring\n  · rfl"
    assert _spans(proof) == [("· constructor\n    · simp\n    · ring", 3, 38), ("· rfl", 41, 46)]
    assert [t for t, _, _ in _spans(proof, "all")] == [
        "· constructor\n    · simp\n    · ring",
        "constructor",
        "· simp",
        "simp",
        "· ring",
        "ring",
        "· rfl",
        "rfl",
    ]


def test_case_and_next_blocks():
    proof = "\n  cases h\n  case inl h =>\n    simp\n    exact h\n  next h => ring"
    assert _spans(proof) == [
        ("cases h", 3, 10),
        ("case inl h =>\n    simp\n    exact h", 13, 47),
        ("next h => ring", 50, 64),
    ]
    assert [t for t, _, _ in _spans(proof, "all")][2:] == ["simp", "exact h", "next h => ring", "ring"]


def test_first_alternatives():
    one_line = "\n  first | simp | ring\n  done"
    assert _spans(one_line) == [("first | simp | ring", 3, 22), ("done", 25, 29)]
    assert _spans(one_line, "all") == [
        ("first | simp | ring", 3, 22),
        ("simp", 11, 15),
        ("ring", 18, 22),
        ("done", 25, 29),
    ]
    multi_line = "\n  first\n  | simp; ring\n  | linarith\n  done"
    assert [t for t, _, _ in _spans(multi_line)] == ["first\n  | simp; ring\n  | linarith", "done"]
    assert [t for t, _, _ in _spans(multi_line, "all")][1:4] == ["simp", "ring", "linarith"]


def test_sequence_combinators_take_the_rest_of_the_sequence():
    # Lean parses `try simp; ring` as `try (simp; ring)`.
    assert _spans("\n  try simp; ring\n  done") == [("try simp; ring", 3, 17), ("done", 20, 24)]
    proof = "\n  all_goals\n    simp\n    ring\n  repeat rw [h]\n  iterate 2 constructor"
    assert [t for t, _, _ in _spans(proof)] == [
        "all_goals\n    simp\n    ring",
        "repeat rw [h]",
        "iterate 2 constructor",
    ]
    assert [t for t, _, _ in _spans(proof, "all")] == [
        "all_goals\n    simp\n    ring",
        "simp",
        "ring",
        "repeat rw [h]",
        "rw [h]",
        "iterate 2 constructor",
        "constructor",
    ]


def test_match_and_induction_alternatives():
    proof = "\n  induction n with\n  | zero => simp\n  | succ n ih =>\n    rw [pow_succ]\n    omega\n  done"
    assert [t for t, _, _ in _spans(proof)] == [
        "induction n with\n  | zero => simp\n  | succ n ih =>\n    rw [pow_succ]\n    omega",
        "done",
    ]
    assert [t for t, _, _ in _spans(proof, "all")][1:] == ["simp", "rw [pow_succ]", "omega", "done"]
    # A term-level `fun ... =>` inside an alternative is not a tactic block.
    rcases = "\n  match h with\n  | .inl x => exact fun y => y\n  | .inr |x| => simp"
    assert [t for t, _, _ in _spans(rcases, "all")] == [rcases.strip(), "exact fun y => y", "simp"]


def test_calc_steps_belong_to_calc():
    proof = "\n  calc a = b := by simp\n    _ = c := by\n      ring\n    _ = d := h\n  linarith"
    assert _spans(proof) == [
        ("calc a = b := by simp\n    _ = c := by\n      ring\n    _ = d := h", 3, 66),
        ("linarith", 69, 77),
    ]
    assert [t for t, _, _ in _spans(proof, "all")] == [
        "calc a = b := by simp\n    _ = c := by\n      ring\n    _ = d := h",
        "simp",
        "ring",
        "linarith",
    ]
    # Steps at the block column are steps when the first of them is there too.
    assert [t for t, _, _ in _spans("\n  calc a = b := h1\n  _ = c := h2\n  _ = d := h3\n  simp")] == [
        "calc a = b := h1\n  _ = c := h2\n  _ = d := h3",
        "simp",
    ]
    # Steps left of a `calc` that starts on the `by` line are still steps (as in the calc transcript).
    on_by_line = " calc\n  3 = 4 := by sorry\n  4 = 5 := by sorry"
    assert [t for t, _, _ in _spans(on_by_line, "all", start_column=21)] == [on_by_line.strip(), "sorry", "sorry"]


def test_a_calc_step_is_never_left_of_the_first_step_or_the_block():
    # Lean saves the first later step's column and reads further steps only at or right of it.
    assert [t for t, _, _ in _spans("\n  calc a = b := h1\n    _ = c := h2\n  _ = d := h3")] == [
        "calc a = b := h1\n    _ = c := h2",
        "_ = d := h3",
    ]
    assert [t for t, _, _ in _spans("\n  calc a = b := h1\n    _ = c := h2\n  intro x; have h := foo")] == [
        "calc a = b := h1\n    _ = c := h2",
        "intro x",
        "have h := foo",
    ]
    # Left of the block it is a command to Lean, `:=` or not.
    dedented = (
        "\n    calc a = b := h1\n      _ = c := h2\n  recall Nat.add_comm (n m : ℕ) : n + m = m + n := Nat.add_comm n m"
    )
    assert [t for t, _, _ in _spans(dedented)] == ["calc a = b := h1\n      _ = c := h2"]
    assert [t for t, _, _ in _spans("\n    calc a = b := h1\n  foo x : y := z")] == ["calc a = b := h1"]


def test_nested_by_blocks():
    proof = "\n  have h : x = 1 := by\n    simp\n    ring\n  suffices h2 : y = 2 by simp\n  show y = 2 from h2"
    assert _spans(proof) == [
        ("have h : x = 1 := by\n    simp\n    ring", 3, 41),
        ("suffices h2 : y = 2 by simp", 44, 71),
        ("show y = 2 from h2", 74, 92),
    ]
    assert [t for t, _, _ in _spans(proof, "all")][1:3] == ["simp", "ring"]
    # A nested block on the same line swallows `; exact h`, exactly as Lean parses it.
    assert _spans("\n  have h := by simp; exact h\n  linarith", "all") == [
        ("have h := by simp; exact h", 3, 29),
        ("simp", 16, 20),
        ("exact h", 22, 29),
        ("linarith", 32, 40),
    ]
    # A `by` block must be indented past its tactic's column: here `exact h` is the next outer tactic.
    assert [t for t, _, _ in _spans("\n  have h : P := by\n  exact h")] == ["have h : P := by", "exact h"]


def test_term_brackets_hold_their_by_blocks_and_tactic_blocks():
    proof = "\n  refine ⟨by simp, fun x => by ring⟩\n  (simp; ring)\n  { omega }"
    assert _spans(proof, "all") == [
        ("refine ⟨by simp, fun x => by ring⟩", 3, 37),
        ("simp", 14, 18),
        ("ring", 32, 36),
        ("(simp; ring)", 40, 52),
        ("simp", 41, 45),
        ("ring", 47, 51),
        ("{ omega }", 55, 64),
        ("omega", 57, 62),
    ]


def test_conv_and_on_goal_blocks():
    proof = "\n  conv => lhs; rw [h]\n  on_goal 2 => simp"
    assert [t for t, _, _ in _spans(proof, "all")] == [
        "conv => lhs; rw [h]",
        "lhs",
        "rw [h]",
        "on_goal 2 => simp",
        "simp",
    ]


def test_comments_are_skipped_and_never_part_of_a_span():
    proof = (
        "\n  -- first we simplify; by the way\n"
        "  simp -- trailing; comment\n"
        "  /- a block /- nested; -/\n  by still comment -/\n"
        "  ring\n"
        "  /-- doc -/"
    )
    assert [t for t, _, _ in _spans(proof)] == ["simp", "ring"]
    # A comment between the lines of one tactic does not split it.
    assert [t for t, _, _ in _spans("\n  rw [a, -- why\n    b]\n  simp")] == ["rw [a, -- why\n    b]", "simp"]
    # An unterminated block comment runs to the end.
    assert [t for t, _, _ in _spans("\n  simp\n  /- ring\n  done")] == ["simp"]


def test_string_and_char_literals_are_skipped():
    proof = "\n  trace \"a; b -- not a comment\n  by\"\n  exact ';'\n  simp"
    assert [t for t, _, _ in _spans(proof)] == ['trace "a; b -- not a comment\n  by"', "exact ';'", "simp"]


def test_raw_strings_and_multi_line_escaped_names_are_single_tokens():
    # Lean ends `r#"…"#` only at `"#` and lets `«…»` span lines; either read wrongly would hide or invent a line.
    assert [t for t, _, _ in _spans('\n  have s := r#"a " b"#\n  skip')] == ['have s := r#"a " b"#', "skip"]
    assert [t for t, _, _ in _spans('\n  have s := r##"a "# ( "##\n  skip')] == ['have s := r##"a "# ( "##', "skip"]
    assert [t for t, _, _ in _spans('\n  have s := r"a"\n  skip')] == ['have s := r"a"', "skip"]


@pytest.mark.parametrize("word", sorted(COMMAND_WORDS))
def test_every_command_word_starting_a_line_ends_the_block(word):
    assert [t for t, _, _ in _spans(f"\n  simp\n  {word} x")] == ["simp"]


@pytest.mark.parametrize("operator", ["<->", "↔", "⊂", "⊆", "∧", "="])
def test_a_line_starting_with_an_infix_operator_continues_the_tactic(operator):
    assert [t for t, _, _ in _spans(f"\n  have h : p\n  {operator} q := x\n  simp")] == [
        f"have h : p\n  {operator} q := x",
        "simp",
    ]


def test_a_location_or_only_ends_nothing_that_is_finished():
    # `at *` and `at h ⊢` are complete locations and `simp only` a complete simp: the next line is the next tactic.
    assert [t for t, _, _ in _spans("\n  norm_num at *\n  linarith")] == ["norm_num at *", "linarith"]
    assert [t for t, _, _ in _spans("\n  simp at h ⊢\n  linarith")] == ["simp at h ⊢", "linarith"]
    assert [t for t, _, _ in _spans("\n  simp only\n  norm_num")] == ["simp only", "norm_num"]
    # `only` still takes its lemma list from the next line, and `*` between terms is still multiplication.
    assert [t for t, _, _ in _spans("\n  simp only\n  [h]\n  norm_num")] == ["simp only\n  [h]", "norm_num"]
    assert [t for t, _, _ in _spans("\n  have h : x = y *\n  z := foo\n  simp")] == [
        "have h : x = y *\n  z := foo",
        "simp",
    ]


def test_no_continuation_reaches_a_line_left_of_the_block():
    # Lean ends the block at a line left of its column; an unfinished-looking tactic does not change that.
    for proof in ["\n    simp at *\n  linarith", "\n    exact\n  h", "\n    simp only\n  [h]", "\n    rw [h] at\n  h"]:
        assert [t for t, _, _ in _spans(proof)] == [proof.split("\n")[1].strip()], proof
    # A line no command starts with is read on: Lean either continues the tactic there or fails to parse it.
    assert [t for t, _, _ in _spans("\n    nlinarith\n  <;> simp")] == ["nlinarith\n  <;> simp"]
    # Only a `calc` whose first step sits on the next line, left of the block, is read on there (calc transcript).
    assert [t for t, _, _ in _spans(" calc\n  3 = 4 := h\n  4 = 5 := h", start_column=21)] == [
        "calc\n  3 = 4 := h\n  4 = 5 := h"
    ]


def test_layout_ends_the_proof():
    # Column 0 is the declaration's column: a line there is the next command, not a tactic.
    assert _spans("\nsimp") == []
    assert _spans("\n  simp\ntheorem foo : True := trivial") == [("simp", 3, 7)]
    # A body starting on the `by` line sets the block column there; a later line left of it ends the block.
    assert _spans(" intro x\n  simp", start_column=21) == [("intro x", 1, 8)]
    assert _spans(" intro x\n                      simp", start_column=21) == [("intro x", 1, 8), ("simp", 31, 35)]


def test_empty_and_comment_only_proofs():
    assert _spans("") == []
    assert _spans("  \n\n  ") == []
    assert _spans("\n  -- nothing here\n  /- nor here -/") == []


def test_unicode_offsets_are_code_points():
    proof = "\n  intro x hx\n  have h₁ : √(x ^ 2) = |x| := by\n    simp [π]\n  · exact ⟨fun n : ℕ => n, by simp⟩ -- ∀ ⊢"
    assert _spans(proof) == [
        ("intro x hx", 3, 13),
        ("have h₁ : √(x ^ 2) = |x| := by\n    simp [π]", 16, 59),
        ("· exact ⟨fun n : ℕ => n, by simp⟩", 62, 95),
    ]
    assert proof[16] == "h" and proof[58] == "]" and proof[94] == "⟩"
    assert [t for t, _, _ in _spans(proof, "all")] == [
        "intro x hx",
        "have h₁ : √(x ^ 2) = |x| := by\n    simp [π]",
        "simp [π]",
        "· exact ⟨fun n : ℕ => n, by simp⟩",
        "exact ⟨fun n : ℕ => n, by simp⟩",
        "simp",
    ]


def test_crlf_line_endings():
    proof = "\r\n  intro x\r\n  simp\r\n  · ring\r\n"
    assert _spans(proof) == [("intro x", 4, 11), ("simp", 15, 19), ("· ring", 23, 29)]


def test_tabs_count_as_one_column_like_lean_positions():
    assert _spans("\n\tintro x\n\tsimp") == [("intro x", 2, 9), ("simp", 11, 15)]
    # Two tabs and two spaces are the same column for Lean's layout.
    assert _spans("\n  intro x\n\t\tsimp") == [("intro x", 3, 10), ("simp", 13, 17)]
    assert _spans("\n  intro x\n\t\t\tsimp") == [("intro x\n\t\t\tsimp", 3, 18)]


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="granularity"):
        split_tactics("\n  simp", "inner")
    with pytest.raises(ValueError, match="start_column"):
        split_tactics("\n  simp", start_column=-1)
    with pytest.raises(TypeError, match="proof"):
        split_tactics(None)


def test_thousand_line_proof_splits_fully():
    block = "  have h{i} : a{i} + b = b + a{i} := by\n    rw [Nat.add_comm] -- swap\n  · nlinarith [sq_nonneg (a - b), h{i}]\n"
    proof = "\n" + "".join(block.format(i=i) for i in range(334))
    tactics = split_tactics(proof)
    assert len(tactics) == 668
    assert tactics[-1].text == "· nlinarith [sq_nonneg (a - b), h333]"
    assert len(split_tactics(proof, "all")) == 668 * 2


# ----------------------------------------------------------------------------- offset_of


def test_offset_of_lines_and_columns():
    text = "ab\ncd"
    assert offset_of(text, 1, 0) == 0
    assert offset_of(text, 1, 2) == 2
    assert offset_of(text, 2, 1) == 4
    # Past the end of a line: the line's end; past the last line: the end of the text.
    assert offset_of(text, 1, 9) == 2
    assert offset_of(text, 2, 9) == 5
    assert offset_of(text, 7, 0) == 5


def test_offset_of_counts_code_points():
    text = "∀ x : ℕ, x = x\n  ⊢ π 𝔽"
    assert offset_of(text, 2, 2) == 17 and text[17] == "⊢"
    assert text[offset_of(text, 2, 4)] == "π"
    assert text[offset_of(text, 2, 6)] == "𝔽"


def test_offset_of_crlf():
    text = "ab\r\ncd"
    assert offset_of(text, 1, 5) == 2
    assert offset_of(text, 2, 0) == 4


def test_offset_of_rejects_bad_positions():
    with pytest.raises(ValueError, match="line"):
        offset_of("ab", 0, 0)
    with pytest.raises(ValueError, match="column"):
        offset_of("ab", 1, -1)


# ----------------------------------------------------------------------------- first_error_tactic

THREE = "\n  intro x\n  simp\n  ring"  # tactics at [3, 10), [13, 17), [20, 24)


def test_no_errors_means_every_tactic_ran():
    tactics = split_tactics(THREE)
    assert first_error_tactic(tactics, []) == 3


def test_unsolved_goals_at_the_by_means_incomplete():
    tactics = split_tactics(THREE)
    assert first_error_tactic(tactics, [(-2, "unsolved goals\nx : ℕ\n⊢ x = x")]) == 3


def test_unsolved_goals_next_to_another_error_before_the_body_credits_nothing():
    tactics = split_tactics(THREE)
    # A statement error plus the resulting "unsolved goals" at the `by`: the declaration itself is broken.
    assert first_error_tactic(tactics, [(-30, "unknown identifier 'foo'"), (-2, "unsolved goals\n⊢ False")]) == 0
    assert first_error_tactic(tactics, [(-2, "unsolved goals\n⊢ False"), (-30, "type mismatch")]) == 0
    # Several "unsolved goals" (one per unfinished case) still mean only that the proof is incomplete.
    assert first_error_tactic(tactics, [(-2, "unsolved goals\ncase a"), (-2, "unsolved goals\ncase b")]) == 3


def test_error_inside_a_tactic_names_it():
    tactics = split_tactics(THREE)
    assert first_error_tactic(tactics, [(20, "ring failed")]) == 2
    assert first_error_tactic(tactics, [(13, "simp made no progress")]) == 1
    # The earliest error wins, and an error in the body beats "unsolved goals" at the `by`.
    assert first_error_tactic(tactics, [(-2, "unsolved goals\n⊢ False"), (21, "x"), (14, "y")]) == 1


def test_error_before_the_proof_credits_nothing():
    tactics = split_tactics(THREE)
    assert first_error_tactic(tactics, [(-40, "(kernel) declaration has metavariables")]) == 0


def test_errors_between_and_after_tactics():
    tactics = split_tactics(THREE)
    assert first_error_tactic(tactics, [(11, "in whitespace")]) == 1
    assert first_error_tactic(tactics, [(0, "before the first tactic")]) == 0
    assert first_error_tactic(tactics, [(24, "unexpected end of input")]) == 2
    assert first_error_tactic(tactics, [(99, "far after")]) == 2


def test_failing_nested_have_blames_the_outer_have():
    proof = "\n  intro x\n  have h : x = 1 := by\n    simp\n    omega\n  exact h"
    outer = split_tactics(proof)
    omega = proof.index("omega")
    assert first_error_tactic(outer, [(omega, "omega could not prove the goal")]) == 1
    # With nested tactics listed, the outer `have` (first containing span) is still the one named,
    # so every tactic listed before it lies entirely before the error.
    every = split_tactics(proof, "all")
    index = first_error_tactic(every, [(omega, "omega could not prove the goal")])
    assert every[index].text.startswith("have h")
    assert all(t.end <= omega for t in every[:index])


def test_no_tactics():
    assert first_error_tactic([], []) == 0
    assert first_error_tactic([], [(3, "unexpected token")]) == 0
    assert first_error_tactic([], [(-1, "unsolved goals\n⊢ True")]) == 0


def test_first_error_tactic_with_hand_built_tactics():
    tactics = [Tactic("a", 0, 1), Tactic("bb", 5, 7)]
    assert first_error_tactic(tactics, [(6, "e")]) == 1
    assert first_error_tactic(tactics, [(3, "e")]) == 1


# ----------------------------------------------------------------------------- hostile input


def test_deep_nesting_does_not_exhaust_the_stack():
    # Untrusted proofs: every one of these would recurse thousands of levels if nesting were unbounded. Blocks nested
    # deeper than MAX_NESTING are not split (the precheck refuses them).
    assert split_tactics(" by" * 3000) == []
    chained = "\n  " + "have h := by simp; " * 2000
    # Each `by` block swallows the `; have …` after it, as in Lean: 2000 levels, past MAX_NESTING.
    assert split_tactics(chained) == []
    assert [t.text for t in split_tactics("\n  " + "have h := by simp; " * 30)] == [
        ("have h := by simp; " * 30).strip()
    ]
    assert split_tactics("\n  " + "· " * 3000 + "simp", "all") == []
    assert split_tactics("\n  " + "(" * 3000 + "simp") == []

    # `t <;> t <;> …` nests one node per `<;>`; flattening it for "all" must not recurse that deep either.
    chain = split_tactics("\n  " + " <;> ".join(["simp"] * 5000), "all")
    assert len(chain) == 4999 + 5000  # a node per `<;>` (the last one is the whole chain), one per `simp`


def _layout(proof: str) -> tuple[list[str], str | None, list[str]]:
    """(outermost tactic texts, suffix text or None, the suffix keywords as written) of a proof body."""
    layout = parse_proof(tokenize(proof))
    tokens = layout.tokens
    suffix = None
    if layout.suffix is not None:
        suffix = proof[tokens[layout.suffix[0]].start : tokens[layout.suffix[1] - 1].end]
    keywords = [tokens[k].text for k in sorted(layout.clause_keywords)]
    tactics = layout.outermost_tactics(proof)
    assert split_tactics(proof) == tactics
    return [t.text for t in tactics], suffix, keywords


WHERE_CLAUSE = (
    "where\n  aux (k : ℕ) : f k = k := by\n    induction k with\n    | zero => rfl\n    | succ j ih => simp [ih]"
)


def test_a_where_clause_is_the_suffix_after_the_tactic_block():
    # Lean's `declValSimple`: `:= declBody Termination.suffix (whereDecls)?`; `where` ends the tactic block at any
    # column, and its declarations are no tactics of the proof.
    for where in (WHERE_CLAUSE, "  " + WHERE_CLAUSE.replace("\n", "\n  ")):
        assert _layout(f"\n  exact aux n\n{where}") == (["exact aux n"], where.strip(), ["where"])
    two = "where\n  a : True := trivial\n  b (n : ℕ) :\n  n = n := rfl\n  c : True := by\n    trivial"
    assert _layout(f"\n  exact a\n{two}") == (["exact a"], two, ["where"])
    on_one_line = "where a : True := trivial; b : True := trivial"
    assert _layout(f"\n  exact a {on_one_line}") == (["exact a"], on_one_line, ["where"])


def test_termination_hints_after_the_block_and_in_where_declarations():
    hints = "termination_by n\ndecreasing_by\n  simp_wf\n  omega"
    proof = f"\n  cases n\n  · simp\n  · exact t k\n{hints}"
    assert _layout(proof) == (["cases n", "· simp", "· exact t k"], hints, ["termination_by", "decreasing_by"])
    clause = "where\n  aux : ℕ → ℕ\n    | 0 => 0\n    | n + 1 => aux n\n  termination_by n => n\n  decreasing_by omega"
    assert _layout(f"\n  exact aux 3\n{clause}") == (
        ["exact aux 3"],
        clause,
        ["where", "termination_by", "decreasing_by"],
    )
    both = "termination_by? n\nwhere\n  a : True := trivial"
    assert _layout(f"\n  exact a\n{both}") == (["exact a"], both, ["termination_by?", "where"])


def test_let_rec_hints_belong_to_the_let_rec_tactic():
    # `letRecDecl` ends in `Termination.suffix`, which checks no column: the hints continue the `let rec` tactic
    # even at the block's column, and the next tactic follows at that column.
    let_rec = "let rec go : ℕ → ℕ\n    | 0 => 0\n    | n + 1 => go n\n  termination_by n => n\n  decreasing_by omega"
    assert _layout(f"\n  {let_rec}\n  exact go 3") == (
        [let_rec, "exact go 3"],
        None,
        ["termination_by", "decreasing_by"],
    )
    # A plain `let` or `have` takes no hints: the block ends there and the hints are the theorem's.
    assert _layout("\n  have h := 1\n  termination_by n") == (["have h := 1"], "termination_by n", ["termination_by"])


@pytest.mark.parametrize(
    "after",
    [
        "#eval IO.println 1",
        "theorem x : True := trivial",
        "axiom ax : False",
        "foo bar",  # dedented code: a command to Lean
        "@[simp] b : True := trivial",  # not a declaration the clause reads (`@[` is refused anyway)
    ],
)
def test_a_where_clause_ends_where_lean_ends_it(after):
    # What follows the clause at column 0 (or cannot start a declaration at its column) is a command to Lean: it is
    # outside both the tactics and the suffix, so the precheck refuses it as code outside the tactic block.
    clause = "where\n  a : True := trivial"
    for indent in ("", "  "):
        proof = f"\n  exact a\n{clause}\n{indent}{after}"
        if indent and after == "foo bar":
            # At the declarations' column a name starts the next declaration, to Lean as here (which then fails
            # to parse it: no `:=`).
            assert _layout(proof) == (["exact a"], f"{clause}\n  foo bar", ["where"])
            continue
        assert _layout(proof) == (["exact a"], clause, ["where"]), proof


def test_where_in_a_literal_or_comment_or_no_clause_is_no_keyword():
    assert _layout('\n  exact "where"\n  simp') == (['exact "where"', "simp"], None, [])
    assert _layout("\n  simp -- where\n  /- termination_by -/\n  simp") == (["simp", "simp"], None, [])
    # No tactic before it: Lean's `by` needs one, so nothing is read as a suffix.
    assert _layout("\nwhere\n  a : True := trivial") == ([], None, [])
    # Declarations at column 0, or starting with a keyword, are not read: the clause then holds `where` alone.
    assert _layout("\n  exact a\nwhere\na : True := trivial") == (["exact a"], "where", ["where"])
    assert _layout("\n  exact a\nwhere\n  theorem a : True := trivial") == (["exact a"], "where", ["where"])
    # A suffix keyword inside brackets is no suffix: the tactic goes on (Lean fails to parse it).
    assert _layout("\n  simp [h, where]") == (["simp [h, where]"], None, [])


_FRAGMENTS = [
    "simp",
    "ring",
    "exact h",
    "intro x",
    ";",
    " <;> ",
    "\n  ",
    "\n    ",
    "\n",
    "\n  · ",
    "· ",
    "by ",
    ":= by",
    "have h : a = b ",
    "(",
    ")",
    "[",
    "]",
    "⟨",
    "⟩",
    ", ",
    " | ",
    "|x|",
    " => ",
    "first ",
    "try ",
    "case inl => ",
    "calc ",
    "_ = c := ",
    "-- c\n",
    "/- c -/",
    "/-",
    '"s;"',
    "'x'",
    "ℕ",
    "√π",
    "\r\n  ",
    "\t",
    "fun y => ",
    "match h with ",
    "theorem ",
]


def test_random_proofs_keep_the_span_invariants():
    import random

    rng = random.Random(1234)
    for _ in range(2000):
        proof = "".join(rng.choice(_FRAGMENTS) for _ in range(rng.randrange(1, 25)))
        column = rng.choice([0, 0, 25])
        outer = split_tactics(proof, start_column=column)
        every = split_tactics(proof, "all", start_column=column)
        for tactic in every:
            assert 0 <= tactic.start < tactic.end <= len(proof), proof
            assert tactic.text == proof[tactic.start : tactic.end] == tactic.text.strip(), proof
        assert all(a.end <= b.start for a, b in zip(outer, outer[1:], strict=False)), proof
        assert set(outer) <= set(every), proof
        assert [(t.start, -t.end) for t in every] == sorted((t.start, -t.end) for t in every), proof
        assert all(any(o.start <= t.start and t.end <= o.end for o in outer) for t in every), proof
        offsets = [rng.randrange(-5, len(proof) + 5) for _ in range(3)]
        index = first_error_tactic(outer, [(offset, "error") for offset in offsets])
        assert 0 <= index <= len(outer)


def test_block_and_line_comments_of_equal_length_split_the_same():
    # A comment is skipped whatever its kind: a block comment and a line comment of equal length split alike.
    template = "\n  intro x {c}\n  have h : x = 1 := by\n    simp [ℕ] {c}\n  · exact ⟨h, by ring⟩\n  {c}\n  omega"
    with_line = template.replace("{c}", "-- note;   \n  ")
    with_block = template.replace("{c}", "/- note; -/\n  ")
    assert len(with_line) == len(with_block)
    for granularity in ("outermost", "all"):
        assert _spans(with_line, granularity) == _spans(with_block, granularity)
    assert [t for t, _, _ in _spans(with_block)] == [
        "intro x",
        "have h : x = 1 := by\n    simp [ℕ]",
        "· exact ⟨h, by ring⟩",
        "omega",
    ]


def test_token_columns_are_code_points_from_the_line_start():
    """Each token's column, counted back to the last line break (or from `start_column` on the first line), and
    whether it is the first token on its line, on random proofs with strings and comments that hold line breaks."""
    import random

    pieces = [" ", "  ", "\n", "\n  ", "·", "simp", "h₀", "(", "))))", '"a\nb"', "/- c\n -/", "-- c\n", ":="]
    rng = random.Random(11)
    checked = 0
    for _ in range(2000):
        proof = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 16)))
        try:
            tokens = tokenize(proof, 5)
        except PrecheckError:  # a comment glued to `:=`: refused, not read
            continue
        for k, token in enumerate(tokens):
            newline = proof.rfind("\n", 0, token.start)
            assert token.column == (token.start - newline - 1 if newline >= 0 else token.start + 5), proof
            assert token.line_start == (k == 0 or "\n" in proof[tokens[k - 1].end : token.start]), proof
            checked += 1
    assert checked > 10000
