"""`trl-verigate evaluate coq` against the real Coq: fixed completions scored by a CoqServer (passed, failed at a
sentence, refused by the precheck) give the pass@k computed here by hand; bad flags stop before any model loads;
the tiny policy runs end to end (slow)."""

import json
import stat
from pathlib import Path

import pytest

from tests.evaluate.fakes import ListBackend
from tests.launch import REPO_ROOT
from trl_verigate.cli import main
from trl_verigate.coq import CoqServer, CoqServerConfig
from trl_verigate.evaluate.coq_scoring import CoqScorer
from trl_verigate.evaluate.outputs import read_samples
from trl_verigate.evaluate.problems import coq_problems
from trl_verigate.evaluate.runner import Evaluation, evaluate

pytestmark = [pytest.mark.timeout(300), pytest.mark.usefixtures("coq_required")]

TINY_COQ = REPO_ROOT / "recipes" / "tiny" / "coq_tiny.jsonl"
# Attempt k of every problem completes with COMPLETIONS[k]: a proof that passes both statements below, one whose
# second sentence fails (reflexivity cannot close n + 0 = n nor 0 < S n for a variable n), and one the precheck
# refuses (Admitted is no tactic).
COMPLETIONS = ["intros n. lia.\nQed.", "intros n. reflexivity.\nQed.", "Admitted."]


class FixedBackend(ListBackend):
    """Stands in for a model: attempt k of every problem completes with ``completions[k]``."""

    def __init__(self, completions: list[str]):
        self.fixed = completions

    def completions(self, prompt, count):
        return self.fixed[:count]


def tiny_rows(*names: str) -> list[dict]:
    rows = {row["name"]: row for row in map(json.loads, TINY_COQ.read_text().splitlines())}
    return [rows[name] for name in names]


def score(tmp_path, completions, names=("add_zero_r", "succ_pos")):
    problem_set = coq_problems(tiny_rows(*names))
    n = len(completions)
    config = CoqServerConfig(workers=2, spare_workers=0, timeout=10.0, header="Require Import Arith Lia.\n")
    with CoqServer(config) as server:
        evaluation = Evaluation("coq", problem_set, CoqScorer(server, 10.0, concurrency=2), n, sorted({1, n}))
        summary = evaluate(evaluation, FixedBackend(completions), str(tmp_path / "out"), False, lambda text: None)
        evaluation.scorer.close()
    return summary, {(row["problem_id"], row["attempt"]): row for row in read_samples(tmp_path / "out")}


def test_fixed_completions_get_coqs_verdicts_and_pass_at_k(tmp_path):
    summary, rows = score(tmp_path, COMPLETIONS)
    for name in ("add_zero_r", "succ_pos"):
        passed, failed, refused = (rows[(name, attempt)] for attempt in range(3))
        assert (passed["status"], passed["correct"]) == ("passed", True)
        assert (failed["status"], failed["correct"], failed["first_error_tactic"]) == ("failed", False, 1)
        assert (refused["status"], refused["correct"]) == ("rejected", False)
        assert "Admitted" in refused["reason"]
    assert summary["statuses"] == {"passed": 2, "failed": 2, "rejected": 2}
    # One correct attempt of n = 3 per problem: pass@1 = 1 - C(2,1)/C(3,1) = 1/3, pass@3 = 1.
    assert summary["metrics"]["pass@1"]["value"] == pytest.approx(1 / 3)
    assert summary["metrics"]["pass@3"]["value"] == 1.0
    assert summary["task"] == "coq" and (tmp_path / "out" / "pass_at_k.png").is_file()


def test_a_completion_closing_the_prompts_open_fence_passes(tmp_path):
    # COQ_PROMPT_TEMPLATE opens a ```coq block: the completion closes it, and the proof ends there, whatever follows.
    completions = ["intros n. lia.\nQed.\n```", "intros n. lia.\nQed.\n```\n\nThis proves it by lia."]
    summary, rows = score(tmp_path, completions, names=("add_zero_r",))
    assert [rows[("add_zero_r", attempt)]["status"] for attempt in (0, 1)] == ["passed", "passed"]


def test_a_completion_without_a_proof_fails_without_reaching_coq(tmp_path):
    class Unreachable:
        def verify(self, requests, timeout=None, progress=None):
            raise AssertionError("Coq was asked")

    scorer = CoqScorer(Unreachable(), 10.0)
    row = scorer.score(coq_problems(tiny_rows("add_zero_r")).problems[0], 0, "   \n")
    scorer.close()
    assert (row["status"], row["reason"]) == ("failed", "no Coq proof in the completion")


def run_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and len(captured.err.splitlines()) == 1, captured.err
    return captured.err


def test_bad_coq_arguments_fail_before_the_model_loads(tmp_path, capsys, no_model_load):
    base = ["evaluate", "coq", "--model", "m", "--dataset", str(TINY_COQ), "--split", "train"]
    base += ["--output", str(tmp_path / "o")]
    not_executable = tmp_path / "coqidetop"
    not_executable.write_text("#!/bin/sh\n")
    not_executable.chmod(stat.S_IRUSR | stat.S_IWUSR)
    bad_header = tmp_path / "bad.jsonl"
    bad_header.write_text(
        json.dumps({"name": "t", "formal_statement": "Theorem t : True.", "header": "Axiom a : False."})
    )
    no_statement = tmp_path / "none.jsonl"
    no_statement.write_text(json.dumps({"name": "t", "statement": "Theorem t : True."}) + "\n")
    cases = [
        (["--coq-command", "/nonexistent/coqidetop"], "--coq-command: /nonexistent/coqidetop runs /nonexistent/"),
        (["--coq-command", str(not_executable)], "which is not an executable file"),
        (["--coq-timeout", "0"], "--coq-timeout must be > 0 seconds"),
        (["--coq-workers", "0"], "--coq-workers must be >= 1"),
        (["--coq-header", "Require Import Arith"], "--coq-*: CoqServerConfig.header may hold only"),
        (["--dataset", str(bad_header), "--split", "test"], "--dataset: row 0 (t) has a `header` that may hold only"),
        (["--dataset", str(no_statement), "--split", "test"], "--statement-field formal_statement: row 0 has no"),
        (["--split", "valid"], "--split valid: no row of"),
    ]
    for extra, message in cases:
        assert message in run_error(capsys, [*base, *extra]), extra
    assert no_model_load == []


@pytest.mark.slow
def test_the_tiny_policy_evaluates_end_to_end(tiny_models, tmp_path, capsys):
    output = tmp_path / "eval"
    argv = ["evaluate", "coq", "--model", tiny_models["policy"], "--dataset", str(TINY_COQ), "--split", "train"]
    argv += ["--limit", "3", "--n", "2", "--k", "1,2", "--max-new-tokens", "24", "--output", str(output)]
    assert main([*argv, "--coq-workers", "2", "--no-progress"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"--split train: the 8 of 8 rows of {TINY_COQ} whose `split` column is 'train'"
    assert out[-1].startswith(f"Outputs: {output.resolve()} ")
    summary = json.loads((output / "summary.json").read_text())
    assert (summary["problems"], summary["attempts"]) == (3, 6)
    # The random policy proves nothing, but every attempt got a verdict from Coq or its precheck, not a fault.
    assert set(summary["statuses"]) <= {"passed", "failed", "rejected"}
    assert Path(output / "samples.jsonl").read_text().count("\n") == 6
