"""The toy-arithmetic task and its checkers (experiments/toy_arithmetic/task.py, oracle.py) against hand-worked
chains: goal tracking like a prover, the previous-line test, the process oracle's error lines and decision spans,
the faithful-pass reward, VeriGate's noisy PRM and the PRM-as-reward control."""

from __future__ import annotations

import random

import pytest

from experiments.toy_arithmetic.oracle import (
    ArithmeticProcessOracle,
    FaithfulPassReward,
    NoisyChainStepScorer,
    PRMOutcomeReward,
    decision_spans,
    first_operation_done,
    goal_tracking_validity,
    line_spans,
    previous_line_validity,
)
from experiments.toy_arithmetic.task import Problem, make_problems, make_splits, random_problem
from trl_verigate.rewards.process import ProcessOracle
from trl_verigate.rewards.step_scorer import StepScorer

PROBLEM = Problem((2, 3, 1, 4), ("+", "-", "+"))  # 2+3-1+4 = 8
RIGHT = ["2+3-1+4=5-1+4", "5-1+4=4+4", "4+4=8", "\\boxed{8}"]


def test_problem_steps_and_answer_by_hand():
    problem = Problem((12, 7, 3), ("+", "-"))
    assert problem.prompt == "Compute: 12+7-3\n"
    assert problem.completion() == "12+7-3=19-3\n19-3=16\n\\boxed{16}"
    assert problem.solution == "\\boxed{16}"
    assert PROBLEM.steps() + [PROBLEM.solution] == RIGHT


def test_generator_is_seeded_distinct_and_in_range():
    first = make_problems(7, [1, 3], 50)
    assert first == make_problems(7, [1, 3], 50)
    assert first != make_problems(8, [1, 3], 50)
    assert len({p.prompt for p in first}) == 50
    with pytest.raises(ValueError, match="--sft-problems"):
        make_problems(7, [1], 200)  # 126 one-operation problems exist with operands 1-9 (9 x 9 sums + 45 differences)
    rng = random.Random(0)
    for _ in range(300):
        problem = random_problem(rng, 3)
        value = problem.numbers[0]
        for operator, number in zip(problem.operators, problem.numbers[1:], strict=True):
            value = value + number if operator == "+" else value - number
            assert 0 <= value <= 27
        assert problem.answer == value


def test_splits_are_disjoint_and_have_their_lengths():
    sizes = {"sft": 60, "pool": 200, "calibration": 10, "held_out": 12, "eval_easy": 8, "hard_candidates": 20}
    splits = make_splits(3, [1, 2, 3], [3], [1, 2], sizes)
    parts = [splits.sft, splits.pool, splits.calibration, splits.held_out, splits.eval_easy, splits.hard_candidates]
    prompts = [{p.prompt for p in part} for part in parts]
    assert [len(p) for p in prompts] == [60, 200, 10, 12, 8, 20]
    assert len(set().union(*prompts)) == 310  # no prompt in two sets
    rl_length = splits.pool + splits.calibration + splits.held_out + splits.hard_candidates
    assert {p.difficulty for p in rl_length} == {3}
    assert {p.difficulty for p in splits.eval_easy} <= {1, 2}


def test_first_operation_done_by_hand():
    assert first_operation_done("12+7-3") == "19-3"
    assert first_operation_done("19-3") == "16"
    assert first_operation_done("3-5+1") == "-2+1"
    assert first_operation_done("16") is None
    assert first_operation_done("1+2)") is None


def test_goal_tracking_follows_the_goal_like_a_prover():
    chain = "2+3-1+4"
    assert goal_tracking_validity(chain, RIGHT) == [True, True, True, True]
    # An error at line 1; line 2 continues the wrong line, so under goal tracking it is invalid too (its left side is
    # not the goal 2+3-1+4, which a failed line leaves open).
    carried = ["2+3-1+4=6-1+4", "6-1+4=5+4", "5+4=9", "\\boxed{9}"]
    assert goal_tracking_validity(chain, carried) == [False, False, False, False]
    # A true line about another chain (the arithmetic-only scorer accepts it) is invalid.
    assert goal_tracking_validity(chain, ["3-1+4=2+4", "2+4=6"]) == [False, False]
    # A failed line leaves the goal open: a right line after it is valid again.
    assert goal_tracking_validity(chain, ["2+3-1+4=9", "2+3-1+4=5-1+4"]) == [False, True]
    # Two operations at once, a wrong boxed value, anything after the answer.
    assert goal_tracking_validity(chain, ["2+3-1+4=4+4", "4+4=8", "\\boxed{8}"]) == [False, False, False]
    assert goal_tracking_validity(chain, [*RIGHT[:3], "\\boxed{9}"]) == [True, True, True, False]
    assert goal_tracking_validity(chain, [*RIGHT, "8=8"]) == [True] * 4 + [False]
    assert goal_tracking_validity(chain, ["\\boxed{8}"]) == [False]  # the goal is not one number yet
    assert goal_tracking_validity(chain, [" 2 + 3-1+4 = 5-1+4 "]) == [True]  # whitespace is not a difference


def test_previous_line_test_forgives_a_carried_error():
    chain = "2+3-1+4"
    carried = ["2+3-1+4=6-1+4", "6-1+4=5+4", "5+4=9", "\\boxed{9}"]
    assert previous_line_validity(chain, carried) == [False, True, True, True]
    assert previous_line_validity(chain, RIGHT) == [True, True, True, True]
    # A line without one '=' gives the next line nothing to continue.
    assert previous_line_validity(chain, ["2+3-1+4", "5-1+4=4+4"]) == [False, False]
    assert previous_line_validity(chain, ["3-1+4=2+4", "2+4=6"]) == [False, True]


def test_oracle_verdicts_reports_and_faithful_pass_by_hand():
    oracle = ArithmeticProcessOracle()
    assert isinstance(oracle, ProcessOracle)
    texts = {
        "right": "\n".join(RIGHT),
        "wrong_step_2": "2+3-1+4=5-1+4\n5-1+4=3+4\n3+4=7\n\\boxed{7}",
        "spurious": "2+3-1+4=6-1+4\n6-1+4=5+4\n5+4=8\n\\boxed{8}",  # right answer, wrong lines
        "truncated": "2+3-1+4=5-1+4\n5-1+4=4+4",
        "empty": "",
    }
    rows = [PROBLEM.row()] * len(texts)
    verdicts = dict(zip(texts, oracle.verify([PROBLEM.prompt] * len(texts), rows, list(texts.values())), strict=True))
    reports = dict(zip(texts, oracle.reports(rows, list(texts.values())), strict=True))
    assert verdicts["right"].status == "passed" and verdicts["right"].first_error == 4
    assert verdicts["right"].spans == ((8, 13), (20, 23), (28, 29), (37, 39))  # from each decision point
    # Goal tracking puts the first error at line 1; the previous-line test finds the error in line 1 only (lines 2
    # and 3 follow the wrong line 1 correctly): propagation off gives d2 to line 1 alone.
    assert (verdicts["wrong_step_2"].status, verdicts["wrong_step_2"].first_error) == ("failed", 1)
    assert verdicts["wrong_step_2"].error_tactics == (1,)
    # A right answer through wrong lines is no pass: line 0 is wrong, line 1 follows it, line 2 (5+4=8) is wrong.
    assert (verdicts["spurious"].status, verdicts["spurious"].first_error) == ("failed", 0)
    assert verdicts["spurious"].error_tactics == (0, 2)
    assert (verdicts["truncated"].first_error, verdicts["truncated"].error_tactics) == (2, ())  # incomplete
    assert verdicts["empty"].spans == () and verdicts["empty"].first_error == 0
    summary = {name: (r.faithful, r.spurious, r.valid_prefix) for name, r in reports.items()}
    assert summary == {
        "right": (True, False, 4),
        "wrong_step_2": (False, False, 1),
        "spurious": (False, True, 0),
        "truncated": (False, False, 2),
        "empty": (False, False, 0),
    }
    with pytest.raises(ValueError, match="solution"):
        oracle.verify(["p"], [{"prompt": "p"}], ["1+1=2"])


def test_noisy_prm_without_noise_is_the_previous_line_test_scoring_0_or_1():
    scorer = NoisyChainStepScorer(flip_share=0.0)
    assert isinstance(scorer, StepScorer)
    steps = [["2+3-1+4=6-1+4\n", "6-1+4=5+4\n", "5+4=9\n", "\\boxed{9}"], ["2+3-1+4=5-1+4\n", "\n", "5-1+4=4+4"]]
    assert scorer.score([PROBLEM.prompt] * 2, steps) == [[0.0, 1.0, 1.0, 1.0], [1.0, 0.0, 1.0]]
    every_label_flipped = [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]  # blank steps stay 0
    assert NoisyChainStepScorer(flip_share=1.0).score([PROBLEM.prompt] * 2, steps) == every_label_flipped
    with pytest.raises(ValueError, match="Compute"):
        scorer.score(["What is 2+3?"], [["2+3=5"]])
    with pytest.raises(ValueError, match="flip_share"):
        NoisyChainStepScorer(flip_share=1.5)


def test_noisy_prm_flips_a_fixed_share_the_same_way_every_time():
    rng = random.Random(5)
    problems = [random_problem(rng, 3) for _ in range(600)]
    scorer, clean = NoisyChainStepScorer(0.2), NoisyChainStepScorer(0.0)
    flips = total = 0
    for problem in problems:
        lines = problem.completion().split("\n")
        noisy = scorer.labels(problem.prompt, lines)
        assert noisy == scorer.labels(problem.prompt, lines)  # deterministic
        flips += sum(a != b for a, b in zip(noisy, clean.labels(problem.prompt, lines), strict=True))
        total += len(lines)
    # 2,400 labels, each flipped with probability 0.2: standard error 0.008.
    assert flips / total == pytest.approx(0.2, abs=0.03)


def test_prm_as_outcome_reward_needs_an_answer_line_and_every_label_valid():
    clean = PRMOutcomeReward(NoisyChainStepScorer(0.0))
    completions = [
        "\n".join(RIGHT),
        "2+3-1+4=6-1+4\n6-1+4=5+4\n5+4=9\n\\boxed{9}",  # line 0 wrong: the clean PRM says so
        "2+3-1+4=5-1+4\n5-1+4=4+4",  # every line valid, no answer line
    ]
    assert clean([PROBLEM.prompt] * 3, completions) == [1.0, 0.0, 0.0]
    assert PRMOutcomeReward(NoisyChainStepScorer(1.0))([PROBLEM.prompt] * 3, completions) == [0.0, 0.0, 0.0]


def test_faithful_pass_reward_by_hand():
    reward = FaithfulPassReward()
    completions = ["\n".join(RIGHT), "2+3-1+4=6-1+4\n6-1+4=5+4\n5+4=8\n\\boxed{8}", "\n".join(RIGHT[:3])]
    assert reward([PROBLEM.prompt] * 3, completions, solution=[PROBLEM.solution] * 3) == [1.0, 0.0, 0.0]


def test_decision_spans_start_after_the_equals_sign_by_hand():
    text = "\n".join(RIGHT)  # lines start at 0, 14, 24, 30
    assert decision_spans(text) == [(8, 13), (20, 23), (28, 29), (37, 39)]
    assert [text[a:b] for a, b in decision_spans(text)] == ["5-1+4", "4+4", "8", "8}"]
    # No '=' or nothing after it: the whole line.
    assert decision_spans("12\n3+4=\n\\boxed{}") == [(0, 2), (3, 7), (8, 16)]


def test_line_spans_skip_blank_lines_and_trailing_spaces():
    assert line_spans("ab\n\n cd  \ne") == [(0, 2), (5, 7), (10, 11)]
