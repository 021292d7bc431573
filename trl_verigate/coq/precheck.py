"""The boundary between a completion and Coq: what of an untrusted proof may reach coqidetop.

Threat model. The dataset's statement and the header are trusted; the proof is written by a policy that is
rewarded for a pass and may search for any text that earns one. A pass must mean: Coq's kernel accepted a proof
term of the trusted statement, built in the trusted header's environment, that depends on no axiom outside
`CoqServerConfig.axiom_whitelist`. The defences, in order:

1. Here: the proof is split into sentences (`coq.sentences`, held to `coqc`'s own spans over the standard
   library) and every sentence must be a bullet, a brace or a tactic whose first word (after a goal selector and
   opening parentheses) is on the allow-list `allowlists/tactics.txt`. Coq reads a proof-mode sentence as a command
   exactly when its first word is a command's, and every command is capitalized and absent from the list, so this
   refuses every vernacular (`Axiom`, `Admitted`, `Abort`, `Load`, `Redirect`, `Declare ML Module`, `Set`/`Unset`
   such as `Unset Guard Checking`, `Require`, `Ltac`, `Hint`, `Time`/`Fail`/`Timeout` prefixes, ...) at its
   index, before Coq runs anything. Tactics that leave goals unproved (`admit`, `give_up`), skip tactic-time type
   checks (`exact_no_check` and kin) or run compiled code (`native_compute`) are not on the list either. A leading
   `Proof.` and a trailing `Qed.`/`Defined.` are the wrapper, not steps; anywhere else they are refused. A first
   sentence that is the trusted statement itself (blanks aside) is dropped: it never reaches Coq.
   A qualified name (`Z.swap_greater`) counts by its full name, or as a qualified form of a listed tactic (`Lia.lia`).
   Control characters other than tab, newline and CRLF's carriage return, and lone surrogates, are refused: the XML
   protocol cannot carry them.
   Stops: every command a completion could run; what it does not stop: a tactic on the list misbehaving, and a
   sentence boundary where Coq and the splitter disagree (then Coq, which reads one sentence per `Add`, runs the
   first sentence of the text and drops the rest, so nothing unchecked runs; tested by the corpus).
2. `coq.process`: the statement is ours, sent as its own sentence, and our `Qed.` closes the proof; `coq.judge`
   then compares `Check <name>.` with the trusted statement's own (elaborated once with `Admitted.`), so a
   proof that swapped the theorem (`Abort.` and a new `Theorem`) fails even if 1. missed it, and reads
   `Print Assumptions <name>.` (always, or a seeded sample) against the whitelist: axioms, `Admitted` lemmas and
   guard, positivity or universe bypasses anywhere in the proof's dependencies fail it.
3. `coq.recheck`: passes are compiled again by `coqc` from the trusted header, statement and the proof's sentences
   (so Coq's own parser splits them), rechecked by `coqchk`, an independent kernel, and their statement checked
   again.
What none of this stops: a bug in Coq's kernel that both Coq and coqchk share, and a header whose libraries
themselves hold an inconsistency (the header is trusted).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from trl_verigate.coq.config import CoqProofRequest, CoqServerConfig, header_problem
from trl_verigate.coq.sentences import Sentence, skip_blanks_and_comments, skip_comment, skip_string, split_sentences
from trl_verigate.prover_pool.results import Tactic, VerificationResult

_DATA = Path(__file__).resolve().parent / "allowlists"
STATEMENT_KEYWORDS = ("Theorem", "Lemma", "Fact", "Remark", "Corollary", "Proposition", "Property", "Example")
# Coq's identifiers: a letter (any script's) or `_`, then letters, digits, `_` and `'`.
IDENT = r"[^\W\d][\w']*"
_STATEMENT = re.compile(r"({})\s+({})".format("|".join(STATEMENT_KEYWORDS), IDENT))
# A goal selector before a tactic: `all:`, `2:`, `1-3:`, `1,3:`, `[x]:`, `!:`, `par:`.
_SELECTOR = re.compile(
    r"(?:only\s+)?(?:all|par|!|\d+(?:\s*-\s*\d+)?(?:\s*,\s*\d+(?:\s*-\s*\d+)?)*|\[\s*[A-Za-z_][\w']*\s*\])\s*:"
)
_WORD = re.compile(IDENT)
# A tactic's name, qualified or not: `lia`, `Z.swap_greater`, `Coq.micromega.Lia.lia` (a `.` then a blank ends
# the sentence instead).
_QUALIFIED = re.compile(rf"{IDENT}(?:\.{IDENT})*")
# Control characters other than tab, newline and the carriage return of a CRLF line end.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]|\r(?!\n)")
# Tactics refused wherever they stand in a sentence, not only first (`try admit`, `abstract admit`,
# `first [exact_no_check I | idtac]`): a proof that needs them is not an honest proof.
REFUSED_ANYWHERE = frozenset(
    {
        "admit",
        "give_up",
        "exact_no_check",
        "change_no_check",
        "vm_cast_no_check",
        "native_cast_no_check",
        "native_compute",
    }
)
# `Proof.` and `Qed.`/`Defined.`, blanks allowed before the period (`Proof .`).
WRAPPER_OPEN = re.compile(r"Proof\s*\.")
WRAPPER_CLOSE = re.compile(r"(?:Qed|Defined)\s*\.")


@lru_cache(maxsize=1)
def allowed_tactics() -> frozenset[str]:
    words = []
    for line in (_DATA / "tactics.txt").read_text(encoding="utf-8").splitlines():
        if not line.lstrip().startswith("#"):
            words += line.split()
    return frozenset(words)


@dataclass(frozen=True)
class CoqJob:
    """What one worker runs: the trusted statement (declaring `name`), then the proof's sentences, then `Qed.`."""

    statement: str
    name: str
    sentences: tuple[str, ...]
    print_assumptions: bool


@dataclass(frozen=True)
class Prepared:
    """A request that passed the precheck: the header its worker loads, the job (`code`, as the pool calls it),
    and the proof's steps as spans of the submitted proof."""

    header: str
    code: CoqJob
    tactics: tuple[Tactic, ...]
    request: CoqProofRequest


def statement_name(statement: str) -> str | None:
    """The name the trusted statement declares, or None when it is not one `Theorem name ... .` sentence."""
    if not isinstance(statement, str):
        return None
    sentences = split_sentences(statement)
    if len(sentences) != 1 or not sentences[0].terminated or sentences[0].kind != "command":
        return None
    match = _STATEMENT.match(statement, sentences[0].start)
    return match.group(2) if match else None


def sentence_head(text: str) -> str:
    """The word Coq decides a proof-mode sentence by: the first (possibly qualified) name after comments, a goal
    selector and opening parentheses or brackets; its first two characters when it starts with none (`#[`)."""
    position = skip_blanks_and_comments(text, 0)
    selector = _SELECTOR.match(text, position)
    if selector is not None:
        position = skip_blanks_and_comments(text, selector.end())
    while position < len(text) and text[position] in "([":
        # `[> t1 | t2 ]` dispatches the goals to t1, t2: its first tactic is the head, like `(t)`'s.
        position += 2 if text.startswith("[>", position) else 1
        position = skip_blanks_and_comments(text, position)
    word = _QUALIFIED.match(text, position)
    return word.group(0) if word else text[position : position + 2]


def proof_steps(proof: str, statement: str | None = None) -> list[Sentence]:
    """The proof's sentences without the `Proof.` ... `Qed.`/`Defined.` wrapper, nor a leading restatement of the
    trusted `statement` (the same sentence, blanks aside: models often repeat the theorem; it never runs, since the
    statement Coq runs is the trusted one)."""
    sentences = split_sentences(proof)
    if sentences and statement is not None and _blanks_aside(sentences[0].text(proof)) == _blanks_aside(statement):
        sentences = sentences[1:]
    if sentences and WRAPPER_OPEN.fullmatch(sentences[0].text(proof)):
        sentences = sentences[1:]
    if sentences and WRAPPER_CLOSE.fullmatch(sentences[-1].text(proof)):
        sentences = sentences[:-1]
    return sentences


def _blanks_aside(text: str) -> str:
    return " ".join(text.split())


def words(text: str) -> list[str]:
    """The identifiers of `text` outside its strings and comments."""
    found: list[str] = []
    position = 0
    while position < len(text):
        if text[position] == '"':
            position = skip_string(text, position)
        elif text.startswith("(*", position):
            position = skip_comment(text, position)
        elif (word := _WORD.match(text, position)) is not None:
            found.append(word.group(0))
            position = word.end()
        else:
            position += 1
    return found


def refusal(text: str, head: str, tactics: frozenset[str]) -> str | None:
    """Why a proof sentence may not run, or None for a tactic on the allow-list."""
    refused = [word for word in words(text) if word in REFUSED_ANYWHERE]
    if refused:
        return (
            f"`{refused[0]}` leaves a goal unproved, skips a type check or runs compiled code: it is refused anywhere"
        )
    if allowed(head, tactics):
        return None
    if "." in head:
        return (
            f"`{head}` is not an allowed tactic: neither its full name nor `{head.rsplit('.', 1)[1]}` is on the "
            "allow-list (trl_verigate/coq/allowlists/tactics.txt; add the full name to CoqServerConfig.extra_tactics)"
        )
    if head == "omega":
        return "`omega` is gone from Coq 8.16: use `lia`"
    if head == "Proof":
        return "`Proof with …` / `Proof using …` are vernacular: start the proof with `Proof.` or its first tactic"
    if head[:1].isupper():
        return f"`{head}` is a vernacular command: a proof may contain only tactics, bullets and braces"
    if not head or not head[0].isalpha() and head[0] != "_":
        return f"{text[:40]!r} does not start with a tactic"
    return f"`{head}` is not an allowed tactic (trl_verigate/coq/allowlists/tactics.txt, CoqServerConfig.extra_tactics)"


def text_problem(text: str) -> str | None:
    """Why `text` cannot travel to coqidetop (the XML protocol carries no control character but tab, newline and
    CRLF's carriage return, and only valid Unicode: no lone surrogate, such as a `surrogateescape` decoding of
    invalid UTF-8 leaves), or None."""
    control = _CONTROL.search(text)
    if control is not None:
        return f"holds the control character {control.group(0)!r} at offset {control.start()}"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"holds the lone surrogate {text[error.start]!r} at offset {error.start}: it is not valid Unicode text"
    return None


def allowed(head: str, tactics: frozenset[str]) -> bool:
    """Whether a sentence's head names an allowed tactic: by its full name (`Z.swap_greater`), or a qualified form
    of an allowed one (`Lia.lia`). Coq lexes `X.y` as the name `X` and the field `.y`, and no command takes a field
    after its keyword (`Admitted.lia.` is a syntax error), so a qualified head never runs a command."""
    return head in tactics or "." in head and head.rsplit(".", 1)[1] in tactics


def samples_print_assumptions(config: CoqServerConfig, statement: str, sentences: tuple[str, ...]) -> bool:
    """Whether `Print Assumptions` runs for this proof: always, never, or for a seeded sample keyed on the
    statement and the sentences (so blanks and comments do not draw the proof again)."""
    if config.print_assumptions != "sample":
        return config.print_assumptions == "always"
    digest = hashlib.sha256("\0".join((str(config.seed), statement, *sentences)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < config.print_assumptions_fraction


def prepare(
    request: CoqProofRequest, config: CoqServerConfig, tactics: frozenset[str]
) -> Prepared | VerificationResult:
    """The job for `request`, or the result refusing it (Coq never runs)."""
    header = config.header if request.header is None else request.header
    problem = header_problem(header)
    if problem is not None:
        return VerificationResult(status="error", reason=f"CoqProofRequest.header {problem}")
    problem = text_problem(request.statement) if isinstance(request.statement, str) else None
    if problem is not None:
        return VerificationResult(status="error", reason=f"CoqProofRequest.statement {problem}: fix the dataset")
    name = statement_name(request.statement)
    if name is None:
        return VerificationResult(
            status="error",
            reason=f"CoqProofRequest.statement must be one sentence `{'|'.join(STATEMENT_KEYWORDS)} name ... .`, "
            f"got {str(request.statement)[:80]!r}: fix the dataset's statement",
        )
    proof = request.proof
    if not isinstance(proof, str):
        return VerificationResult(status="rejected", reason=f"the proof must be a str, got {type(proof).__name__}")
    problem = text_problem(proof)
    if problem is not None:
        return VerificationResult(status="rejected", reason=f"the proof {problem}")
    steps = proof_steps(proof, request.statement)
    spans = tuple(Tactic(s.text(proof), s.start, s.end) for s in steps)
    for index, step in enumerate(steps):
        if step.kind != "command":
            continue
        text = step.text(proof)
        reason = refusal(text, sentence_head(text), tactics)
        if reason is not None:
            return VerificationResult(
                status="rejected", tactics=list(spans), first_error_tactic=index, reason=f"sentence {index}: {reason}"
            )
    sentences = tuple(s.text for s in spans)
    job = CoqJob(request.statement, name, sentences, samples_print_assumptions(config, request.statement, sentences))
    return Prepared(header, job, spans, request)


def tactics_for(config: CoqServerConfig) -> frozenset[str]:
    """The allow-list with `extra_tactics` added."""
    return allowed_tactics() | frozenset(config.extra_tactics)


__all__ = [
    "CoqJob",
    "Prepared",
    "allowed",
    "prepare",
    "proof_steps",
    "sentence_head",
    "statement_name",
    "tactics_for",
    "text_problem",
]
