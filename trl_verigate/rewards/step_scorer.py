"""The step-scorer interface that VeriGate GRPO calls: ``scorer.score(prompts, steps) -> list[list[float]]``.

The question text of each completion and the list of its step texts in, one float per step out (a completion with
no steps gets ``[]``). `as_step_scorer` wraps any scorer or plain callable so that a wrong shape or a non-finite
score fails with a clear message. Kept free of torch so that the symbolic scorer imports without it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

__all__ = ["StepScorer", "as_step_scorer", "check_step_inputs"]


@runtime_checkable
class StepScorer(Protocol):
    """Anything with ``score(prompts, steps) -> list[list[float]]``, one float per step."""

    def score(self, prompts: list[str], steps: list[list[str]]) -> list[list[float]]: ...


class _ValidatedStepScorer:
    """Wraps a scorer or callable and checks that it returns one finite float per step."""

    def __init__(self, score_fn: Callable[[list[str], list[list[str]]], Sequence[Sequence[float]]], name: str):
        self._score_fn = score_fn
        self._name = name

    def score(self, prompts: list[str], steps: list[list[str]]) -> list[list[float]]:
        check_step_inputs(prompts, steps)
        raw = self._score_fn(prompts, steps)
        try:
            rows = [list(row) for row in raw]
        except TypeError as error:
            raise TypeError(
                f"step scorer {self._name} must return a list with one list of floats per completion, got "
                f"{type(raw).__name__}"
            ) from error
        if len(rows) != len(steps):
            raise ValueError(
                f"step scorer {self._name} returned {len(rows)} score lists for {len(steps)} completions; "
                "it must return one list per completion"
            )
        scores = []
        for index, (row, completion_steps) in enumerate(zip(rows, steps, strict=True)):
            if len(row) != len(completion_steps):
                raise ValueError(
                    f"step scorer {self._name} returned {len(row)} scores for completion {index}, which has "
                    f"{len(completion_steps)} steps; it must return exactly one score per step"
                )
            try:
                values = [float(value) for value in row]
            except (TypeError, ValueError) as error:
                raise TypeError(
                    f"step scorer {self._name} returned a non-numeric score for completion {index}"
                ) from error
            if not all(math.isfinite(value) for value in values):
                raise ValueError(
                    f"step scorer {self._name} returned a non-finite score for completion {index}: {values}"
                )
            scores.append(values)
        return scores

    def __repr__(self) -> str:
        return f"as_step_scorer({self._name})"


def as_step_scorer(obj) -> StepScorer:
    """Return `obj` as a `StepScorer` whose outputs are shape-checked.

    Accepts an object with a ``score(prompts, steps)`` method, or a plain callable with that signature. The result
    raises a clear error when the wrapped scorer returns the wrong number of scores or non-finite values.
    """
    if isinstance(obj, _ValidatedStepScorer):
        return obj
    if isinstance(obj, StepScorer):
        return _ValidatedStepScorer(obj.score, repr(obj))
    if callable(obj):
        return _ValidatedStepScorer(obj, getattr(obj, "__qualname__", repr(obj)))
    raise TypeError(
        f"expected a StepScorer (an object with a score(prompts, steps) method) or a callable "
        f"f(prompts, steps) -> list[list[float]], got {type(obj).__name__}"
    )


def check_step_inputs(prompts, steps) -> None:
    if not isinstance(prompts, (list, tuple)) or not all(isinstance(prompt, str) for prompt in prompts):
        raise TypeError("prompts must be a list of question strings, one per completion")
    if not isinstance(steps, (list, tuple)) or not all(
        isinstance(completion, (list, tuple)) and all(isinstance(step, str) for step in completion)
        for completion in steps
    ):
        raise TypeError("steps must be a list (one per completion) of lists of step strings")
    if len(prompts) != len(steps):
        raise ValueError(f"prompts has {len(prompts)} entries but steps has {len(steps)}; they must match")
