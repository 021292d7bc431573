"""coq.precheck: the boundary. Every vernacular and refused tactic is refused at its sentence index before Coq
runs; honest proofs in every style get through with their steps as spans of the submitted proof."""

import json

import pytest

from tests.launch import TESTS_DIR
from trl_verigate.coq.config import CoqProofRequest, CoqServerConfig
from trl_verigate.coq.precheck import Prepared, prepare, sentence_head, statement_name, tactics_for
from trl_verigate.prover_pool.results import VerificationResult

from .helpers import STATEMENT

CORPUS = [json.loads(line) for line in (TESTS_DIR / "data" / "coq_adversarial.jsonl").open()]
CONFIG = CoqServerConfig(workers=1)


def prepared(proof, statement=STATEMENT, config=CONFIG):
    return prepare(CoqProofRequest(statement, proof), config, tactics_for(config))


@pytest.mark.parametrize("row", [r for r in CORPUS if r["expect"] == "rejected"], ids=lambda r: r["mechanism"])
def test_corpus_rows_the_precheck_owns_are_rejected(row):
    result = prepared(row["proof"], row["statement"])
    assert isinstance(result, VerificationResult) and result.status == "rejected", result
    assert "\n" not in result.reason


@pytest.mark.parametrize(
    "proof, index, word",
    [
        ("intros n. Admitted.", 1, "Admitted"),
        ("intros n.\n- Axiom x : False.", 2, "Axiom"),
        ("intros n. 2: { Set Printing All. }", 2, "Set"),
        ("intros n. try (admit).", 1, "admit"),
        ("first [exact_no_check I | idtac].", 0, "exact_no_check"),
        ("intros n. my_secret_tactic.", 1, "my_secret_tactic"),
    ],
)
def test_a_refusal_names_the_sentence_and_the_word(proof, index, word):
    result = prepared(proof)
    assert result.status == "rejected" and result.first_error_tactic == index
    assert result.reason.startswith(f"sentence {index}:") and f"`{word}`" in result.reason


def test_extra_tactics_extend_the_allow_list():
    config = CoqServerConfig(workers=1, extra_tactics=["my_secret_tactic"])
    assert isinstance(prepared("intros n. my_secret_tactic.", config=config), Prepared)


def test_the_wrapper_is_not_a_step_and_spans_index_the_submitted_proof():
    proof = "Proof.\n  induction n as [|n IH].\n  - reflexivity. (* done. *)\n  - simpl. rewrite IH. reflexivity.\nQed."
    result = prepared(proof)
    texts = [t.text for t in result.tactics]
    assert texts == ["induction n as [|n IH].", "-", "reflexivity.", "-", "simpl.", "rewrite IH.", "reflexivity."]
    assert all(proof[t.start : t.end] == t.text for t in result.tactics)
    assert result.code.sentences == tuple(texts) and result.code.name == "t"


def test_heads_skip_comments_selectors_and_parentheses():
    assert sentence_head("(* c. *) all: (intros; auto).") == "intros"
    assert sentence_head("[x]: exact I.") == "exact"
    assert sentence_head("only 1: lia.") == "lia"
    assert sentence_head("split; [> lia | auto ].") == "split"
    assert sentence_head("[> lia | auto ].") == "lia"


def test_retired_and_vernacular_openings_say_what_to_write():
    assert "use `lia`" in prepare(CoqProofRequest(STATEMENT, "omega."), CONFIG, tactics_for(CONFIG)).reason
    proof_with = prepare(
        CoqProofRequest(STATEMENT, "Proof with auto.\nintros n. lia.\nQed."), CONFIG, tactics_for(CONFIG)
    )
    assert "start the proof with `Proof.`" in proof_with.reason
    assert sentence_head("#[local] Definition x := 0.") == "#["


@pytest.mark.parametrize("statement", ["Definition x := 0.", "Theorem t : True. Theorem u : True.", "Goal True.", 3])
def test_a_statement_that_is_not_one_theorem_is_an_error_naming_the_field(statement):
    assert statement_name(statement) is None
    result = prepare(CoqProofRequest(statement, "auto."), CONFIG, tactics_for(CONFIG))
    assert result.status == "error" and result.reason.startswith("CoqProofRequest.statement")


def test_print_assumptions_sampling_is_seeded_and_near_the_fraction():
    config = CoqServerConfig(workers=1, print_assumptions="sample", print_assumptions_fraction=0.25, seed=3)
    picks = [prepared(f"intros n. idtac {i}. lia.", config=config).code.print_assumptions for i in range(400)]
    again = [prepared(f"intros n. idtac {i}. lia.", config=config).code.print_assumptions for i in range(400)]
    assert picks == again and 60 < sum(picks) < 140
    assert prepared("auto.").code.print_assumptions  # the default: always


@pytest.mark.parametrize(
    "proof",
    [
        "intros x y H. Z.swap_greater. exact H.",
        "intros. Z.div_mod_to_equations. lia.",
        "intros. Z.to_euclidean_division_equations. lia.",
        "intros. Nat.order.",
        "intros. Lia.lia.",  # a qualified form of an allowed tactic
        "intros. Coq.micromega.Lia.lia.",
        "2: Z.swap_greater.",
        "Proof .\n  intros n. lia.\nQed .",
        "Proof.\r\n  intros n.\r\n  lia.\r\nDefined.\r\n",
        "intros n. now_show (n + 0 = n). lia.",
    ],
)
def test_honest_shapes_an_adversarial_review_saw_refused_get_through(proof):
    assert isinstance(prepared(proof), Prepared), prepared(proof)


def test_a_qualified_name_off_the_list_is_refused_as_a_tactic_not_a_command():
    result = prepared("intros. Z.my_tactic.")
    assert result.status == "rejected" and "`Z.my_tactic` is not an allowed tactic" in result.reason
    config = CoqServerConfig(workers=1, extra_tactics=["Z.my_tactic"])
    assert isinstance(prepared("intros. Z.my_tactic.", config=config), Prepared)


def test_the_wrapper_with_a_space_is_not_a_step():
    result = prepared("Proof .\n  intros n. lia.\nQed .")
    assert [t.text for t in result.tactics] == ["intros n.", "lia."]


def test_a_leading_restatement_of_the_trusted_statement_is_dropped():
    proof = "Theorem t : forall n : nat,\n    n + 0 = n.\nProof.\n  intros n. lia.\nQed."
    result = prepared(proof)
    assert [t.text for t in result.tactics] == ["intros n.", "lia."]
    assert result.code.sentences == ("intros n.", "lia.")


@pytest.mark.parametrize(
    "proof",
    [
        "Theorem t : forall n : nat, n = n + 0. Proof. intros n. lia. Qed.",  # another statement
        "Lemma t : forall n : nat, n + 0 = n. Proof. intros n. lia. Qed.",  # another keyword
        "intros n. Theorem t : forall n : nat, n + 0 = n. lia.",  # not leading
        "Proof. Theorem t : forall n : nat, n + 0 = n. intros n. lia. Qed.",  # inside the proof
    ],
)
def test_only_the_trusted_statement_itself_and_only_first_is_dropped(proof):
    result = prepared(proof)
    assert result.status == "rejected" and "vernacular command" in result.reason, result


@pytest.mark.parametrize("statement, name", [("Theorem αβ : True.", "αβ"), ("Lemma éa' : True.", "éa'")])
def test_a_theorem_name_may_start_with_any_letter(statement, name):
    assert statement_name(statement) == name
    assert prepared("exact I.", statement=statement).code.name == name


@pytest.mark.parametrize(
    "proof, what",
    [("intros n.\rlia.", "'\\r'"), ("intros n.\x00 lia.", "'\\x00'"), ("intros \ud800.", "lone surrogate")],
)
def test_text_the_protocol_cannot_carry_is_rejected(proof, what):
    result = prepared(proof)
    assert result.status == "rejected" and what in result.reason
