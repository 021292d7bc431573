"""Lean as a process oracle (`LeanProcessOracle`), and the Lean outcome reward `LeanProofReward`, an ordinary TRL
reward function named `lean_proof`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from trl_verigate.lean_server import MINIF2F_HEADER, VerificationResult
from trl_verigate.lean_server.service.verifier import Verifier
from trl_verigate.rewards.lean_proofs import COMPLETION_FORMATS, completion_text, extract_row_proof
from trl_verigate.rewards.process import ProcessOracle, ProcessVerdict, ProofReward


def _offset_of(text: str, line: int, column: int) -> int:
    """Character offset of (1-based line, 0-based column in characters) in ``text``, clamped to the text."""
    position = 0
    for _ in range(max(line, 1) - 1):
        newline = text.find("\n", position)
        if newline < 0:
            return len(text)
        position = newline + 1
    line_end = text.find("\n", position)
    line_end = len(text) if line_end < 0 else line_end
    return min(position + max(column, 0), line_end)


class LeanProcessOracle:
    """The Lean backend of the process oracle: completions to requests (`lean_proofs.extract_proof`), a `Verifier`
    for the verdicts, verdicts back to completion coordinates.

    Args:
        verifier: a `LeanServer` (started) or `LeanClient`.
        completion_format: "auto", "proof_body" or "fenced_block" (see `lean_proofs`).
        timeout: seconds per proof (None: the verifier's default).
        statement_field: the row key of the trusted statement.
        header_field: the row key of the trusted header.
    """

    def __init__(
        self,
        verifier: Verifier,
        completion_format: str = "auto",
        timeout: float | None = None,
        statement_field: str = "formal_statement",
        header_field: str = "header",
    ):
        if not isinstance(verifier, Verifier):
            raise TypeError(
                f"verifier must have verify()/averify() like LeanServer and LeanClient, got {type(verifier).__name__}"
            )
        if completion_format not in COMPLETION_FORMATS:
            raise ValueError(f"completion_format must be one of {COMPLETION_FORMATS}, got {completion_format!r}")
        self.verifier = verifier
        self.completion_format = completion_format
        self.timeout = timeout
        self.statement_field = statement_field
        self.header_field = header_field
        config = getattr(verifier, "config", None)
        self.default_header = getattr(config, "header", MINIF2F_HEADER)

    def verify(self, prompts: Sequence, rows: Sequence[dict[str, Any]], completions: Sequence) -> list[ProcessVerdict]:
        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows for {len(completions)} completions: give one row per completion")
        texts = [completion_text(completion) for completion in completions]
        extracted = [
            extract_row_proof(
                text, row, self.statement_field, self.header_field, self.default_header, self.completion_format
            )
            for row, text in zip(rows, texts, strict=True)
        ]
        to_send = [index for index, proof in enumerate(extracted) if proof.request is not None]
        results: dict[int, VerificationResult] = {}
        if to_send:
            answers = self.verifier.verify([extracted[index].request for index in to_send], timeout=self.timeout)
            if len(answers) != len(to_send):
                raise RuntimeError(f"the verifier answered {len(answers)} of {len(to_send)} requests")
            results = dict(zip(to_send, answers, strict=True))
        verdicts = []
        for index, (text, proof) in enumerate(zip(texts, extracted, strict=True)):
            if proof.request is None:
                verdicts.append(ProcessVerdict(status="failed", reason=proof.reason))
            else:
                verdict = self._verdict(text, proof, results[index])
                verdicts.append(replace(verdict, rechecked=results[index].rechecked))
        return verdicts

    @staticmethod
    def _verdict(text: str, proof, result: VerificationResult) -> ProcessVerdict:
        spans = tuple((proof.proof_start + tactic.start, proof.proof_start + tactic.end) for tactic in result.tactics)
        if any(text[start:end] != tactic.text for (start, end), tactic in zip(spans, result.tactics, strict=True)):
            # The verifier split a different text than the one sent: no tactic can be credited safely.
            spans = ()
        if result.status not in ("passed", "failed"):
            return ProcessVerdict(result.status, spans, 0, tuple(range(len(spans))), result.reason)
        first_error = min(max(int(result.first_error_tactic), 0), len(spans))
        if result.status == "passed":
            return ProcessVerdict("passed", spans, len(spans), (), None)
        error_tactics = set()
        for message in result.messages:
            if message.severity != "error":
                continue
            offset = _offset_of(proof.submitted, message.line, message.column) - proof.submitted_proof_start
            for index, (start, end) in enumerate(spans):
                if proof.proof_start + offset in range(start, end):
                    error_tactics.add(index)
        return ProcessVerdict("failed", spans, first_error, tuple(sorted(error_tactics)), result.reason)


class LeanProofReward(ProofReward):
    """`ProofReward` of a Lean process oracle, logged as `lean_proof`: `reward_funcs=[LeanProofReward(oracle)]` in any
    TRL trainer."""

    def __init__(self, oracle: ProcessOracle):
        super().__init__(oracle, name="lean_proof")
