"""The toy-arithmetic experiment (experiments/toy_arithmetic, docs/experiments.md): its task generator and
arithmetic process oracle against hand-worked examples, and a tiny end-to-end `--quick` run of the launcher."""

from __future__ import annotations

import json
import random

import pytest

from experiments.toy_arithmetic.oracle import ArithmeticProcessOracle, line_spans
from experiments.toy_arithmetic.task import Problem, make_problems, make_splits, random_problem
from trl_verigate.rewards.process import ProcessOracle
from trl_verigate.rewards.symbolic import SymbolicStepScorer

D1, D2 = -0.05, -0.1


def test_problem_steps_and_answer_by_hand():
    problem = Problem((12, 7, 3), ("+", "-"))
    assert problem.prompt == "Compute: 12+7-3\n"
    assert problem.completion() == "12+7-3=19-3\n19-3=16\n\\boxed{16}"
    assert problem.solution == "\\boxed{16}"
    assert problem.difficulty == 2
    longer = Problem((12, 7, 3, 5), ("+", "-", "+"))  # each step rewrites the rest of the chain
    assert longer.steps() == ["12+7-3+5=19-3+5", "19-3+5=16+5", "16+5=21"]
    assert longer.answer == 21
    scorer = SymbolicStepScorer(neutral_score=0.0)  # the step checker both VeriGate and the oracle use
    assert [scorer.score_step(step) for step in longer.steps()] == [1.0, 1.0, 1.0]
    assert scorer.score_step("12+7-3+5=19-3+6") == 0.0  # a miscopied rest of the chain is a wrong step


def test_generator_is_seeded_distinct_and_in_range():
    first = make_problems(7, [1, 3], 50, max_operand=20)
    assert first == make_problems(7, [1, 3], 50, max_operand=20)
    assert first != make_problems(8, [1, 3], 50, max_operand=20)
    assert len({p.prompt for p in first}) == 50
    assert {p.difficulty for p in first} == {1, 3}
    assert len(make_problems(7, [1, 2], 2000, max_operand=20)) == 2000  # more than the ~600 one-operation problems
    with pytest.raises(ValueError, match="--sft-problems"):
        make_problems(7, [1], 2000, max_operand=20)
    rng = random.Random(0)
    for _ in range(500):
        problem = random_problem(rng, 4, max_operand=20)
        value = problem.numbers[0]
        for operator, number in zip(problem.operators, problem.numbers[1:], strict=True):
            value = value + number if operator == "+" else value - number
            assert 0 <= value <= 60
        assert problem.answer == value  # the chain evaluated independently of Problem.steps
    for _ in range(200):
        problem = random_problem(rng, 5, max_operand=9)
        assert max(problem.numbers) <= 9
        value = problem.numbers[0]
        for operator, number in zip(problem.operators, problem.numbers[1:], strict=True):
            value = value + number if operator == "+" else value - number
            assert 0 <= value <= 27


def test_splits_do_not_overlap():
    splits = make_splits(3, [1, 2], [3], 40, 20, 10)  # default operands 1-9
    sets = [{p.prompt for p in part} for part in (splits.sft, splits.train, splits.eval_easy, splits.eval_hard)]
    assert sum(len(s) for s in sets) == len(set().union(*sets)) == 80
    assert {p.difficulty for p in splits.sft + splits.eval_easy} == {1, 2}
    assert {p.difficulty for p in splits.train + splits.eval_hard} == {3}


def test_line_spans_skip_blank_lines_and_trailing_spaces():
    assert line_spans("ab\n\n cd  \ne") == [(0, 2), (5, 7), (10, 11)]


def test_oracle_verdicts_by_hand():
    oracle = ArithmeticProcessOracle()
    assert isinstance(oracle, ProcessOracle)
    row = {"prompt": "Compute: 12+7-3\n", "solution": "\\boxed{16}"}
    right = "12+7-3=19-3\n19-3=16\n\\boxed{16}"
    wrong_step = "12+7-3=18-3\n18-3=15\n\\boxed{15}"  # first step wrong, second right from the wrong value
    wrong_second = "12+7-3=19-3\n19-3=17\n\\boxed{17}"
    truncated = "12+7-3=19-3\n19-3"  # no relation on the second line: nothing checkable is a wrong step
    right_steps_wrong_answer = "12+7-3=19-3\n19-3=16\n\\boxed{15}"
    no_answer = "12+7-3=19-3\n19-3=16"
    verdicts = oracle.verify([row["prompt"]] * 6, [row] * 6, [
        right, wrong_step, wrong_second, truncated, right_steps_wrong_answer, no_answer
    ])  # fmt: skip
    assert [v.status for v in verdicts] == ["passed"] + ["failed"] * 5
    assert verdicts[0].spans == ((0, 11), (12, 19), (20, 30))
    assert verdicts[0].first_error == 3
    assert (verdicts[1].first_error, verdicts[1].error_tactics) == (0, (0, 2))
    assert (verdicts[2].first_error, verdicts[2].error_tactics) == (1, (1, 2))
    assert verdicts[3].spans == ((0, 11), (12, 16)) and verdicts[3].first_error == 1
    assert (verdicts[4].first_error, verdicts[4].error_tactics) == (2, (2,))
    assert verdicts[5].first_error == 2 and verdicts[5].error_tactics == ()  # every step right, no answer line


def test_step_counts_tell_right_steps_about_another_chain_apart():
    from experiments.toy_arithmetic.policy import step_counts

    problem = Problem((9, 7, 6, 4), ("-", "+", "-"))  # 9-7+6-4 = 4
    texts = [
        "9-7+6-4=2+6-4\n2+6-4=8-4\n8-4=4\n\\boxed{4}",  # the reference: 3 right steps from the whole chain
        "7+6-4=13-4\n13-4=9\n\\boxed{9}",  # dropped the first operand: 2 right steps about another chain
        "9-7+6-4=3+6-4\n3+6-4=5\n\\boxed{5}",  # the whole chain, first step wrong, second right
        "\\boxed{4}",  # no steps at all
    ]
    oracle = ArithmeticProcessOracle()
    verdicts = oracle.verify([problem.prompt] * 4, [problem.row()] * 4, texts)
    assert step_counts(texts, verdicts, [problem] * 4, oracle) == (3 + 2 + 2, 3 + 2 + 1, 2)


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
    assert 0.0 <= start["first_step_copies_prompt"] <= 1.0
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


@pytest.mark.slow  # builds four trainers: ~15 s of CPU, about a minute on the loaded 2-core machine
def test_hand_made_batch_gets_the_hand_derived_advantages(tmp_path):
    """The trainers' own scoring of fixed completions (experiments/toy_arithmetic/credit_check.py): signs and the
    tokens that get credit, against values worked out here from the papers' formulas."""
    import statistics

    from experiments.toy_arithmetic.credit_check import hand_made_advantages
    from experiments.toy_arithmetic.policy import build_policy

    policy = build_policy(tmp_path / "policy", hidden_size=64, num_layers=1)  # weights do not enter advantages

    def by_line(method):
        rows = hand_made_advantages(method, policy, str(tmp_path / method))
        return {(r["group"], r["name"]): [[value for _, value in line] for line in r["lines"]] for r in rows}

    grpo, coef0, process, verigate = (by_line(m) for m in ("grpo", "process_coef0", "process", "verigate"))
    # GRPO: group 0 rewards 1, 0, 0, 0 -> mean 1/4, std (Bessel) 1/2: +1.5 and -0.5 on every token; group 1 all 0.
    for (group, name), lines in grpo.items():
        expected = 0.0 if group == 1 else (0.75 if name == "right" else -0.25) / (0.5 + 1e-4)
        assert all(value == pytest.approx(expected, abs=1e-4) for line in lines for value in line), (group, name)
    assert coef0 == grpo  # process_advantage_coef 0 is GRPO, token by token
    # Process (d1 = -0.05, d2 = -0.1, first token): the first token of line j gets phi_j - mean(g) on top of GRPO's
    # advantage; phi = 1 for a passed proof, d1 before the first wrong line, d2 from it on. Other tokens: GRPO's.
    first_error = {"right": None, "wrong_step_2": 1, "wrong_step_1": 0, "wrong_answer": 3}
    for (group, name), lines in process.items():
        mean_g = 0.25 if group == 0 else 0.0
        for index, line in enumerate(lines):
            base = grpo[group, name][index][0]
            if first_error[name] is None:
                phi = 1.0
            else:
                phi = D1 if index < first_error[name] else D2
            assert line[0] == pytest.approx(base + phi - mean_g, abs=1e-4), (group, name, index)
            assert all(value == pytest.approx(base, abs=1e-4) for value in line[1:]), (group, name, index)
    # VeriGate: group 0 has a pass, so it keeps GRPO's advantages; group 1 is all-zero and gated: every token of line
    # j gets (c_j - mean c) / (std c + eps), c_j = the summed step scores from line j on, mean and std over the
    # group's 16 lines. A right line scores 1, a wrong one 0; the answer line, with no relation to check, gets the
    # scorer's neutral score, which every c_j contains once and the normalisation cancels, so it is left out here.
    for name in ("right", "wrong_step_2", "wrong_step_1", "wrong_answer"):
        assert verigate[0, name] == grpo[0, name]
    cumulated = {"wrong_answer": [3, 2, 1, 0], "wrong_step_2": [2, 1, 1, 0], "wrong_step_1": [2, 2, 1, 0]}
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
