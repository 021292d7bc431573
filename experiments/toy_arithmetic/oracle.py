"""The arithmetic backend of the process oracle (`trl_verigate.rewards.process.ProcessOracle`).

`ProcessVerifiedGRPOTrainer(process_oracle=ArithmeticProcessOracle())` trains on this task with the trainer's own code:
the verdict has the same shape as the Lean backend's, in completion character coordinates.

- Steps ("tactics") are the completion's non-empty lines; ``spans[j]`` is line j without its newline.
- A line is a right step when `SymbolicStepScorer` (the scorer VeriGate uses here) finds at least one numeric
  relation in it and all of them hold; a line with nothing checkable is a wrong step (``neutral_score=0``). The line
  holding the final ``\\boxed{}`` answer is the answer step: right exactly when the answer is.
- ``passed`` is the project's math reward (`MathAccuracyReward`, the outcome reward GRPO gets), so the outcome g of
  the process trainer is GRPO's reward and ``process_advantage_coef=0`` reproduces GRPO.
- A failed completion's ``first_error`` is its first wrong step; with every step right (a wrong or missing answer
  after right steps, or a truncated chain) it is the answer line's index, or ``len(spans)`` when there is no answer
  line (an incomplete proof in Lean terms: every step locally valid). A passed one has ``first_error == len(spans)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trl_verigate.rewards.lean_proofs import completion_text
from trl_verigate.rewards.math import MathAccuracyReward
from trl_verigate.rewards.process import ProcessVerdict
from trl_verigate.rewards.symbolic import SymbolicStepScorer

ANSWER_MARKER = "\\boxed"


def line_spans(text: str) -> list[tuple[int, int]]:
    """[start, end) of every non-empty line, trailing whitespace excluded."""
    spans, position = [], 0
    for line in text.split("\n"):
        stripped = line.rstrip()
        if stripped.strip():
            start = position + len(stripped) - len(stripped.lstrip())
            spans.append((start, position + len(stripped)))
        position += len(line) + 1
    return spans


class ArithmeticProcessOracle:
    """Verdicts for completions of `task` problems; rows need the ``solution`` column (gold ``\\boxed{N}``)."""

    def __init__(self, solution_field: str = "solution", accuracy: MathAccuracyReward | None = None):
        self.solution_field = solution_field
        self.accuracy = accuracy if accuracy is not None else MathAccuracyReward()
        self.scorer = SymbolicStepScorer(neutral_score=0.0)

    def step_is_right(self, line: str) -> bool:
        return self.scorer.score_step(line) == 1.0

    def verify(self, prompts: Sequence, rows: Sequence[dict[str, Any]], completions: Sequence) -> list[ProcessVerdict]:
        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows for {len(completions)} completions: give one row per completion")
        missing = [index for index, row in enumerate(rows) if self.solution_field not in row]
        if missing:
            raise ValueError(
                f"row {missing[0]} has no `{self.solution_field}` column (keys: {sorted(rows[missing[0]])}); "
                "pass solution_field= naming the column with the gold \\boxed{N} answer"
            )
        texts = [completion_text(completion) for completion in completions]
        outcomes = self.accuracy(texts, solution=[row[self.solution_field] for row in rows])
        return [self._verdict(text, outcome == 1.0) for text, outcome in zip(texts, outcomes, strict=True)]

    def _verdict(self, text: str, passed: bool) -> ProcessVerdict:
        spans = tuple(line_spans(text))
        if passed:
            return ProcessVerdict("passed", spans, len(spans), ())
        wrong = []
        for index, (start, end) in enumerate(spans):
            line = text[start:end]
            # The answer line is wrong here because the outcome is (a right answer line means passed).
            if ANSWER_MARKER in line or not self.step_is_right(line):
                wrong.append(index)
        first_error = wrong[0] if wrong else len(spans)
        return ProcessVerdict("failed", spans, first_error, tuple(wrong))
