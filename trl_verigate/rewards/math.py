"""Math answer accuracy as a TRL reward function, with a per-item time limit that holds in any thread or process.

`accuracy_reward(completions, solution=None, answer=None, **kwargs)` scores 1.0 when the completion's final answer
is mathematically equal to the gold answer according to math-verify, else 0.0.

Why the time limit is enforced here. math-verify's own timeouts use ``signal.alarm``, which only works in the main
thread, and they interrupt single parse/compare calls, not a whole item. Worse, some inputs make sympy compute huge
integers (``\\boxed{9^{9^{9^{9}}}}``): CPython then sits in one C call that holds the GIL, so no watchdog thread can
even run. Such a call does check for signals, though, so a SIGALRM timer delivered to the thread running it works.
Hence two paths sharing one deadline mechanism (math-verify's own timeouts disabled, as they would reset the timer):

- in the main thread of any process (TRL's trainer loop, a `multiprocessing.Pool` worker, daemonic or not), the item
  runs in-process under a ``setitimer`` deadline;
- in any other thread, the item runs in a long-lived child Python process (started with `subprocess`, which, unlike
  `multiprocessing`, daemonic workers may use) that applies the same deadline in its own main thread; if the child
  does not answer within the limit plus a grace period it is killed and restarted on the next item.

Any error or timeout scores 0.0, is counted in `MathAccuracyReward.failures`, and never propagates.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
from math_verify.errors import TimeoutException as MathVerifyTimeout

logger = logging.getLogger(__name__)

_BOXED_START = re.compile(r"\\(?:boxed|fbox)\s*\{")
_NUMBER = re.compile(r"-?(?:\d+(?:,\d{3})*(?:\.\d+)?|\.\d+)")
_EXTRACTION_CONFIG = [LatexExtractionConfig(), ExprExtractionConfig()]

# How long past the item's limit a child process may take to answer before it is killed; covers the reply itself.
_KILL_GRACE_SECONDS = 1.0
# Importing sympy and math-verify in a fresh child takes a second or two; a loaded machine may need far more.
_STARTUP_TIMEOUT_SECONDS = 120.0


class _DeadlineExceeded(BaseException):
    """Raised by the SIGALRM handler; a BaseException so that sympy's ``except Exception`` blocks let it through."""


class _SkipDisabledTimeoutWarning(logging.Filter):
    # math-verify warns once that its timeouts are off; here they are off on purpose, replaced by our deadline.
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Timeout is disabled")


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_SkipDisabledTimeoutWarning())


def _boxed_content(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` or ``\\fbox{...}`` whose braces balance (escaped braces skipped)."""
    for match in reversed(list(_BOXED_START.finditer(text))):
        depth, index = 1, match.end()
        while index < len(text):
            char = text[index]
            if char == "\\":
                index += 2
                continue
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    return text[match.end() : index].strip()
            index += 1
    return None


def _gold_answer_and_boxed(text: str) -> tuple[str, bool]:
    """The gold answer (see `extract_gold_answer`) and whether it came from a ``\\boxed{}``/``\\fbox{}``."""
    if not isinstance(text, str):
        raise ValueError(f"The gold solution must be a str, got {type(text).__name__}.")
    if "####" in text:
        tail = text.rsplit("####", 1)[1].strip()
        if tail:
            return tail.splitlines()[0].strip().replace(",", ""), False
    boxed = _boxed_content(text)
    if boxed is not None:
        return boxed, True
    return text.strip(), False


def extract_gold_answer(text: str) -> str:
    """The gold answer of a dataset solution.

    GSM8K: the text after the last ``####`` (commas removed, ``1,000`` -> ``1000``). MATH: the content of the last
    ``\\boxed{}``/``\\fbox{}``. Anything else (e.g. an ``answer`` column that already holds the bare answer): the
    whole string, stripped.
    """
    return _gold_answer_and_boxed(text)[0]


def extract_predicted_answer(text: str, last_number_fallback: bool = True) -> str | None:
    """The final answer of a completion: the last ``\\boxed{}``, else (with ``last_number_fallback``) the last number
    (commas removed), else None."""
    if not isinstance(text, str):
        raise ValueError(f"A completion must be a str or a list of messages, got {type(text).__name__}.")
    boxed = _boxed_content(text)
    if boxed is not None:
        return boxed
    if not last_number_fallback:
        return None
    numbers = _NUMBER.findall(text)
    return numbers[-1].replace(",", "") if numbers else None


def _parse_answer(answer: str) -> list:
    # A bare answer ("\frac{1}{2}", "x^2+1") only parses as LaTeX between $...$; free text keeps its own delimiters.
    candidates = [f"${answer}$", answer] if "$" not in answer else [answer]
    for candidate in candidates:
        parsed = parse(candidate, extraction_config=_EXTRACTION_CONFIG, parsing_timeout=None)
        if parsed:
            return parsed
    return []


def _answers_match(gold_answer: str, predicted_answer: str) -> bool:
    gold = _parse_answer(gold_answer)
    if not gold:
        raise ValueError(f"math-verify could not parse the gold answer {gold_answer!r}")
    prediction = _parse_answer(predicted_answer)
    return bool(prediction) and bool(verify(gold, prediction, timeout_seconds=None))


@contextlib.contextmanager
def _signal_deadline(seconds: float):
    """Raise `_DeadlineExceeded` in this (main) thread after ``seconds``; restores any timer that was set before."""
    armed = True

    def on_alarm(signum, frame):
        if armed:
            raise _DeadlineExceeded()

    started = time.monotonic()
    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    previous_delay, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        armed = False  # first, so that an alarm arriving now cannot raise out of the clean-up
        signal.setitimer(signal.ITIMER_REAL, 0)
        if previous_handler is not None:  # None: installed from C, which Python cannot reinstate
            signal.signal(signal.SIGALRM, previous_handler)
        if previous_delay > 0:
            signal.setitimer(signal.ITIMER_REAL, max(previous_delay - (time.monotonic() - started), 1e-3))


def _check_in_this_thread(gold_answer: str, predicted_answer: str, timeout_seconds: float) -> tuple[bool, str | None]:
    """(answers match, failure description or None). Must run in a main thread."""
    try:
        with _signal_deadline(timeout_seconds):
            return _answers_match(gold_answer, predicted_answer), None
    except _DeadlineExceeded:
        return False, f"timed out after {timeout_seconds} s"
    except MathVerifyTimeout as error:  # a BaseException: math-verify's own timeout, should it ever be enabled
        return False, f"math-verify timeout: {error}"
    except Exception as error:
        return False, f"{type(error).__name__}: {error}"


class _CheckerProcess:
    """A child Python process that checks answers in its main thread, for callers outside a main thread."""

    def __init__(self):
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None

    def check(self, gold_answer: str, predicted_answer: str, timeout_seconds: float) -> tuple[bool, str | None]:
        with self._lock:
            try:
                process = self._running_process()
            except (OSError, RuntimeError) as error:
                return False, f"could not start the answer-checking process: {error}"
            request = json.dumps({"gold": gold_answer, "prediction": predicted_answer, "timeout": timeout_seconds})
            try:
                process.stdin.write(request.encode() + b"\n")
                process.stdin.flush()
            except OSError as error:
                self._stop()
                return False, f"the answer-checking process is gone: {error}"
            if not select.select([process.stdout], [], [], timeout_seconds + _KILL_GRACE_SECONDS)[0]:
                self._stop()
                return False, f"timed out after {timeout_seconds} s (checking process killed)"
            line = process.stdout.readline()
            if not line:
                self._stop()
                return False, "the answer-checking process exited"
            reply = json.loads(line)
            return reply["correct"], reply["failure"]

    def _running_process(self) -> subprocess.Popen:
        if self._process is not None and self._process.poll() is None:
            return self._process
        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
        process = subprocess.Popen(
            [sys.executable, "-c", "from trl_verigate.rewards.math import _serve; _serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        ready = select.select([process.stdout], [], [], _STARTUP_TIMEOUT_SECONDS)[0]
        if not ready or process.stdout.readline() != b"ready\n":
            process.kill()
            process.wait()
            raise RuntimeError(f"it did not report ready within {_STARTUP_TIMEOUT_SECONDS} s")
        self._process = process
        return process

    def _stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def close(self) -> None:
        with self._lock:
            if self._process is not None:
                # Closing stdin ends the child's request loop; kill only if it does not exit promptly.
                self._process.stdin.close()
                try:
                    self._process.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    self._stop()
                self._process = None


_checker_process = _CheckerProcess()
atexit.register(lambda: _checker_process.close())


def _forget_parent_checker() -> None:
    # A forked child must not talk to (or kill) its parent's checking process, nor inherit a held lock.
    global _checker_process
    _checker_process = _CheckerProcess()


os.register_at_fork(after_in_child=_forget_parent_checker)


def _serve() -> None:
    """Request loop of the checking process: one JSON line in, one JSON line out, until stdin closes."""
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything a library prints goes to stderr instead of corrupting the protocol
    protocol.write("ready\n")
    for line in sys.stdin:
        request = json.loads(line)
        correct, failure = _check_in_this_thread(request["gold"], request["prediction"], request["timeout"])
        protocol.write(json.dumps({"correct": correct, "failure": failure}) + "\n")


def _completion_text(completion) -> str:
    """Text of a standard completion (str) or of a conversational one (the last message's content)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        content = completion[-1].get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):  # content parts, as in multimodal chat formats
            return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    raise ValueError(
        f"A completion must be a str or a list of messages whose last one has a 'content', got {completion!r:.200}."
    )


class MathAccuracyReward:
    """TRL reward function: 1.0 when a completion's final answer equals the gold answer (math-verify), else 0.0.

    Gold answers come from ``solution`` (MATH-style, last ``\\boxed{}``) or ``answer`` (GSM8K-style ``#### N``);
    see `extract_gold_answer` and `extract_predicted_answer`. Against a boxed gold answer only a boxed answer counts:
    the last number of a completion without ``\\boxed{}`` is most often a truncated one's intermediate result
    ("Step 2"), and rewarding it would reward truncation (and un-gate VeriGate groups). ``allow_unboxed_answers=True``
    accepts that last number too. GSM8K ``#### N`` and bare gold answers always take the last number when nothing is
    boxed. Each item (parsing both answers and comparing them)
    has ``timeout_seconds`` of wall-clock time. Items that error or time out score 0.0 and are counted in
    ``failures`` (cumulative; the trainer logs its increments as ``verigate/reward_failures``).
    """

    def __init__(self, timeout_seconds: float = 5.0, allow_unboxed_answers: bool = False):
        if isinstance(timeout_seconds, bool) or not isinstance(timeout_seconds, (int, float)) or timeout_seconds <= 0:
            raise ValueError(f"`timeout_seconds` must be a positive number, got {timeout_seconds!r}.")
        if not isinstance(allow_unboxed_answers, bool):
            raise ValueError(f"`allow_unboxed_answers` must be True or False, got {allow_unboxed_answers!r}.")
        self.timeout_seconds = float(timeout_seconds)
        self.allow_unboxed_answers = allow_unboxed_answers
        self.failures = 0
        self.__name__ = "accuracy_reward"  # TRL names the reward's metrics after it
        self._failures_lock = threading.Lock()

    def __getstate__(self):
        state = self.__dict__.copy()
        del state["_failures_lock"]
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._failures_lock = threading.Lock()

    def predicted_answer(self, completion, gold: str) -> str | None:
        """The answer this reward reads from ``completion`` (a str or a list of messages) against the dataset solution
        ``gold``: only a boxed one when the gold answer is boxed, unless ``allow_unboxed_answers``."""
        _, gold_is_boxed = _gold_answer_and_boxed(gold)
        return extract_predicted_answer(
            _completion_text(completion), last_number_fallback=self.allow_unboxed_answers or not gold_is_boxed
        )

    def __call__(self, completions, solution=None, answer=None, **kwargs) -> list[float]:
        golds = solution if solution is not None else answer
        if golds is None:
            raise ValueError(
                "accuracy_reward needs the gold answers: the dataset must have a `solution` column (MATH-style, "
                "final answer in \\boxed{}) or an `answer` column (GSM8K-style, '#### N')."
            )
        if len(golds) != len(completions):
            raise ValueError(f"Got {len(completions)} completions but {len(golds)} gold answers; they must pair up.")

        in_main_thread = threading.current_thread() is threading.main_thread()
        rewards, gold_answers, predicted_answers = [], [], []
        for completion, gold in zip(completions, golds, strict=True):
            gold_answer = predicted_answer = None
            try:
                gold_answer = extract_gold_answer(gold)
                predicted_answer = self.predicted_answer(completion, gold)
            except ValueError as error:
                correct, failure = False, str(error)
            else:
                if predicted_answer is None:
                    correct, failure = False, None
                elif in_main_thread:
                    correct, failure = _check_in_this_thread(gold_answer, predicted_answer, self.timeout_seconds)
                else:
                    correct, failure = _checker_process.check(gold_answer, predicted_answer, self.timeout_seconds)
            if failure is not None:
                with self._failures_lock:
                    self.failures += 1
                logger.warning("accuracy_reward scored 0.0 after a failure (%s); gold answer %r", failure, gold_answer)
            rewards.append(1.0 if correct else 0.0)
            gold_answers.append(gold_answer)
            predicted_answers.append(predicted_answer)

        log_extra = kwargs.get("log_extra")  # TRL passes it to add columns to its completions table
        if callable(log_extra):
            log_extra("gold_answer", gold_answers)
            log_extra("predicted_answer", predicted_answers)
        return rewards


accuracy_reward = MathAccuracyReward()
