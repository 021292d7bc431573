"""The verdict: `prepare` (what is sent to Lean) and the judgement of REPL answers (`judge`)."""

import json

import pytest

from tests.lean_helpers import FILE, prepare
from trl_verigate.lean_server.core.types import (
    MINIF2F_HEADER,
    FileRequest,
    LeanServerConfig,
    Position,
    ProofRequest,
    VerificationResult,
)
from trl_verigate.lean_server.precheck.prepared import EXAMPLE_NAME, Prepared
from trl_verigate.lean_server.verdict import judging
from trl_verigate.lean_server.verdict.judging import is_axioms_answer, judge, parse_axioms_message

CONFIG = LeanServerConfig()
# The header's imports only: no preamble lines before the statement, so a REPL line is the submitted line.
IMPORTS = "import Mathlib\nimport Aesop"


def prepare_proof(request, header=IMPORTS, **settings):
    return prepare(request, IMPORTS if header == MINIF2F_HEADER else header, **settings)


NATIVE = LeanServerConfig(
    allow_native_decide=True, axiom_whitelist=CONFIG.axiom_whitelist + ("Lean.ofReduceBool", "Lean.trustCompiler")
)
CLEAN_AXIOMS = ["propext", "Classical.choice", "Quot.sound"]


def test_prepared_code_appends_print_axioms_two_lines_after_the_proof():
    prepared = prepare_proof(ProofRequest("theorem foo : 1 = 1 := by", "  rfl"), "import Mathlib")
    assert prepared.code == "theorem foo : 1 = 1 := by\n  rfl\n\n#print axioms foo"
    assert (prepared.proof_start, prepared.theorem_name, prepared.line_offset) == (26, "foo", 0)
    assert prepared.print_line == 4


def test_a_request_header_overrides_the_default_header():
    prepared = prepare_proof(ProofRequest("theorem foo : 1 = 1 := by", "  rfl", header="import Lean"), MINIF2F_HEADER)
    assert prepared.header == "import Lean"


T = "theorem t : 2 + 2 = 5 := by"


def test_bad_arguments_name_the_argument():
    with pytest.raises(TypeError, match="request"):
        prepare(42, MINIF2F_HEADER)
    with pytest.raises(TypeError, match="default_header"):
        prepare_proof(ProofRequest(T, "  rfl"), None)
    with pytest.raises(TypeError, match="ProofRequest.proof"):
        prepare_proof(ProofRequest(T, None), MINIF2F_HEADER)


def test_a_file_request_is_prepared_like_the_same_file_sent_as_a_str():
    assert prepare(FileRequest(FILE), MINIF2F_HEADER) == prepare(FILE, MINIF2F_HEADER)
    rejected = prepare(FileRequest("import Mathlib\ntheorem t : 1 = 1 := by sorry"), MINIF2F_HEADER)
    assert rejected.status == "rejected" and "line 2" in rejected.reason, rejected.reason
    with pytest.raises(TypeError, match="FileRequest.file"):
        prepare(FileRequest(None), MINIF2F_HEADER)


def test_file_request_messages_are_in_file_coordinates():
    prepared = prepare(FILE, MINIF2F_HEADER)
    # REPL line 4 is `  rfl` (line 1 of the body is blank, 2 the docstring, 3 the theorem).
    response = {
        "messages": [
            {
                "severity": "error",
                "pos": {"line": 5, "column": 2},
                "endPos": {"line": 5, "column": 5},
                "data": "The rfl tactic failed",
            },
            axioms_message(prepared, CLEAN_AXIOMS),
        ],
        "env": 1,
    }
    result = judge(prepared, response, CONFIG, 0.5)
    assert FILE.split("\n")[8] == "  rfl"
    assert [(m.line, m.column, m.end) for m in result.messages] == [(9, 2, Position(9, 5))]
    assert result.status == "failed" and result.first_error_tactic == 1


# ------------------------------------------------------------ judge


def axioms_message(prepared: Prepared, axioms: list[str], name: str | None = None, line=None, column=0) -> dict:
    name = name or prepared.theorem_name
    text = f"'{name}' depends on axioms: [{', '.join(axioms)}]" if axioms else f"'{name}' does not depend on any axioms"
    line = prepared.print_line if line is None else line
    return {
        "severity": "info",
        "pos": {"line": line, "column": column},
        "endPos": {"line": line, "column": 6},
        "data": text,
    }


def hand_prepared(cmd: str, name: str) -> Prepared:
    """A Prepared whose code starts with a recorded transcript command verbatim (so its positions apply).

    The recorded commands use `sorry`, which `prepare` would reject, so it is built by hand: the statement runs
    through `:= by` (or `:=` for term-mode proofs) and the proof is the rest, on the same line.
    """
    cut = cmd.index(":= by") + len(":= by") if ":= by" in cmd else cmd.index(":=") + len(":=")
    return Prepared(
        header="",
        code=cmd + f"\n\n#print axioms {name}",
        proof=cmd[cut:],
        proof_start=cut,
        theorem_name=name,
        line_offset=0,
        statement=cmd[:cut],
        separator="",
    )


def transcript(transcripts_dir, name: str) -> list[tuple[dict, dict]]:
    def blocks(path):
        return [json.loads(b, strict=False) for b in path.read_text(encoding="utf-8").split("\n\n") if b.strip()]

    return list(
        zip(blocks(transcripts_dir / f"{name}.in"), blocks(transcripts_dir / f"{name}.expected.out"), strict=True)
    )


def test_judge_fails_a_tactic_sorry_and_blames_the_sorry(transcripts_dir):
    (request, response), *_ = transcript(transcripts_dir, "tactic_sorry")
    prepared = hand_prepared(request["cmd"], "f")
    response = dict(response, messages=response["messages"] + [axioms_message(prepared, ["sorryAx"])])
    result = judge(prepared, response, CONFIG, 1.0)
    assert result.status == "failed" and not result.passed
    assert result.reason == "uses sorry"
    assert [t.text for t in result.tactics] == ["sorry"]
    assert result.first_error_tactic == 0
    assert [(m.severity, m.line, m.column, m.end, m.text) for m in result.messages] == [
        ("warning", 1, 4, Position(1, 5), "declaration uses `sorry`")
    ]
    assert result.axioms == ["sorryAx"] and result.time_s == 1.0


def test_judge_fails_term_mode_sorries_even_without_an_axioms_answer(transcripts_dir):
    for request, response in transcript(transcripts_dir, "dup_sorries"):
        prepared = hand_prepared(request["cmd"], request["cmd"].split()[1])
        result = judge(prepared, response, CONFIG, 0.0)
        assert result.status == "failed" and result.reason == "uses sorry"
        assert result.messages[0].column == 8


def test_judge_on_an_incomplete_proof_credits_every_tactic(transcripts_dir):
    (first_request, first), (second_request, second) = transcript(transcripts_dir, "incomplete")
    prepared = hand_prepared(first_request["cmd"], "f")
    result = judge(prepared, first, CONFIG, 0.0)
    # "unsolved goals" at the `by`, before the body: every tactic ran, the proof is incomplete.
    assert result.status == "failed" and result.reason.startswith("error at line 1, column 15: unsolved goals")
    assert result.first_error_tactic == len(result.tactics) == 1
    assert result.messages[0].end == Position(1, 32)

    prepared = hand_prepared(second_request["cmd"], "f")
    result = judge(prepared, second, CONFIG, 0.0)
    # The earliest error inside the body is in the `{ apply Nat.succ }` block, the second tactic.
    assert [t.text for t in result.tactics] == ["by_cases x", "{ apply Nat.succ }"]
    assert result.first_error_tactic == 1
    assert [(m.line, m.column) for m in result.messages] == [(3, 19), (1, 26)]


def test_judge_blames_the_tactic_holding_a_nested_sorry(transcripts_dir):
    (request, response), *_ = transcript(transcripts_dir, "have_by_sorry")
    prepared = hand_prepared(request["cmd"], "foo")
    result = judge(prepared, response, CONFIG, 0.0)
    assert result.status == "failed"
    assert result.first_error_tactic == 0 and len(result.tactics) == 1


def test_judge_reports_repl_error_objects_as_errors(transcripts_dir):
    (request, response), *_ = transcript(transcripts_dir, "unknown_environment")
    assert response == {"message": "Unknown environment."}
    result = judge(hand_prepared(request["cmd"], "f"), response, CONFIG, 0.2)
    assert result.status == "error" and not result.passed
    assert result.reason == "Unknown environment."
    _, (request, response) = transcript(transcripts_dir, "unknown_tactic")
    result = judge(hand_prepared("def f : Nat := by exat 42", "f"), response, CONFIG, 0.0)
    assert result.status == "error" and "unknown tactic" in result.reason


def test_judge_uses_invalid_tactic_transcript_as_failed(transcripts_dir):
    (request, response), *_ = transcript(transcripts_dir, "invalid_tactic")
    result = judge(hand_prepared(request["cmd"], "my_theorem"), response, CONFIG, 0.0)
    assert result.status == "failed" and result.reason == "uses sorry"


def test_judge_passes_a_clean_proof_with_its_tactics(transcripts_dir):
    (request, response), *_ = transcript(transcripts_dir, "all_tactics")
    prepared = hand_prepared(request["cmd"], "f")
    response = dict(response, messages=[axioms_message(prepared, [])])
    result = judge(prepared, response, CONFIG, 0.3)
    assert result.status == "passed" and result.passed and result.reason is None
    assert [t.text for t in result.tactics] == ["have t := 37", "exact t"]
    assert result.first_error_tactic == 2
    assert result.messages == [] and result.axioms == []


# (request, its proof body, outermost tactics, every tactic) as (text, start, end) offsets into the body, counted
# by hand from Lean's grammar: `·` and `have … := by` nest the tactics under them, `<;>` joins the tactics on
# either side into one (whatever the column of a continuation line), `;` separates two tactics of the sequence.
SPLIT_CASES = [
    (
        ProofRequest(
            "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q := by", "  constructor\n  · exact hp\n  · exact hq"
        ),
        "  constructor\n  · exact hp\n  · exact hq",
        [("constructor", 2, 13), ("· exact hp", 16, 26), ("· exact hq", 29, 39)],
        [
            ("constructor", 2, 13),
            ("· exact hp", 16, 26),
            ("exact hp", 18, 26),
            ("· exact hq", 29, 39),
            ("exact hq", 31, 39),
        ],
    ),
    (
        ProofRequest(
            "theorem t (x : ℝ) (hx : 0 < x) : 0 < x ^ 2 := by",
            "  have h : 0 < x * x := by\n    positivity\n  nlinarith",
        ),
        "  have h : 0 < x * x := by\n    positivity\n  nlinarith",
        [("have h : 0 < x * x := by\n    positivity", 2, 41), ("nlinarith", 44, 53)],
        [("have h : 0 < x * x := by\n    positivity", 2, 41), ("positivity", 31, 41), ("nlinarith", 44, 53)],
    ),
    (
        # The `<;>` line starts left of `norm_num` (column 24 against 26): still the same tactic.
        "import Mathlib\nexample : 2 + 2 = 4 := by norm_num\n                        <;> rfl",
        " norm_num\n                        <;> rfl",
        [("norm_num\n                        <;> rfl", 1, 41)],
        [("norm_num\n                        <;> rfl", 1, 41), ("norm_num", 1, 9), ("rfl", 38, 41)],
    ),
    (
        "import Mathlib\ntheorem t (n : ℕ) : n + 0 = n := by simp; omega",
        " simp; omega",
        [("simp", 1, 5), ("omega", 7, 12)],
        [("simp", 1, 5), ("omega", 7, 12)],
    ),
]


def spans(tactics) -> list[tuple[str, int, int]]:
    return [(t.text, t.start, t.end) for t in tactics]


@pytest.mark.parametrize(("request_", "body", "outermost", "every"), SPLIT_CASES)
def test_judge_reports_the_tactics_the_precheck_split_at_either_granularity(
    request_, body, outermost, every, monkeypatch
):
    prepared = prepare(request_, MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.proof == body
    # The hand-counted offsets are the texts' places in the body: a check on the table itself.
    assert all(body[start:end] == text for text, start, end in outermost + every)
    response = {"env": 1, "messages": [axioms_message(prepared, [])]}
    assert spans(prepared.outermost_tactics) == outermost
    assert spans(judge(prepared, response, LeanServerConfig(tactic_granularity="all"), 0.0).tactics) == every

    # The default granularity reuses the precheck's split instead of splitting the proof a second time.
    def no_second_split(*args, **kwargs):
        raise AssertionError("judge split the proof again")

    monkeypatch.setattr(judging, "split_tactics", no_second_split)
    result = judge(prepared, response, CONFIG, 0.0)
    assert result.passed and spans(result.tactics) == outermost and result.first_error_tactic == len(outermost)
    result.tactics.clear()
    assert spans(prepared.outermost_tactics) == outermost, "the verdict's list is the Prepared's own"


def test_a_hand_built_prepared_without_the_precheck_split_is_split_by_judge(transcripts_dir):
    (request, response), *_ = transcript(transcripts_dir, "all_tactics")
    prepared = hand_prepared(request["cmd"], "f")
    assert prepared.outermost_tactics is None
    result = judge(prepared, dict(response, messages=[axioms_message(prepared, [])]), CONFIG, 0.0)
    assert [t.text for t in result.tactics] == ["have t := 37", "exact t"]


@pytest.mark.parametrize(
    "text,parsed",
    [
        ("'foo' does not depend on any axioms", ("foo", [])),
        ("'foo' depends on axioms: [propext]", ("foo", ["propext"])),
        (
            "'Nat.foo_bar'' depends on axioms: [propext, Classical.choice, Quot.sound]",
            ("Nat.foo_bar'", ["propext", "Classical.choice", "Quot.sound"]),
        ),
        ("'«my thm»' depends on axioms: [sorryAx]", ("«my thm»", ["sorryAx"])),
        ("foo depends on axioms: [propext]", None),
        ("'foo' depends on axioms: propext", None),
        ("unsolved goals", None),
    ],
)
def test_axioms_messages_of_both_forms_are_parsed(text, parsed):
    assert parse_axioms_message(text) == parsed


def clean_prepared() -> Prepared:
    return prepare_proof(ProofRequest("theorem t (a b : ℕ) : a + b = b + a := by", "  omega"), MINIF2F_HEADER)


@pytest.mark.parametrize(
    "axioms,config,passed,reason",
    [
        ([], CONFIG, True, None),
        (CLEAN_AXIOMS, CONFIG, True, None),
        (["propext", "sorryAx"], CONFIG, False, "uses sorry (sorryAx among its axioms)"),
        (["propext", "cheat"], CONFIG, False, "axiom cheat not in whitelist"),
        (
            CLEAN_AXIOMS,
            LeanServerConfig(axiom_whitelist=("propext",)),
            False,
            "axiom Classical.choice not in whitelist",
        ),
        (["sorryAx"], LeanServerConfig(axiom_whitelist=("sorryAx",)), False, "uses sorry (sorryAx among its axioms)"),
        (["Lean.ofReduceBool"], CONFIG, False, "axiom Lean.ofReduceBool not in whitelist"),
        (["Lean.trustCompiler"], CONFIG, False, "axiom Lean.trustCompiler not in whitelist"),
        (["propext", "Lean.ofReduceBool"], NATIVE, True, None),
        (["Lean.trustCompiler"], NATIVE, True, None),
        # Native evaluation needs both keys: the precheck switch and the axioms in the whitelist.
        (
            ["Lean.ofReduceBool"],
            LeanServerConfig(allow_native_decide=True),
            False,
            "axiom Lean.ofReduceBool not in whitelist",
        ),
        (
            ["Lean.ofReduceBool"],
            LeanServerConfig(axiom_whitelist=NATIVE.axiom_whitelist),
            False,
            "axiom Lean.ofReduceBool not in whitelist",
        ),
    ],
)
def test_the_axiom_whitelist_is_enforced(axioms, config, passed, reason):
    prepared = clean_prepared()
    result = judge(prepared, {"messages": [axioms_message(prepared, axioms)], "env": 1}, config, 0.0)
    assert (result.passed, result.reason) == (passed, reason)
    assert result.axioms == axioms
    assert result.status == ("passed" if passed else "failed")


def test_an_axioms_answer_elsewhere_or_for_another_name_does_not_count():
    prepared = clean_prepared()
    fakes = [
        axioms_message(prepared, [], line=2, column=2),  # e.g. printed by `trace` inside the proof
        axioms_message(prepared, [], column=3),
        axioms_message(prepared, [], name="Nat.add_comm"),
        dict(axioms_message(prepared, []), severity="warning"),
    ]
    for fake in fakes:
        result = judge(prepared, {"messages": [fake], "env": 1}, CONFIG, 0.0)
        assert not result.passed and result.reason.startswith("no `#print axioms` answer for `t`")
    # Where the answer sits and what it says decide, not the name: the judge then checks the name.
    assert [is_axioms_answer(prepared, fake) for fake in fakes] == [False, False, True, False]
    assert is_axioms_answer(prepared, axioms_message(prepared, CLEAN_AXIOMS))
    assert not is_axioms_answer(prepared, dict(axioms_message(prepared, []), data="declaration uses `sorry`"))
    assert not is_axioms_answer(prepared, "not a message")
    # A fake clean answer next to the real one listing sorryAx: the real one decides.
    result = judge(prepared, {"messages": [fakes[0], axioms_message(prepared, ["sorryAx"])], "env": 1}, CONFIG, 0.0)
    assert not result.passed and result.axioms == ["sorryAx"]
    assert [(m.line, m.column) for m in result.messages] == [(2, 2)]


@pytest.mark.parametrize("order", [["sorryAx"], CLEAN_AXIOMS], ids=["sorry_first", "clean_first"])
def test_two_axioms_answers_for_the_theorem_fail_whatever_their_order(order):
    # One `#print axioms` gives one answer; a second one at its position was not written by it.
    prepared = clean_prepared()
    answers = [
        axioms_message(prepared, order),
        axioms_message(prepared, [a for a in ("sorryAx", "propext") if a not in order] or ["propext"]),
    ]
    result = judge(prepared, {"messages": answers, "env": 1}, CONFIG, 0.0)
    assert result.status == "failed" and not result.passed
    assert result.reason.startswith("2 `#print axioms` answers for `t`"), result.reason
    assert "sorryAx" in result.axioms


@pytest.mark.parametrize("warning", ["declaration uses `sorry`", "declaration uses 'sorry'"])
def test_both_sorry_warning_quote_styles_fail(warning):
    prepared = clean_prepared()
    message = {"severity": "warning", "pos": {"line": 1, "column": 8}, "endPos": {"line": 1, "column": 9}}
    response = {"messages": [dict(message, data=warning), axioms_message(prepared, CLEAN_AXIOMS)], "env": 1}
    result = judge(prepared, response, CONFIG, 0.0)
    assert not result.passed and result.reason == "uses sorry"


def test_errors_after_the_proof_are_clamped_to_its_end_and_fail():
    prepared = clean_prepared()
    error = {
        "severity": "error",
        "pos": {"line": prepared.print_line, "column": 14},
        "endPos": {"line": prepared.print_line, "column": 15},
        "data": "Unknown constant `t`",
    }
    result = judge(prepared, {"messages": [error], "env": 1}, CONFIG, 0.0)
    assert not result.passed and "Unknown constant" in result.reason
    assert (result.messages[0].line, result.messages[0].column) == (2, 7)
    # The theorem is missing at our `#print`: Lean located no error in the proof, so no tactic is credited.
    assert result.first_error_tactic == 0


def test_an_error_on_the_line_after_at_star_blames_that_lines_tactic():
    prepared = prepare_proof(ProofRequest(T, "  norm_num at *\n  linarith"), MINIF2F_HEADER)
    error = {
        "severity": "error",
        "pos": {"line": 3, "column": 2},
        "endPos": {"line": 3, "column": 10},
        "data": "linarith failed",
    }
    result = judge(prepared, {"env": 1, "messages": [error]}, CONFIG, 0.0)
    assert [t.text for t in result.tactics] == ["norm_num at *", "linarith"]
    assert result.first_error_tactic == 1


def test_a_parse_error_at_the_appended_print_blames_the_last_tactic():
    # An unfinished last tactic (`exact (rfl`) runs into our `#print axioms`: Lean's parse error sits there.
    prepared = prepare(
        ProofRequest("theorem x : 1 = 1 ∧ 2 = 2 := by", "  constructor\n  · rfl\n  · exact (rfl"), MINIF2F_HEADER
    )
    parse_error = {
        "severity": "error",
        "pos": {"line": prepared.print_line, "column": 0},
        "endPos": None,
        "data": "unexpected token '#print'; expected ')', ',' or ':'",
    }
    unsolved = {
        "severity": "error",
        "pos": {"line": 1, "column": 29},
        "endPos": {"line": 1, "column": 31},
        "data": "unsolved goals\ncase right\n⊢ 2 = 2",
    }
    for messages in ([parse_error], [parse_error, unsolved], [unsolved, parse_error]):
        result = judge(prepared, {"messages": messages, "env": 1}, CONFIG, 0.0)
        assert result.status == "failed"
        assert [t.text for t in result.tactics] == ["constructor", "· rfl", "· exact (rfl"]
        assert result.first_error_tactic == 2


@pytest.mark.parametrize("text", ["Unknown constant `t`", "unknown constant 't'"])
def test_an_unknown_constant_at_the_print_says_nothing_about_the_tactics(text):
    # The theorem never reached the environment (e.g. the kernel refused it): no tactic is to blame.
    prepared = prepare_proof(ProofRequest("theorem t : 1 = 1 ∧ 2 = 2 := by", "  constructor\n  · rfl\n  · rfl"), "")
    error = {
        "severity": "error",
        "pos": {"line": prepared.print_line, "column": 14},
        "endPos": {"line": prepared.print_line, "column": 15},
        "data": text,
    }
    result = judge(prepared, {"messages": [error], "env": 1}, CONFIG, 0.0)
    assert not result.passed and len(result.tactics) == 3 and result.first_error_tactic == 0


AXIOMS_STAGE_FAILURES = {
    "sorryAx among the axioms": [["propext", "sorryAx"]],
    "an axiom outside the whitelist": [["propext", "Lean.ofReduceBool"]],
    "two axioms answers": [[], []],
    "no axioms answer": [],
}


@pytest.mark.parametrize("answers", AXIOMS_STAGE_FAILURES.values(), ids=AXIOMS_STAGE_FAILURES.keys())
def test_a_failure_found_only_at_the_axioms_stage_credits_no_tactic(answers):
    # len(tactics) would tell a process reward "every tactic valid, proof incomplete" for a proof that fails only
    # because of what it depends on (or because its answer was forged): no tactic is known good, so 0.
    prepared = prepare_proof(ProofRequest(T, "  norm_num\n  exact?"), MINIF2F_HEADER)
    response = {"messages": [axioms_message(prepared, axioms) for axioms in answers], "env": 1}
    result = judge(prepared, response, CONFIG, 0.0)
    assert result.status == "failed" and len(result.tactics) == 2
    assert result.first_error_tactic == 0, result.reason
    # An incomplete proof ("unsolved goals" at the `by`, nothing else) still credits every tactic.
    unsolved = {
        "severity": "error",
        "pos": {"line": 1, "column": 25},
        "endPos": None,
        "data": "unsolved goals\n⊢ False",
    }
    result = judge(prepared, {"messages": [unsolved, *response["messages"]], "env": 1}, CONFIG, 0.0)
    assert result.status == "failed" and result.first_error_tactic == 2


def test_example_is_renamed_and_positions_map_back_to_the_submitted_columns():
    prepared = prepare_proof(ProofRequest("example (n : ℕ) : n + 0 = n := by", "  simp"), MINIF2F_HEADER)
    # The rest of the `example` line keeps its column, one line down.
    assert prepared.code.startswith(f"theorem {EXAMPLE_NAME}\n        (n : ℕ) : n + 0 = n := by\n  simp\n")
    assert prepared.theorem_name == EXAMPLE_NAME and prepared.statement.startswith("example")
    response = {
        "messages": [
            # the declaration keyword, as Lean reports "declaration uses sorry" for examples
            {"severity": "warning", "pos": {"line": 1, "column": 0}, "endPos": {"line": 1, "column": 24}, "data": "w"},
            # `n + 0` in the statement, below the renamed keyword
            {"severity": "error", "pos": {"line": 2, "column": 18}, "endPos": {"line": 2, "column": 23}, "data": "e"},
            {"severity": "error", "pos": {"line": 3, "column": 2}, "endPos": {"line": 3, "column": 6}, "data": "simp"},
            axioms_message(prepared, []),
        ],
        "env": 1,
    }
    result = judge(prepared, response, CONFIG, 0.0)
    assert prepared.submitted == prepared.statement + "\n" + prepared.proof
    assert prepared.submitted.split("\n")[0][18:23] == "n + 0"
    assert [(m.line, m.column, m.end) for m in result.messages] == [
        (1, 0, Position(1, 7)),
        (1, 18, Position(1, 23)),
        (2, 2, Position(2, 6)),
    ]
    assert result.first_error_tactic == 0


def _aligned_example_file(tactic_column_shift: int) -> str:
    line = "example : True ∧ True := by constructor"
    column = line.index("constructor") + tactic_column_shift
    return f"import Mathlib\n{line}\n{' ' * column}trivial\n{' ' * column}trivial"


def test_a_renamed_example_keeps_the_columns_of_a_proof_on_its_by_line():
    # `trivial` aligned under `constructor`: three tactics to Lean, so to the precheck and the judge too.
    prepared = prepare(_aligned_example_file(0), MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    by_line = prepared.code.split("\n")[1]
    assert by_line.index("constructor") == _aligned_example_file(0).split("\n")[1].index("constructor")
    assert prepared.proof_column == len("example : True ∧ True := by")
    result = judge(prepared, {"messages": [axioms_message(prepared, [])], "env": 1}, CONFIG, 0.0)
    assert result.passed and [t.text for t in result.tactics] == ["constructor", "trivial", "trivial"]
    # Deeper than `constructor`, the lines continue it, for the judge as for Lean.
    prepared = prepare(_aligned_example_file(len(EXAMPLE_NAME) + 1), MINIF2F_HEADER)
    result = judge(prepared, {"messages": [axioms_message(prepared, [])], "env": 1}, CONFIG, 0.0)
    assert len(result.tactics) == 1
    # Shallower, they end the block: the precheck refuses what Lean would read as commands.
    result = prepare(_aligned_example_file(-1), MINIF2F_HEADER)
    assert result.status == "rejected" and "reads what follows as commands" in result.reason, result.reason


def test_judge_rejects_bad_arguments():
    with pytest.raises(TypeError, match="prepared"):
        judge({"code": "x"}, {}, CONFIG, 0.0)
    with pytest.raises(TypeError, match="response"):
        judge(clean_prepared(), "not a dict", CONFIG, 0.0)


@pytest.mark.parametrize(
    "messages,where",
    [
        ([None], "messages[0]"),
        (["text"], "messages[0]"),
        ("not a list", "messages"),
        ({"severity": "info"}, "messages"),
    ],
)
def test_a_malformed_messages_field_is_an_error_verdict(messages, where):
    prepared = clean_prepared()
    # A clean axioms answer next to the malformed item must not make it pass.
    if isinstance(messages, list):
        messages = [axioms_message(prepared, CLEAN_AXIOMS)] + messages
        where = "messages[1]"
    result = judge(prepared, {"messages": messages, "env": 1}, CONFIG, 0.0)
    assert result.status == "error" and not result.passed
    assert f"malformed REPL response: {where}" in result.reason, result.reason


@pytest.mark.parametrize(
    "sorries,where",
    [(5, "sorries is a int"), ("sorry", "sorries is a str"), ({"pos": {}}, "sorries is a dict"), ([7], "sorries[0]")],
)
def test_a_malformed_sorries_field_is_an_error_verdict_naming_it(sorries, where):
    prepared = clean_prepared()
    # Next to a clean axioms answer, so only the malformed field can keep it from passing.
    response = {"messages": [axioms_message(prepared, CLEAN_AXIOMS)], "sorries": sorries, "env": 1}
    result = judge(prepared, response, CONFIG, 0.0)
    assert result.status == "error" and not result.passed
    assert f"malformed REPL response: {where}" in result.reason, result.reason


def test_passed_is_exactly_status_passed():
    assert VerificationResult("passed").passed is True
    assert VerificationResult("failed").passed is False
    assert VerificationResult.from_dict({"status": "passed"}).passed is True
    with pytest.raises(ValueError, match="passed=False contradicts status='passed'"):
        VerificationResult("passed", passed=False)
    with pytest.raises(ValueError, match="passed=True contradicts status='timeout'"):
        VerificationResult("timeout", passed=True)
    with pytest.raises(ValueError, match="status must be one of"):
        VerificationResult("ok")
    with pytest.raises(ValueError, match="tactic_granularity must be one of \\('outermost', 'all'\\)"):
        LeanServerConfig(tactic_granularity="nested")


def test_results_round_trip_through_dicts():
    prepared = clean_prepared()
    result = judge(prepared, {"messages": [axioms_message(prepared, CLEAN_AXIOMS)], "env": 1}, CONFIG, 0.25)
    assert VerificationResult.from_dict(result.to_dict()) == result


def trace_messages(prepared: Prepared, count: int) -> list[dict]:
    """`count` info messages, one per proof line, as `trace "x"` on each line makes Lean write."""
    return [
        {"severity": "info", "pos": {"line": 2 + i, "column": 2}, "endPos": {"line": 2 + i, "column": 11}, "data": "x"}
        for i in range(count)
    ]


def test_an_answer_over_max_messages_fails_unread():
    count = judging.MAX_MESSAGES  # with the axioms answer: one over the limit
    prepared = prepare_proof(ProofRequest(T, '  trace "x"\n' * count + "  rfl"), MINIF2F_HEADER)
    flood = {"messages": [*trace_messages(prepared, count), axioms_message(prepared, [])], "env": 1}
    result = judge(prepared, flood, CONFIG, 0.5)
    assert result.status == "failed" and not result.passed and result.first_error_tactic == 0
    assert result.reason.startswith(f"Lean answered with {count + 1} messages and sorries, over the {count}")
    assert result.messages == [] and result.time_s == 0.5 and len(result.tactics) == count + 1
    # At the limit the answer is read (and here passes: info messages are no errors).
    flood["messages"].pop(0)
    assert judge(prepared, flood, CONFIG, 0.0).status == "passed"
    # Sorries count too.
    sorries = [{"pos": {"line": 2, "column": 2}, "goal": "⊢ x"}] * 2
    result = judge(prepared, {**flood, "sorries": sorries}, CONFIG, 0.0)
    assert result.status == "failed" and result.reason.startswith(f"Lean answered with {count + 2} messages")


def test_positions_are_mapped_without_walking_the_text_per_message(monkeypatch):
    # One message per line made judge and submitted_response quadratic (the code walked line by line per message).
    # The mapping uses Prepared's line tables: the text-walking helpers must not be called at all.
    from trl_verigate.lean_server.precheck import tokens
    from trl_verigate.lean_server.service import server

    prepared = prepare_proof(ProofRequest(T, '  trace "x"\n' * 50 + "  rfl"), MINIF2F_HEADER)
    response = {"messages": [*trace_messages(prepared, 50), axioms_message(prepared, [])], "env": 1}

    def walks(*args):
        raise AssertionError("a position was mapped by walking the text")

    monkeypatch.setattr(tokens, "position", walks)
    result = judge(prepared, response, CONFIG, 0.0)
    assert [(m.line, m.column) for m in result.messages] == [(2 + i, 2) for i in range(50)]
    mapped = server.submitted_response(prepared, response)
    assert [m["pos"] for m in mapped["messages"]] == [{"line": 2 + i, "column": 2} for i in range(50)]


def reference_offset(text: str, line: int, column: int) -> int:
    """Lean's (line, column) -> offset, by splitting the text into lines (the clamping rules of offset_of)."""
    lines = text.split("\n")
    if line > len(lines):
        return len(text)
    start = sum(len(previous) + 1 for previous in lines[: line - 1])
    content = lines[line - 1][:-1] if lines[line - 1].endswith("\r") else lines[line - 1]
    return start + min(column, len(content))


def test_prepared_offset_of_and_submitted_position_match_a_reference():
    import random

    rng = random.Random(7)
    file_text = "import Mathlib\n\ndef a : ℕ := 1\r\nexample : a = 1 := by rfl\n  -- x\n"
    for request in (ProofRequest(T, "  simp\r\n  norm_num\n\n  rfl"), file_text):
        prepared = prepare(request, MINIF2F_HEADER)
        assert isinstance(prepared, Prepared), prepared.reason
        code = prepared.code
        for _ in range(2000):
            line, column = rng.randint(1, code.count("\n") + 3), rng.randint(0, 40)
            assert prepared.offset_of(line, column) == reference_offset(code, line, column), (line, column)
        submitted = prepared.submitted
        for offset in range(prepared.proof_start, len(code) + 1):
            # In the proof, code and submitted source differ by the statement's edits only: a fixed shift.
            # Offsets past the proof (our `#print axioms`) clamp to its end, the end of the submitted source.
            expected = min(
                len(prepared.statement) + len(prepared.separator) + offset - prepared.proof_start, len(submitted)
            )
            before = submitted[:expected]
            line, column = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1)
            assert prepared.submitted_position(offset) == Position(line + prepared.line_offset, column)
    with pytest.raises(ValueError, match="1-based"):
        prepared.offset_of(0, 0)


def test_the_header_preamble_shifts_repl_lines_and_messages_map_back():
    # The miniF2F header's option and `open` lines run before the statement: REPL line 5 is submitted line 3.
    prepared = prepare(ProofRequest(T, "  norm_num\n  linarith"), MINIF2F_HEADER)
    assert prepared.code.count("\n", 0, prepared.proof_start) == 3
    error = {"severity": "error", "pos": {"line": 4, "column": 2}, "endPos": {"line": 4, "column": 10}, "data": "x"}
    result = judge(prepared, {"env": 1, "messages": [error]}, CONFIG, 0.0)
    assert [(m.line, m.column) for m in result.messages] == [(2, 2)] and result.first_error_tactic == 0
    # A message on a preamble line belongs to no tactic: it maps to the statement's start.
    early = dict(error, pos={"line": 1, "column": 4}, endPos=None)
    result = judge(prepared, {"env": 1, "messages": [early]}, CONFIG, 0.0)
    assert [(m.line, m.column) for m in result.messages] == [(1, 0)] and result.first_error_tactic == 0
