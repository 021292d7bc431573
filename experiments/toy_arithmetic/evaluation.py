"""What is measured on a policy: held-out metrics, the warm-start calibration, the checkpoint rule, rescue rate.

Every sampled evaluation runs under its own fixed seed inside `torch.random.fork_rng`, so two policies are compared
on the same sampling noise and an evaluation during training leaves the training's random stream untouched.
"""

from __future__ import annotations

import statistics

import torch

from experiments.toy_arithmetic.oracle import ArithmeticProcessOracle, ChainReport
from experiments.toy_arithmetic.policy import generate
from experiments.toy_arithmetic.task import Problem

EVAL_SEED = 20_261  # the sampling seed of every held-out and calibration evaluation

# The checkpoint rule of issue 21, fixed before any RL run (docs/experiments.md, "Warm start"): among checkpoints
# with at least MIN_ALL_ZERO of all-zero groups and at most MAX_SPURIOUS spurious share, the one whose sampled
# faithful rate is closest to TARGET_FAITHFUL (the earlier on a tie); if none qualifies, the closest over all,
# recorded as rule_met = False.
TARGET_FAITHFUL = 0.30
MIN_ALL_ZERO = 0.15
MAX_SPURIOUS = 0.20


def _mean(values) -> float:
    values = list(values)
    return statistics.mean(values) if values else float("nan")


def read(problems: list[Problem], texts: list[str], samples: int, oracle: ArithmeticProcessOracle) -> list:
    """Goal-tracking reports of ``texts``, ``samples`` consecutive completions per problem."""
    rows = [p.row() for p in problems for _ in range(samples)]
    return oracle.reports(rows, texts)


def sampled_metrics(reports: list[ChainReport], samples: int) -> dict:
    """Pass, faithful, spurious share (of passes) and valid prefix over sampled completions, plus per problem the
    number of faithful completions and whether its group of ``samples`` has no pass (all-zero)."""
    groups = [reports[i : i + samples] for i in range(0, len(reports), samples)]
    passes = sum(r.outcome for r in reports)
    return {
        "pass": _mean(r.outcome for r in reports),
        "faithful": _mean(r.faithful for r in reports),
        "spurious_share": sum(r.spurious for r in reports) / passes if passes else 0.0,
        "valid_prefix": _mean(r.valid_prefix for r in reports),
        "all_zero_groups": _mean(not any(r.outcome for r in group) for group in groups),
        "faithful_counts": [sum(r.faithful for r in group) for group in groups],
    }


@torch.no_grad()
def evaluate_policy(
    model,
    tokenizer,
    hard: list[Problem],
    easy: list[Problem],
    samples: int,
    max_new_tokens: int,
    oracle: ArithmeticProcessOracle,
) -> dict:
    """Held-out metrics: on ``hard``, ``samples`` sampled completions per prompt (temperature 1) and one greedy; on
    ``easy``, the greedy pass rate."""
    with torch.random.fork_rng():
        torch.manual_seed(EVAL_SEED)
        sampled = generate(model, tokenizer, [p.prompt for p in hard], max_new_tokens, samples, 256, temperature=1.0)
    greedy = read(hard, generate(model, tokenizer, [p.prompt for p in hard], max_new_tokens, 1, 256), 1, oracle)
    greedy_easy = read(easy, generate(model, tokenizer, [p.prompt for p in easy], max_new_tokens, 1, 256), 1, oracle)
    return {
        **{f"sampled_{k}": v for k, v in sampled_metrics(read(hard, sampled, samples, oracle), samples).items()},
        "greedy_pass": _mean(r.outcome for r in greedy),
        "greedy_faithful": _mean(r.faithful for r in greedy),
        "easy_greedy_pass": _mean(r.outcome for r in greedy_easy),
        "example": sampled[0],
    }


@torch.no_grad()
def calibrate(
    model, tokenizer, problems: list[Problem], samples: int, max_new_tokens: int, oracle: ArithmeticProcessOracle
) -> dict:
    """The checkpoint rule's inputs on the calibration prompts: sampled faithful rate, all-zero group fraction and
    spurious share, with ``samples`` completions per prompt (GRPO's G)."""
    with torch.random.fork_rng():
        torch.manual_seed(EVAL_SEED)
        texts = generate(model, tokenizer, [p.prompt for p in problems], max_new_tokens, samples, 256, temperature=1.0)
    metrics = sampled_metrics(read(problems, texts, samples, oracle), samples)
    del metrics["faithful_counts"]
    return metrics


def pick_checkpoint(calibration: dict[str, dict]) -> dict:
    """The checkpoint the rule picks from ``{checkpoint: calibrate(...)}`` (in step order), with why."""
    if not calibration:
        raise ValueError("no checkpoint to pick from: the warm start saved none (check --sft-save-every)")
    names = list(calibration)

    def distance(name: str) -> tuple[float, int]:
        return abs(calibration[name]["faithful"] - TARGET_FAITHFUL), names.index(name)

    eligible = [
        name
        for name in names
        if calibration[name]["all_zero_groups"] >= MIN_ALL_ZERO and calibration[name]["spurious_share"] <= MAX_SPURIOUS
    ]
    picked = min(eligible or names, key=distance)
    return {
        "rule": f"among checkpoints with all-zero groups >= {MIN_ALL_ZERO} and spurious share <= {MAX_SPURIOUS}, "
        f"sampled faithful closest to {TARGET_FAITHFUL} (earlier on a tie); if none qualifies, closest over all",
        "eligible": eligible,
        "picked": picked,
        "rule_met": bool(eligible),
    }


def rescue_rate(start_counts: list[int], end_counts: list[int]) -> float:
    """Among prompts with no faithful completion at the start, the fraction with at least one at the end (NaN when
    every prompt had one at the start)."""
    if len(start_counts) != len(end_counts):
        raise ValueError(f"{len(start_counts)} start counts for {len(end_counts)} end counts: same prompts needed")
    unsolved = [end for start, end in zip(start_counts, end_counts, strict=True) if start == 0]
    return _mean(end > 0 for end in unsolved)
