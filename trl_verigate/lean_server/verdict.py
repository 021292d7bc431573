"""The verdict: what is sent to Lean for a request, and whether Lean's answer proves it.

Two halves around one REPL command:

* `prepare` turns a request into a `Prepared` (the header, and the code sent in the header's env)
  or rejects it before Lean runs. The proof body is untrusted: the precheck (`precheck.py`, over the
  tokens of `lexer.py`) refuses anything that could leave the `by` block or change how Lean checks or
  reports the proof; a complete file is untrusted throughout and checked by `files.py`.
* `judge` reads the REPL's response to that code. A proof passes only with no error, no sorry
  (neither `sorries` nor the "declaration uses sorry" warning) and a `#print axioms` answer for the
  theorem, at the position of the `#print axioms` command we appended, listing only whitelisted
  axioms. The axioms check is the backstop for everything the precheck cannot see, e.g. a tactic
  that closes goals with `sorryAx` without emitting the warning (DeepSeek-Prover-V2's `apply?`).
"""

from __future__ import annotations

import re
from typing import Union

from trl_verigate.lean_server import tactics as tactic_split
from trl_verigate.lean_server.files import HEADER_RULE, normalize_header, prepare_file, split_header
from trl_verigate.lean_server.gc_pause import gc_paused
from trl_verigate.lean_server.lexer import PrecheckError, Token, lex, split_name
from trl_verigate.lean_server.precheck import precheck_proof
from trl_verigate.lean_server.prepared import (
    EXAMPLE_NAME,
    EXAMPLE_REPLACEMENT,
    Prepared,
    assemble,
    declaration,
    located_at,
)
from trl_verigate.lean_server.token_rules import COMMAND_WORDS
from trl_verigate.lean_server.types import (
    FileRequest,
    LeanServerConfig,
    Message,
    Position,
    ProofRequest,
    Request,
    VerificationResult,
)

# Importable from here as before the split: callers and tests name them as `verdict.X`.
__all__ = [
    "COMMAND_WORDS",
    "EXAMPLE_NAME",
    "EXAMPLE_REPLACEMENT",
    "HEADER_RULE",
    "MAX_MESSAGES",
    "NATIVE_AXIOMS",
    "SORRY_WARNINGS",
    "PrecheckError",
    "Prepared",
    "is_axioms_answer",
    "judge",
    "parse_axioms_message",
    "precheck_proof",
    "prepare",
    "repl_position",
    "split_header",
    "submitted_position",
]

SORRY_WARNINGS = ("declaration uses `sorry`", "declaration uses 'sorry'")
NATIVE_AXIOMS = ("Lean.ofReduceBool", "Lean.trustCompiler")
# The most messages and sorries `judge` reads from one answer. A legitimate proof gets a handful; a proof that makes
# Lean write more (one `trace "x"` per line writes one message per line) is flooding the output, and fails unread.
MAX_MESSAGES = 10_000
_AXIOMS_LIST = re.compile(r"^'(?P<name>.+)' depends on axioms: \[(?P<axioms>.*)\]$", re.DOTALL)
_AXIOMS_NONE = re.compile(r"^'(?P<name>.+)' does not depend on any axioms$", re.DOTALL)


def _check_statement(statement: str) -> list[Token]:
    try:
        tokens = lex(statement)
    except PrecheckError as error:
        raise PrecheckError(f"statement: {error.before}", error.offset, error.after) from None
    code = [t for t in tokens if t.kind != "comment"]
    ends_in_by = (
        len(code) >= 3
        and [t.text for t in code[-3:]] == [":", "=", "by"]
        and code[-3].end == code[-2].start
        and tokens[-1] is code[-1]
    )
    if not ends_in_by:
        raise PrecheckError(
            "statement must end in `:= by` (the proof body is appended on the next line); "
            f"it ends in {statement.rstrip()[-30:]!r}"
        )
    return tokens


# ---------------------------------------------------------------- prepare


def _rejected(reason: str) -> VerificationResult:
    return VerificationResult(status="rejected", reason=reason)


# A file's body is lexed outside precheck_proof's own pause: the whole prepare runs with the collector paused.
@gc_paused()
def prepare(
    request: Request, default_header: str, allow_native_decide: bool = False
) -> Union[Prepared, VerificationResult]:
    """The REPL command for `request`, or a `status="rejected"` result saying what the precheck found and where.

    A `ProofRequest`'s statement is trusted and must end in `:= by`; its proof body is untrusted. Its
    `header` is trusted like the statement (the caller picks both, e.g. from the dataset) and is sent
    unchecked: never fill it from model output.
    A str request is a complete file: helper theorem/lemma/def declarations, then the main theorem proved with
    `:= by` (see `files.prepare_file`), all of it untrusted
    (kimina snippets are model output): its header lines must each be one `import M`, `set_option NAME
    VALUE` or `open …` command (see `split_header`); only comments, modifiers and
    `open … in` / `set_option NAME VALUE in` may precede the theorem.
    A `FileRequest` is such a file held to its trusted `statement` and `header` (see `files.prepare_file`); a
    trusted statement without a header is held to `default_header` as its trusted header.
    """
    if not isinstance(default_header, str):
        raise TypeError(
            f"prepare(default_header=...) needs the header text as a str, got {type(default_header).__name__}"
        )
    try:
        if isinstance(request, ProofRequest):
            return _prepare_proof_request(request, default_header, allow_native_decide)
        if isinstance(request, FileRequest):
            if not isinstance(request.file, str):
                raise TypeError(f"FileRequest.file must be a str, got {type(request.file).__name__}")
            return prepare_file(request.file, allow_native_decide, request.statement, request.header, default_header)
        if isinstance(request, str):
            return prepare_file(request, allow_native_decide, None, None)
    except PrecheckError as error:
        return _rejected(error.reason(_submitted_source(request)))
    raise TypeError(
        f"prepare(request=...) needs a ProofRequest(statement, proof), a FileRequest or a str holding a Lean file, "
        f"got {type(request).__name__}"
    )


def _submitted_source(request: Request) -> str:
    """The text a PrecheckError's offset is relative to once `prepare` has shifted it: the file, or the statement,
    a line break and the proof."""
    if isinstance(request, FileRequest):
        return request.file
    if isinstance(request, str):
        return request
    return request.statement + "\n" + request.proof


def _prepare_proof_request(request: ProofRequest, default_header: str, allow_native_decide: bool) -> Prepared:
    for field_name in ("statement", "proof"):
        if not isinstance(getattr(request, field_name), str):
            raise TypeError(
                f"ProofRequest.{field_name} must be a str, got {type(getattr(request, field_name)).__name__}"
            )
    header = default_header if request.header is None else request.header
    if not isinstance(header, str):
        raise TypeError(f"ProofRequest.header must be a str or None, got {type(header).__name__}")
    # The pool keys REPLs by header: a comment or blank line must not cost a fresh `import Mathlib`.
    header = normalize_header(header)
    # Offsets in PrecheckErrors are moved to the submitted source, `statement + "\n" + proof`.
    tokens = _check_statement(request.statement)
    keyword, name = declaration(tokens, "statement")
    if not request.proof.strip():
        raise PrecheckError("empty proof body")
    prepared = assemble(header, request.statement, "\n", request.proof, tokens, keyword, name, line_offset=0)
    with located_at(len(request.statement) + 1):
        prepared.outermost_tactics = precheck_proof(
            prepared.proof, allow_native_decide, start_column=prepared.proof_column
        )
    return prepared


# ---------------------------------------------------------------- judge


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
    name = ".".join(split_name(printed)).removeprefix("_root_.")
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
        tactics = tactic_split.split_tactics(
            prepared.proof, config.tactic_granularity, start_column=prepared.proof_column
        )
    if "message" in response and "messages" not in response and "env" not in response:
        return VerificationResult(status="error", tactics=tactics, time_s=time_s, reason=str(response["message"]))

    malformed = _malformed_list(response.get("messages"), "messages", "message") or _malformed_list(
        response.get("sorries"), "sorries", "sorry"
    )
    if malformed is not None:
        return VerificationResult(status="error", tactics=tactics, time_s=time_s, reason=malformed)
    answered = len(response.get("messages") or []) + len(response.get("sorries") or [])
    if answered > MAX_MESSAGES:
        # "failed", not "error": the proof made Lean write them (the REPL worked), and nothing in them can make it
        # pass, so it is not worth reading them (or retrying).
        reason = (
            f"Lean answered with {answered} messages and sorries, over the {MAX_MESSAGES} a proof may produce: "
            "the proof floods Lean's output, and fails without its answer being read"
        )
        return VerificationResult(status="failed", tactics=tactics, time_s=time_s, reason=reason)

    messages: list[Message] = []
    errors: list[tuple[int, str]] = []
    first_error: Message | None = None
    axioms: list[str] | None = None
    # Our one `#print axioms` answers once: several answers mean one was not written by it, and none may decide.
    axioms_answers = 0
    sorry_warning = False
    for raw in response.get("messages") or []:
        severity = str(raw.get("severity", ""))
        text = str(raw.get("data", ""))
        start = repl_position(raw.get("pos")) or (1, 0)
        start_offset = prepared.offset_of(*start)
        end = repl_position(raw.get("endPos"))
        if is_axioms_answer(prepared, raw):
            name, listed = parse_axioms_message(text)
            if _same_name(name, prepared.theorem_name):
                axioms_answers += 1
                axioms = list(dict.fromkeys((axioms or []) + listed))
            continue
        if any(warning in text for warning in SORRY_WARNINGS):
            sorry_warning = True
        end_position = None
        if end is not None:
            end_position = submitted_position(prepared, prepared.offset_of(*end))
        position = submitted_position(prepared, start_offset)
        message = Message(severity, position.line, position.column, end_position, text)
        messages.append(message)
        if severity == "error":
            first_error = first_error or message
            if start_offset < prepared.proof_end:
                errors.append((start_offset - prepared.proof_start, text))
            elif not (start[0] == prepared.print_line and "unknown constant" in text.lower()):
                # Past the proof's end Lean only complains because the proof did not finish (a parse error at
                # our `#print`, an unclosed term): the last tactic is at fault. An unknown constant on the
                # `#print` line means the theorem never entered the environment, which blames no tactic.
                errors.append((len(prepared.proof), text))
    sorries = response.get("sorries") or []
    for sorry in sorries:
        start = repl_position(sorry.get("pos"))
        if start is not None:
            offset = prepared.offset_of(*start)
            if offset < prepared.proof_end:
                errors.append((offset - prepared.proof_start, "sorry"))

    # Two keys for native evaluation: allow_native_decide lifts the precheck ban, and the whitelist must still
    # name the axioms, so neither setting alone lets compiled code vouch for a proof.
    allowed = set(config.axiom_whitelist) - {"sorryAx"}
    if not config.allow_native_decide:
        allowed -= set(NATIVE_AXIOMS)
    if first_error is not None:
        reason = f"error at line {first_error.line}, column {first_error.column}: {first_error.text}"
    elif sorries or sorry_warning:
        reason = "uses sorry"
    elif axioms is None:
        reason = f"no `#print axioms` answer for `{prepared.theorem_name}`: the proof did not finish cleanly"
    elif axioms_answers > 1:
        reason = (
            f"{axioms_answers} `#print axioms` answers for `{prepared.theorem_name}` where Lean gives one: "
            "the response is not Lean's answer to the command sent"
        )
    elif "sorryAx" in axioms:
        reason = "uses sorry (sorryAx among its axioms)"
    else:
        unlisted = [a for a in axioms if a not in allowed]
        reason = f"axiom {unlisted[0]} not in whitelist" if unlisted else None
    passed = reason is None
    if passed:
        first_error_tactic = len(tactics)
    elif not errors:
        # A failure no error locates (found at the axioms stage: sorryAx or an axiom outside the whitelist, no or
        # two `#print axioms` answers, an unpositioned sorry warning, the theorem missing at our `#print`): no
        # tactic is known good. len(tactics) would read as "every tactic valid, proof incomplete", a process reward
        # for a proof that may have forged its answer; 0 credits nothing, as the recheck's demotion does.
        first_error_tactic = 0
    else:
        first_error_tactic = tactic_split.first_error_tactic(tactics, errors)
    return VerificationResult(
        status="passed" if passed else "failed",
        passed=passed,
        messages=messages,
        tactics=tactics,
        first_error_tactic=first_error_tactic,
        axioms=list(axioms or []),
        time_s=time_s,
        reason=reason if reason is None else reason[:500],
    )
