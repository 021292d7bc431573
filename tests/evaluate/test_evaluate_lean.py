"""Lean scoring of `trl-verigate evaluate` against the stand-in REPL: verification faults (timeout, crashed REPL,
an unreachable server, a verifier that raises) are recorded as the attempt's status, count as failures, and never
stop the run; samples.jsonl survives a cut-off last line."""

import json

import pytest

from tests.evaluate.fakes import ListBackend
from tests.fake_repl import stand_in_config
from tests.launch import free_port
from trl_verigate.evaluate.lean_scoring import LeanScorer
from trl_verigate.evaluate.outputs import SamplesFile, read_samples
from trl_verigate.evaluate.problems import lean_problems
from trl_verigate.evaluate.runner import Evaluation, evaluate
from trl_verigate.lean_server import LeanClient, LeanServer

pytestmark = pytest.mark.timeout(120)

HEADER = "import Mathlib\n"


def row(name: str) -> dict:
    return {"name": name, "split": "test", "informal_prefix": "", "formal_statement": f"theorem {name} : 1 + 1 = 2 := by\n",
            "goal": "⊢ 1 + 1 = 2", "header": HEADER}  # fmt: skip


class FixedBackend(ListBackend):
    """Every attempt of every problem completes with the same proof body."""

    def __init__(self, completion: str):
        self.completion = completion

    def completions(self, prompt, count):
        return [self.completion] * count


class RaisingVerifier:
    config = None

    def verify(self, requests, timeout=None, progress=None):
        raise RuntimeError("verifier exploded")

    async def averify(self, requests, timeout=None, progress=None):
        raise RuntimeError("verifier exploded")


def run(tmp_path, verifier, names, n=2, timeout=1.0, completion="  rfl"):
    problem_set = lean_problems([row(name) for name in names])
    evaluation = Evaluation("lean", problem_set, LeanScorer(verifier, timeout, concurrency=2), n, [1, n])
    output = tmp_path / "out"
    summary = evaluate(evaluation, FixedBackend(completion), str(output), progress=False, echo=lambda text: None)
    evaluation.scorer.close()
    return summary, {(r["problem_id"], r["attempt"]): r for r in read_samples(output)}


def test_timeouts_and_crashes_are_statuses_and_failures(tmp_path):
    script = [{"match": "hangs", "behaviour": "hang"}, {"match": "crashes", "behaviour": "crash"}]
    with LeanServer(stand_in_config(tmp_path, script=script, workers=2, timeout=5.0)) as server:
        summary, rows = run(tmp_path, server, ["fine", "hangs", "crashes"])
    assert {key: r["status"] for key, r in rows.items()} == {
        ("fine", 0): "passed", ("fine", 1): "passed",
        ("hangs", 0): "timeout", ("hangs", 1): "timeout",
        ("crashes", 0): "crashed", ("crashes", 1): "crashed",
    }  # fmt: skip
    assert all(r["correct"] == (r["status"] == "passed") for r in rows.values())
    assert all(r["reason"] for key, r in rows.items() if key[0] != "fine")
    assert rows[("fine", 0)]["first_error_tactic"] == 1  # one tactic, none failed
    assert rows[("fine", 0)]["proof"] == "  rfl"
    # One of three problems proved, whatever k.
    assert summary["metrics"]["pass@1"]["value"] == pytest.approx(1 / 3)
    assert summary["metrics"]["pass@2"]["value"] == pytest.approx(1 / 3)
    assert summary["statuses"] == {"passed": 2, "timeout": 2, "crashed": 2}


def test_an_unreachable_server_is_an_error_status(tmp_path):
    client = LeanClient([f"http://127.0.0.1:{free_port()}"], retries=0, backoff=0.0)
    summary, rows = run(tmp_path, client, ["a", "b"])
    assert [r["status"] for r in rows.values()] == ["error"] * 4
    assert summary["metrics"]["pass@2"]["value"] == 0.0 and summary["attempts"] == 4


def test_a_verifier_that_raises_is_an_error_status(tmp_path):
    summary, rows = run(tmp_path, RaisingVerifier(), ["a"])
    assert [r["status"] for r in rows.values()] == ["error", "error"]
    assert "verifier exploded" in rows[("a", 0)]["reason"]
    assert summary["metrics"]["pass@1"]["value"] == 0.0


def test_a_completion_without_a_proof_fails_without_reaching_lean(tmp_path):
    summary, rows = run(
        tmp_path, RaisingVerifier(), ["a"], completion="```lean4\ntheorem other : True := by\n  trivial\n```"
    )
    assert [r["status"] for r in rows.values()] == ["failed", "failed"]
    assert "statement changed" in rows[("a", 0)]["reason"]


def test_samples_file_drops_a_cut_off_last_line_and_skips_duplicates(tmp_path):
    first = {"problem_id": "p", "attempt": 0, "status": "passed", "correct": True}
    path = tmp_path / "samples.jsonl"
    path.write_text(json.dumps(first) + "\n" + '{"problem_id": "p", "attempt": 1, "sta')
    samples = SamplesFile(tmp_path)
    assert samples.done("p", 0) and not samples.done("p", 1)
    samples.append({**first, "status": "failed"})  # already there: not written again
    samples.append({"problem_id": "p", "attempt": 1, "status": "failed", "correct": False})
    samples.close()
    lines = path.read_text().splitlines()
    assert [json.loads(line)["attempt"] for line in lines] == [0, 1]
    assert json.loads(lines[0])["status"] == "passed"


class NoGenerationBackend:
    def set_seed(self, seed):
        pass

    def generate(self, prompts, counts, on_completions=None):
        raise AssertionError("a rerun sampled again an attempt it already had")


def test_a_rerun_judges_faulted_attempts_again_from_their_completions(tmp_path):
    # First run: the verifier is down, every attempt is an `error` row.
    summary, rows = run(tmp_path, RaisingVerifier(), ["a", "b"], completion="  rfl")
    assert summary["statuses"] == {"error": 4}
    # Rerun once it is back: the same completions are verified (nothing is sampled again); the verdicts replace the
    # fault rows, and the file is left with one row per attempt.
    with LeanServer(stand_in_config(tmp_path, workers=2, timeout=5.0)) as server:
        problem_set = lean_problems([row("a"), row("b")])
        evaluation = Evaluation("lean", problem_set, LeanScorer(server, 5.0, concurrency=2), 2, [1, 2])
        messages = []
        summary = evaluate(
            evaluation, NoGenerationBackend(), str(tmp_path / "out"), progress=False, echo=messages.append
        )
        evaluation.scorer.close()
    assert "judging again 4 attempts whose verification failed (status 'error')" in messages
    assert summary["statuses"] == {"passed": 4} and summary["metrics"]["pass@1"]["value"] == 1.0
    lines = [json.loads(line) for line in (tmp_path / "out" / "samples.jsonl").read_text().splitlines()]
    assert sorted((r["problem_id"], r["attempt"], r["status"], r["completion"]) for r in lines) == [
        (name, attempt, "passed", "  rfl") for name in "ab" for attempt in range(2)
    ]


def test_samples_file_lets_a_verdict_replace_a_fault_but_never_another_verdict(tmp_path):
    key = {"problem_id": "p", "attempt": 0}
    rows = [{**key, "status": "error"}, {**key, "status": "failed"}, {**key, "status": "passed"}]
    (tmp_path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    samples = SamplesFile(tmp_path)  # a run killed after judging the fault again, before compacting
    assert samples.rows[("p", 0)]["status"] == "failed" and samples.faults() == []
    samples.close()
    samples.compact()
    assert [json.loads(line)["status"] for line in (tmp_path / "samples.jsonl").read_text().splitlines()] == ["failed"]
