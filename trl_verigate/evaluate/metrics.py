"""The numbers an evaluation reports, as pure functions of per-problem outcomes.

- pass@k: Chen et al. (2021)'s unbiased estimator 1 - C(n-c, k)/C(n, k) of the chance that at least one of k
  attempts drawn without replacement from a problem's n attempts (c of them correct) is correct, averaged over
  problems.
- maj@k: a problem counts as solved when the answer most of its first k attempts agree on is correct (Minerva's
  majority voting). Answers are grouped by an equivalence the caller gives (math-verify for math), attempts without an
  answer do not vote, and a tie goes to the answer reached first.
- A 95% confidence interval of any per-problem mean: the percentile bootstrap over problems, seeded, so the same
  outcomes always give the same interval.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from math import comb

BOOTSTRAP_RESAMPLES = 1000
CONFIDENCE = 0.95


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that k of n attempts, c of them correct, drawn without replacement, hold a correct one."""
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 1 <= k <= n, got n={n}, k={k}: sample at least k attempts per problem")
    if n - c < k:  # every draw of k holds a correct attempt
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def check_ks(ks: Sequence[int], n: int, flag: str = "--k", n_flag: str = "--n") -> list[int]:
    """``ks`` sorted and deduplicated; each must be in [1, n] (pass@k needs at least k attempts per problem)."""
    if not ks:
        raise ValueError(f"{flag} is empty: give the k of pass@k, e.g. {flag} 1,{n}")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"{flag}: every k must be a whole number >= 1, got {k!r}")
        if k > n:
            raise ValueError(
                f"{flag}: k={k} is larger than {n_flag}={n} attempts per problem; pass@{k} needs at least {k} "
                f"attempts: raise {n_flag} to {k} or drop k={k}"
            )
    return sorted(set(ks))


def majority_index(answers: Sequence, equivalent: Callable[[object, object], bool]) -> int | None:
    """Index of the first answer of the class most of ``answers`` are equivalent to (None entries do not vote); a
    tie goes to the class reached first. None when no answer votes.

    Each answer joins the first earlier class whose first member it is equivalent to, so ``equivalent`` is called
    against class representatives only.
    """
    representatives: list[int] = []  # index of each class's first member
    votes: list[int] = []
    for index, answer in enumerate(answers):
        if answer is None:
            continue
        for position, representative in enumerate(representatives):
            if equivalent(answers[representative], answer):
                votes[position] += 1
                break
        else:
            representatives.append(index)
            votes.append(1)
    if not representatives:
        return None
    # max() returns the first maximum: the class reached first wins a tie.
    return representatives[max(range(len(votes)), key=votes.__getitem__)]


def bootstrap_ci(
    values: Sequence[float], seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (one per problem), resampling problems."""
    if not values:
        raise ValueError("bootstrap_ci needs at least one value")
    rng = random.Random(seed)
    size = len(values)
    means = sorted(sum(rng.choices(values, k=size)) / size for _ in range(resamples))
    tail = (1.0 - confidence) / 2.0
    low = means[int(tail * (resamples - 1))]
    high = means[int(round((1.0 - tail) * (resamples - 1)))]
    return low, high


def mean_with_ci(values: Sequence[float], seed: int = 0) -> dict[str, float]:
    """{"value", "ci_low", "ci_high"}: the mean over problems and its bootstrap interval."""
    low, high = bootstrap_ci(values, seed=seed)
    return {"value": sum(values) / len(values), "ci_low": low, "ci_high": high}


def pass_at_k_metrics(correct_per_problem: Sequence[Sequence[bool]], ks: Sequence[int], seed: int = 0) -> dict:
    """{"pass@k": mean_with_ci} for each k, from each problem's attempts (True: correct). Every problem must have
    at least max(ks) attempts; each problem's own n is used."""
    if not correct_per_problem:
        raise ValueError("no problems to score")
    metrics = {}
    for k in ks:
        values = [pass_at_k(len(attempts), sum(map(bool, attempts)), k) for attempts in correct_per_problem]
        metrics[f"pass@{k}"] = mean_with_ci(values, seed=seed)
    return metrics


def maj_at_k_metrics(
    attempts_per_problem: Sequence[Sequence[tuple[object, bool]]],
    ks: Sequence[int],
    equivalent: Callable[[object, object], bool],
    seed: int = 0,
) -> dict:
    """{"maj@k": mean_with_ci} for each k, from each problem's attempts in order, as (answer or None, correct).

    The vote over the first k attempts picks an answer class; the problem is solved when that class's first attempt
    is correct (its members are equivalent to it, so they are all right or all wrong).
    """
    metrics = {}
    for k in ks:
        values = []
        for attempts in attempts_per_problem:
            first = list(attempts)[:k]
            winner = majority_index([answer for answer, _ in first], equivalent)
            values.append(1.0 if winner is not None and first[winner][1] else 0.0)
        metrics[f"maj@{k}"] = mean_with_ci(values, seed=seed)
    return metrics
