"""The judge: whether Lean's answer to a prepared request proves it.

A proof passes only with no error, no sorry (neither `sorries` nor the "declaration uses sorry" warning) and a
`#print axioms` answer for the theorem, at the position of the `#print axioms` command `prepare` appended, listing
only whitelisted axioms. The axioms check is the backstop for what the precheck cannot see, e.g. a tactic that closes
goals with `sorryAx` without the warning (DeepSeek-Prover-V2's `apply?`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from trl_verigate.lean_server.core import LeanServerConfig, Message, Position, Tactic, VerificationResult
from trl_verigate.lean_server.precheck import Prepared, name_components, split_tactics

SORRY_WARNINGS = ("declaration uses `sorry`", "declaration uses 'sorry'")
NATIVE_AXIOMS = ("Lean.ofReduceBool", "Lean.trustCompiler")
# The most messages and sorries `judge` reads from one answer. A legitimate proof gets a handful; a proof that makes
# Lean write more is flooding the output, and fails unread.
MAX_MESSAGES = 10_000
_AXIOMS_LIST = re.compile(r"^'(?P<name>.+)' depends on axioms: \[(?P<axioms>.*)\]$", re.DOTALL)
_AXIOMS_NONE = re.compile(r"^'(?P<name>.+)' does not depend on any axioms$", re.DOTALL)


def parse_axioms_message(text: str) -> tuple[str, list[str]] | None:
    """(constant name, axioms) from a `#print axioms` info message, or None if `text` is not one."""
    match = _AXIOMS_NONE.match(text)
    if match:
        return match.group("name"), []
    match = _AXIOMS_LIST.match(text)
    if match:
        axioms = [a.strip() for a in match.group("axioms").split(",") if a.strip()]
        return match.group("name"), axioms
    return None


def _same_name(printed: str, theorem_name: str) -> bool:
    # Real Lean prints `theorem _root_.x` as `x`; the stand-in echoes the name as written.
    name = ".".join(name_components(printed)).removeprefix("_root_.")
    # A `private theorem` prints with its mangled name `_private.<module>.0.<name>`.
    return name == theorem_name or (name.startswith("_private.") and name.endswith(".0." + theorem_name))


def submitted_position(prepared: Prepared, code_offset: int) -> Position:
    """The position in the submitted source of `code_offset` in `prepared.code` (clamped to the proof's end)."""
    return prepared.submitted_position(code_offset)


def repl_position(raw) -> tuple[int, int] | None:
    """(line, column) of a REPL `pos`/`endPos` object, or None if `raw` is not one."""
    if not isinstance(raw, dict):
        return None
    line, column = raw.get("line"), raw.get("column")
    if not isinstance(line, int) or not isinstance(column, int):
        return None
    # Tactic-mode answers carry line 0; clamp so a stray position still lands in the code.
    return max(1, line), max(0, column)


def is_axioms_answer(prepared: Prepared, raw) -> bool:
    """Whether `raw`, one message of the REPL's response to `prepared.code`, answers our appended `#print axioms`.

    Only an info message at the start of that command whose text lists axioms counts: the proof cannot put one
    there, so a forged listing elsewhere is just a message.
    """
    if not isinstance(raw, dict) or raw.get("severity") != "info":
        return False
    at_print = repl_position(raw.get("pos")) == (prepared.print_line, 0)
    return at_print and parse_axioms_message(str(raw.get("data", ""))) is not None


def _malformed_list(raw, field: str, item_name: str) -> str | None:
    """Why a response's `field` (`messages`, `sorries`) is not a list of objects, or None when it is (or is absent)."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        return f"malformed REPL response: {field} is a {type(raw).__name__}, not a list of {item_name} objects"
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            return f"malformed REPL response: {field}[{index}] is a {type(item).__name__}, not a {item_name} object"
    return None


@dataclass
class _Answer:
    """What `judge` reads from the REPL's messages and sorries."""

    messages: list[Message] = field(default_factory=list)
    # (offset into the proof body, text) of each error and sorry that blames a tactic.
    errors: list[tuple[int, str]] = field(default_factory=list)
    first_error: Message | None = None
    axioms: list[str] | None = None
    # Our one `#print axioms` answers once: several answers mean one was not written by it, and none may decide.
    axioms_answers: int = 0
    sorry_warning: bool = False
    sorries: list = field(default_factory=list)


def _read_message(prepared: Prepared, raw: dict, answer: _Answer) -> None:
    severity = str(raw.get("severity", ""))
    text = str(raw.get("data", ""))
    start = repl_position(raw.get("pos")) or (1, 0)
    start_offset = prepared.offset_of(*start)
    end = repl_position(raw.get("endPos"))
    if is_axioms_answer(prepared, raw):
        name, listed = parse_axioms_message(text)
        if _same_name(name, prepared.theorem_name):
            answer.axioms_answers += 1
            answer.axioms = list(dict.fromkeys((answer.axioms or []) + listed))
        return
    if any(warning in text for warning in SORRY_WARNINGS):
        answer.sorry_warning = True
    end_position = None
    if end is not None:
        end_position = submitted_position(prepared, prepared.offset_of(*end))
    position = submitted_position(prepared, start_offset)
    message = Message(severity, position.line, position.column, end_position, text)
    answer.messages.append(message)
    if severity == "error":
        answer.first_error = answer.first_error or message
        if start_offset < prepared.proof_end:
            answer.errors.append((start_offset - prepared.proof_start, text))
        elif not (start[0] == prepared.print_line and "unknown constant" in text.lower()):
            # Past the proof's end Lean only complains because the proof did not finish (a parse error at our
            # `#print`, an unclosed term): the last tactic is at fault. An unknown constant on the `#print` line
            # means the theorem never entered the environment, which blames no tactic.
            answer.errors.append((len(prepared.proof), text))


def _read_answer(prepared: Prepared, response: dict) -> _Answer:
    answer = _Answer(sorries=response.get("sorries") or [])
    for raw in response.get("messages") or []:
        _read_message(prepared, raw, answer)
    for sorry in answer.sorries:
        start = repl_position(sorry.get("pos"))
        if start is not None:
            offset = prepared.offset_of(*start)
            if offset < prepared.proof_end:
                answer.errors.append((offset - prepared.proof_start, "sorry"))
    return answer


def _failure_reason(prepared: Prepared, config: LeanServerConfig, answer: _Answer) -> str | None:
    """Why the answer does not prove the theorem, or None when it does."""
    # Two keys for native evaluation: allow_native_decide lifts the precheck ban, and the whitelist must still
    # name the axioms, so neither setting alone lets compiled code vouch for a proof.
    allowed = set(config.axiom_whitelist) - {"sorryAx"}
    if not config.allow_native_decide:
        allowed -= set(NATIVE_AXIOMS)
    first_error, axioms = answer.first_error, answer.axioms
    if first_error is not None:
        return f"error at line {first_error.line}, column {first_error.column}: {first_error.text}"
    if answer.sorries or answer.sorry_warning:
        return "uses sorry"
    if axioms is None:
        return f"no `#print axioms` answer for `{prepared.theorem_name}`: the proof did not finish cleanly"
    if answer.axioms_answers > 1:
        return (
            f"{answer.axioms_answers} `#print axioms` answers for `{prepared.theorem_name}` where Lean gives one: "
            "the response is not Lean's answer to the command sent"
        )
    if "sorryAx" in axioms:
        return "uses sorry (sorryAx among its axioms)"
    unlisted = [a for a in axioms if a not in allowed]
    return f"axiom {unlisted[0]} not in whitelist" if unlisted else None


def _unreadable(response: dict) -> tuple[str, str] | None:
    """(status, reason) for an answer `judge` does not read: an error object, malformed lists, or a flood."""
    if "message" in response and "messages" not in response and "env" not in response:
        return "error", str(response["message"])
    malformed = _malformed_list(response.get("messages"), "messages", "message") or _malformed_list(
        response.get("sorries"), "sorries", "sorry"
    )
    if malformed is not None:
        return "error", malformed
    answered = len(response.get("messages") or []) + len(response.get("sorries") or [])
    if answered > MAX_MESSAGES:
        # "failed", not "error": the proof made Lean write them (the REPL worked), and nothing in them can make it
        # pass, so it is not worth reading them (or retrying).
        return "failed", (
            f"Lean answered with {answered} messages and sorries, over the {MAX_MESSAGES} a proof may produce: "
            "the proof floods Lean's output, and fails without its answer being read"
        )
    return None


def judge(prepared: Prepared, response: dict, config: LeanServerConfig, time_s: float) -> VerificationResult:
    """The verdict on the REPL's `response` to `prepared.code` (see the module docstring for the rules).

    Its cost is linear in the response (each position is mapped by binary search, `Prepared.offset_of`), and an
    answer of more than `MAX_MESSAGES` messages and sorries fails unread. `LeanServer` calls it off its event loop.
    """
    if not isinstance(prepared, Prepared):
        raise TypeError(f"judge(prepared=...) needs the Prepared from prepare(), got {type(prepared).__name__}")
    if not isinstance(response, dict):
        raise TypeError(f"judge(response=...) needs the REPL's JSON object as a dict, got {type(response).__name__}")
    if config.tactic_granularity == "outermost" and prepared.outermost_tactics is not None:
        tactics = list(prepared.outermost_tactics)
    else:
        tactics = split_tactics(prepared.proof, config.tactic_granularity, start_column=prepared.proof_column)
    unreadable = _unreadable(response)
    if unreadable is not None:
        status, reason = unreadable
        return VerificationResult(status=status, tactics=tactics, time_s=time_s, reason=reason)
    answer = _read_answer(prepared, response)
    reason = _failure_reason(prepared, config, answer)
    passed = reason is None
    if passed:
        first_error_tactic = len(tactics)
    elif not answer.errors:
        # A failure no error locates (found at the axioms stage: sorryAx or an axiom outside the whitelist, no or
        # two `#print axioms` answers, an unpositioned sorry warning, the theorem missing at our `#print`): no
        # tactic is known good. len(tactics) would read as "every tactic valid, proof incomplete", a process reward
        # for a proof that may have forged its answer; 0 credits nothing, as the recheck's demotion does.
        first_error_tactic = 0
    else:
        first_error_tactic = first_error_tactic_of(tactics, answer.errors)
    return VerificationResult(
        status="passed" if passed else "failed",
        passed=passed,
        messages=answer.messages,
        tactics=tactics,
        first_error_tactic=first_error_tactic,
        axioms=list(answer.axioms or []),
        time_s=time_s,
        reason=reason if reason is None else reason[:500],
    )


def first_error_tactic_of(tactics: list[Tactic], errors: list[tuple[int, str]]) -> int:
    """Index of the first failing tactic: tactics before it ran without error.

    `errors` holds `(offset into the proof body, message text)`; the offset is negative for an error before the
    body. The earliest error inside the body blames the first tactic (in list order, so the outermost one) whose span
    contains it; an error between tactics blames the next one, and one after the last tactic the last one. Without
    errors in the body, errors before it that are all "unsolved goals" mean every tactic ran but the proof is
    incomplete (-> `len(tactics)`), any other error there means nothing can be credited (-> 0), and no errors at all
    gives `len(tactics)`.
    """
    inside = [offset for offset, _ in errors if offset >= 0]
    if inside:
        if not tactics:
            return 0
        offset = min(inside)
        for index, tactic in enumerate(tactics):
            if tactic.start <= offset < tactic.end:
                return index
        for index, tactic in enumerate(tactics):
            if tactic.start > offset:
                return index
        return len(tactics) - 1
    if all(text.lstrip().startswith("unsolved goals") for _, text in errors):
        return len(tactics)
    return 0
