"""What the toy-arithmetic experiment measures and records (experiments/toy_arithmetic/evaluation.py, methods.py,
launch.py, preparation.py, provenance.py), against hand-made inputs: the checkpoint rule, rescue rate, VeriGate's
gated concordance, the budgets, the grids' criterion, the hard-prompt screening, the warm-start cache and each run's
provenance. The decisions are tested in test_experiment_analysis.py."""

from __future__ import annotations

import math

import pytest

from experiments.toy_arithmetic.evaluation import keep_hard, pick_checkpoint, rescue_rate, sampled_metrics
from experiments.toy_arithmetic.methods import Budget, gated_concordance, prompts_per_step, steps_of
from experiments.toy_arithmetic.oracle import ChainReport


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


def test_grid_score_is_the_second_half_of_the_training_reward():
    from experiments.toy_arithmetic.launch import training_reward_score

    es = {"method": "es", "metrics": [{"es/reward_mean": value} for value in (0.0, 0.1, 0.4, 0.6)] + [{"loss": 1.0}]}
    assert training_reward_score(es) == pytest.approx(0.5)
    process = {"method": "process", "metrics": [{"reward": value} for value in (0.9, 0.2, 0.3, 0.5, 0.1)]}
    assert training_reward_score(process) == pytest.approx((0.3 + 0.5 + 0.1) / 3)  # steps 3-5 of 5


def test_keep_hard_keeps_the_screened_prompts_at_or_below_the_threshold():
    counts = [0, 3, 1, 2, 0, 1, 4]
    assert keep_hard(counts, 1) == {"indices": [0, 2, 4, 5], "qualifying": 4, "rule_met": True}
    assert keep_hard(counts, 1, size=3) == {"indices": [0, 2, 4], "qualifying": 4, "rule_met": True}
    # Six asked, four qualify: the six with the fewest (0, 0, 1, 1, 2, 3 at indices 0, 4, 2, 5, 3, 1), in order.
    assert keep_hard(counts, 1, size=6) == {"indices": [0, 1, 2, 3, 4, 5], "qualifying": 4, "rule_met": False}


def test_provenance_hashes_the_code_and_reads_the_commit(tmp_path):
    import subprocess

    from experiments.toy_arithmetic.provenance import code_hash, git_state, stamped

    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "a.py").write_text("x = 1\n")
    (tmp_path / "code" / "notes.md").write_text("not code")
    first = code_hash(tmp_path, ("code",))
    assert len(first) == 64 and first == code_hash(tmp_path, ("code",))
    (tmp_path / "code" / "notes.md").write_text("still not code")
    assert code_hash(tmp_path, ("code",)) == first  # only Python files count
    (tmp_path / "code" / "a.py").write_text("x = 2\n")
    assert code_hash(tmp_path, ("code",)) != first
    assert git_state(tmp_path, ("code",)) == {"git_commit": None, "git_dirty": False}  # not a repository

    def git(*args):
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                              capture_output=True, text=True).stdout.strip()  # fmt: skip

    git("init", "-q")
    git("add", "code")
    git("commit", "-q", "-m", "c")
    assert git_state(tmp_path, ("code",)) == {"git_commit": git("rev-parse", "HEAD"), "git_dirty": False}
    (tmp_path / "code" / "cache").mkdir()  # an untracked warm-start cache: data, not code
    (tmp_path / "code" / "cache" / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "code" / "notes.md").write_text("edited")
    assert not git_state(tmp_path, ("code",))["git_dirty"]  # the same files as code_hash: Python ones only
    (tmp_path / "code" / "cache" / "new.py").write_text("y = 1\n")
    assert git_state(tmp_path, ("code",))["git_dirty"]  # an untracked Python file is code that runs
    (tmp_path / "code" / "cache" / "new.py").unlink()
    (tmp_path / "code" / "a.py").write_text("x = 3\n")
    assert git_state(tmp_path, ("code",))["git_dirty"]
    record = stamped(lambda: {"value": 1})()
    assert record["value"] == 1 and record["started_at"] <= record["ended_at"]
    assert record["started_at"].endswith("+00:00") and len(record["code_hash"]) == 64
    assert {"git_commit", "git_dirty"} <= record.keys()


def test_cache_refuses_other_flags_and_a_missing_file(tmp_path):
    from experiments.toy_arithmetic.preparation import CACHE_FLAGS, load_cache, save_cache

    flags = dict.fromkeys(CACHE_FLAGS, 1)
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    (tmp_path / "ckpt" / "optimizer.pt").write_text("not copied")
    warm = {"policy": str(tmp_path / "ckpt"), "picked": "ckpt"}
    prepared = {"screening": {"pool": 1}, "start_eval": {"x": 1}, "prerun_check": {"y": 2}}
    save_cache(tmp_path / "cache", flags, warm, prepared)
    assert sorted(p.name for p in (tmp_path / "cache" / "policy").iterdir()) == ["config.json"]
    loaded_warm, loaded = load_cache(tmp_path / "cache", flags)
    assert loaded == prepared and loaded_warm["policy"] == str((tmp_path / "cache" / "policy").resolve())
    with pytest.raises(SystemExit, match="--eval-samples 1"):
        load_cache(tmp_path / "cache", {**flags, "eval_samples": 16})
    with pytest.raises(SystemExit, match="--save-warm-start"):
        load_cache(tmp_path / "nowhere", flags)


def full_results(quick: bool) -> dict:
    """Results as `launch` writes them: six seeds of every arm, each run ending 0.01 x seed above the last."""
    point = {"sampled_faithful": 0.4, "sampled_pass": 0.5, "greedy_pass": 0.5, "greedy_faithful": 0.4,
             "sampled_spurious_share": 0.1, "sampled_valid_prefix": 2.0, "easy_greedy_pass": 0.8,
             "sampled_faithful_counts": [1, 0], "hard_sampled_faithful": 0.1, "hard_sampled_pass": 0.1,
             "hard_sampled_faithful_counts": [0, 1], "completions": 8}  # fmt: skip
    runs = []
    for index, method in enumerate(("grpo", "verigate", "process", "process_noprop", "es", "prm_outcome")):
        for seed in range(6):
            end = {
                **point,
                "sampled_faithful": 0.5 + 0.01 * index + 0.002 * seed,
                "hard_sampled_faithful_counts": [1, 1],
            }
            middle = {k: v for k, v in point.items() if not k.startswith("hard")}
            runs.append({"method": method, "seed": seed, "eval": [middle, end], "wall_seconds": 2.0, "completions": 8,
                         "metrics": [{"step": 1, "grad_norm": 0.5, "reward": 0.2, "es/reward_std": 0.1}],
                         "setting": None, "started_at": "2026-12-07T00:00:00+00:00",
                         "ended_at": "2026-12-07T00:01:00+00:00", "git_commit": "a" * 40, "git_dirty": True,
                         "code_hash": "b" * 64})  # fmt: skip
    results = {
        "config": {"quick": quick, "seeds": list(range(6))},
        "warm_start": {
            "calibration": {"checkpoint-1": calibration(0.3, 0.2, 0.1)},
            "picked": "checkpoint-1",
            "rule": "r",
            "rule_met": True,
        },  # fmt: skip
        "screening": {
            "pool_counts": [0, 1, 3],
            "pool": {"indices": [0, 1], "qualifying": 2, "rule_met": True},
            "hard_counts": [0, 1],
            "hard": {"indices": [0, 1], "qualifying": 2, "rule_met": True},
        },  # fmt: skip
        "prerun_check": {
            "failed": 10,
            "differing": 4,
            "differing_share": 0.4,
            "prm": {"lines": 40, "accuracy_vs_line_check": 0.8, "accuracy_vs_goal_tracking": 0.7},
        },  # fmt: skip
        "start_eval": point,
        "runs": runs,
        "grids": {
            "process": [{"d1": -0.05, "d2": -0.1, "train_reward": 0.3}, {"d1": 0.0, "d2": -0.5, "train_reward": 0.2}]
        },
        "chosen": {"process": {"d1": -0.05, "d2": -0.1}},
    }
    from experiments.toy_arithmetic.report import summarize

    results["summary"] = summarize(results)
    return results


def test_report_tables_and_plots_of_a_full_result(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments.toy_arithmetic.report import markdown, plot

    table = markdown(full_results(quick=False))
    # GRPO - warm start: 0.1 + 0.002 x seed, every seed: mean 0.105, lower bound far above 0.
    assert "| GRPO learns | held-out faithful, GRPO - warm start | 0.02 |" in table and "**supported**" in table
    assert (
        "| grpo | 3 | 2026-12-07T00:00:00+00:00 | 2026-12-07T00:01:00+00:00 | aaaaaaaaaa (dirty) | bbbbbbbbbbbb |"
        in table
    )
    assert "| -0.05 | -0.1 | 0.3000 (chosen) |" in table
    assert "score 4 of 10 failed completions" in table and "hard rescue" in table
    assert not table.startswith("**--quick")
    quick = markdown(full_results(quick=True))
    assert quick.startswith("**--quick is a smoke test of the plumbing: it decides nothing.**")
    assert "**supported**" not in quick
    paths = plot(full_results(quick=False), tmp_path)
    assert [path.name for path in paths] == ["held_out.png", "training.png", "decisions.png"]
    assert all(path.stat().st_size > 10_000 for path in paths)
    plt.close("all")


def test_a_two_part_claims_panels_say_the_verdict_is_the_claims():
    from experiments.toy_arithmetic.report import panel_title

    one_part = {"claim": "GRPO learns", "verdict": "supported", "parts": {"gain": {}}}
    assert panel_title(one_part, "gain") == "GRPO learns:\nsupported"
    # ES's non-inferiority part alone may be inconclusive while the claim is refuted by its other part: a panel
    # must not read as if its own part were refuted.
    es = {"claim": "ES vs GRPO", "verdict": "refuted", "parts": {"vs GRPO": {}, "vs warm start": {}}}
    assert panel_title(es, "vs GRPO") == "ES vs GRPO, part 'vs GRPO'\n(claim: refuted)"
    assert panel_title(es, "vs warm start") == "ES vs GRPO, part 'vs warm start'\n(claim: refuted)"
