"""Seeded multi-step arithmetic problems whose difficulty is the number of operations.

A problem is a chain ``a op1 b op2 c ...`` with ``+`` and ``-`` only, so left-to-right evaluation is the usual one,
and every intermediate result stays in [0, 3 * max_operand] (no negative numbers for the step checker to misread). The
reference completion writes one verified step per line, each rewriting the rest of the chain with its first
operation done, then the answer boxed (no spaces: every digit and operator is one token of the tiny tokenizer):

    Compute: 12+7-3
    12+7-3=19-3
    19-3=16
    \\boxed{16}

The gold answer goes in the ``solution`` column as ``\\boxed{N}``, the format `trl_verigate.rewards.math.
accuracy_reward` reads from a MATH-style solution; against a boxed gold it only accepts a boxed predicted answer,
so a completion cut off mid-chain is never rewarded for an intermediate number that happens to equal the answer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

MAX_OPERAND = 9  # operands are 1..max_operand (default); results stay in [0, 3 * max_operand]
PROMPT_TEMPLATE = "Compute: {expression}\n"


def _chain(operators, numbers) -> str:
    """``+7-3`` for operators ``+ -`` and numbers ``7 3``; no spaces, so every character is one token."""
    return "".join(f"{operator}{number}" for operator, number in zip(operators, numbers, strict=True))


@dataclass(frozen=True)
class Problem:
    numbers: tuple[int, ...]
    operators: tuple[str, ...]

    @property
    def difficulty(self) -> int:
        return len(self.operators)

    @property
    def expression(self) -> str:
        return f"{self.numbers[0]}{_chain(self.operators, self.numbers[1:])}"

    def steps(self) -> list[str]:
        """The verified steps, one per operation: each rewrites the remaining chain with its first operation done,
        ``12+7-3=19-3`` then ``19-3=16``. Each step copies the previous step's right side (a local copy that does
        not depend on the chain's length) and is a true equation the step checkers can verify on its own."""
        steps, value = [], self.numbers[0]
        for index, (operator, number) in enumerate(zip(self.operators, self.numbers[1:], strict=True)):
            result = value + number if operator == "+" else value - number
            rest = _chain(self.operators[index + 1 :], self.numbers[index + 2 :])
            steps.append(f"{value}{operator}{number}{rest}={result}{rest}")
            value = result
        return steps

    @property
    def answer(self) -> int:
        value = self.numbers[0]
        for operator, number in zip(self.operators, self.numbers[1:], strict=True):
            value = value + number if operator == "+" else value - number
        return value

    @property
    def prompt(self) -> str:
        return PROMPT_TEMPLATE.format(expression=self.expression)

    @property
    def solution(self) -> str:
        return f"\\boxed{{{self.answer}}}"

    def completion(self) -> str:
        return "\n".join([*self.steps(), self.solution])

    def row(self) -> dict:
        return {"prompt": self.prompt, "solution": self.solution, "difficulty": self.difficulty}


def random_problem(rng: random.Random, difficulty: int, max_operand: int = MAX_OPERAND) -> Problem:
    if difficulty < 1:
        raise ValueError(f"difficulty={difficulty} must be at least 1 operation")
    max_value = 3 * max_operand
    value = rng.randint(1, max_operand)
    numbers, operators = [value], []
    for _ in range(difficulty):
        operator = rng.choice("+-")
        if operator == "+" and value + 1 > max_value:
            operator = "-"
        if operator == "-" and value < 1:
            operator = "+"
        if operator == "+":
            number = rng.randint(1, min(max_operand, max_value - value))
            value += number
        else:
            number = rng.randint(1, min(max_operand, value))
            value -= number
        numbers.append(number)
        operators.append(operator)
    return Problem(tuple(numbers), tuple(operators))


def make_problems(
    seed: int, difficulties: list[int], count: int, exclude: set[str] | None = None, max_operand: int = MAX_OPERAND
) -> list[Problem]:
    """``count`` distinct problems, each of a difficulty drawn from ``difficulties``, none whose prompt is in
    ``exclude`` (so held-out sets never overlap training sets). Small difficulties have few distinct problems (126
    with one operation and operands 1-9, 1,899 with two, 29,541 with three), so a large ``count`` holds more of the
    larger ones."""
    if count < 0:
        raise ValueError(f"count={count} must be non-negative")
    rng = random.Random(seed)
    seen = set(exclude or ())
    problems: list[Problem] = []
    attempts = 0
    while len(problems) < count:
        attempts += 1
        if attempts > 50 * count + 1000:
            raise ValueError(
                f"could not draw {count} distinct problems of difficulties {difficulties}: ask for fewer problems "
                "(--sft-problems, --pool-problems, --eval-problems, ...) or allow more operations"
            )
        problem = random_problem(rng, rng.choice(difficulties), max_operand)
        if problem.prompt not in seen:
            seen.add(problem.prompt)
            problems.append(problem)
    return problems


@dataclass(frozen=True)
class Splits:
    """The disjoint problem sets of the experiment.

    ``sft``: the warm start's problems (with their reference completions). ``pool``: the candidate RL training
    prompts (the warm start's screening keeps the hard ones), each drawn at most once by a run. ``calibration``: the
    prompts the warm-start checkpoint is picked on. ``held_out``: held-out prompts of the RL length. ``eval_easy``:
    held-out short prompts that measure forgetting. ``hard_candidates``: held-out prompts of the RL length the hard
    set is screened from.
    """

    sft: list[Problem]
    pool: list[Problem]
    calibration: list[Problem]
    held_out: list[Problem]
    eval_easy: list[Problem]
    hard_candidates: list[Problem]


def make_splits(
    seed: int,
    sft_operations: list[int],
    rl_operations: list[int],
    easy_operations: list[int],
    sizes: dict[str, int],
    max_operand: int = MAX_OPERAND,
) -> Splits:
    """Every set of `Splits`, ``sizes[name]`` problems each, drawn in the order sft, pool, calibration, held_out,
    eval_easy, hard_candidates, each excluding every prompt drawn before it (so no two sets share a prompt)."""
    operations = {
        "sft": sft_operations,
        "pool": rl_operations,
        "calibration": rl_operations,
        "held_out": rl_operations,
        "eval_easy": easy_operations,
        "hard_candidates": rl_operations,
    }
    used: set[str] = set()
    drawn = {}
    for offset, (name, difficulties) in enumerate(operations.items()):
        drawn[name] = make_problems(seed + offset, difficulties, sizes[name], used, max_operand)
        used |= {p.prompt for p in drawn[name]}
    return Splits(**drawn)
