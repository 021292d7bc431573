"""Coq as a process oracle (`CoqProcessOracle`), and the Coq outcome reward `CoqProofReward`, an ordinary TRL reward
function named `coq_proof`.

A completion's proof is read with `coq.extract_coq_proof` (a ```coq block, else the whole completion; `Proof.` and
`Qed.` optional) and verified against the row's trusted statement by a `CoqServer`. Coq stops at the first failing
sentence, so a failed proof's error lies in exactly that sentence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trl_verigate.prover_pool.results import VerificationResult
from trl_verigate.rewards.lean_proofs import completion_text
from trl_verigate.rewards.process import ProcessOracle, ProcessVerdict, ProofReward

# The statement inside an open ```coq fence, then `Proof.`: the completion continues with the tactics.
COQ_PROMPT_TEMPLATE = "Complete the following Coq proof:\n\n```coq\n{header}{formal_statement}\nProof.\n"


class CoqProcessOracle:
    """The Coq backend of the process oracle: completions to `CoqProofRequest`s, a `CoqServer` for the verdicts,
    sentence spans back to completion coordinates.

    Args:
        verifier: a `CoqServer` (started), or anything with its batch `verify(requests, timeout=...)`.
        timeout: seconds per proof (None: the verifier's default).
        statement_field: the row key of the trusted statement (`Theorem name : T.`).
        header_field: the row key of the trusted header (`Require Import …` sentences; an empty or missing value
            means the verifier's default header).
    """

    def __init__(
        self,
        verifier,
        timeout: float | None = None,
        statement_field: str = "formal_statement",
        header_field: str = "header",
    ):
        if not callable(getattr(verifier, "verify", None)):
            raise TypeError(
                f"verifier must have verify(requests, timeout=...) like CoqServer, got {type(verifier).__name__}"
            )
        self.verifier = verifier
        self.timeout = timeout
        self.statement_field = statement_field
        self.header_field = header_field

    def verify(self, prompts: Sequence, rows: Sequence[dict[str, Any]], completions: Sequence) -> list[ProcessVerdict]:
        from trl_verigate.coq import CoqProofRequest, extract_coq_proof

        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows for {len(completions)} completions: give one row per completion")
        texts = [completion_text(completion) for completion in completions]
        extracted = [extract_coq_proof(text) for text in texts]
        to_send = []
        for index, (row, proof) in enumerate(zip(rows, extracted, strict=True)):
            if proof is None:
                continue
            statement = row.get(self.statement_field)
            if not statement:
                raise ValueError(
                    f"row {index} has no `{self.statement_field}` (the trusted Coq statement): set statement_field to "
                    "the column that holds it"
                )
            header = row.get(self.header_field) or None
            to_send.append((index, CoqProofRequest(statement, proof[0], header=header)))
        results: dict[int, VerificationResult] = {}
        if to_send:
            answers = self.verifier.verify([request for _, request in to_send], timeout=self.timeout)
            if len(answers) != len(to_send):
                raise RuntimeError(f"the verifier answered {len(answers)} of {len(to_send)} requests")
            results = {index: answer for (index, _), answer in zip(to_send, answers, strict=True)}
        verdicts = []
        for index, (text, proof) in enumerate(zip(texts, extracted, strict=True)):
            if proof is None:
                verdicts.append(ProcessVerdict(status="failed", reason="no Coq proof in the completion"))
            else:
                verdicts.append(_verdict(text, proof[1], results[index]))
        return verdicts


def _verdict(text: str, proof_start: int, result: VerificationResult) -> ProcessVerdict:
    spans = tuple((proof_start + tactic.start, proof_start + tactic.end) for tactic in result.tactics)
    if any(text[start:end] != tactic.text for (start, end), tactic in zip(spans, result.tactics, strict=True)):
        # The verifier split a different text than the one sent: no sentence can be credited safely.
        spans = ()
    if result.status not in ("passed", "failed"):
        return ProcessVerdict(result.status, spans, 0, tuple(range(len(spans))), result.reason, result.rechecked)
    if result.status == "passed":
        return ProcessVerdict("passed", spans, len(spans), (), None, result.rechecked)
    first_error = min(max(int(result.first_error_tactic), 0), len(spans))
    # Coq stops at the first failing sentence: the error is in it, and no later sentence ran.
    error_tactics = (first_error,) if first_error < len(spans) else ()
    return ProcessVerdict("failed", spans, first_error, error_tactics, result.reason, result.rechecked)


class CoqProofReward(ProofReward):
    """`ProofReward` of a Coq process oracle, logged as `coq_proof`: `reward_funcs=[CoqProofReward(oracle)]` in any
    TRL trainer."""

    def __init__(self, oracle: ProcessOracle):
        super().__init__(oracle, name="coq_proof")
