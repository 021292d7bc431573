"""Design 3's pre-run check, on a batch sampled from the warm start: do first-error propagation on and off give
different tactic scores to the failed completions? Below `analysis.MIN_PROPAGATION_DIFFERENCE` of them, the
propagation claim is untestable before anything runs. The same batch measures the noisy PRM's accuracy.

    python -m experiments.toy_arithmetic.prerun POLICY_DIR [--prompts 32] [--samples 8] [--prompt-seed 7]

`launch` runs it on the first prompts of the screened RL pool (results.json, ``prerun_check``); the command alone
draws its own RL-length prompts.

The scores are the process trainer's own (`trl_verigate.advantages.tactic_scores`) on the oracle's verdicts.
"""

from __future__ import annotations

import argparse
import json

import torch

from experiments.toy_arithmetic import analysis
from experiments.toy_arithmetic.methods import DEFAULT_PROCESS, PRM_FLIP_SHARE
from experiments.toy_arithmetic.oracle import (
    ArithmeticProcessOracle,
    NoisyChainStepScorer,
    goal_tracking_validity,
    line_spans,
    previous_line_validity,
    prompt_chain,
)
from trl_verigate.advantages import tactic_scores


def differing_share(rows: list[dict], texts: list[str], d1: float, d2: float) -> dict:
    """Among the failed completions, how many get different tactic scores with propagation on and off."""
    verdicts = [v for v in ArithmeticProcessOracle().verify([], rows, texts) if not v.passed and v.spans]
    if not verdicts:
        return {"failed": 0, "differing": 0, "differing_share": 0.0}
    num_tactics = torch.tensor([len(v.spans) for v in verdicts])
    first_error = torch.tensor([v.first_error for v in verdicts])
    errors = torch.zeros(len(verdicts), int(num_tactics.max()), dtype=torch.bool)
    for row, verdict in enumerate(verdicts):
        errors[row, list(verdict.error_tactics)] = True
    passed = torch.zeros(len(verdicts), dtype=torch.bool)
    on, mask = tactic_scores(passed, num_tactics, first_error, d1, d2)
    off, _ = tactic_scores(passed, num_tactics, first_error, d1, d2, error_tactics=errors)
    differing = int(((on != off) & mask).any(dim=1).sum())
    return {"failed": len(verdicts), "differing": differing, "differing_share": differing / len(verdicts)}


def prm_accuracy(rows: list[dict], texts: list[str], flip_share: float = PRM_FLIP_SHARE) -> dict:
    """The noisy PRM's per-line agreement with the clean previous-line test and with goal tracking."""
    scorer = NoisyChainStepScorer(flip_share)
    agree_line = agree_goal = total = 0
    for row, text in zip(rows, texts, strict=True):
        lines = [text[start:end] for start, end in line_spans(text)]
        chain = prompt_chain(row["prompt"])
        labels = scorer.labels(row["prompt"], lines)
        agree_line += sum(a == b for a, b in zip(labels, previous_line_validity(chain, lines), strict=True))
        agree_goal += sum(a == b for a, b in zip(labels, goal_tracking_validity(chain, lines), strict=True))
        total += len(lines)
    return {
        "lines": total,
        "accuracy_vs_line_check": agree_line / total if total else float("nan"),
        "accuracy_vs_goal_tracking": agree_goal / total if total else float("nan"),
    }


def prerun_check(model, tokenizer, problems, samples: int, max_new_tokens: int) -> dict:
    """Sample ``samples`` completions of each of ``problems`` from the policy (the evaluation's seed) and run both
    measurements, with the trainer's default d1/d2 (any d1 != d2 gives the same differing share)."""
    from experiments.toy_arithmetic.evaluation import sample_reports

    reports, texts = sample_reports(model, tokenizer, problems, samples, max_new_tokens, ArithmeticProcessOracle())
    rows = [p.row() for p in problems for _ in range(samples)]
    check = differing_share(rows, texts, DEFAULT_PROCESS["d1"], DEFAULT_PROCESS["d2"])
    check["faithful"] = sum(report.faithful for report in reports) / len(reports)
    check["testable"] = check["differing_share"] >= analysis.MIN_PROPAGATION_DIFFERENCE
    return {**check, "prm": prm_accuracy(rows, texts)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", help="the warm start's policy directory")
    parser.add_argument("--prompts", type=int, default=32, help="3-operation prompts to sample from")
    parser.add_argument("--samples", type=int, default=8, help="completions per prompt (GRPO's G)")
    parser.add_argument("--prompt-seed", type=int, default=7, help="seed of the prompts")
    parser.add_argument("--max-completion-length", type=int, default=56)
    args = parser.parse_args(argv)
    if args.prompts < 1 or args.samples < 1:
        parser.error(f"--prompts {args.prompts} and --samples {args.samples} must be at least 1")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from experiments.toy_arithmetic.task import make_problems

    problems = make_problems(args.prompt_seed, [3], args.prompts)
    model, tokenizer = AutoModelForCausalLM.from_pretrained(args.policy), AutoTokenizer.from_pretrained(args.policy)
    print(json.dumps(prerun_check(model, tokenizer, problems, args.samples, args.max_completion_length), indent=1))


if __name__ == "__main__":
    main()
