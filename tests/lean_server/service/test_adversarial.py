"""The adversarial corpus: no attack passes, whether the precheck stops it or Lean's answer is judged.

Each row of tests/data/adversarial_proofs.jsonl is a ProofRequest (`statement`, `proof`) or a complete
Lean file (`file`), sent as a str request the way every kimina `/check` snippet is, so its header is
untrusted too (see tests/adversarial.py). `expect`: "rejected" (the precheck must refuse it before Lean
runs), "failed" (it reaches Lean and `lean_response`, the answer real Lean gives to the full command
including the appended `#print axioms`, must not pass) or "timeout" (`behaviour: "hang"`: Lean spins;
the server must time it out). Rows with `behaviour: "oom"` exhaust memory: under RLIMIT_AS the REPL dies,
so the server reports "crashed"; their `lean_response` is what Lean says when it stops itself first
(heartbeats), which must fail too.
"""

import pytest

from tests.adversarial import fake_repl_script, is_file_row, lean_response, load_corpus, load_raw_corpus, request_of
from tests.fake_repl import read_log, repl_command, write_script
from tests.lean_helpers import prepare
from trl_verigate.lean_server.core.types import MINIF2F_HEADER, LeanServerConfig, VerificationResult
from trl_verigate.lean_server.precheck.prepared import Prepared
from trl_verigate.lean_server.service.server import LeanServer
from trl_verigate.lean_server.verdict.judging import is_axioms_answer, judge, parse_axioms_message

ROWS = load_corpus()
CONFIG = LeanServerConfig()


def prepared_of(row: dict):
    return prepare(request_of(row), MINIF2F_HEADER, CONFIG.allow_native_decide)


def test_the_corpus_is_large_and_well_formed():
    assert len(ROWS) >= 40
    ids = [row["id"] for row in ROWS]
    assert len(ids) == len(set(ids))
    # `why`: the reason the attack must not pass (newer rows carry it; `attack` says what each row tries).
    common = {"id", "attack", "why", "supersedes", "expect", "lean_response", "behaviour"}
    for row in ROWS:
        request_fields = {"file"} if is_file_row(row) else {"statement", "proof"}
        trusted_fields = {"statement", "header"} if is_file_row(row) else set()
        assert request_fields <= set(row) <= common | request_fields | trusted_fields, row["id"]
        assert all(isinstance(row[field], str) and row[field].strip() for field in request_fields), row["id"]
        assert row["expect"] in ("rejected", "failed", "timeout"), row["id"]
        assert row["behaviour"] in (None, "hang", "oom"), row["id"]
        assert row["attack"].strip(), row["id"]
        assert isinstance(row.get("why", "-"), str) and row.get("why", "-").strip(), row["id"]
        assert ("lean_response" in row) == (row["expect"] != "rejected"), row["id"]
        assert (row["behaviour"] == "hang") == (row["expect"] == "timeout"), row["id"]
    raw = load_raw_corpus()
    raw_ids = [row["id"] for row in raw]
    assert len(raw_ids) == len(set(raw_ids))
    for index, row in enumerate(raw):
        if "supersedes" in row:
            # Only an earlier row can be superseded, and only once.
            assert row["supersedes"] in raw_ids[:index], row["id"]
            assert [r.get("supersedes") for r in raw].count(row["supersedes"]) == 1, row["id"]
    behaviours = [row["behaviour"] for row in ROWS]
    assert behaviours.count("hang") >= 2 and behaviours.count("oom") >= 1
    assert sum(row["expect"] == "failed" for row in ROWS) >= 10
    assert sum(map(is_file_row, ROWS)) >= 10


@pytest.mark.parametrize("row", [r for r in ROWS if r["expect"] == "rejected"], ids=lambda r: r["id"])
def test_rows_expected_to_be_rejected_never_reach_lean(row):
    result = prepared_of(row)
    assert isinstance(result, VerificationResult), f"{row['id']}: the precheck let it through"
    assert result.status == "rejected" and not result.passed and result.reason


@pytest.mark.parametrize("row", [r for r in ROWS if r["expect"] != "rejected"], ids=lambda r: r["id"])
def test_rows_that_reach_lean_are_judged_not_passed(row):
    prepared = prepared_of(row)
    assert isinstance(prepared, Prepared), f"{row['id']}: rejected ({prepared.reason}), so Lean's answer is untested"
    result = judge(prepared, lean_response(row, prepared), CONFIG, 0.0)
    assert result.status == "failed" and not result.passed, row["id"]
    assert result.reason


@pytest.mark.parametrize("row", [r for r in ROWS if r["expect"] != "rejected"], ids=lambda r: r["id"])
def test_recorded_responses_are_positioned_for_the_prepared_code(row):
    """Guards the corpus itself: every message lies in the code we send, the axioms answer where Lean puts it."""
    prepared = prepared_of(row)
    response = lean_response(row, prepared)
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
            assert is_axioms_answer(prepared, message), row["id"]
    for sorry in response.get("sorries", []):
        assert {"proofState", "pos", "goal", "endPos"} <= set(sorry)


def test_native_rows_pass_the_precheck_only_under_allow_native_decide():
    native = [r for r in ROWS if r["id"] in ("native_decide", "decide_plus_native", "bv_decide")]
    assert len(native) == 3
    for row in native:
        assert isinstance(prepare(request_of(row), MINIF2F_HEADER, allow_native_decide=True), Prepared)


def test_the_whole_corpus_through_the_server_passes_nothing(tmp_path):
    script = fake_repl_script(ROWS, MINIF2F_HEADER, CONFIG.allow_native_decide)
    assert all(a["match"] not in b["match"] for a in script for b in script if a is not b)
    log = tmp_path / "repl.log"
    config = LeanServerConfig(
        repl_command=repl_command("--script", write_script(tmp_path / "script.jsonl", script), "--log", str(log)),
        project_dir=str(tmp_path),
        workers=2,
        timeout=2.0,
        startup_timeout=30.0,
        memory_limit_mb=1024,
    )
    with LeanServer(config) as server:
        results = server.verify([request_of(row) for row in ROWS])
    assert len(results) == len(ROWS)
    for row, result in zip(ROWS, results, strict=True):
        assert not result.passed, row["id"]
        expected = {"oom": "crashed"}.get(row["behaviour"], row["expect"])
        assert result.status == expected, (row["id"], result.status, result.reason)
    # Rejected rows never reach the REPL: every proof command it saw is the code of a row that passed the precheck.
    sent = {entry["request"]["cmd"] for entry in read_log(log) if "env" in entry["request"]}
    assert sent <= {row["match"] for row in script}
    assert len(sent) == len(script)
