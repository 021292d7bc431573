"""Math scoring with the project's math-verify reward (`MathAccuracyReward`): the completion's final answer against
the gold one, and answer equivalence for majority voting.

Statuses: "correct", "wrong", "no_answer" (nothing to extract) and "error" (parsing or comparing failed or timed out;
counted as wrong, as in training).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from trl_verigate.evaluate.problems import Problem
from trl_verigate.rewards.math import MathAccuracyReward


class MathScorer:
    """Scores attempts in the calling thread (math-verify's deadline is a signal timer there)."""

    def __init__(self, timeout_seconds: float = 5.0):
        self.reward = MathAccuracyReward(timeout_seconds)
        self._equivalent: dict[tuple[str, str], bool] = {}

    def submit(self, problem: Problem, attempt: int, completion: str, on_row: Callable[[dict], None]) -> None:
        on_row(self.score(problem, attempt, completion))

    def drain(self) -> None:
        """Nothing is in flight: `submit` scores at once."""

    def close(self) -> None:
        """Nothing to release."""

    def score(self, problem: Problem, attempt: int, completion: str) -> dict:
        started = time.perf_counter()
        answer = self.reward.predicted_answer(completion, problem.gold)  # the reward's own reading of it
        if answer is not None and not answer.strip():
            answer = None  # an empty \boxed{} answers nothing, and must not vote in maj@k
        failures = self.reward.failures
        correct = self.reward([completion], solution=[problem.gold])[0] == 1.0
        if correct:
            status = "correct"
        elif self.reward.failures > failures:
            status = "error"
        elif answer is None:
            status = "no_answer"
        else:
            status = "wrong"
        return {
            "problem_id": problem.id,
            "attempt": attempt,
            "completion": completion,
            "answer": answer,
            "status": status,
            "correct": correct,
            "first_error_tactic": None,
            "time_s": time.perf_counter() - started,
        }

    def equivalent(self, first: str, second: str) -> bool:
        """Whether two extracted answers are equal: the same text, or equal by math-verify (the reward's own
        comparison, each answer boxed so both are read whole)."""
        if first.strip() == second.strip():
            return True  # the same text, also where math-verify cannot parse it (it would call it unequal)
        key = (first, second)
        if key not in self._equivalent:
            score = self.reward([f"\\boxed{{{second}}}"], solution=[f"\\boxed{{{first}}}"])[0]
            self._equivalent[key] = score == 1.0
        return self._equivalent[key]
