"""What the toy-arithmetic experiment measures and decides (experiments/toy_arithmetic/evaluation.py, methods.py,
report.py, launch.py), against hand-made inputs: the checkpoint rule, rescue rate, VeriGate's gated concordance,
the budgets, the ES grid criterion and the pre-registered decisions paired by seed."""

from __future__ import annotations

import copy
import math

import pytest

from experiments.toy_arithmetic.evaluation import pick_checkpoint, rescue_rate, sampled_metrics
from experiments.toy_arithmetic.methods import Budget, gated_concordance, prompts_per_step, steps_of
from experiments.toy_arithmetic.oracle import ChainReport
from experiments.toy_arithmetic.report import decisions, markdown


def calibration(faithful, all_zero, spurious):
    return {"faithful": faithful, "all_zero_groups": all_zero, "spurious_share": spurious, "pass": faithful}


def test_checkpoint_rule_picks_the_eligible_checkpoint_closest_to_030():
    table = {
        "checkpoint-150": calibration(0.05, 0.80, 0.50),  # too many spurious passes
        "checkpoint-300": calibration(0.27, 0.30, 0.10),  # eligible, 0.03 away
        "checkpoint-450": calibration(0.30, 0.10, 0.05),  # closest, but too few all-zero groups
        "checkpoint-600": calibration(0.33, 0.20, 0.15),  # eligible, 0.03 away too: the earlier wins
        "checkpoint-750": calibration(0.60, 0.05, 0.02),
    }
    pick = pick_checkpoint(table)
    assert pick["eligible"] == ["checkpoint-300", "checkpoint-600"]
    assert pick["picked"] == "checkpoint-300" and pick["rule_met"]
    assert "0.15" in pick["rule"] and "0.2" in pick["rule"] and "0.3" in pick["rule"]
    none_eligible = {"checkpoint-1": calibration(0.1, 0.0, 0.0), "checkpoint-2": calibration(0.4, 0.0, 0.0)}
    assert pick_checkpoint(none_eligible) == {**pick_checkpoint(none_eligible), "picked": "checkpoint-2"}
    assert not pick_checkpoint(none_eligible)["rule_met"]
    with pytest.raises(ValueError, match="sft-save-every"):
        pick_checkpoint({})


def test_rescue_rate_counts_prompts_unsolved_at_the_start():
    # Prompts 0, 2 and 3 have no faithful completion at the start; 2 and 3 get one at the end: 2 of 3.
    assert rescue_rate([0, 5, 0, 0], [0, 0, 1, 16]) == pytest.approx(2 / 3)
    assert math.isnan(rescue_rate([1, 2], [0, 0]))
    with pytest.raises(ValueError, match="same prompts"):
        rescue_rate([0], [0, 1])


def report(valid, outcome):
    return ChainReport(tuple(valid), outcome)


def test_sampled_metrics_by_hand():
    reports = [
        report([True] * 4, True),  # faithful
        report([False, True], True),  # spurious
        report([True, False], False),
        report([], False),
    ]
    metrics = sampled_metrics(reports, samples=2)
    assert metrics == {
        "pass": 0.5,
        "faithful": 0.25,
        "spurious_share": 0.5,  # one of the two passes
        "valid_prefix": (4 + 0 + 1 + 0) / 4,
        "all_zero_groups": 0.5,  # the second group has no pass
        "faithful_counts": [1, 0],
    }


def test_gated_concordance_by_hand():
    # Group 0 (all fail): prefixes 3, 1, 1, 0 with first-token advantages 0.9, 0.1, 0.1, 0.5. Pairs with different
    # prefixes: (3,1) x2 concordant, (3,0) concordant, (1,0) x2 discordant: 5 pairs, 3 concordant. Group 1 has a
    # pass, so it is not gated and not counted.
    reports = [report([True] * 3 + [False], False), report([True, False], False), report([True, False], False)]
    reports += [report([False], False)]
    reports += [report([True] * 4, True), report([False], False), report([False], False), report([False], False)]
    advantages = [0.9, 0.1, 0.1, 0.5, 1.0, -1.0, -1.0, -1.0]
    assert gated_concordance(reports, advantages, 4) == (5, 3.0)
    tie = [report([True, False], False), report([False], False)]
    assert gated_concordance(tie, [0.2, 0.2], 2) == (1, 0.5)


def test_every_method_generates_the_same_completions():
    budget = Budget(8, 4, 5120, 56, 1e-4, 8, 16, 16)
    assert steps_of("grpo", budget) == (160, 32)  # 5120 / (4 prompts x G 8)
    assert steps_of("process", budget) == (160, 32)
    assert steps_of("es", budget) == (40, 128)  # 5120 / (P 8 x 16 greedy completions)
    # Prompts drawn from the pool: GRPO 160 x 4, ES 40 x 16 (every member answers the same 16): 640 each.
    assert [steps_of(m, budget)[0] * prompts_per_step(m, budget) for m in ("grpo", "es")] == [640, 640]


def test_es_grid_score_is_the_second_half_of_the_training_reward():
    from experiments.toy_arithmetic.launch import es_grid_score

    run = {"metrics": [{"es/reward_mean": value} for value in (0.0, 0.1, 0.4, 0.6)] + [{"loss": 1.0}]}
    assert es_grid_score(run) == pytest.approx(0.5)


END = {"sampled_faithful": 0.30, "sampled_pass": 0.5, "greedy_pass": 0.5, "greedy_faithful": 0.3,
       "sampled_spurious_share": 0.2, "sampled_valid_prefix": 2.0, "easy_greedy_pass": 0.8}  # fmt: skip


def make_results(ends: dict[tuple[str, int], dict], start_counts=(0, 0, 0, 0), end_counts=None):
    """A results dict with the warm start at END and one run per (method, seed) ending at END updated with ends."""
    runs = []
    for (method, seed), changes in ends.items():
        counts = (end_counts or {}).get((method, seed), [0, 0, 0, 0])
        point = {**END, **changes, "sampled_faithful_counts": counts, "completions": 5120}
        metrics = [
            {"step": 1, "verigate/gate_rate": 0.5, "mechanism/gated_pairs": 4.0, "mechanism/gated_concordant": 4.0}
        ]
        runs.append({"method": method, "seed": seed, "eval": [point, point], "metrics": metrics,
                     "wall_seconds": 1.0, "completions": 5120})  # fmt: skip
    return {
        "config": {"seeds": [0, 1, 2]},
        "start_eval": {**END, "sampled_faithful_counts": list(start_counts)},
        "warm_start": {
            "calibration": {"checkpoint-1": calibration(0.3, 0.2, 0.1)},
            "picked": "checkpoint-1",
            "rule": "r",
            "rule_met": True,
        },  # fmt: skip
        "runs": runs,
    }


def verdicts(results) -> dict[str, str]:
    return {row["claim"]: row["verdict"] for row in decisions(results)}


def test_decisions_pair_by_seed_and_need_every_seed():
    ends = {}
    for seed in range(3):
        ends["grpo", seed] = {"sampled_faithful": 0.36}  # +0.06 over the warm start
        ends["verigate", seed] = {"sampled_faithful": 0.35}  # 0.01 below GRPO: allowed
        ends["process", seed] = {"sampled_faithful": 0.40, "sampled_spurious_share": 0.1}  # +0.04, fewer spurious
        ends["es", seed] = {"greedy_pass": 0.55, "easy_greedy_pass": 0.76}  # +0.05; easy -0.04
    end_counts = {("verigate", s): [1, 0, 0, 0] for s in range(3)}  # rescue 1/4 vs GRPO's 0
    results = make_results(ends, end_counts=end_counts)
    assert verdicts(results) == {
        "GRPO sanity": "supported",
        "VeriGate vs GRPO": "supported",
        "process vs outcome-only": "supported",
        "ES": "supported",
    }
    rows = {row["claim"]: row for row in decisions(results)}
    assert rows["VeriGate vs GRPO"]["deltas"]["rescue"] == {"0": 0.25, "1": 0.25, "2": 0.25}
    assert rows["VeriGate vs GRPO"]["mechanism"]["present"]
    assert rows["process vs outcome-only"]["deltas"]["faithful"]["1"] == pytest.approx(0.04)
    assert "**supported**" in markdown(results)

    mixed = copy.deepcopy(ends)
    mixed["process", 2] = {"sampled_faithful": 0.38, "sampled_spurious_share": 0.1}  # +0.02: inside the threshold
    mixed["es", 1] = {"greedy_pass": 0.55, "easy_greedy_pass": 0.70}  # easy -0.10
    assert verdicts(make_results(mixed, end_counts=end_counts)) == {
        "GRPO sanity": "supported",
        "VeriGate vs GRPO": "supported",
        "process vs outcome-only": "not supported",
        "ES": "not supported",
    }
    missing = {key: value for key, value in ends.items() if key != ("verigate", 2)}  # two seeds are not three
    assert verdicts(make_results(missing, end_counts=end_counts))["VeriGate vs GRPO"] == "not supported"


def test_a_failed_grpo_sanity_makes_the_other_claims_untestable():
    ends = {("grpo", s): {"sampled_faithful": 0.33} for s in range(3)}  # +0.03 < 0.04
    ends |= {("process", s): {"sampled_faithful": 0.40} for s in range(3)}
    result = verdicts(make_results(ends))
    assert result["GRPO sanity"] == "not supported"
    assert (
        result["process vs outcome-only"].startswith("untestable")
        and "supported as measured" in result["process vs outcome-only"]
    )
