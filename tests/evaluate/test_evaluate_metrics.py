"""pass@k, maj@k and the bootstrap interval of `trl_verigate.evaluate.metrics`, against hand arithmetic and brute
force; `compute_metrics` against rows built by hand."""

import itertools
import statistics

import pytest

from trl_verigate.evaluate.math_scoring import MathScorer
from trl_verigate.evaluate.metrics import (
    bootstrap_ci,
    check_ks,
    maj_at_k_metrics,
    majority_index,
    pass_at_k,
    pass_at_k_metrics,
)
from trl_verigate.evaluate.runner import compute_metrics


def test_pass_at_k_hand_values_n5_c2():
    # 1 - C(3,k)/C(5,k): k=1: 1 - 3/5; k=2: 1 - 3/10; k=5: C(3,5) = 0.
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(5, 2, 5) == 1.0


@pytest.mark.parametrize("k", [1, 2, 5])
def test_pass_at_k_none_and_all_correct(k):
    assert pass_at_k(5, 0, k) == 0.0
    assert pass_at_k(5, 5, k) == 1.0


def test_pass_at_k_equals_brute_force_over_subsets():
    for n in range(1, 8):
        for c in range(n + 1):
            outcomes = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                subsets = list(itertools.combinations(outcomes, k))
                expected = sum(any(subset) for subset in subsets) / len(subsets)
                assert pass_at_k(n, c, k) == pytest.approx(expected), (n, c, k)


def test_pass_at_k_refuses_k_above_n_and_bad_counts():
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(4, 1, 5)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError, match="--k: k=8 is larger than --n=4"):
        check_ks([1, 8], 4)
    assert check_ks([4, 1, 4], 4) == [1, 4]


def test_pass_at_k_metrics_average_over_problems():
    # Problem A: n=5, c=2 (pass@1 0.4, pass@2 0.7); problem B: n=5, c=0.
    a = [True, False, True, False, False]
    b = [False] * 5
    metrics = pass_at_k_metrics([a, b], [1, 2])
    assert metrics["pass@1"]["value"] == pytest.approx(0.2)
    assert metrics["pass@2"]["value"] == pytest.approx(0.35)


def test_majority_tie_goes_to_the_answer_reached_first():
    same = str.__eq__
    assert majority_index(["3", "4", "4", "3"], same) == 0  # 2-2: "3" came first
    assert majority_index(["4", "3", "3", "4"], same) == 0
    assert majority_index(["3", "4", "4"], same) == 1  # 1-2
    assert majority_index([None, "5", None], same) == 1  # no answer does not vote
    assert majority_index([None, None], same) is None


def test_maj_at_k_ties_and_first_k_attempts():
    same = str.__eq__
    # Gold 3: attempts answer 3, 4, 4, 3. maj@1: "3" right. maj@2: 1-1 tie, "3" first: right. maj@3: "4" wins: wrong.
    # maj@4: 2-2 tie, "3" first: right.
    attempts = [("3", True), ("4", False), ("4", False), ("3", True)]
    metrics = maj_at_k_metrics([attempts], [1, 2, 3, 4], same)
    assert [metrics[f"maj@{k}"]["value"] for k in (1, 2, 3, 4)] == [1.0, 1.0, 0.0, 1.0]
    # No answer at all: not solved.
    assert maj_at_k_metrics([[(None, False)] * 2], [2], same)["maj@2"]["value"] == 0.0


def test_maj_at_k_groups_equivalent_answers_written_differently():
    scorer = MathScorer()
    assert scorer.equivalent("\\frac12", "0.5")
    assert not scorer.equivalent("\\frac12", "\\frac13")
    # Gold 1/2. "\frac12" and "0.5" are one class of two votes against two different wrong answers.
    attempts = [("7", False), ("\\frac12", True), ("3", False), ("0.5", True)]
    metrics = maj_at_k_metrics([attempts], [4], scorer.equivalent)
    assert metrics["maj@4"]["value"] == 1.0
    # Plain string equality would see four classes of one vote and pick "7".
    assert maj_at_k_metrics([attempts], [4], str.__eq__)["maj@4"]["value"] == 0.0


def test_bootstrap_is_seeded_and_brackets_the_mean():
    values = [0.0, 1.0, 0.5, 0.25, 1.0, 0.0, 0.75, 1.0]
    low, high = bootstrap_ci(values, seed=3)
    assert (low, high) == bootstrap_ci(values, seed=3)
    assert low <= statistics.mean(values) <= high
    assert 0.0 <= low < high <= 1.0
    assert bootstrap_ci([0.5] * 6) == (0.5, 0.5)


def test_compute_metrics_from_rows():
    def row(problem, attempt, correct, answer):
        return {"problem_id": problem, "attempt": attempt, "correct": correct, "answer": answer, "status": "x"}

    rows = [
        row("p", 0, True, "2"),
        row("p", 1, False, "3"),
        row("q", 0, False, "1"),
        row("q", 1, False, None),
        row("p", 2, True, "2"),  # beyond n=2: ignored
    ]
    metrics = compute_metrics(rows, ["p", "q"], n=2, ks=[1, 2], equivalent=str.__eq__)
    # p: c=1 of 2, q: c=0. accuracy = pass@1 = (1/2 + 0)/2; pass@2 = (1 + 0)/2; maj@1: p right, q wrong.
    assert metrics["accuracy"]["value"] == pytest.approx(0.25)
    assert metrics["pass@1"]["value"] == pytest.approx(0.25)
    assert metrics["pass@2"]["value"] == pytest.approx(0.5)
    assert metrics["maj@1"]["value"] == pytest.approx(0.5)
    assert metrics["maj@2"]["value"] == pytest.approx(0.5)  # p: 1-1 tie, "2" first: right
    with pytest.raises(RuntimeError, match="lack some of their 3 attempts"):
        compute_metrics(rows[:4], ["p", "q"], n=3, ks=[1])


@pytest.mark.parametrize("n", [64, 1024, 4000])
def test_pass_at_k_for_large_n_matches_chens_product_form(n):
    # C(4000, 2000) has over 1,200 digits, far past a float: the estimator must not overflow. Reference: Chen et al.'s
    # numerically stable form 1 - prod_{i=n-c+1}^{n} (1 - k/i), and the exact fraction.
    from fractions import Fraction
    from math import comb, prod

    for c in (0, 1, 3, n // 2, n - 1):
        for k in (1, 8, n // 2, n):
            if n - c < k:
                expected = 1.0
            else:
                expected = 1.0 - prod(1.0 - k / i for i in range(n - c + 1, n + 1))
                exact = 1 - Fraction(comb(n - c, k), comb(n, k))
                assert float(exact) == pytest.approx(expected, rel=1e-9, abs=1e-12)
            assert pass_at_k(n, c, k) == pytest.approx(expected, rel=1e-9, abs=1e-12), (n, c, k)


def test_maj_at_k_votes_for_the_same_text_and_not_for_empty_boxes():
    from trl_verigate.evaluate.problems import math_problems

    scorer = MathScorer()
    # math-verify cannot parse this answer, and would call it unequal to itself: the same text is one class.
    unparsable = "\\mathrm{foo}\\$\\#"
    assert scorer.equivalent(unparsable, unparsable)
    attempts = [("7", False), (unparsable, True), (unparsable, True)]
    assert maj_at_k_metrics([attempts], [3], scorer.equivalent)["maj@3"]["value"] == 1.0
    # An empty \boxed{} is no answer: it does not vote, so it cannot win a 1-1 tie against the right answer.
    (problem,) = math_problems([{"problem": "What is 2+3?", "answer": "5"}]).problems
    rows = [scorer.score(problem, 0, "I give up: \\boxed{}"), scorer.score(problem, 1, "2+3 = \\boxed{5}")]
    assert [(row["answer"], row["status"]) for row in rows] == [(None, "no_answer"), ("5", "correct")]
    metrics = compute_metrics(rows, [problem.id], n=2, ks=[2], equivalent=scorer.equivalent)
    assert metrics["maj@2"]["value"] == 1.0


def test_an_unboxed_answer_against_boxed_gold_is_no_answer_and_against_gsm8k_gold_is_read():
    from trl_verigate.evaluate.problems import math_problems

    scorer = MathScorer()
    # MATH gold (\boxed): a completion cut off before its box has no answer, as the training reward reads it.
    (boxed,) = math_problems([{"problem": "What is 2+3?", "solution": "So it is \\boxed{5}."}]).problems
    row = scorer.score(boxed, 0, "We add.\n\nStep 2: 2 + 3 = 5")
    assert (row["answer"], row["status"], row["correct"]) == (None, "no_answer", False)
    # GSM8K gold (#### N): the last number is the answer.
    (gsm8k,) = math_problems([{"question": "What is 2+3?", "answer": "2+3=5\n#### 5"}], "gsm8k").problems
    row = scorer.score(gsm8k, 0, "2 + 3 = 5, so 5")
    assert (row["answer"], row["status"], row["correct"]) == ("5", "correct", True)
