"""The toy-arithmetic experiment (experiments/toy_arithmetic, docs/experiments.md): its task generator and
arithmetic process oracle against hand-worked examples, and a tiny end-to-end `--quick` run of the launcher."""

from __future__ import annotations

import json
import random

import pytest

from experiments.toy_arithmetic.oracle import ArithmeticProcessOracle, line_spans
from experiments.toy_arithmetic.task import Problem, make_problems, make_splits, random_problem
from trl_verigate.rewards.lean import ProcessOracle

D1, D2 = -0.05, -0.1


def test_problem_steps_and_answer_by_hand():
    problem = Problem((12, 7, 3), ("+", "-"))
    assert problem.prompt == "Compute: 12 + 7 - 3\n"
    assert problem.completion() == "12 + 7 = 19\n19 - 3 = 16\n\\boxed{16}"
    assert problem.solution == "\\boxed{16}"
    assert problem.difficulty == 2


def test_generator_is_seeded_distinct_and_in_range():
    first = make_problems(7, [1, 3], 50)
    assert first == make_problems(7, [1, 3], 50)
    assert first != make_problems(8, [1, 3], 50)
    assert len({p.prompt for p in first}) == 50
    assert {p.difficulty for p in first} == {1, 3}
    assert len(make_problems(7, [1, 2], 2000)) == 2000  # more than the ~600 one-operation problems there are
    with pytest.raises(ValueError, match="--sft-problems"):
        make_problems(7, [1], 2000)
    rng = random.Random(0)
    for _ in range(500):
        problem = random_problem(rng, 4)
        value = problem.numbers[0]
        for operator, number in zip(problem.operators, problem.numbers[1:], strict=True):
            value = value + number if operator == "+" else value - number
            assert 0 <= value <= 60
        assert problem.answer == value  # the chain evaluated independently of Problem.steps
    small = [random_problem(rng, 3, max_operand=9) for _ in range(200)]
    assert (
        max(n for p in small for n in p.numbers) <= 9
        and max(int(s.split("= ")[1]) for p in small for s in p.steps()) <= 27
    )


def test_splits_do_not_overlap():
    splits = make_splits(3, [1, 2], [3], 40, 20, 10)
    sets = [{p.prompt for p in part} for part in (splits.sft, splits.train, splits.eval_easy, splits.eval_hard)]
    assert sum(len(s) for s in sets) == len(set().union(*sets)) == 80
    assert {p.difficulty for p in splits.sft + splits.eval_easy} == {1, 2}
    assert {p.difficulty for p in splits.train + splits.eval_hard} == {3}


def test_line_spans_skip_blank_lines_and_trailing_spaces():
    assert line_spans("ab\n\n cd  \ne") == [(0, 2), (5, 7), (10, 11)]


def test_oracle_verdicts_by_hand():
    oracle = ArithmeticProcessOracle()
    assert isinstance(oracle, ProcessOracle)
    row = {"prompt": "Compute: 12 + 7 - 3\n", "solution": "\\boxed{16}"}
    right = "12 + 7 = 19\n19 - 3 = 16\n\\boxed{16}"
    wrong_step = "12 + 7 = 18\n18 - 3 = 15\n\\boxed{15}"  # first step wrong, second right from the wrong value
    wrong_second = "12 + 7 = 19\n19 - 3 = 17\n\\boxed{17}"
    truncated = "12 + 7 = 19\n19 - 3"  # no relation on the second line: nothing checkable is a wrong step
    right_steps_wrong_answer = "12 + 7 = 19\n19 - 3 = 16\n\\boxed{15}"
    no_answer = "12 + 7 = 19\n19 - 3 = 16"
    verdicts = oracle.verify([row["prompt"]] * 6, [row] * 6, [
        right, wrong_step, wrong_second, truncated, right_steps_wrong_answer, no_answer
    ])  # fmt: skip
    assert [v.status for v in verdicts] == ["passed"] + ["failed"] * 5
    assert verdicts[0].spans == ((0, 11), (12, 23), (24, 34))
    assert verdicts[0].first_error == 3
    assert (verdicts[1].first_error, verdicts[1].error_tactics) == (0, (0, 2))
    assert (verdicts[2].first_error, verdicts[2].error_tactics) == (1, (1, 2))
    assert verdicts[3].spans == ((0, 11), (12, 18)) and verdicts[3].first_error == 1
    assert (verdicts[4].first_error, verdicts[4].error_tactics) == (2, (2,))
    assert verdicts[5].first_error == 2 and verdicts[5].error_tactics == ()  # every step right, no answer line


def test_oracle_names_the_missing_solution_column():
    with pytest.raises(ValueError, match="solution"):
        ArithmeticProcessOracle().verify(["p"], [{"prompt": "p"}], ["1 + 1 = 2"])


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--es-sweep", "3:1e-3"], "--es-sweep population 3"),
        (["--es-sweep", "1e-3"], "--es-sweep"),
        (["--num-generations", "1"], "--num-generations"),
        (["--budget", "4"], "--budget"),
        (["--methods", "grpo", "ppo"], "--methods"),
        (["--methods", "process_coef0"], "include grpo"),
        (["--max-operand", "1"], "--max-operand"),
    ],
)
def test_launcher_refuses_bad_sizes_before_loading_anything(flags, named, capsys):
    from experiments.toy_arithmetic.launch import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--quick", *flags])
    assert named in capsys.readouterr().err


@pytest.mark.slow
def test_quick_launcher_end_to_end(tmp_path):
    from experiments.toy_arithmetic.launch import main

    methods = ["grpo", "verigate", "process", "process_coef0", "es"]
    results = main([
        "--quick", "--output", str(tmp_path), "--sft-steps", "6", "--sft-problems", "48", "--sft-batch-size", "16",
        "--train-problems", "8", "--eval-problems", "2", "--num-generations", "2", "--prompts-per-step", "2",
        "--budget", "8", "--max-completion-length", "24", "--seeds", "0", "--eval-every", "4",
        "--start-groups", "2", "--es-sweep", "2:1e-3",
    ])  # fmt: skip
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["summary"].keys() == set(methods)
    start = on_disk["starting_point"]
    assert 0.0 <= start["pass_rate"] <= 1.0 and 0.0 <= start["frac_zero_std"] <= 1.0
    assert start["num_groups"] == 2 and start["num_generations"] == 2
    assert [run["method"] for run in on_disk["runs"]] == methods
    for run in on_disk["runs"]:
        assert run["completions"] == 8, run["method"]  # the same generation budget for every method
        assert run["eval"][-1]["completions"] == 8
        assert all(0.0 <= point[key] <= 1.0 for point in run["eval"] for key in ("easy", "hard"))
        assert run["wall_seconds"] > 0
    runs = {run["method"]: run for run in on_disk["runs"]}
    assert runs["grpo"]["steps"] == 2 and runs["es"]["steps"] == 1  # GRPO: 2 x 2 x 2; ES: P=2 members x 2 x 2
    assert all("verigate/gate_rate" in entry for entry in runs["verigate"]["metrics"])
    assert on_disk["es_sweep"][0]["population_size"] == 2 and on_disk["es_chosen"]["sigma"] == 1e-3

    # Coefficient 0 is GRPO: the same first batch gives the same token advantages, while coefficient 1 does not
    # (so the comparison can fail), and the whole runs log the same rewards and losses step by step.
    check = on_disk["coef0_check"]
    assert check["same_completions"] and check["num_completions"] == 4
    assert check["max_abs_diff_coef0_vs_grpo"] <= 1e-6
    assert check["max_abs_diff_coef1_vs_grpo"] > 1e-3
    grpo, coef0 = runs["grpo"]["metrics"], runs["process_coef0"]["metrics"]
    assert len(grpo) == len(coef0) == 2
    for ours, theirs in zip(coef0, grpo, strict=True):
        for key in ("reward", "frac_reward_zero_std", "completions/mean_length"):
            assert ours[key] == theirs[key], key
        assert ours["loss"] == pytest.approx(theirs["loss"], abs=1e-6)
    assert runs["process_coef0"]["eval"] == runs["grpo"]["eval"]

    import matplotlib.image

    for name in ("pass_rate.png", "zero_std_vs_gate.png"):
        image = matplotlib.image.imread(tmp_path / name)
        assert image.shape[0] > 100 and image.shape[1] > 100 and image.std() > 0.01, name
    table = (tmp_path / "results.md").read_text()
    assert all(f"| {method} |" in table for method in methods)
    assert json.loads(json.dumps(results["summary"])) == on_disk["summary"]  # main() returns what it wrote
