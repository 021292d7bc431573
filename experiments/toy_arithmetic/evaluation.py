"""What is measured on a policy: held-out metrics, the warm-start calibration, the checkpoint rule, the screening
of hard prompts, rescue rate.

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
SCREEN_SEED = 20_262  # the sampling seed of the screening, so the hard set is not picked on its own start evaluation

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


def sample_reports(model, tokenizer, problems, samples, max_new_tokens, oracle, seed: int = EVAL_SEED) -> list:
    """Goal-tracking reports of ``samples`` completions per problem (temperature 1) under the sampling ``seed``."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        texts = generate(model, tokenizer, [p.prompt for p in problems], max_new_tokens, samples, 256, temperature=1.0)
    return read(problems, texts, samples, oracle), texts


@torch.no_grad()
def evaluate_policy(
    model,
    tokenizer,
    held_out: list[Problem],
    easy: list[Problem],
    samples: int,
    max_new_tokens: int,
    oracle: ArithmeticProcessOracle,
    hard: list[Problem] | None = None,
) -> dict:
    """Held-out metrics: on ``held_out``, ``samples`` sampled completions per prompt (temperature 1) and one greedy;
    on ``easy``, the greedy pass rate; on ``hard`` (when given), ``samples`` sampled completions per prompt."""
    reports, sampled = sample_reports(model, tokenizer, held_out, samples, max_new_tokens, oracle)
    greedy = read(held_out, generate(model, tokenizer, [p.prompt for p in held_out], max_new_tokens, 1, 256), 1, oracle)
    greedy_easy = read(easy, generate(model, tokenizer, [p.prompt for p in easy], max_new_tokens, 1, 256), 1, oracle)
    metrics = {
        **{f"sampled_{k}": v for k, v in sampled_metrics(reports, samples).items()},
        "greedy_pass": _mean(r.outcome for r in greedy),
        "greedy_faithful": _mean(r.faithful for r in greedy),
        "easy_greedy_pass": _mean(r.outcome for r in greedy_easy),
        "example": sampled[0],
    }
    if hard:
        hard_reports = sample_reports(model, tokenizer, hard, samples, max_new_tokens, oracle)[0]
        metrics |= {f"hard_sampled_{k}": v for k, v in sampled_metrics(hard_reports, samples).items()}
    return metrics


@torch.no_grad()
def screen(model, tokenizer, problems: list[Problem], samples: int, max_new_tokens: int, oracle) -> list[int]:
    """Faithful completions of ``samples`` per problem, under the screening seed."""
    reports = sample_reports(model, tokenizer, problems, samples, max_new_tokens, oracle, SCREEN_SEED)[0]
    return sampled_metrics(reports, samples)["faithful_counts"]


def keep_hard(counts: list[int], max_faithful: int, size: int | None = None) -> dict:
    """The indices of the screened problems with at most ``max_faithful`` faithful completions, in order, the first
    ``size`` of them (all when None). When fewer qualify, the ``size`` with the fewest (the earlier on a tie), with
    ``rule_met`` False."""
    qualifying = [index for index, count in enumerate(counts) if count <= max_faithful]
    if size is None or len(qualifying) >= size:
        return {"indices": qualifying[:size], "qualifying": len(qualifying), "rule_met": True}
    fewest = sorted(range(len(counts)), key=lambda index: (counts[index], index))[:size]
    return {"indices": sorted(fewest), "qualifying": len(qualifying), "rule_met": False}


@torch.no_grad()
def calibrate(
    model, tokenizer, problems: list[Problem], samples: int, max_new_tokens: int, oracle: ArithmeticProcessOracle
) -> dict:
    """The checkpoint rule's inputs on the calibration prompts: sampled faithful rate, all-zero group fraction and
    spurious share, with ``samples`` completions per prompt (GRPO's G)."""
    metrics = sampled_metrics(sample_reports(model, tokenizer, problems, samples, max_new_tokens, oracle)[0], samples)
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
