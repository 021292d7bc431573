"""coq.judge, on what the real coqidetop says about attacks the precheck refuses (run here past the precheck, to
show each defence behind it holds on its own): the statement check, Print Assumptions, and Qed's kernel check."""

import asyncio

import pytest

from trl_verigate.coq.config import CoqProofRequest, CoqServerConfig
from trl_verigate.coq.judge import (
    judge,
    located_constant,
    qualified_suffixes,
    read_assumptions,
    to_locate,
    whitelisted,
)
from trl_verigate.coq.precheck import Prepared
from trl_verigate.coq.process import CoqProcess
from trl_verigate.prover_pool.results import Tactic

from .helpers import STATEMENT, job

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def answer():
    loop = asyncio.new_event_loop()
    process = CoqProcess(CoqServerConfig(workers=1))
    loop.run_until_complete(process.start("Require Import Arith Lia."))

    def run(sentences, statement=STATEMENT):
        return loop.run_until_complete(process.run_code(job(sentences, statement), 20))

    yield run
    loop.run_until_complete(process.close())
    loop.close()


def verdict(sentences, response, statement=STATEMENT, **config):
    proof = " ".join(sentences)
    tactics, position = [], 0
    for sentence in sentences:
        start = proof.index(sentence, position)
        tactics.append(Tactic(sentence, start, start + len(sentence)))
        position = start + len(sentence)
    prepared = Prepared(
        "Require Import Arith Lia.", job(sentences, statement), tuple(tactics), CoqProofRequest(statement, proof)
    )
    return judge(prepared, response, CoqServerConfig(**config), 0.1)


def test_an_honest_proof_passes_with_every_step_credited(answer):
    sentences = [
        "intros n.",
        "induction n as [|n IH].",
        "-",
        "reflexivity.",
        "-",
        "simpl.",
        "rewrite IH.",
        "reflexivity.",
    ]
    result = verdict(sentences, answer(sentences))
    assert result.passed and result.first_error_tactic == len(sentences) and result.axioms == []


def test_a_swapped_theorem_fails_the_statement_check(answer):
    # Coq accepts this: Abort drops the trusted statement and our Qed closes the new one.
    sentences = ["Abort.", "Theorem t : True.", "exact I."]
    response = answer(sentences)
    assert "failure" not in response and response["assumptions"] == "Closed under the global context"
    result = verdict(sentences, response)
    assert result.status == "failed" and "not the trusted statement" in result.reason and "True" in result.reason


def test_an_axiom_declared_inside_the_proof_fails_print_assumptions(answer):
    sentences = ["Axiom cheat : forall n, n + 0 = n.", "exact cheat."]
    response = answer(sentences)
    assert "failure" not in response  # Coq accepts an Axiom inside an open proof
    result = verdict(sentences, response)
    assert (
        result.status == "failed" and result.axioms == ["cheat"] and "axiom cheat is not whitelisted" in result.reason
    )
    assert verdict(sentences, response, axiom_whitelist=["cheat"]).passed


def test_a_guard_bypass_fails_print_assumptions(answer):
    sentences = ["Unset Guard Checking.", "exact (fix f (n : nat) : n + 0 = n := f n)."]
    result = verdict(sentences, answer(sentences))
    assert result.status == "failed" and "assumed to be guarded" in result.reason


def test_admit_then_qed_is_refused_by_coq(answer):
    result = verdict(["intros n.", "admit."], answer(["intros n.", "admit."]))
    assert result.status == "failed" and "given up goals" in result.reason and result.first_error_tactic == 2


def test_exact_no_check_with_a_wrong_term_is_caught_by_the_kernel_at_qed(answer):
    sentences = ["intros n.", "exact_no_check (eq_refl n)."]
    result = verdict(sentences, answer(sentences))
    # The tactic itself is accepted; Qed's kernel check refuses the term.
    assert result.status == "failed" and result.first_error_tactic == 2 and "expected to have type" in result.reason


def test_a_failure_is_positioned_in_the_proof(answer):
    sentences = ["intros n.", "exact (foo n)."]
    result = verdict(sentences, answer(sentences))
    (message,) = [m for m in result.messages if m.severity == "error"]
    # "foo" starts 7 characters into the second sentence, which starts at column 10.
    assert (message.line, message.column, message.end.column) == (1, 17, 20)
    assert result.goals == ["n : nat\n====================\nn + 0 = n"]


def test_read_assumptions_reads_coqs_sections():
    text = "Axioms:\nclassic : forall P : Prop,\n          P \\/ ~ P\nf is assumed to be guarded."
    assert read_assumptions(text) == (["classic"], ["f is assumed to be guarded."])
    assert read_assumptions("Closed under the global context") == ([], [])
    assert read_assumptions("something new") == ([], ["something new"])


def test_read_assumptions_reads_an_axiom_whose_type_is_on_the_next_line():
    # As coqc 8.16 prints it for an `lra` proof over the reals (copied from its output).
    text = (
        "Axioms:\nClassicalDedekindReals.sig_forall_dec\n  : forall P : nat -> Prop,\n"
        "    (forall n : nat, {P n} + {~ P n}) ->\n    {n : nat | ~ P n} + {forall n : nat, P n}\n"
        "functional_extensionality_dep\n  : forall (A : Type) (B : A -> Type) (f g : forall x : A, B x),\n"
        "    (forall x : A, f x = g x) -> f = g"
    )
    assert read_assumptions(text) == (
        ["ClassicalDedekindReals.sig_forall_dec", "functional_extensionality_dep"],
        [],
    )
    # A lone word with no type after it is not an axiom the whitelist could excuse.
    assert read_assumptions("Axioms:\nstray") == ([], ["stray"])


UINT63_ADD_SPEC = "Coq.Numbers.Cyclic.Int63.Uint63.add_spec"


@pytest.mark.parametrize(
    "name, whitelist, expected",
    [
        ("ClassicalDedekindReals.sig_forall_dec", ("sig_forall_dec",), True),
        ("Coq.Reals.ClassicalDedekindReals.sig_forall_dec", ("Coq.Reals.ClassicalDedekindReals.sig_forall_dec",), True),
        ("Coq.Reals.ClassicalDedekindReals.sig_forall_dec", ("ClassicalDedekindReals.sig_forall_dec",), True),
        ("Coq.Logic.Classical_Prop.classic", ("classic",), True),
        ("classic", ("classic",), True),
        # A name shorter than a qualified entry may stand for another axiom: only its full name can match.
        ("classic", ("Coq.Logic.Classical_Prop.classic",), False),
        ("add_spec", (UINT63_ADD_SPEC,), False),
        ("Coq.Floats.FloatAxioms.add_spec", (UINT63_ADD_SPEC,), False),
        ("Coq.Floats.FloatAxioms.add_spec", ("Uint63.add_spec",), False),
        ("my_classic", ("classic",), False),
        ("classic", ("sic",), False),
        ("Other.sig_forall_dec_bis", ("sig_forall_dec",), False),
        ("Coq.Logic.Xclassic", ("Logic.classic",), False),
        ("classic", (), False),
    ],
)
def test_the_whitelist_matches_a_qualified_entry_only_by_the_full_name(name, whitelist, expected):
    assert whitelisted(name, whitelist) is expected


def test_only_names_shorter_than_a_qualified_entry_are_located():
    assert to_locate("add_spec", (UINT63_ADD_SPEC,))
    assert to_locate("Uint63.add_spec", (UINT63_ADD_SPEC,))
    assert not to_locate("add_spec", ("add_spec",))  # a plain entry matches as printed
    assert not to_locate("classic", (UINT63_ADD_SPEC,))  # no entry could stand for it
    assert not to_locate("add_spec. Axiom x", (UINT63_ADD_SPEC,))  # only a name reaches a Locate query
    assert qualified_suffixes(("A.B.c", "d")) == ["B.c", "c"]
    assert located_constant("Constant Coq.Floats.FloatAxioms.add_spec\nConstant Other.add_spec") == (
        "Coq.Floats.FloatAxioms.add_spec"
    )
    assert located_constant("No object of basename add_spec") is None
