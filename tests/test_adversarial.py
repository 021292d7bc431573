"""The adversarial corpus: no attack passes, whether the precheck stops it or Lean's answer is judged.

Each row of tests/data/adversarial_proofs.jsonl is a ProofRequest (`statement`, `proof`) with
`expect`: "rejected" (the precheck must refuse it before Lean runs), "failed" (it reaches Lean and
`lean_response`, the answer real Lean gives to the full command including the appended
`#print axioms`, must not pass) or "timeout" (`behaviour: "hang"`: Lean spins; the server must time it
out). Rows with `behaviour: "oom"` exhaust memory: under RLIMIT_AS the REPL dies, so the server
reports "crashed"; their `lean_response` is what Lean says when it stops itself first (heartbeats),
which must fail too.

`FILE_ATTACKS` below are complete Lean files, sent as str requests the way every kimina `/check` snippet
is: their header is untrusted too. They live here rather than in the corpus because the corpus rows are
ProofRequests for every consumer of the file.
"""

import json
from pathlib import Path

import pytest

from trl_verigate.lean_server.types import MINIF2F_HEADER, LeanServerConfig, ProofRequest, VerificationResult
from trl_verigate.lean_server.verdict import Prepared, judge, parse_axioms_message, prepare

CORPUS = Path(__file__).resolve().parent / "data" / "adversarial_proofs.jsonl"
ROWS = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
CONFIG = LeanServerConfig()
# (id, attack, file): each must be rejected before Lean runs.
FILE_ATTACKS = [
    (
        "file_option_after_open",
        "a complete file: `set_option debug.skipKernelTC true` hidden on the header's `open` line",
        "import Mathlib\nopen Nat set_option debug.skipKernelTC true\ntheorem adv_f1 : False := by\n  exact absurd rfl (by decide : (1 : ℕ) ≠ 1)",
    ),
    (
        "file_option_guillemets",
        "a complete file: `set_option «debug».skipKernelTC true` in the header",
        "import Mathlib\nset_option «debug».skipKernelTC true\ntheorem adv_f2 : True := by\n  trivial",
    ),
    (
        "file_option_comment",
        "a complete file: `set_option /- c -/ debug.skipKernelTC true` in the header",
        "import Mathlib\nset_option /- c -/ debug.skipKernelTC true\ntheorem adv_f3 : True := by\n  trivial",
    ),
    (
        "file_header_elab",
        "a complete file: `open … in elab` defines a tactic that closes any goal",
        'import Mathlib\nopen Lean Elab Tactic in elab "cheat" : tactic => do (← getMainGoal).assign (mkConst ``True.intro)\ntheorem adv_f4 : False := by\n  cheat',
    ),
    (
        "file_header_eval",
        "a complete file: `open … in #eval` runs a process on the verifier host",
        'import Mathlib\nopen Nat in #eval IO.Process.run {cmd := "id"}\ntheorem adv_f5 : True := by\n  trivial',
    ),
    (
        "file_header_axiom",
        "a complete file: `open … in axiom` adds an axiom",
        "import Mathlib\nopen Nat in axiom cheat : 1 = 2\ntheorem adv_f6 : 1 = 2 := by\n  exact cheat",
    ),
    (
        "file_import_exit",
        "a complete file: `#exit` after an import on the same line",
        "import Mathlib #exit\ntheorem adv_f7 : 1 = 2 := by\n  norm_num",
    ),
    (
        "file_combined_cheat",
        "a complete file: kernel check off plus a goal-assigning tactic, both in the header",
        'import Mathlib\nopen Nat set_option debug.skipKernelTC true\nopen Lean Elab Tactic in elab "cheat" : tactic => do (← getMainGoal).assign (mkConst ``True.intro)\ntheorem adv_f8 : False := by\n  cheat',
    ),
    (
        "file_term_proof_then_command",
        "a complete file: a term-mode theorem, then an unlisted command (`simproc`) whose `:= by` poses as the proof",
        "import Mathlib\ntheorem adv_f9 : True := trivial\nsimproc cheat (1 = 2) := by\n  exact fun _ => pure none",
    ),
    (
        "file_unlisted_command_before",
        "a complete file: a command other than `open … in`/`set_option … in` before the theorem",
        "import Mathlib\nadd_aesop_rules safe (by exact True.intro)\ntheorem adv_f10 : True := by\n  aesop",
    ),
]


def prepared_of(row: dict):
    return prepare(ProofRequest(row["statement"], row["proof"]), MINIF2F_HEADER, CONFIG.allow_native_decide)


def test_the_corpus_is_large_and_well_formed():
    assert len(ROWS) >= 40
    ids = [row["id"] for row in ROWS]
    assert len(ids) == len(set(ids))
    for row in ROWS:
        assert set(row) <= {"id", "attack", "statement", "proof", "expect", "lean_response", "behaviour"}, row["id"]
        assert row["expect"] in ("rejected", "failed", "timeout"), row["id"]
        assert row["behaviour"] in (None, "hang", "oom"), row["id"]
        assert row["attack"].strip(), row["id"]
        assert ("lean_response" in row) == (row["expect"] != "rejected"), row["id"]
        assert (row["behaviour"] == "hang") == (row["expect"] == "timeout"), row["id"]
    behaviours = [row["behaviour"] for row in ROWS]
    assert behaviours.count("hang") >= 2 and behaviours.count("oom") >= 1
    assert sum(row["expect"] == "failed" for row in ROWS) >= 10


@pytest.mark.parametrize("row", [r for r in ROWS if r["expect"] == "rejected"], ids=lambda r: r["id"])
def test_rows_expected_to_be_rejected_never_reach_lean(row):
    result = prepared_of(row)
    assert isinstance(result, VerificationResult), f"{row['id']}: the precheck let it through"
    assert result.status == "rejected" and not result.passed and result.reason


@pytest.mark.parametrize("row", [r for r in ROWS if r["expect"] != "rejected"], ids=lambda r: r["id"])
def test_rows_that_reach_lean_are_judged_not_passed(row):
    prepared = prepared_of(row)
    assert isinstance(prepared, Prepared), f"{row['id']}: rejected ({prepared.reason}), so Lean's answer is untested"
    result = judge(prepared, row["lean_response"], CONFIG, 0.0)
    assert result.status == "failed" and not result.passed, row["id"]
    assert result.reason


@pytest.mark.parametrize("row", [r for r in ROWS if r["expect"] != "rejected"], ids=lambda r: r["id"])
def test_recorded_responses_are_positioned_for_the_prepared_code(row):
    """Guards the corpus itself: every message lies in the code we send, the axioms answer where Lean puts it."""
    prepared = prepared_of(row)
    response = row["lean_response"]
    assert set(response) <= {"messages", "sorries", "env"} and isinstance(response["env"], int)
    lines = prepared.code.split("\n")
    for message in response.get("messages", []):
        assert message["severity"] in ("error", "warning", "info")
        assert isinstance(message["data"], str) and message["data"]
        start, end = message["pos"], message["endPos"]
        assert 1 <= start["line"] <= end["line"] <= len(lines), (row["id"], message)
        assert 0 <= start["column"] <= len(lines[start["line"] - 1]), (row["id"], message)
        assert end["column"] <= len(lines[end["line"] - 1]), (row["id"], message)
        if start["line"] == prepared.print_line and parse_axioms_message(message["data"]):
            assert (message["severity"], start["column"]) == ("info", 0), row["id"]
    for sorry in response.get("sorries", []):
        assert {"proofState", "pos", "goal", "endPos"} <= set(sorry)


@pytest.mark.parametrize("attack_id,attack,file_text", FILE_ATTACKS, ids=[a[0] for a in FILE_ATTACKS])
def test_file_attacks_never_reach_lean(attack_id, attack, file_text):
    result = prepare(file_text, MINIF2F_HEADER, CONFIG.allow_native_decide)
    assert isinstance(result, VerificationResult), (
        f"{attack_id} ({attack}): sent as {result.header!r} + {result.code!r}"
    )
    assert result.status == "rejected" and not result.passed and result.reason


def test_native_rows_pass_the_precheck_only_under_allow_native_decide():
    native = [r for r in ROWS if r["id"] in ("native_decide", "decide_plus_native", "bv_decide")]
    assert len(native) == 3
    for row in native:
        request = ProofRequest(row["statement"], row["proof"])
        assert isinstance(prepare(request, MINIF2F_HEADER, allow_native_decide=True), Prepared)


def test_the_whole_corpus_through_the_server_passes_nothing(tmp_path):
    server_module = pytest.importorskip(
        "trl_verigate.lean_server.server", reason="LeanServer (trl_verigate.lean_server.server) is not importable"
    )
    fake_repl = pytest.importorskip("fake_repl", reason="the stand-in REPL tests/fake_repl.py is missing")
    script = []
    for row in ROWS:
        prepared = prepared_of(row)
        if isinstance(prepared, Prepared):
            # The full code is the match: each row's theorem name is unique, so no match hits another row.
            action = {"behaviour": row["behaviour"]} if row["behaviour"] else {"response": row["lean_response"]}
            script.append({"match": prepared.code, **action})
    assert all(a["match"] not in b["match"] for a in script for b in script if a is not b)
    log = tmp_path / "repl.log"
    config = LeanServerConfig(
        repl_command=fake_repl.repl_command(
            "--script", fake_repl.write_script(tmp_path / "script.jsonl", script), "--log", str(log)
        ),
        project_dir=str(tmp_path),
        workers=2,
        timeout=2.0,
        startup_timeout=30.0,
        memory_limit_mb=1024,
    )
    with server_module.LeanServer(config) as server:
        results = server.verify([ProofRequest(row["statement"], row["proof"]) for row in ROWS])
        file_results = server.verify([file_text for _, _, file_text in FILE_ATTACKS])
    assert [r.status for r in file_results] == ["rejected"] * len(FILE_ATTACKS)
    assert len(results) == len(ROWS)
    for row, result in zip(ROWS, results, strict=True):
        assert not result.passed, row["id"]
        expected = {"oom": "crashed"}.get(row["behaviour"], row["expect"])
        assert result.status == expected, (row["id"], result.status, result.reason)
    # Rejected rows never reach the REPL: every proof command it saw is the code of a row that passed the precheck.
    sent = {entry["request"]["cmd"] for entry in fake_repl.read_log(log) if "env" in entry["request"]}
    assert sent <= {row["match"] for row in script}
    assert len(sent) == len(script)
