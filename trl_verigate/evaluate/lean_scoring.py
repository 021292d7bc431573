"""Lean scoring: each completion's proof (the two completion shapes of `lean_proofs`, as the Lean process trainer
reads them) verified by a `LeanServer` or `LeanClient` (`proof_scoring.ProofScorer` runs them)."""

from __future__ import annotations

from trl_verigate.evaluate.problems import Problem
from trl_verigate.evaluate.proof_scoring import ProofScorer
from trl_verigate.lean_server import MINIF2F_HEADER
from trl_verigate.lean_server.service.verifier import Verifier
from trl_verigate.rewards.lean_proofs import COMPLETION_FORMATS, extract_row_proof


class LeanScorer(ProofScorer):
    """Verify Lean attempts concurrently; see `ProofScorer`.

    Args:
        verifier: a started `LeanServer` or a `LeanClient`.
        timeout: seconds per proof.
        completion_format: "auto", "proof_body" or "fenced_block" (see `lean_proofs`).
        statement_field: the row's column of the trusted statement.
        header_field: the row's column of the trusted header.
        concurrency: proofs in flight at once (the pool's workers, or what the servers take).
    """

    timeout_flag = "--lean-timeout"

    def __init__(
        self,
        verifier: Verifier,
        timeout: float,
        completion_format: str = "auto",
        statement_field: str = "formal_statement",
        header_field: str = "header",
        concurrency: int = 4,
    ):
        if not isinstance(verifier, Verifier):
            raise TypeError(f"verifier must be a LeanServer or LeanClient, got {type(verifier).__name__}")
        if completion_format not in COMPLETION_FORMATS:
            raise ValueError(f"--completion-format must be one of {COMPLETION_FORMATS}, got {completion_format!r}")
        super().__init__(verifier, timeout, concurrency)
        self.completion_format = completion_format
        self.statement_field = statement_field
        self.header_field = header_field
        self.default_header = getattr(getattr(verifier, "config", None), "header", MINIF2F_HEADER)

    def request(self, problem: Problem, completion: str):
        extracted = extract_row_proof(
            completion,
            problem.row,
            self.statement_field,
            self.header_field,
            self.default_header,
            self.completion_format,
        )
        return extracted.proof, extracted.request, extracted.reason
