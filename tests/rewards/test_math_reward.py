import multiprocessing
import pickle
import signal
import threading

import pytest
from math_verify.errors import TimeoutException as MathVerifyTimeout

import trl_verigate.rewards.math as math_reward
from trl_verigate.rewards.math import (
    MathAccuracyReward,
    accuracy_reward,
    extract_gold_answer,
    extract_predicted_answer,
)

# sympy tries to evaluate 9^(9^(9^9)) when comparing: an unbounded big-integer computation inside one C call.
HANGING_COMPLETION = r"The answer is \boxed{9^{9^{9^{9}}}}"

COMPLETIONS = [r"So x = \boxed{0.5}.", "She has 1,000 apples left.", r"\boxed{\frac{1}{3}}", "I give up."]
SOLUTIONS = [r"Hence $x = \boxed{\frac{1}{2}}$.", "1000 - 0 = 1000\n#### 1,000", r"$\boxed{\frac{1}{2}}$", "#### 7"]
EXPECTED = [1.0, 1.0, 0.0, 0.0]


@pytest.fixture
def reward():
    return MathAccuracyReward(timeout_seconds=1.0)


def score_and_count(completions, solutions):
    """Runs inside pool workers: a fresh reward so that its failure count belongs to this call."""
    worker_reward = MathAccuracyReward(timeout_seconds=1.0)
    return worker_reward(completions, solution=solutions), worker_reward.failures


# ---------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    "solution, expected",
    [
        ("Natalia sold 48/2 = 24 clips in May.\n#### 72", "72"),
        ("It costs 1,234,567 dollars.\n#### 1,234,567", "1234567"),
        ("#### -3.5\n", "-3.5"),
        (r"so the answer is $\boxed{\frac{1}{2}}$.", r"\frac{1}{2}"),
        (r"first \boxed{1}, finally \boxed{\frac{a}{b^{2}}}", r"\frac{a}{b^{2}}"),
        (r"the set is \boxed{\{1, 2\}}", r"\{1, 2\}"),
        (r"area: \fbox{ 12 }", "12"),
        (r"\boxed{3} and a truncated \boxed{\frac{1}{2}", "3"),
        ("  x^2 + 1  ", "x^2 + 1"),
    ],
)
def test_extract_gold_answer(solution, expected):
    assert extract_gold_answer(solution) == expected


@pytest.mark.parametrize(
    "completion, expected",
    [
        (r"We get \boxed{\sqrt{\frac{3}{4}}} in the end", r"\sqrt{\frac{3}{4}}"),
        (r"\boxed{1} then \boxed{2}", "2"),
        ("Step 1: 3 * 4 = 12. Step 2: 12 + 5 = 17 apples", "17"),
        ("a total of 1,250.75 dollars, i.e. -.5 per day", "-.5"),
        ("the total is 1,250.75", "1250.75"),
        ("no answer here", None),
    ],
)
def test_extract_predicted_answer(completion, expected):
    assert extract_predicted_answer(completion) == expected


def test_extraction_rejects_non_text():
    with pytest.raises(ValueError, match="gold solution must be a str"):
        extract_gold_answer(None)
    with pytest.raises(ValueError, match="completion must be a str"):
        extract_predicted_answer(3)


# ---------------------------------------------------------------- scoring


def test_accuracy_reward_math_and_gsm8k(reward):
    assert reward(COMPLETIONS, solution=SOLUTIONS) == EXPECTED
    assert reward(["The answer is 18."], answer=["Janet makes 9 * 2 = 18.\n#### 18"]) == [1.0]
    assert reward.failures == 0


def test_truncated_completion_against_boxed_gold_scores_zero(reward):
    # The example: a completion cut after "Step 2" has no \boxed answer; its last number, 2, happens to be the
    # gold answer, and the last-number fallback rewarded the truncation.
    truncated = ["Let us set up the equation.\n\nStep 2"]
    gold = [r"Thus $x = \boxed{2}$."]
    assert reward(truncated, solution=gold) == [0.0]
    assert reward.failures == 0
    assert reward([r"Let us set up the equation.\n\nStep 2: x = \boxed{2}"], solution=gold) == [1.0]
    assert reward.predicted_answer(truncated[0], gold[0]) is None
    # Opting in to the fallback scores the last number again.
    assert MathAccuracyReward(timeout_seconds=1.0, allow_unboxed_answers=True)(truncated, solution=gold) == [1.0]


def test_gsm8k_and_bare_gold_keep_the_last_number(reward):
    assert reward(["3 + 4 = 7 apples.\n\nStep 2"], answer=["She has 3 + 4 = 7.\n#### 2"]) == [1.0]
    assert reward(["so 2"], answer=["2"]) == [1.0]


def test_allow_unboxed_answers_must_be_a_bool():
    with pytest.raises(ValueError, match="`allow_unboxed_answers` must be True or False"):
        MathAccuracyReward(allow_unboxed_answers="yes")


def test_extract_predicted_answer_without_fallback():
    assert extract_predicted_answer("Step 2", last_number_fallback=False) is None
    assert extract_predicted_answer(r"Step 2: \boxed{5}", last_number_fallback=False) == "5"


@pytest.mark.parametrize(
    "prediction, gold",
    [
        (r"\boxed{\frac{1}{2}}", "0.5"),
        (r"\boxed{0.5}", r"\boxed{\dfrac{1}{2}}"),
        (r"\boxed{\sqrt{50}}", r"\boxed{5\sqrt{2}}"),
        (r"\boxed{\{2, 1\}}", r"\boxed{\{1,2\}}"),
        (r"\boxed{2x+3}", r"\boxed{3 + 2x}"),
    ],
)
def test_equivalent_forms_score_one(reward, prediction, gold):
    assert reward([prediction], solution=[gold]) == [1.0]


@pytest.mark.parametrize("prediction, gold", [(r"\boxed{\frac{1}{3}}", "0.5"), ("42", "#### 24"), (r"\boxed{x}", "y")])
def test_wrong_answers_score_zero_without_failure(reward, prediction, gold):
    assert reward([prediction], solution=[gold]) == [0.0]
    assert reward.failures == 0


def test_conversational_completions(reward):
    completions = [
        [{"role": "assistant", "content": r"Thus \boxed{\frac{3}{10}}."}],
        [{"role": "user", "content": r"\boxed{3/10}"}, {"role": "assistant", "content": "It is 0.4"}],
        [{"role": "assistant", "content": [{"type": "text", "text": r"\boxed{0.3}"}]}],
    ]
    assert reward(completions, solution=[r"\boxed{\frac{3}{10}}"] * 3) == [1.0, 0.0, 1.0]


def test_trl_calling_convention(reward):
    logged = {}
    rewards = reward(
        prompts=["p1", "p2"],
        completions=[r"\boxed{4}", "5"],
        completion_ids=[[1], [2]],
        solution=[r"\boxed{4}", r"\boxed{4}"],
        trainer_state=None,
        log_extra=lambda column, values: logged.setdefault(column, values),
        log_metric=lambda name, value: None,
    )
    assert rewards == [1.0, 0.0]
    # "5" is not boxed, so against boxed gold it is no answer at all.
    assert logged == {"gold_answer": ["4", "4"], "predicted_answer": ["4", None]}
    assert accuracy_reward.__name__ == "accuracy_reward"
    assert isinstance(accuracy_reward, MathAccuracyReward)


def test_bad_arguments(reward):
    with pytest.raises(ValueError, match="`solution` column"):
        reward(["1"])
    with pytest.raises(ValueError, match="must pair up"):
        reward(["1", "2"], solution=["1"])
    with pytest.raises(ValueError, match="`timeout_seconds` must be a positive number"):
        MathAccuracyReward(timeout_seconds=0)


def test_malformed_items_are_counted_failures(reward):
    rewards = reward([{"content": "4"}, r"\boxed{4}", r"\boxed{4}"], solution=[r"\boxed{4}", None, r"\boxed{}"])
    assert rewards == [0.0, 0.0, 0.0]
    assert reward.failures == 3


def test_pickle_keeps_settings_and_count(reward):
    reward(["1"], solution=[None])
    reward.allow_unboxed_answers = True
    restored = pickle.loads(pickle.dumps(reward))
    assert (restored.timeout_seconds, restored.failures, restored.__name__) == (1.0, 1, "accuracy_reward")
    assert restored.allow_unboxed_answers is True
    assert restored(["1"], solution=["1"]) == [1.0]


# ---------------------------------------------------------------- time limits and math-verify failures


@pytest.mark.timeout(60)
def test_hanging_input_is_cut_in_main_thread(reward):
    assert reward([HANGING_COMPLETION, r"\boxed{5}"], solution=["5", "5"]) == [0.0, 1.0]
    assert reward.failures == 1


@pytest.mark.timeout(60)
def test_main_thread_deadline_restores_an_existing_timer(reward):
    fired = []

    def handler(signum, frame):
        fired.append(signum)

    previous = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 100.0)
        assert reward([HANGING_COMPLETION], solution=["5"]) == [0.0]
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < remaining <= 100.0
        assert signal.getsignal(signal.SIGALRM) is handler and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.timeout(60)
def test_slow_python_verify_is_cut(reward, monkeypatch):
    def endless_verify(gold, target, **kwargs):
        while True:
            pass

    monkeypatch.setattr(math_reward, "verify", endless_verify)
    assert reward([r"\boxed{1}"], solution=["1"]) == [0.0]
    assert reward.failures == 1


@pytest.mark.parametrize(
    "raised",
    [MathVerifyTimeout("Operation timed out!"), RecursionError("too deep"), MemoryError(), RuntimeError("bug")],
)
def test_math_verify_exceptions_are_caught_and_counted(reward, monkeypatch, raised):
    def failing_verify(gold, target, **kwargs):
        raise raised

    monkeypatch.setattr(math_reward, "verify", failing_verify)
    assert reward([r"\boxed{1}", r"\boxed{2}"], solution=["1", "2"]) == [0.0, 0.0]
    assert reward.failures == 2


def test_keyboard_interrupt_is_not_swallowed(reward, monkeypatch):
    def interrupted_parse(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(math_reward, "parse", interrupted_parse)
    with pytest.raises(KeyboardInterrupt):
        reward([r"\boxed{1}"], solution=["1"])


@pytest.mark.timeout(120)
def test_called_from_a_thread(reward):
    results = {}

    def run():
        results["rewards"] = reward(COMPLETIONS + [HANGING_COMPLETION], solution=SOLUTIONS + ["5"])

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert results["rewards"] == EXPECTED + [0.0]
    assert reward.failures == 1


@pytest.mark.timeout(120)
def test_checking_process_that_overruns_is_killed_and_replaced(reward, monkeypatch):
    # A negative grace makes the caller give up before the child's own deadline, as if the child were stuck.
    monkeypatch.setattr(math_reward, "_KILL_GRACE_SECONDS", -0.9)
    results = {}

    def run():
        results["stuck"] = reward([HANGING_COMPLETION], solution=["5"])
        monkeypatch.setattr(math_reward, "_KILL_GRACE_SECONDS", 1.0)
        results["after"] = reward([r"\boxed{5}"], solution=["5"])

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert results == {"stuck": [0.0], "after": [1.0]}
    assert reward.failures == 1


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_called_from_daemonic_pool_workers(start_method):
    context = multiprocessing.get_context(start_method)
    with context.Pool(2) as pool:
        rewards, failures = pool.apply(score_and_count, (COMPLETIONS + [HANGING_COMPLETION], SOLUTIONS + ["5"]))
        # The module-level instance pickles to the workers too, as TRL-style worker code would use it.
        assert pool.apply(accuracy_reward, (COMPLETIONS,), {"solution": SOLUTIONS}) == EXPECTED
    assert rewards == EXPECTED + [0.0]
    assert failures == 1
