"""CoqServer end to end on the real coqidetop, coqc and coqchk: honest proofs in every style pass (and are
confirmed by the recheck), every row of the adversarial corpus comes back not passed, a looping proof times out
alone, and `extract_coq_proof` maps a completion's proof back to it."""

import json

import pytest

from tests.launch import TESTS_DIR
from trl_verigate.coq import CoqProofRequest, extract_coq_proof
from trl_verigate.coq.precheck import proof_steps

from .helpers import STATEMENT

pytestmark = pytest.mark.timeout(300)

CORPUS = [json.loads(line) for line in (TESTS_DIR / "data" / "coq_adversarial.jsonl").open()]

HONEST = {
    "bullets": (STATEMENT, "intros n. induction n as [|n IH].\n- reflexivity.\n- simpl. rewrite IH. reflexivity."),
    "braces": (STATEMENT, "intros n. induction n as [|n IH].\n{ reflexivity. }\n{ simpl. rewrite IH. reflexivity. }"),
    "lia": (STATEMENT, "intros n. lia."),
    "auto_with_arith": ("Lemma le_succ : forall n : nat, n <= S n.", "auto with arith."),
    "destruct_simpl_chain": (
        "Lemma negb_twice : forall b : bool, negb (negb b) = b.",
        "destruct b; simpl; reflexivity.",
    ),
    "rewrite_chain": (
        "Lemma plus_swap : forall a b : nat, a + b + 0 = b + a.",
        "intros a b. rewrite <- plus_n_O. rewrite Nat.add_comm. reflexivity.",
    ),
    "semicolon_combinators": (
        STATEMENT,
        "intros n; induction n as [|n IH]; simpl; [reflexivity | rewrite IH; reflexivity].",
    ),
    "comments_with_dots": (STATEMENT, '(* first intro. then lia. *) intros n. (* done. "*)" *) lia.'),
    "proof_qed_wrapper": (STATEMENT, "Proof.\n  intros n.\n  lia.\nQed."),
    "restated_statement": (STATEMENT, STATEMENT + "\nProof.\n  intros n.\n  lia.\nQed."),
    "selector_brace": (STATEMENT, "intros n. destruct n.\n2: { simpl. f_equal. lia. }\nreflexivity."),
}


def test_honest_proofs_in_every_style_pass_and_are_rechecked(coq_server):
    names = list(HONEST)
    results = coq_server.verify([CoqProofRequest(*HONEST[name]) for name in names])
    for name, result in zip(names, results, strict=True):
        assert result.passed and result.rechecked, (name, result.reason)
        proof = HONEST[name][1]
        assert result.first_error_tactic == len(result.tactics) == len(proof_steps(proof, HONEST[name][0]))
        assert result.axioms == []


@pytest.mark.parametrize("row", CORPUS, ids=lambda row: row["mechanism"])
def test_every_corpus_row_comes_back_not_passed(coq_server, row):
    (result,) = coq_server.verify([CoqProofRequest(row["statement"], row["proof"])])
    assert not result.passed, row["mechanism"]
    if row["expect"] != "not passed":
        assert result.status == row["expect"], (row["mechanism"], result.status, result.reason)


def test_a_looping_proof_times_out_alone(coq_server):
    looping = CoqProofRequest(STATEMENT, "intros n. repeat (assert True by auto).")
    # Proofs whose Print Assumptions is cheap (a lia proof's takes 0.3 s), so a loaded machine stays inside 3 s.
    honest = [CoqProofRequest(*HONEST["bullets"])] * 4
    results = coq_server.verify([looping, *honest], timeout=3.0)
    assert results[0].status == "timeout"
    assert all(result.passed for result in results[1:])


def test_a_failure_reports_the_failing_step_message_and_goals(coq_server):
    (result,) = coq_server.verify([CoqProofRequest(STATEMENT, "intros n.\nsimpl.\nreflexivity.")])
    assert result.status == "failed" and result.first_error_tactic == 2
    assert result.goals == ["n : nat\n====================\nn + 0 = n"]
    (error,) = [m for m in result.messages if m.severity == "error"]
    assert (error.line, error.column) == (3, 0)


def test_metrics_count_the_rechecked_passes(coq_server):
    before = coq_server.metrics()
    coq_server.verify(
        [CoqProofRequest(STATEMENT, "intros n. lia."), CoqProofRequest(STATEMENT, "intros n. reflexivity.")]
    )
    after = coq_server.metrics()
    assert after["coq/rechecked"] - before["coq/rechecked"] == 1
    assert after["coq/passes"] - before["coq/passes"] == 1
    assert after["coq/recheck_overturned"] == before["coq/recheck_overturned"]
    assert set(after) == {
        "coq/rechecked",
        "coq/recheck_overturned",
        "coq/recheck_checker_failures",
        "coq/recheck_seconds",
        "coq/passes",
    }


def test_requests_are_checked_before_anything_runs(coq_server):
    with pytest.raises(TypeError, match="CoqProofRequest"):
        coq_server.verify(["intros n. lia."])
    (result,) = coq_server.verify([CoqProofRequest(STATEMENT, "idtac. " * 20_000)])
    assert result.status == "rejected" and "max_request_bytes" in result.reason


@pytest.mark.parametrize(
    "completion, proof",
    [
        ("intros n. lia.", "intros n. lia."),
        ("Here it is:\n```coq\nProof.\n  intros n. lia.\nQed.\n```\nDone.", "Proof.\n  intros n. lia.\nQed."),
        ("```\n  auto.\n", "auto."),
        # The continuation of a prompt that opened the block: its closing fence ends the proof.
        ("\n  intros n.\n  lia.\nQed.\n```\nThat proves it.", "intros n.\n  lia.\nQed."),
        ("intros n. lia.\nQed.\n```", "intros n. lia.\nQed."),
        ("   \n", None),
    ],
)
def test_extract_coq_proof_returns_the_proof_and_its_offset(completion, proof):
    found = extract_coq_proof(completion)
    if proof is None:
        assert found is None
        return
    text, start = found
    assert text == proof and completion[start : start + len(text)] == proof


def test_a_proof_that_floods_the_output_crashes_its_worker_only(coq_server):
    # 2,500 messages of 2,000 characters: 5 MB of feedback, over the 4 MiB a proof may make coqidetop print.
    flood = CoqProofRequest("Theorem t : True.", f'do 2500 idtac "{"x" * 2000}". exact I.')
    honest = CoqProofRequest(STATEMENT, "intros n. lia.")
    flooded, after = coq_server.verify([flood, honest])
    assert flooded.status == "crashed" and "over 4 MiB" in flooded.reason, flooded.reason
    assert after.status == "passed"
