"""The power of the decision rules, by simulation from design 2's seed-to-seed spread.

    python -m experiments.toy_arithmetic.power docs/experiments/design2/results.json

Model: per seed, each paired difference is drawn from a normal distribution whose standard deviation is the sample
standard deviation of design 2's three per-seed differences of that measure (the warm start is one evaluation, so
a difference against it varies only with the arm's seed), and whose mean is the effect assumed; seeds and clauses
are independent. Each simulated experiment is decided by the rule as coded: design 2's "every seed beyond its
threshold" rules here, design 3's interval rules by `analysis` itself. Prints markdown tables
(docs/experiments/power.md holds the output).
"""

from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments.toy_arithmetic import analysis

TRIALS = 200_000
DESIGN2_SEEDS = 3
# The process effect of a paper's size, as issue 30's review put it; for VeriGate's rescue rate and ES's greedy pass
# no paper number is on record in this project, so their rules are shown at effects equal to their thresholds.
PAPER_PROCESS_EFFECT = 0.025


@dataclass(frozen=True)
class Clause:
    """One per-seed condition of a design-2 rule: the difference (mean ``effect``, spread ``sd``) must be at least
    ``threshold`` (``at_most`` False) or at most it (True)."""

    effect: float
    sd: float
    threshold: float
    at_most: bool = False


def spread(results: dict, first: str, second: str | None, key: str) -> tuple[float, list[float]]:
    """Sample standard deviation of design 2's per-seed differences of ``key`` (``first`` - ``second``, or -
    the warm start), and the differences."""
    deltas = list(analysis.paired(results["summary"], first, second, key, results["start_eval"]).values())
    return statistics.stdev(deltas), deltas


def every_seed_power(clauses: list[Clause], seeds: int, trials: int = TRIALS, seed: int = 0) -> float:
    """P(every seed meets every clause) over ``trials`` simulated experiments."""
    rng = np.random.default_rng(seed)
    holds = np.ones(trials, dtype=bool)
    for clause in clauses:
        draws = rng.normal(clause.effect, clause.sd, size=(trials, seeds))
        met = draws <= clause.threshold if clause.at_most else draws >= clause.threshold
        holds &= met.all(axis=1)
    return float(holds.mean())


def rule_rates(effect: float, sd: float, sesoi: float, seeds: int, trials: int = TRIALS, seed: int = 0) -> dict:
    """Shares of simulated experiments `analysis.rule` calls supported, refuted and inconclusive."""
    draws = np.random.default_rng(seed).normal(effect, sd, size=(trials, seeds))
    return _rates(analysis.rule(draws, sesoi))


def es_rule_rates(es_gain: float, es_sd: float, grpo_gain: float, grpo_sd: float, seeds: int,
                  trials: int = TRIALS, seed: int = 0) -> dict:  # fmt: skip
    """The same for `analysis.es_rule`: per seed, ES's and GRPO's gains over the warm start are drawn apart."""
    rng = np.random.default_rng(seed)
    es = rng.normal(es_gain, es_sd, size=(trials, seeds))
    grpo = rng.normal(grpo_gain, grpo_sd, size=(trials, seeds))
    return _rates(analysis.es_rule(es - grpo, es))


def _rates(codes: np.ndarray) -> dict:
    return {name: float((codes == code).mean()) for code, name in analysis.VERDICTS.items()}


def design2_table(results: dict) -> str:
    sd = {
        "process_faithful": spread(results, "process", "grpo", "sampled_faithful")[0],
        "process_spurious": spread(results, "process", "grpo", "sampled_spurious_share")[0],
        "verigate_rescue": spread(results, "verigate", "grpo", "rescue_rate")[0],
        "verigate_faithful": spread(results, "verigate", "grpo", "sampled_faithful")[0],
        "es_greedy": spread(results, "es", None, "greedy_pass")[0],
        "es_easy": spread(results, "es", None, "easy_greedy_pass")[0],
    }
    rows = [
        ("process: faithful >= +0.03, alone", [Clause(PAPER_PROCESS_EFFECT, sd["process_faithful"], 0.03)],
         f"+{PAPER_PROCESS_EFFECT} (paper-sized)"),
        ("process: faithful >= +0.03 and spurious not higher",
         [Clause(PAPER_PROCESS_EFFECT, sd["process_faithful"], 0.03), Clause(0.0, sd["process_spurious"], 0.0, True)],
         f"+{PAPER_PROCESS_EFFECT}; spurious 0"),
        ("VeriGate: faithful no more than 0.02 lower, alone", [Clause(0.0, sd["verigate_faithful"], -0.02)], "0"),
        ("VeriGate: rescue >= +0.05 and faithful >= -0.02",
         [Clause(0.05, sd["verigate_rescue"], 0.05), Clause(0.0, sd["verigate_faithful"], -0.02)],
         "rescue +0.05 (its threshold); faithful 0"),
        ("VeriGate: the same", [Clause(0.10, sd["verigate_rescue"], 0.05), Clause(0.0, sd["verigate_faithful"], -0.02)],
         "rescue +0.10; faithful 0"),
        ("ES: greedy >= +0.04 and easy >= -0.05",
         [Clause(0.04, sd["es_greedy"], 0.04), Clause(0.0, sd["es_easy"], -0.05)], "greedy +0.04 (its threshold); easy 0"),
        ("ES: the same", [Clause(0.08, sd["es_greedy"], 0.04), Clause(0.0, sd["es_easy"], -0.05)], "greedy +0.08; easy 0"),
    ]  # fmt: skip
    lines = [
        f"Design 2's rules ({DESIGN2_SEEDS} of {DESIGN2_SEEDS} seeds), spreads: "
        + ", ".join(f"{name} {value:.4f}" for name, value in sd.items()),
        "",
        "| rule | effect assumed | P(every seed meets it) |",
        "|---|---|---|",
    ]
    for name, clauses, effect in rows:
        lines.append(f"| {name} | {effect} | {every_seed_power(clauses, DESIGN2_SEEDS):.3f} |")
    return "\n".join(lines) + "\n"


def design3_table(results: dict, seeds: int = analysis.MIN_SEEDS) -> str:
    grpo_gain_sd, grpo_gains = spread(results, "grpo", None, "sampled_faithful")
    process_sd = spread(results, "process", "grpo", "sampled_faithful")[0]
    verigate_sd = spread(results, "verigate", "grpo", "sampled_faithful")[0]
    es_sd = spread(results, "es", None, "sampled_faithful")[0]
    singles = [
        ("GRPO learns", analysis.SANITY_SESOI, grpo_gain_sd, "GRPO - warm start"),
        ("process vs GRPO", analysis.PROCESS_SESOI, process_sd, "process - GRPO"),
        ("first-error propagation", analysis.PROPAGATION_SESOI, process_sd, "process - GRPO (proxy)"),
        ("VeriGate vs GRPO (hard set)", analysis.VERIGATE_SESOI, verigate_sd, "VeriGate - GRPO, full set (proxy)"),
    ]
    lines = [
        f"Design 3's rules, {seeds} seeds, one-sided 95% t bounds; spreads from design 2's held-out faithful.",
        "",
        "| claim | spread (design 2) | true effect | supported | refuted | inconclusive |",
        "|---|---|---|---|---|---|",
    ]
    for claim, sesoi, sd, source in singles:
        for effect, label in ((0.0, "0"), (sesoi, f"SESOI {sesoi:g}"), (2 * sesoi, f"2 x SESOI {2 * sesoi:g}")):
            rates = rule_rates(effect, sd, sesoi, seeds)
            lines.append(
                f"| {claim} | {sd:.4f} ({source}) | {label} | {rates['supported']:.3f} | {rates['refuted']:.3f} | "
                f"{rates['inconclusive']:.3f} |"
            )
    grpo_gain = statistics.mean(grpo_gains)
    scenarios = (
        (grpo_gain, f"ES gain = GRPO's ({grpo_gain:.3f})"),
        (grpo_gain - analysis.ES_MARGIN, f"ES gain = GRPO's - {analysis.ES_MARGIN:g}"),
        (analysis.ES_LEARNING_SESOI, f"ES gain {analysis.ES_LEARNING_SESOI:g}, GRPO's {grpo_gain:.3f}"),
    )
    for es_gain, label in scenarios:
        rates = es_rule_rates(es_gain, es_sd, grpo_gain, grpo_gain_sd, seeds)
        lines.append(
            f"| ES vs GRPO | ES {es_sd:.4f}, GRPO {grpo_gain_sd:.4f} (gains over the warm start) | {label} | "
            f"{rates['supported']:.3f} | {rates['refuted']:.3f} | {rates['inconclusive']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="design 2's results.json (docs/experiments/design2/results.json)")
    parser.add_argument("--seeds", type=int, default=analysis.MIN_SEEDS, help="seeds per arm in design 3")
    args = parser.parse_args(argv)
    results = json.loads(args.results.read_text())
    print(design2_table(results))
    print(design3_table(results, args.seeds))


if __name__ == "__main__":
    main()
