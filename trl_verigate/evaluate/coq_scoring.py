"""Coq scoring: each completion's proof (a ```coq block, else the whole completion, as the Coq process oracle reads
it: `coq.extract_coq_proof`) verified by a `CoqServer` against the row's trusted statement (`ProofScorer` runs them)."""

from __future__ import annotations

from trl_verigate.coq import CoqProofRequest, extract_coq_proof
from trl_verigate.evaluate.problems import Problem
from trl_verigate.evaluate.proof_scoring import ProofScorer


class CoqScorer(ProofScorer):
    """Verify Coq attempts concurrently; see `ProofScorer`.

    Args:
        verifier: a started `CoqServer` (anything with its batch `verify`).
        timeout: seconds per proof.
        statement_field: the row's column of the trusted statement (`Theorem name : T.`).
        header_field: the row's column of the trusted header (empty or missing: the server's).
        concurrency: proofs in flight at once (the pool's workers).
    """

    timeout_flag = "--coq-timeout"

    def __init__(
        self,
        verifier,
        timeout: float,
        statement_field: str = "formal_statement",
        header_field: str = "header",
        concurrency: int = 4,
    ):
        if not callable(getattr(verifier, "verify", None)):
            raise TypeError(f"verifier must be a CoqServer, got {type(verifier).__name__}")
        super().__init__(verifier, timeout, concurrency)
        self.statement_field = statement_field
        self.header_field = header_field

    def request(self, problem: Problem, completion: str):
        found = extract_coq_proof(completion)
        if found is None:
            return None, None, "no Coq proof in the completion"
        proof = found[0]
        header = problem.row.get(self.header_field) or None
        return proof, CoqProofRequest(problem.row[self.statement_field], proof, header=header), None
