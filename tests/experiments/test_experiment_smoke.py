"""The toy-arithmetic experiment's launcher (experiments/toy_arithmetic, docs/experiments.md): its one-line errors,
its resumable pieces and warm start, a tiny end-to-end `--quick` run, and the advantages each trainer gives a
hand-made batch. The task, checkers and decisions are tested in test_experiment_checkers.py and
test_experiment_decisions.py."""

from __future__ import annotations

import json
import re

import pytest

D1, D2 = -0.05, -0.1


def test_side_by_side_launchers_split_the_runs_evenly_and_keep_grids_whole():
    from experiments.toy_arithmetic.launch import parse_args, split_arms

    # Full preset, 6 seeds: process 2 grid points + 5 more seeds = 7 runs, bundled with process_noprop's 6 (it
    # needs process's d1/d2): 13; ES 0.75 x (4 grid points + 5 more seeds) = 6.75; the others 6 each. Largest
    # first to the emptier launcher: 13 | 6.75, then grpo 12.75, verigate 18.75, prm_outcome to the first: 19.
    groups = split_arms(parse_args([]), 2)
    assert groups == [["process", "process_noprop", "prm_outcome"], ["es", "grpo", "verigate"]]
    # More launchers than units: one unit each, never an empty launcher.
    groups = split_arms(parse_args(["--methods", "grpo", "process_noprop", "process"]), 4)
    assert sorted(groups) == [["grpo"], ["process", "process_noprop"]]
    assert split_arms(parse_args(["--methods", "grpo", "es"]), 1) == [["es", "grpo"]]


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--es-population", "3"], "--es-population 3"),
        (["--es-grid", "1e-3"], "--es-grid"),
        (["--es-grid", "0:1e-3"], "must be positive"),
        (["--num-generations", "1"], "--num-generations"),
        (["--budget", "4"], "--budget"),
        (["--pool-problems", "4"], "--pool-problems 4"),
        (["--methods", "grpo", "ppo"], "--methods"),
        (["--methods", "process_coef0"], "--methods"),
        (["--process-grid=-0.1:-0.1"], "d1 must differ"),
        (["--process-grid=-0.1"], "--process-grid"),
        (["--hard-size", "0"], "--hard-size 0"),
        (["--hard-candidates", "2"], "--hard-candidates 2 is below --hard-size 4"),
        (["--max-operand", "1"], "--max-operand"),
        (["--eval-samples", "0"], "--eval-samples"),
        (["--jobs", "0"], "--jobs 0"),
    ],
)
def test_launcher_refuses_bad_sizes_before_loading_anything(flags, named, capsys):
    from experiments.toy_arithmetic.launch import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--quick", *flags])
    assert named in capsys.readouterr().err


@pytest.mark.slow
def test_quick_launcher_end_to_end(tmp_path, capfd):
    from experiments.toy_arithmetic.launch import main

    methods = ["grpo", "verigate", "process", "process_noprop", "es", "prm_outcome"]
    cache = tmp_path / "cache"
    sizes = [
        "--quick", "--sft-steps", "4", "--sft-save-every", "2", "--sft-problems", "48", "--sft-batch-size", "16",
        "--pool-problems", "16", "--calibration-problems", "2", "--eval-problems", "3", "--easy-problems", "2",
        "--hard-candidates", "4", "--hard-size", "2", "--pool-screen-samples", "2", "--prerun-prompts", "2",
        "--num-generations", "2", "--prompts-per-step", "2", "--budget", "8", "--max-completion-length", "24",
        "--seeds", "0", "--eval-samples", "2", "--es-population", "2", "--es-prompts", "2",
        "--es-grid", "1e-2:2e-3,3e-2:1e-2", "--process-grid=-0.05:-0.1,0:-0.5",
    ]  # fmt: skip
    argv = [*sizes, "--output", str(tmp_path / "run"), "--jobs", "2", "--save-warm-start", str(cache)]
    results = main(argv)
    printed = capfd.readouterr().out
    assert printed.count("worker launcher: --methods") == 2  # two launchers side by side
    assert printed.count("--quick is a smoke test of the plumbing: it decides nothing") == 2  # first and last
    on_disk = json.loads((tmp_path / "run" / "results.json").read_text())
    assert not on_disk["partial"] and on_disk["summary"].keys() == set(methods)
    warm = on_disk["warm_start"]
    assert list(warm["calibration"]) == ["checkpoint-2", "checkpoint-4"]  # a checkpoint every 2 of 4 steps
    assert warm["picked"] in warm["calibration"] and warm["policy"].endswith(warm["picked"])
    screening = on_disk["screening"]
    assert len(screening["pool_counts"]) == 16 and len(screening["hard_counts"]) == 4
    assert len(screening["hard"]["indices"]) == 2
    assert len(on_disk["start_eval"]["hard_sampled_faithful_counts"]) == 2  # one count per hard prompt
    check = on_disk["prerun_check"]
    assert 0 <= check["differing"] <= check["failed"] <= 4 and 0.0 <= check["prm"]["accuracy_vs_line_check"] <= 1.0
    assert [run["method"] for run in on_disk["runs"]] == methods
    for run in on_disk["runs"]:
        assert run["completions"] == 8, run["method"]  # the same generation budget for every method
        assert [point["completions"] for point in run["eval"]] == [4, 8], run["method"]  # middle and end
        assert "hard_sampled_faithful" in run["eval"][-1] and "hard_sampled_faithful" not in run["eval"][0]
        assert run["started_at"] <= run["ended_at"] and len(run["code_hash"]) == 64, run["method"]
        assert re.fullmatch("[0-9a-f]{40}", run["git_commit"]), run["method"]  # HEAD may move while runs run
    assert on_disk["run_code_hashes"] == sorted({run["code_hash"] for run in on_disk["runs"]})
    runs = {run["method"]: run for run in on_disk["runs"]}
    assert runs["grpo"]["steps"] == 2 and runs["es"]["steps"] == 2  # GRPO: 2 x 2 x 2; ES: P=2 x 2 greedy prompts
    assert all("verigate/gate_rate" in entry for entry in runs["verigate"]["metrics"])
    assert all("lean/empty_fraction" in entry for entry in runs["process"]["metrics"])
    assert all("es/update_norm" in entry for entry in runs["es"]["metrics"])
    for method, keys in (("es", ("sigma", "learning_rate")), ("process", ("d1", "d2"))):
        grid = on_disk["grids"][method]
        best = max(grid, key=lambda point: point["train_reward"])
        assert on_disk["chosen"][method] == {key: best[key] for key in keys} == runs[method]["setting"]
    assert runs["process_noprop"]["setting"] == on_disk["chosen"]["process"]  # noprop uses process's d1/d2

    # Coefficient 0 is GRPO: the same first batch gives the same token advantages, while coefficient 1 does not
    # (so the comparison can fail).
    coef0 = on_disk["coef0_check"]
    assert coef0["same_completions"] and coef0["num_completions"] == 4
    assert coef0["max_abs_diff_coef0_vs_grpo"] <= 1e-6
    assert coef0["max_abs_diff_coef1_vs_grpo"] > 1e-3

    import matplotlib.image

    for name in ("held_out.png", "training.png", "decisions.png"):
        image = matplotlib.image.imread(tmp_path / "run" / name)
        assert image.shape[0] > 100 and image.shape[1] > 100 and image.std() > 0.01, name
    table = (tmp_path / "run" / "results.md").read_text()
    assert table.startswith("**--quick is a smoke test") and "## Decisions" in table and "## Runs on record" in table
    assert all(f"| {method} | 0 |" in table for method in methods)
    assert json.loads(json.dumps(results["summary"])) == on_disk["summary"]  # main() returns what it wrote

    # Resumed with the same sizes, nothing is computed again: every piece is loaded (the warm start included).
    pieces = sorted(path.name for path in (tmp_path / "run" / "finished").iterdir())
    stamps = {name: (tmp_path / "run" / "finished" / name).stat().st_mtime_ns for name in pieces}
    assert json.dumps(main(argv)["summary"]) == json.dumps(results["summary"])  # NaN-safe equality
    assert {name: (tmp_path / "run" / "finished" / name).stat().st_mtime_ns for name in pieces} == stamps

    # One seed of one method from the cache, in a fresh output: no SFT, no calibration, the cached pick and sets.
    rerun = main([*sizes, "--output", str(tmp_path / "rerun"), "--jobs", "1", "--warm-start-cache", str(cache),
                  "--methods", "grpo"])  # fmt: skip
    assert not list((tmp_path / "rerun").glob("warm_start_*"))
    assert not list((tmp_path / "rerun" / "finished").glob("calibration_*"))
    assert rerun["screening"] == on_disk["screening"] and rerun["start_eval"] == on_disk["start_eval"]
    reproduced = rerun["summary"]["grpo"]["0"]
    assert {key: reproduced[key] for key in ("sampled_faithful", "greedy_pass", "hard_sampled_faithful")} == {
        key: on_disk["summary"]["grpo"]["0"][key]
        for key in ("sampled_faithful", "greedy_pass", "hard_sampled_faithful")
    }  # the same run, reproduced from the cache


@pytest.mark.slow
def test_a_killed_warm_start_resumes_from_its_last_checkpoint(tmp_path):
    """SFT killed after its first checkpoint: rerun, it resumes there and ends with the weights of a run never
    killed (nothing lost, nothing trained twice)."""
    import shutil
    from pathlib import Path

    from safetensors.torch import load_file

    from experiments.toy_arithmetic.policy import build_policy, warm_start
    from experiments.toy_arithmetic.task import make_problems

    base = build_policy(tmp_path / "base", hidden_size=64, num_layers=1)
    problems = make_problems(0, [1, 2], 32)
    whole = warm_start(base, problems, tmp_path / "whole", 4, 8, 3e-3, 0, 2)
    killed = warm_start(base, problems, tmp_path / "killed", 4, 8, 3e-3, 0, 2)
    shutil.rmtree(killed[-1])  # as if killed between the checkpoints at steps 2 and 4
    first = Path(killed[0]) / "model.safetensors"
    stamp = first.stat().st_mtime_ns
    resumed = warm_start(base, problems, tmp_path / "killed", 4, 8, 3e-3, 0, 2)
    assert first.stat().st_mtime_ns == stamp  # steps 1-2 were not trained again: their checkpoint is untouched
    assert [path.split("/")[-1] for path in resumed] == ["checkpoint-2", "checkpoint-4"]
    state = json.loads((tmp_path / "killed" / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["global_step"] == 4
    ours, theirs = (load_file(f"{path}/model.safetensors") for path in (resumed[-1], whole[-1]))
    assert ours.keys() == theirs.keys()
    assert all((ours[name] == theirs[name]).all() for name in ours)


@pytest.mark.slow  # builds four trainers: ~15 s of CPU, about a minute on the loaded 2-core machine
def test_hand_made_batch_gets_the_hand_derived_advantages(tmp_path, monkeypatch):
    """The trainers' own scoring of fixed completions (experiments/toy_arithmetic/credit_check.py): signs and the
    tokens that get credit, against values worked out here from the papers' formulas."""
    import statistics

    from experiments.toy_arithmetic import methods
    from experiments.toy_arithmetic.credit_check import hand_made_advantages
    from experiments.toy_arithmetic.policy import build_policy

    policy = build_policy(tmp_path / "policy", hidden_size=64, num_layers=1)  # weights do not enter advantages
    monkeypatch.setattr(methods, "PRM_FLIP_SHARE", 0.0)  # VeriGate's PRM without noise: the labels below by hand
    texts = {}

    def by_line(method):
        rows = hand_made_advantages(method, policy, str(tmp_path / method))
        texts.update({(r["group"], r["name"]): [[text for text, _ in line] for line in r["lines"]] for r in rows})
        return {(r["group"], r["name"]): [[value for _, value in line] for line in r["lines"]] for r in rows}

    def decision_token(tokens: list[str]) -> int:
        """The token holding the line's decision point: the character after '=', or the digit after '{'."""
        line = "".join(tokens)
        point = line.index("=") + 1 if "=" in line else line.index("{") + 1
        return next(k for k in range(len(tokens)) if len("".join(tokens[: k + 1])) > point)

    grpo, coef0, process, noprop, verigate = (
        by_line(m) for m in ("grpo", "process_coef0", "process", "process_noprop", "verigate")
    )
    # GRPO: group 0 rewards 1, 0, 0, 0 -> mean 1/4, std (Bessel) 1/2: +1.5 and -0.5 on every token; group 1 all 0.
    for (group, name), lines in grpo.items():
        expected = 0.0 if group == 1 else (0.75 if name == "right" else -0.25) / (0.5 + 1e-4)
        assert all(value == pytest.approx(expected, abs=1e-4) for line in lines for value in line), (group, name)
    assert coef0 == grpo  # process_advantage_coef 0 is GRPO, token by token
    # Process (d1 = -0.05, d2 = -0.1, first token of each step, a step starting at its line's decision point): that
    # token of line j gets phi_j - mean(g) on top of GRPO's advantage; phi = 1 for a faithful pass, d1 before the
    # first wrong line, d2 from it on (propagation). Other tokens: GRPO's.
    # Without propagation a line gets d2 only when it is wrong against the line written before it: a carried slip
    # (wrong_step_2's lines 2-3 follow its wrong line 1; wrong_step_1's lines 1-3 follow its wrong line 0) gets d1.
    phis = {
        "right": [1.0] * 4,
        "wrong_step_2": [D1, D2, D2, D2],
        "wrong_step_1": [D2, D2, D2, D2],
        "wrong_answer": [D1, D1, D1, D2],
    }
    phis_off = {**phis, "wrong_step_2": [D1, D2, D1, D1], "wrong_step_1": [D2, D1, D1, D1]}
    for trainer, expected_phis in ((process, phis), (noprop, phis_off)):
        for (group, name), lines in trainer.items():
            mean_g = 0.25 if group == 0 else 0.0
            for index, line in enumerate(lines):
                base = grpo[group, name][index][0]
                credited = decision_token(texts[group, name][index])
                expected = [
                    base + (expected_phis[name][index] - mean_g if k == credited else 0.0) for k in range(len(line))
                ]
                assert line == pytest.approx(expected, abs=1e-4), (group, name, index)
    # VeriGate: group 0 has a pass, so it keeps GRPO's advantages; group 1 is all-zero and gated: every token of line
    # j gets (c_j - mean c) / (std c + eps), c_j = the summed step scores from line j on, mean and std over the
    # group's 16 lines. The PRM scores a line 1 when it continues the line written before it (the prompt's chain for
    # line 1), else 0, the answer line included: wrong_answer 1,1,1,0; wrong_step_2 1,0,1,1 (its third line continues
    # the wrong second one); wrong_step_1 0,1,1,1.
    for name in ("right", "wrong_step_2", "wrong_step_1", "wrong_answer"):
        assert verigate[0, name] == grpo[0, name]
    cumulated = {"wrong_answer": [3, 2, 1, 0], "wrong_step_2": [3, 2, 2, 1], "wrong_step_1": [3, 3, 2, 1]}
    group = [*cumulated["wrong_answer"], *cumulated["wrong_step_2"], *cumulated["wrong_step_1"]]
    group += cumulated["wrong_step_2"]
    mean, std = statistics.mean(group), statistics.stdev(group)
    for name, values in cumulated.items():
        for line, c in zip(verigate[1, name], values, strict=True):
            assert all(value == pytest.approx((c - mean) / (std + 1e-4), abs=1e-3) for value in line), name


def test_finished_pieces_are_reused_only_under_the_same_sizes_and_while_usable(tmp_path):
    """A finished piece is loaded on a rerun with the same sizes, computed again under other sizes, and computed
    again when `usable` says what it names is gone (the warm start's model deleted since)."""
    import argparse

    from experiments.toy_arithmetic.launch import FinishedPieces

    calls = []

    def compute():
        calls.append(1)
        return {"run": len(calls)}

    pieces = FinishedPieces(tmp_path, argparse.Namespace(budget=64))
    assert pieces.get("piece", compute) == {"run": 1}
    assert pieces.get("piece", compute) == {"run": 1}  # reused: nothing computed
    assert pieces.get("piece", compute, usable=lambda value: False) == {"run": 2}
    assert FinishedPieces(tmp_path, argparse.Namespace(budget=128)).get("piece", compute) == {"run": 3}
    assert len(calls) == 3
