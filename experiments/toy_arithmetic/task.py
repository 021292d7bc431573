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
    ``exclude`` (so held-out sets never overlap training sets). Small difficulties have few distinct problems (about
    600 with one operation), so a large ``count`` holds more of the larger ones."""
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
                "(--sft-problems, --train-problems, --eval-problems) or allow more operations (--easy, --hard)"
            )
        problem = random_problem(rng, rng.choice(difficulties), max_operand)
        if problem.prompt not in seen:
            seen.add(problem.prompt)
            problems.append(problem)
    return problems


@dataclass(frozen=True)
class Splits:
    """Warm-start (easy, with completions), RL training (hard prompts) and held-out easy/hard evaluation sets."""

    sft: list[Problem]
    train: list[Problem]
    eval_easy: list[Problem]
    eval_hard: list[Problem]


def make_splits(
    seed: int,
    easy: list[int],
    hard: list[int],
    num_sft: int,
    num_train: int,
    num_eval: int,
    max_operand: int = MAX_OPERAND,
) -> Splits:
    sft = make_problems(seed, easy, num_sft, None, max_operand)
    used = {p.prompt for p in sft}
    train = make_problems(seed + 1, hard, num_train, used, max_operand)
    used |= {p.prompt for p in train}
    eval_easy = make_problems(seed + 2, easy, num_eval, used, max_operand)
    used |= {p.prompt for p in eval_easy}
    eval_hard = make_problems(seed + 3, hard, num_eval, used, max_operand)
    return Splits(sft, train, eval_easy, eval_hard)
