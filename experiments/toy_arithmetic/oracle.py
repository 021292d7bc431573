"""Checkers that check a chain like a proof assistant: the process oracle, VeriGate's PRM, and the faithful pass.

A completion rewrites the prompt's chain one operation per line, then boxes the answer (`task`). Two readings of a
line, both exact string tests on the line with its whitespace removed:

- **Goal tracking** (the process oracle, `ArithmeticProcessOracle`, and the faithful pass). The goal starts as the
  prompt's chain. A line ``L=R`` is valid iff L is the current goal and R is the goal with its first operation done;
  the goal then becomes R. The answer line ``\\boxed{N}`` is valid iff the goal is one number equal to N; it closes
  the goal, and any later line is invalid. An invalid line leaves the goal where it was, as a prover leaves the
  goal of a failed tactic open. ``first_error`` is the first invalid line.
- **Previous written line** (`ChainStepScorer`, VeriGate's PRM here). The same test, against the right side of the
  line written before (the prompt's chain for line 1), scored 0/1. It forgives an error carried from an earlier
  line (``2+3-1=6-1`` then ``6-1=5`` scores 0, 1), as a learned PRM would.

A **faithful pass** is a correct outcome with every line valid under goal tracking. The arithmetic-only
`SymbolicStepScorer` (a line is right when its numeric relations hold, whatever chain it is about) stays available
as the hackable control (`methods`, ``verigate_arith``).

The oracle's ``passed`` is the project's math reward (`MathAccuracyReward`, GRPO's outcome reward), so the process
trainer's g is GRPO's reward and ``process_advantage_coef=0`` reproduces GRPO. Unlike a Lean pass, a pass here can
hold invalid lines (a right answer through wrong lines); the trainer scores every line of a passed completion φ = 1.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from trl_verigate.rewards.lean_proofs import completion_text
from trl_verigate.rewards.math import MathAccuracyReward
from trl_verigate.rewards.process import ProcessVerdict

ANSWER_LINE = re.compile(r"\\boxed\{(-?\d+)\}")
FIRST_OPERATION = re.compile(r"(-?\d+)([+-])(\d+)((?:[+-]\d+)*)")
NUMBER = re.compile(r"-?\d+")
PROMPT_CHAIN = re.compile(r"Compute:\s*(\S+)")


def compact(line: str) -> str:
    return "".join(line.split())


def first_operation_done(chain: str) -> str | None:
    """``12+7-3`` -> ``19-3``; None when ``chain`` has no operation or is not a chain."""
    match = FIRST_OPERATION.fullmatch(chain)
    if match is None:
        return None
    left, operator, right, rest = match.groups()
    value = int(left) + int(right) if operator == "+" else int(left) - int(right)
    return f"{value}{rest}"


def line_is_valid(line: str, goal: str | None) -> bool:
    """Whether ``line`` (compacted) continues ``goal``: a rewrite ``goal=goal with its first operation done``, or the
    answer line when the goal is one number equal to the boxed one. A closed goal (None) admits no line."""
    if goal is None:
        return False
    answer = ANSWER_LINE.fullmatch(line)
    if answer is not None:
        return NUMBER.fullmatch(goal) is not None and int(goal) == int(answer.group(1))
    sides = line.split("=")
    return len(sides) == 2 and sides[0] == goal and sides[1] == first_operation_done(goal)


def goal_after(line: str) -> str | None:
    """The goal a valid line leaves: its right side, or None (closed) after the answer line."""
    return None if ANSWER_LINE.fullmatch(line) else line.split("=")[1]


def prompt_chain(prompt: str) -> str:
    match = PROMPT_CHAIN.search(prompt)
    if match is None:
        raise ValueError(f"prompt {prompt[:60]!r} has no 'Compute: <chain>'; the checkers read the chain from it")
    return match.group(1)


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


def goal_tracking_validity(chain: str, lines: Sequence[str]) -> list[bool]:
    """Per line, valid under goal tracking from the prompt's ``chain``."""
    goal: str | None = chain
    valid = []
    for line in map(compact, lines):
        ok = line_is_valid(line, goal)
        valid.append(ok)
        if ok:
            goal = goal_after(line)
    return valid


def previous_line_validity(chain: str, lines: Sequence[str]) -> list[bool]:
    """Per line, valid against the right side of the line written before it (the prompt's chain for line 1)."""
    reference: str | None = chain
    valid = []
    for line in map(compact, lines):
        valid.append(line_is_valid(line, reference))
        sides = line.split("=")
        reference = sides[1] if len(sides) == 2 and not ANSWER_LINE.fullmatch(line) else None
    return valid


@dataclass(frozen=True)
class ChainReport:
    """One completion read by goal tracking: its line validity, outcome and what the metrics need."""

    valid: tuple[bool, ...]
    outcome: bool

    @property
    def valid_prefix(self) -> int:
        """Lines valid before the first invalid one (the answer line included)."""
        return self.valid.index(False) if False in self.valid else len(self.valid)

    @property
    def faithful(self) -> bool:
        return self.outcome and bool(self.valid) and all(self.valid)

    @property
    def spurious(self) -> bool:
        """A right answer reached through an invalid line."""
        return self.outcome and not self.faithful


class ArithmeticProcessOracle:
    """Process verdicts for completions of `task` problems by goal tracking; rows need the ``prompt`` and the
    ``solution`` column (gold ``\\boxed{N}``). A `trl_verigate.rewards.process.ProcessOracle`."""

    def __init__(self, solution_field: str = "solution", accuracy: MathAccuracyReward | None = None):
        self.solution_field = solution_field
        self.accuracy = accuracy if accuracy is not None else MathAccuracyReward()

    def reports(self, rows: Sequence[dict[str, Any]], completions: Sequence) -> list[ChainReport]:
        if len(rows) != len(completions):
            raise ValueError(f"{len(rows)} rows for {len(completions)} completions: give one row per completion")
        for index, row in enumerate(rows):
            if self.solution_field not in row or "prompt" not in row:
                raise ValueError(
                    f"row {index} lacks `prompt` or `{self.solution_field}` (keys: {sorted(row)}); pass "
                    "solution_field= naming the column with the gold \\boxed{N} answer"
                )
        texts = [completion_text(completion) for completion in completions]
        outcomes = self.accuracy(texts, solution=[row[self.solution_field] for row in rows])
        return [
            ChainReport(tuple(goal_tracking_validity(prompt_chain(row["prompt"]), _lines(text))), outcome == 1.0)
            for row, text, outcome in zip(rows, texts, outcomes, strict=True)
        ]

    def verify(self, prompts: Sequence, rows: Sequence[dict[str, Any]], completions: Sequence) -> list[ProcessVerdict]:
        verdicts = []
        for report, completion in zip(self.reports(rows, completions), completions, strict=True):
            spans = tuple(line_spans(completion_text(completion)))
            if report.outcome:
                verdicts.append(ProcessVerdict("passed", spans, len(spans), ()))
            else:
                errors = tuple(index for index, ok in enumerate(report.valid) if not ok)
                verdicts.append(ProcessVerdict("failed", spans, report.valid_prefix, errors))
        return verdicts


def _lines(text: str) -> list[str]:
    return [text[start:end] for start, end in line_spans(text)]


class ChainStepScorer:
    """VeriGate's PRM on this task (a `trl_verigate.rewards.step_scorer.StepScorer`): step j scores 1.0 when it is
    valid against the line written before it (`previous_line_validity`), else 0.0. Blank steps are no lines and
    score 0.0."""

    def score(self, prompts: list[str], steps: list[list[str]]) -> list[list[float]]:
        scores = []
        for prompt, completion_steps in zip(prompts, steps, strict=True):
            lines = [step for step in completion_steps if step.strip()]
            validity = iter(previous_line_validity(prompt_chain(prompt), lines))
            scores.append([float(next(validity)) if step.strip() else 0.0 for step in completion_steps])
        return scores
