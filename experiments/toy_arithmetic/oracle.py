"""Checkers that check a chain like a proof assistant: the process oracle, VeriGate's PRM, and the faithful pass.

A completion rewrites the prompt's chain one operation per line, then boxes the answer (`task`). Two readings of a
line, both exact string tests on the line with its whitespace removed:

- **Goal tracking.** The goal starts as the prompt's chain. A line ``L=R`` is valid iff L is the current goal and R
  is the goal with its first operation done; the goal then becomes R. The answer line ``\\boxed{N}`` is valid iff
  the goal is one number equal to N; it closes the goal, and any later line is invalid. An invalid line leaves the
  goal where it was, as a prover leaves the goal of a failed tactic open.
- **Previous written line.** The same test against the right side of the line written before (the prompt's chain
  for line 1). It forgives an error carried from an earlier line (``2+3-1+4=6-1+4`` then ``6-1+4=5+4`` reads
  invalid, valid), as a prover that recovers from an error does.

A **faithful pass** is a right answer with every line valid under goal tracking: the outcome of every arm
(`FaithfulPassReward`; the process oracle's ``passed``). A **spurious** pass is a right answer through an invalid
line. The process oracle (`ArithmeticProcessOracle`) takes the first error from goal tracking and the lines that
carry an error from the previous-line test, so first-error propagation on and off score a carried slip differently
(on: every line from the slip on gets d2; off: only the slip). Its step spans start at each line's decision point,
the right side after ``=`` (the number inside ``\\boxed{}`` for the answer line): the trainer credits a step's
first token, and the first token of a line only copies the line before.

VeriGate's PRM here (`NoisyChainStepScorer`) is the previous-line test with a fixed share of its labels flipped,
each flip fixed by the line and what it is checked against, as a learned PRM is consistently wrong about the same
step. The control arm uses the same PRM as its outcome reward (`PRMOutcomeReward`).
"""

from __future__ import annotations

import hashlib
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


def decision_spans(text: str) -> list[tuple[int, int]]:
    """Each line's span from its decision point to its end: the right side after the first ``=``, the number inside
    ``\\boxed{}``, or the whole line when it has neither (or nothing after it)."""
    spans = []
    for start, end in line_spans(text):
        line = text[start:end]
        answer = re.search(r"\\boxed\{([-\d])", line)
        cut = answer.start(1) if answer else line.find("=") + 1
        spans.append((start + cut, end) if 0 < cut < len(line) else (start, end))
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
        """Passed iff faithful; a failed completion's first error by goal tracking, its error lines by the
        previous-line test; spans from each line's decision point (`decision_spans`)."""
        verdicts = []
        for row, report, completion in zip(rows, self.reports(rows, completions), completions, strict=True):
            text = completion_text(completion)
            spans = tuple(decision_spans(text))
            if report.faithful:
                verdicts.append(ProcessVerdict("passed", spans, len(spans), ()))
                continue
            carried = previous_line_validity(prompt_chain(row["prompt"]), _lines(text))
            errors = tuple(index for index, ok in enumerate(carried) if not ok)
            verdicts.append(ProcessVerdict("failed", spans, report.valid_prefix, errors))
        return verdicts


class FaithfulPassReward:
    """The outcome reward of every arm (TRL's reward-function signature): 1.0 for a faithful pass, else 0.0. Reads
    the ``prompt`` and the gold ``solution`` column."""

    __name__ = "faithful_pass"

    def __init__(self):
        self.oracle = ArithmeticProcessOracle()

    def __call__(self, prompts, completions, solution, **kwargs) -> list[float]:
        rows = [{"prompt": completion_text(p), "solution": s} for p, s in zip(prompts, solution, strict=True)]
        return [float(report.faithful) for report in self.oracle.reports(rows, completions)]


def _lines(text: str) -> list[str]:
    return [text[start:end] for start, end in line_spans(text)]


def flipped(chain: str, lines: Sequence[str], share: float, salt: str = "prm") -> list[bool]:
    """Per line, whether the noisy PRM flips its label: a hash of ``salt``, the line and the text it is checked
    against (the previous written line, or the prompt's chain), below ``share`` of its range. The same line after
    the same text always gets the same flip."""
    reference, flips = chain, []
    for line in map(compact, lines):
        digest = hashlib.blake2b(f"{salt}|{reference}|{line}".encode(), digest_size=8).digest()
        flips.append(int.from_bytes(digest, "big") / 2**64 < share)
        reference = line
    return flips


class NoisyChainStepScorer:
    """VeriGate's PRM on this task (a `trl_verigate.rewards.step_scorer.StepScorer`): step j scores 1.0 when it is
    valid against the line written before it (`previous_line_validity`), else 0.0, with the labels `flipped` picks
    inverted (``flip_share`` 0: the clean test). Blank steps are no lines and score 0.0."""

    def __init__(self, flip_share: float = 0.2):
        if not 0.0 <= flip_share <= 1.0:
            raise ValueError(f"flip_share={flip_share} must lie in [0, 1], e.g. 0.2")
        self.flip_share = flip_share

    def labels(self, prompt: str, lines: Sequence[str]) -> list[bool]:
        chain = prompt_chain(prompt)
        valid = previous_line_validity(chain, lines)
        return [ok != flip for ok, flip in zip(valid, flipped(chain, lines, self.flip_share), strict=True)]

    def score(self, prompts: list[str], steps: list[list[str]]) -> list[list[float]]:
        scores = []
        for prompt, completion_steps in zip(prompts, steps, strict=True):
            labels = iter(self.labels(prompt, [step for step in completion_steps if step.strip()]))
            scores.append([float(next(labels)) if step.strip() else 0.0 for step in completion_steps])
        return scores


class PRMOutcomeReward:
    """The control: the noisy PRM as the outcome reward (TRL's reward-function signature). 1.0 when the completion
    ends with an answer line and the PRM labels every line valid, else 0.0."""

    __name__ = "prm_outcome"

    def __init__(self, scorer: NoisyChainStepScorer):
        self.scorer = scorer

    def __call__(self, prompts, completions, **kwargs) -> list[float]:
        rewards = []
        for prompt, completion in zip(prompts, completions, strict=True):
            lines = _lines(completion_text(completion))
            ends = bool(lines) and ANSWER_LINE.fullmatch(compact(lines[-1])) is not None
            rewards.append(float(ends and all(self.scorer.labels(completion_text(prompt), lines))))
        return rewards
