"""What the Coq tests share: the trusted statement most of them prove, and jobs built without the precheck."""

from trl_verigate.coq.precheck import CoqJob

STATEMENT = "Theorem t : forall n : nat, n + 0 = n."


def job(proof_sentences, statement=STATEMENT, name="t", print_assumptions=True) -> CoqJob:
    """A job as the precheck would build it, for tests that run what the precheck refuses."""
    return CoqJob(statement, name, tuple(proof_sentences), print_assumptions)
