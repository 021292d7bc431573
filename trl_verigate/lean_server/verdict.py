"""The verdict: what is sent to Lean for a request, and whether Lean's answer proves it.

Two halves around one REPL command:

* `prepare` turns a request into a `Prepared` (the header, and the code sent in the header's env)
  or rejects it before Lean runs. The proof body is untrusted: the precheck refuses anything that
  could leave the `by` block or change how Lean checks or reports the proof (commands,
  metaprogramming, attributes, `debug.*` options, native evaluation, `sorry`), and text that looks
  different to a reader than to Lean (invisible and bidi characters, look-alike identifiers).
* `judge` reads the REPL's response to that code. A proof passes only with no error, no sorry
  (neither `sorries` nor the "declaration uses sorry" warning) and a `#print axioms` answer for the
  theorem, at the position of the `#print axioms` command we appended, listing only whitelisted
  axioms. The axioms check is the backstop for everything the precheck cannot see, e.g. a tactic
  that closes goals with `sorryAx` without emitting the warning (DeepSeek-Prover-V2's `apply?`).

The precheck lexes the proof the way Lean's tokenizer does (nested `/- -/` comments, `--` comments,
strings, raw strings `r#"…"#`, character literals, `«escaped»` identifiers, identifier characters
from `Lean.isIdFirst`/`isIdRest`), so a keyword inside a comment or string is not a false positive.
Where the `by` block ends is decided by the tactic splitter, which has its own tokenizer: the two
readings must agree on what is code, literal and comment, or the proof is rejected, so a comment or
string one of them misreads cannot hide a dedented command. Where the lexer and Lean could still disagree
(an unterminated comment or string, a character literal holding `"` glued to a symbol such as `∑'`,
unpaired braces in a string literal) the proof is rejected: Lean would fail on the first two anyway.
Braces in a string are code in an interpolated string (`s!"{…}"`, `dbg_trace "{…}"`), which depends on
what precedes the literal, so the code between paired braces is checked like the rest of the proof. A `'` that starts no character literal is read as a symbol
(`∑'`, `∏'`, `⁻¹'`, `''` are Mathlib notation): a literal holds one character, so no reading of it
can hide a word.

Unicode: Lean compares identifiers code point by code point and never normalizes, so a look-alike
such as fullwidth `ｓｏｒｒｙ`, Cyrillic `ѕоrrу` or Greek-omicron `sοrry` is a *different*
identifier to Lean (or not an identifier at all) and would fail as unknown. They are rejected
anyway, with a clear reason: it costs nothing (no legitimate proof contains them) and keeps the
verdict safe should a toolchain ever normalize. The spellings Lean *does* treat as the same
name — `«sorryAx»`, `Lean.«ofReduceBool»`, `_root_.sorryAx`, or `ofReduceBool` after
`open Lean` — are caught by comparing every dotted component with guillemets removed.
Legitimate mathematical Unicode (`ℝ`, `h₀`, `α`, `𝓝`, `x²`) passes: none of it normalizes to a
forbidden word.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Union

from trl_verigate.lean_server import tactics as tactic_split
from trl_verigate.lean_server.types import (
    LeanServerConfig,
    Message,
    Position,
    ProofRequest,
    Request,
    Tactic,
    VerificationResult,
)

# `example` has no name for `#print axioms`; it is declared under this name instead. The replacement is longer
# than `example`, so it ends with a line break and indentation that put the rest of the line back at its submitted
# column: a proof on the `by` line keeps its column, which Lean's layout rules compare with the lines below.
EXAMPLE_NAME = "verigate_example"
EXAMPLE_REPLACEMENT = f"theorem {EXAMPLE_NAME}"

SORRY_WARNINGS = ("declaration uses `sorry`", "declaration uses 'sorry'")
NATIVE_AXIOMS = ("Lean.ofReduceBool", "Lean.trustCompiler")
_AXIOMS_LIST = re.compile(r"^'(?P<name>.+)' depends on axioms: \[(?P<axioms>.*)\]$", re.DOTALL)
_CHAR_LITERAL = re.compile(tactic_split.CHAR_LITERAL, re.DOTALL)
_AXIOMS_NONE = re.compile(r"^'(?P<name>.+)' does not depend on any axioms$", re.DOTALL)

# Command keywords (defined next to the splitter, which ends a tactic block at them): any of them inside a proof
# means the proof left its `by` block or adds syntax/declarations.
COMMAND_WORDS = tactic_split.COMMAND_WORDS
# Tactics that close goals without proving them, or search tactics: `apply?` has closed goals
# with sorry without the warning (DeepSeek-Prover-V2), `exact?` is `apply?`'s sibling.
# `hint` and `observe` run library search too; `plausible`/`slim_check` test a goal on examples and have admitted
# it when they found no counterexample.
TACTIC_WORDS = frozenset(
    {"sorry", "admit", "stop", "exact?", "apply?", "library_search", "hint", "observe", "observe?", "plausible"}
    | {"slim_check"}
)
# Constants that are axioms or unchecked evaluation, under any spelling of their name.
CONSTANT_WORDS = frozenset({"sorryAx", "trustCompiler"})
NATIVE_WORDS = frozenset(
    {"native_decide", "bv_decide", "bv_decide?", "bv_check", "ofReduceBool", "reduceBool", "ofReduceNat", "reduceNat"}
    # Its `native` field turns `decide` into `native_decide`, however the structure is written.
    | {"DecideConfig"}
)
FORBIDDEN_OPTION_PREFIXES = ("debug.", "bootstrap.", "compiler.", "interpreter.")
# `warn.sorry false` silences the "declaration uses sorry" warning (the axioms check would still catch it).
FORBIDDEN_OPTIONS = frozenset({"allowUnsafeReducibility", "warn.sorry"})

# Cyrillic/Greek/Latin letters that look like ASCII ones; NFKC leaves them alone.
_CONFUSABLES = str.maketrans(
    "аеорсухѕіјԁԛԝӏһАВЕКМНОРСТХЅІЈοανικρυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧıꜱʀɡ",
    "aeopcyxsijdqwlhABEKMHOPCTXSIJoavikpuxABEZHIKMNOPTYXisrg",
)


@dataclass
class Prepared:
    """A request ready for the REPL.

    `code` is sent in the env of `header`: the statement (with `example` renamed), `separator`,
    the proof, then `"\\n\\n#print axioms <theorem_name>"`. `proof_start` is the proof's offset in
    `code`; `line_offset` the lines to add to REPL lines to get submitted-source lines (the header's
    line count for a str request). `statement` is the statement as submitted.
    """

    header: str
    code: str
    proof: str
    proof_start: int
    theorem_name: str
    line_offset: int
    statement: str
    # Between statement and proof in the submitted source: "\n" for a ProofRequest, "" for a file,
    # whose proof starts right after `by`.
    separator: str = "\n"
    # (offset in code, length) of the text that replaced `example` (7 chars): `EXAMPLE_REPLACEMENT`, a line break,
    # and spaces up to the column after the submitted `example`.
    renamed_example: tuple[int, int] | None = None
    # The proof's top-level tactics as the precheck split them to find the `by` block's end; `judge` reuses them
    # for tactic_granularity "outermost" instead of splitting the proof again. None: `judge` splits it itself.
    outermost_tactics: list[Tactic] | None = field(default=None, repr=False, compare=False)

    @property
    def proof_end(self) -> int:
        return self.proof_start + len(self.proof)

    @property
    def submitted(self) -> str:
        """The source as submitted (header lines aside): `statement + separator + proof`; messages are positioned in it."""
        return self.statement + self.separator + self.proof

    @property
    def proof_column(self) -> int:
        """The column of the proof's first character in `code`, which equals its column in the submitted source."""
        return self.proof_start - (self.code.rfind("\n", 0, self.proof_start) + 1)

    @cached_property
    def print_line(self) -> int:
        """The REPL line (1-based) of the appended `#print axioms` command (counted once: every message reads it)."""
        return self.code.count("\n", 0, self.proof_end) + 3


class PrecheckError(ValueError):
    """Raised inside the precheck; `prepare` turns it into a rejected result.

    The reason reads `before` + " at line L, column C" + `after`. `offset` is relative to the text the raising check
    was given (the proof, the statement, the header, a file's body); `shifted` moves it to the submitted source,
    where `prepare` turns it into a line and column once, so every rejection is positioned like `Message`s are.
    """

    def __init__(self, before: str, offset: int | None = None, after: str = ""):
        super().__init__(before, offset, after)
        self.before, self.offset, self.after = before, offset, after

    def shifted(self, by: int) -> PrecheckError:
        return PrecheckError(self.before, None if self.offset is None else self.offset + by, self.after)

    def reason(self, source: str) -> str:
        """The reason, positioned in `source`, the text the offset (after any `shifted`) is relative to."""
        if self.offset is None:
            return self.before + self.after
        line, column = _position(source, self.offset)
        return f"{self.before} at line {line}, column {column}{self.after}"

    def __str__(self) -> str:
        where = "" if self.offset is None else f" at offset {self.offset}"
        return f"{self.before}{where}{self.after}"


# ---------------------------------------------------------------- lexing


def _is_letter_like(c: str) -> bool:
    v = ord(c)
    return (
        (0x3B1 <= v <= 0x3C9 and v != 0x3BB)
        or (0x391 <= v <= 0x3A9 and v not in (0x3A0, 0x3A3))
        or 0x3CA <= v <= 0x3FB
        or 0x1F00 <= v <= 0x1FFE
        or 0x2100 <= v <= 0x214F
        or 0x1D49C <= v <= 0x1D59F
        or (0xC0 <= v <= 0xFF and v not in (0xD7, 0xF7))
        or 0x100 <= v <= 0x17F
    )


def _is_id_first(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z") or c == "_" or _is_letter_like(c)


def _is_id_rest(c: str) -> bool:
    v = ord(c)
    return (
        _is_id_first(c)
        or "0" <= c <= "9"
        or c in "'!?"
        or 0x2080 <= v <= 0x209C
        or 0x1D62 <= v <= 0x1D6A
        or v == 0x2C7C
    )


@dataclass(frozen=True)
class _Token:
    kind: str  # ident | symbol | number | string | char | comment
    start: int
    end: int
    text: str
    # An identifier's dotted name components, guillemets removed (`Lean.«ofReduceBool»` -> 2 parts); empty for
    # other kinds. Split once at lexing: every check that reads a name reads these.
    components: tuple[str, ...] = ()


def _split_name(text: str) -> list[str]:
    if "«" not in text and "»" not in text:
        return text.split(".")
    parts, current, escaped = [], [], False
    for c in text:
        if c == "«":
            escaped = True
        elif c == "»":
            escaped = False
        elif c == "." and not escaped:
            parts.append("".join(current))
            current = []
        else:
            current.append(c)
    parts.append("".join(current))
    return parts


def _position(text: str, offset: int) -> tuple[int, int]:
    """(1-based line, 0-based column) of a char offset, Lean's convention."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1)


def _lex(text: str) -> list[_Token]:
    """Tokens of `text` as Lean's tokenizer splits them; raises PrecheckError where Lean's lexing is unclear."""
    tokens: list[_Token] = []
    n, i = len(text), 0
    while i < n:
        c = text[i]
        if c in " \n\r\t":
            i += 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            tokens.append(_Token("comment", i, end, text[i:end]))
            i = end
        elif text.startswith("/-", i):
            j = tactic_split.block_comment_end(text, i + 2)
            if j is None:
                raise PrecheckError("unterminated block comment `/-`", i, " swallows the rest")
            tokens.append(_Token("comment", i, j, text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]):
            hashes = len(re.match(r"r(#*)", text[i:]).group(1))
            closing = '"' + "#" * hashes
            end = text.find(closing, i + 2 + hashes)
            if end < 0:
                raise PrecheckError("unterminated raw string", i, " swallows the rest")
            end += len(closing)
            tokens.append(_Token("string", i, end, text[i:end]))
            i = end
        elif c == '"':
            j, depth, segment_start, segments = i + 1, 0, 0, []
            while j < n and text[j] != '"':
                # Interpolated strings (s!, m!, f!, throwError, dbg_trace …) parse `{…}` as code. Whether this
                # literal is one depends on what precedes it, so its braces are read both ways: they must pair
                # up inside the plain literal (a `"`, `'`, `-/` within the code would break the pairing), and
                # the code between them is lexed and checked like the rest of the proof.
                if text[j] == "{":
                    depth += 1
                    segment_start = segment_start if depth > 1 else j + 1
                elif text[j] == "}":
                    depth -= 1
                    if depth < 0:
                        raise _ambiguous_braces(j)
                    if depth == 0:
                        segments.append((segment_start, j))
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                raise PrecheckError('unterminated string `"`', i, " swallows the rest")
            if depth:
                raise _ambiguous_braces(j)
            tokens.append(_Token("string", i, j + 1, text[i : j + 1]))
            for start, end in segments:
                try:
                    segment = _lex(text[start:end])
                except PrecheckError as error:
                    raise error.shifted(start) from None
                tokens.extend(_Token(t.kind, t.start + start, t.end + start, t.text, t.components) for t in segment)
            i = j + 1
        elif c == "'":
            # Lean reads `''` as a token (Mathlib's image `f '' s`), and a `'` that is no character literal as part
            # of a symbol (`∑'`, `∏'`, `⁻¹'`) or as an error; a literal holds one character, so no reading hides a
            # word. A literal holding `"` right after a symbol is the one case where the readings part ways:
            # Lean may see `∑'` and then a string start.
            match = None if text.startswith("''", i) else _CHAR_LITERAL.match(text, i)
            if match is None:
                width = 2 if text.startswith("''", i) else 1
                tokens.append(_Token("symbol", i, i + width, text[i : i + width]))
                i += width
                continue
            if '"' in match.group(0) and i > 0 and not (text[i - 1].isspace() or text[i - 1] in "([{⟨,"):
                raise PrecheckError(
                    f"ambiguous `{match.group(0)}`",
                    i,
                    f": after `{text[i - 1]}` Lean may read `'` as part of a symbol and `\"` as a string start; "
                    "put a space before the character literal",
                )
            tokens.append(_Token("char", i, match.end(), match.group(0)))
            i = match.end()
        elif _is_id_first(c) or c == "«":
            j = i
            while True:
                if j < n and text[j] == "«":
                    close = text.find("»", j)
                    if close < 0:
                        raise PrecheckError("unterminated identifier escape `«`", j)
                    j = close + 1
                else:
                    j += 1
                    while j < n and _is_id_rest(text[j]):
                        j += 1
                if j + 1 < n and text[j] == "." and (_is_id_first(text[j + 1]) or text[j + 1] == "«"):
                    j += 1
                else:
                    break
            name = text[i:j]
            tokens.append(_Token("ident", i, j, name, tuple(_split_name(name))))
            i = j
        elif "0" <= c <= "9":
            match = re.match(r"0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?", text[i:])
            tokens.append(_Token("number", i, i + match.end(), match.group(0)))
            i += match.end()
        else:
            tokens.append(_Token("symbol", i, i + 1, c))
            i += 1
    return tokens


def _ambiguous_braces(offset: int) -> PrecheckError:
    return PrecheckError(
        "unpaired brace in a string literal",
        offset,
        ': in an interpolated string (`s!"…"`) `{…}` is code, and with unpaired braces the code\'s extent is '
        "ambiguous; pair the braces or drop them",
    )


# ---------------------------------------------------------------- precheck rules


def _check_characters(text: str, what: str) -> None:
    """Reject characters that read differently to a person than to Lean, or that Lean refuses anyway."""
    for i, c in enumerate(text):
        if c == "\n" or c == " ":
            continue
        if c == "\r":
            if text.startswith("\r\n", i):
                continue
            raise PrecheckError(f"lone carriage return in the {what}", i, ": use \\n line endings")
        if c == "\t":
            raise PrecheckError(f"tab in the {what}", i, ": Lean refuses tabs, indent with spaces")
        category = unicodedata.category(c)
        if category in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"):
            name = unicodedata.name(c, "unnamed")
            raise PrecheckError(f"invisible or control character U+{ord(c):04X} ({name}) in the {what}", i)


def _forbidden_word(word: str, allow_native_decide: bool, components: Sequence[str] | None = None) -> str | None:
    """Why `word` (one identifier token, as Lean would read it) is forbidden, or None.

    `components`: the word's dotted name components when its token has them already (`_Token.components`).
    """
    if word in COMMAND_WORDS:
        return f"command `{word}`"
    if word in TACTIC_WORDS:
        return f"`{word}`"
    if not allow_native_decide and word in NATIVE_WORDS:
        return f"`{word}` (native evaluation; allowed only with allow_native_decide=True)"
    parts = _split_name(word) if components is None else components
    for part in parts:
        if part in CONSTANT_WORDS or part in TACTIC_WORDS:
            return f"`{part}` (in `{word}`)"
        if not allow_native_decide and part in NATIVE_WORDS:
            return f"`{part}` (in `{word}`; native evaluation, allowed only with allow_native_decide=True)"
        if len(parts) > 1 and part in ("implemented_by", "extern"):
            return f"`{part}` (in `{word}`)"
    return None


def _forbidden_option(name: str) -> bool:
    """Whether `set_option NAME` changes how Lean checks or reports a proof (`debug.skipKernelTC`, `warn.sorry`)."""
    return name in FORBIDDEN_OPTIONS or name.startswith(FORBIDDEN_OPTION_PREFIXES)


def _check_tokens(tokens: list[_Token], allow_native_decide: bool, allowed_commands=frozenset()) -> None:
    code = [t for t in tokens if t.kind != "comment"]
    for k, token in enumerate(code):
        following = code[k + 1] if k + 1 < len(code) else None
        adjacent = following is not None and following.start == token.end
        if token.kind == "ident":
            if token.text in allowed_commands or _is_keyword_argument(code, k):
                continue
            reason = _forbidden_word(token.text, allow_native_decide, token.components)
            if reason:
                raise PrecheckError(reason, token.start)
            if token.text == "set_option" and following is not None and following.kind == "ident":
                option = ".".join(following.components)
                if _forbidden_option(option):
                    raise PrecheckError(f"`set_option {option}`", token.start)
        elif token.kind == "symbol":
            if token.text == "#" and adjacent and following.kind == "ident":
                raise PrecheckError(f"command `#{following.text}`", token.start)
            if token.text == "@" and adjacent and following.text == "[":
                raise PrecheckError("attribute `@[`", token.start)
            if not allow_native_decide and token.text == "+" and following is not None and _is_native(following):
                raise PrecheckError("`+native` (native evaluation)", token.start)
    if not allow_native_decide:
        for k, token in enumerate(code[:-2]):
            texts = [t.text for t in code[k + 1 : k + 5]]
            assigns = texts[:2] == [":", "="] and code[k + 2].start == code[k + 1].end
            # Any value counts (`Bool.true`, `!false`, `(true)`): only the field name is certain.
            if _is_native(token) and assigns:
                raise PrecheckError("`native :=` (native evaluation)", token.start)
            # A whole config (`⟨false, true, …⟩`, `.mk …`) can set `native` positionally; `decide +kernel` remains.
            if token.text == "decide" and texts == ["(", "config", ":", "="]:
                raise PrecheckError(
                    "`decide (config := …)`",
                    token.start,
                    " can turn on native evaluation; write `decide` or `decide +kernel`",
                )


def _is_keyword_argument(code: list[_Token], k: int) -> bool:
    """Whether `code[k]` is a command word used as an argument: `scoped` right after `open` (`open scoped X in`), or
    `unsafe`, an Aesop rule phase, right after `add` or a `,` in an `(add …)` clause (`aesop (add unsafe 50% …)`).

    Neither starts a command there: `open scoped` without `in` is refused as a command `open`, and an `unsafe` term
    (`unsafe e`) cannot be an application argument, so after `add` Lean reads the phase or fails to parse.
    """
    word = code[k].text
    previous = code[k - 1].text if k > 0 else None
    if word == "scoped":
        return previous == "open"
    if word != "unsafe":
        return False
    if previous in ("add", "erase"):
        return k >= 2 and code[k - 2].text == "("
    if previous != ",":
        return False
    depth = 0
    for j in range(k - 1, 0, -1):
        text = code[j].text
        if text in tactic_split.CLOSERS:
            depth += 1
        elif text in tactic_split.OPENERS:
            if depth == 0:
                return text == "(" and code[j + 1].text in ("add", "erase")
            depth -= 1
    return False


def _is_native(token: _Token) -> bool:
    return token.kind == "ident" and token.components[-1] == "native"


def _skeleton(word: str) -> str:
    return unicodedata.normalize("NFKC", word).translate(_CONFUSABLES)


def _code_only(text: str, tokens: list[_Token]) -> str:
    """`text` with comments and string/char literals blanked, newlines kept (so lines stay put)."""
    chars = list(text)
    for token in tokens:
        if token.kind in ("comment", "string", "char"):
            for i in range(token.start, token.end):
                if chars[i] != "\n":
                    chars[i] = " "
    return "".join(chars)


def _check_look_alikes(text: str, tokens: list[_Token], allow_native_decide: bool) -> None:
    """Reject code that spells a forbidden word with look-alike characters (see the module docstring)."""
    code = _code_only(text, tokens)
    for match in re.finditer(r"[\w'!?«».]+", code):
        word = match.group(0)
        if word.isascii():
            continue
        skeleton = _skeleton(word)
        reason = _forbidden_word(skeleton, allow_native_decide) or _forbidden_word(skeleton.strip("."), False)
        if reason:
            raise PrecheckError(f"look-alike characters spelling {reason} in `{word}`", match.start())
    normalized = unicodedata.normalize("NFKC", code)
    if normalized != code:
        try:
            _check_tokens(_lex(normalized), allow_native_decide)
        except PrecheckError as error:
            # Normalization rarely changes lengths in code, so the offset still points at (or next to) the word.
            raise PrecheckError(
                f"after Unicode normalization (NFKC): {error.before}", error.offset, error.after
            ) from None


def _check_columns(text: str, tokens: list[_Token], first_line_at_line_start: bool) -> None:
    """A code token at column 0 outside brackets closes the `by` block: everything from there on is a new command.

    Inside brackets Lean checks no columns (`withoutPosition`), so a term list may go on at column 0 there; a
    command word or `#` command is refused at any depth by the token checks, and `_check_block` follows the layout.
    """
    depth = 0
    literal_end = 0
    for token in tokens:
        if token.kind == "comment" or token.start < literal_end:
            # Code inside an interpolated string's braces is part of the literal for layout, as for the splitter.
            continue
        if token.kind == "string":
            literal_end = token.end
        line_start = text.rfind("\n", 0, token.start) + 1
        # A stray closer leaves the depth below 0, where columns are still checked.
        if depth <= 0 and token.start == line_start and (line_start > 0 or first_line_at_line_start):
            raise PrecheckError(
                f"`{token.text}`", token.start, " closes the `by` block: indent every line of the proof body"
            )
        if token.kind == "symbol":
            if token.text in tactic_split.OPENERS:
                depth += 1
            elif token.text in tactic_split.CLOSERS:
                depth -= 1


def _check_block(text: str, tokens: list[_Token], start_column: int) -> list[Tactic]:
    """Every code token must lie in a top-level tactic: anything after the block's end is read by Lean as commands.

    Lean ends the `by` block at the first line indented less than its first tactic (or at a token no tactic
    continues with); what follows is parsed as a declaration suffix (`where`, `termination_by`) or as commands,
    at any column. The splitter follows the same layout rules, so code outside its outermost spans is exactly
    that. Returns those spans, the proof's outermost tactics.
    """
    spans, splitter_tokens = tactic_split.split_tactics_and_tokens(text, "outermost", start_column=start_column)
    disagreement = _lexers_disagree_at(tokens, splitter_tokens)
    if disagreement is not None:
        raise PrecheckError(
            "the proof's layout",
            disagreement,
            " is ambiguous (a comment, string or escaped identifier the tactic splitter reads differently), so "
            "where its `by` block ends cannot be checked; rewrite that part",
        )
    starts = [span.start for span in spans]
    for token in tokens:
        # `;` separates tactics, so it sits between spans (or after the last, which Lean allows).
        if token.kind == "comment" or token.text == ";":
            continue
        index = bisect.bisect_right(starts, token.start) - 1
        if index < 0 or token.start >= spans[index].end:
            raise PrecheckError(
                f"`{token.text}`",
                token.start,
                " is outside the proof's tactic block: a line indented less than the block's first tactic closes "
                "the `by` block, and Lean reads the rest as commands; indent every tactic of the block to the same "
                "column",
            )
    return spans


def _reading(spans) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(code runs, literals) of a lexer's `(start, end, is_literal)` tokens, tokens inside a literal dropped.

    Touching code tokens merge into one run, so the lexers may cut `:=` or `1_000` differently and still agree.
    """
    runs: list[tuple[int, int]] = []
    literals: list[tuple[int, int]] = []
    literal_end = 0
    for start, end, literal in spans:
        if start < literal_end:  # code inside an interpolated string's braces, part of the literal for layout
            continue
        if literal:
            literals.append((start, end))
            literal_end = end
        elif runs and runs[-1][1] == start:
            runs[-1] = (runs[-1][0], end)
        else:
            runs.append((start, end))
    return runs, literals


def _lexers_disagree_at(tokens: list[_Token], splitter_tokens) -> int | None:
    """The first offset where the precheck's tokens and the splitter's differ on what is code, literal or comment.

    `_check_block` trusts the splitter's spans only if both read the same code: otherwise text one of them takes
    for a string or comment could hold the line that, to Lean, ends the `by` block.
    """
    ours = _reading(
        (t.start, t.end, t.kind in ("string", "char"))
        for t in sorted(tokens, key=lambda t: t.start)
        if t.kind != "comment"
    )
    theirs = _reading(splitter_tokens)
    if ours == theirs:
        return None
    differences = [set(a).symmetric_difference(b) for a, b in zip(ours, theirs, strict=True)]
    return min(start for difference in differences for start, _ in difference)


def _scoped_prefix_in(code: list[_Token], k: int) -> int | None:
    """The index of the `in` closing the `open …` / `set_option NAME VALUE` prefix that starts at `code[k]`, or None
    if no such prefix starts there.

    `code` is a token list without comments. A prefix is `open` followed by at least one `open` argument, or
    `set_option`, an option name and a value Lean's `set_option` accepts (`true`/`false`, a number, a string), each
    followed by `in`. The proof's and a file preamble's checks both read prefixes here, so they agree on what one is.
    """
    token = code[k]
    if token.kind != "ident":
        return None
    if token.text == "open":
        end = k + 1
        if end < len(code) and code[end].text == "scoped":
            end += 1
        first_argument = end
        while end < len(code) and _is_open_argument(code[end]):
            end += 1
        if end == first_argument:
            return None
    elif token.text == "set_option":
        end = k + 3
        if end >= len(code) or code[k + 1].kind != "ident" or code[k + 2].kind not in ("ident", "number", "string"):
            return None
    else:
        return None
    return end if end < len(code) and code[end].text == "in" else None


def _check_scoped_prefixes(tokens: list[_Token]) -> None:
    """`open` and `set_option` are tactics only as `open … in tac` / `set_option NAME VALUE in tac`.

    Without `in` they are commands, which Lean would run after ending the tactic block there.
    """
    code = [t for t in tokens if t.kind != "comment"]
    for k, token in enumerate(code):
        if token.kind == "ident" and token.text in ("open", "set_option") and _scoped_prefix_in(code, k) is None:
            raise PrecheckError(
                f"`{token.text}`",
                token.start,
                " is not an `open … in tactic` or `set_option NAME VALUE in tactic` prefix (VALUE: true, false, a "
                "number or a string), the only forms that are tactics; the others are commands",
            )


def precheck_proof(proof: str, allow_native_decide: bool = False, start_column: int = 0) -> list[Tactic]:
    """Raise PrecheckError with the reason if the untrusted proof body must not be sent to Lean.

    Returns the proof's outermost tactics, `split_tactics(proof, "outermost", start_column=start_column)`, which
    the check computes anyway to find where the `by` block ends.

    `start_column` is the column of `proof[0]` in its line, `Prepared.proof_column`: 0 for a ProofRequest (the
    body starts on the line after the statement), the column after `by` for a file whose proof continues the `by`
    line (the same in the code sent to Lean as in the file, a renamed `example` included).
    """
    _check_characters(proof, "proof")
    tokens = _lex(proof)
    _check_columns(proof, tokens, first_line_at_line_start=start_column == 0)
    _check_tokens(tokens, allow_native_decide)
    _check_look_alikes(proof, tokens, allow_native_decide)
    _check_scoped_prefixes(tokens)
    return _check_block(proof, tokens, start_column)


# ---------------------------------------------------------------- statements and files

_DECLARATIONS = ("theorem", "lemma", "example", "def", "abbrev")
_MODIFIERS = frozenset({"private", "protected", "noncomputable", "nonrec"})
_DECLARING_WORDS = frozenset(
    {"theorem", "lemma", "example", "def", "abbrev", "instance", "structure", "class", "inductive", "coinductive"}
    | {"axiom", "opaque", "constant", "mutual", "namespace", "section"}
)
_PREFIX_COMMANDS = frozenset({"open", "set_option", "import"})


def _declaration(tokens: list[_Token], what: str) -> tuple[_Token, _Token | None]:
    """The last declaration keyword of `text` and its name token (None for `example`)."""
    keywords = [t for t in tokens if t.kind == "ident" and t.text in _DECLARATIONS]
    if not keywords:
        raise PrecheckError(f"the {what} declares no theorem: expected `theorem NAME … := by` or `example … := by`")
    keyword = keywords[-1]
    if keyword.text == "example":
        return keyword, None
    following = [t for t in tokens if t.start >= keyword.end and t.kind != "comment"]
    if not following or following[0].kind != "ident":
        raise PrecheckError(f"the {what}'s `{keyword.text}`", keyword.start, " has no name")
    return keyword, following[0]


def _check_statement(statement: str) -> list[_Token]:
    try:
        tokens = _lex(statement)
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


# A complete file's header lines, each exactly one command: the header runs in its own REPL command (cached per
# worker, shared with other requests), so anything else there would escape the checks on the theorem. `open` lines
# are read by `_is_open_line`.
_HEADER_LINE = re.compile(
    r"[ ]*(?:"
    r"import[ ]+[A-Za-z_][A-Za-z0-9_']*(?:\.[A-Za-z_][A-Za-z0-9_']*)*"
    r"|set_option[ ]+(?P<option>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)[ ]+"
    r'(?:true|false|[0-9]+|"[^"\\{}\n]*")'
    r")[ ]*(?:--[^\n]*)?\r?",
    re.ASCII,
)
# The forms of Lean's `open` command over its tokens as `_open_line_shape` spells them (N: a name).
_OPEN_FORMS = re.compile(
    r"open (?:(?:scoped )?N(?: N)*|N \( N(?: N)* \)|N hiding N(?: N)*|N renaming N → N(?: , N → N)*)"
)
# Keywords of the `open` command itself, and `in`, which makes the line the `open … in` prefix of what follows.
_OPEN_KEYWORDS = frozenset({"scoped", "hiding", "renaming", "in"})
# A keyword ends `open`'s names, and a command keyword starts a command of its own on the same line.
_NOT_OPEN_NAMES = COMMAND_WORDS | _PREFIX_COMMANDS | _OPEN_KEYWORDS
HEADER_RULE = (
    "a file's header lines are single `import M`, `set_option NAME VALUE` (true, false, a number or a string) "
    "or `open` commands (`open [scoped] A B…`, `open A (x y…)`, `open A hiding x…`, `open A renaming x → y, …`), "
    "one per line"
)


def _open_line_shape(line: str) -> str | None:
    """The tokens of `line` as `_OPEN_FORMS` reads them, or None if `line` cannot be a lone `open` command.

    Names are Lean identifiers (dotted, any case, Unicode letters, `«escaped»`) other than keywords; `->` is `→`.
    Only a trailing `--` comment may follow: a block comment could hide where the line's command ends.
    """
    try:
        tokens = _lex(line)
    except PrecheckError:
        return None
    if any(t.kind == "comment" and not t.text.startswith("--") for t in tokens):
        return None
    code = [t for t in tokens if t.kind != "comment"]
    shape: list[str] = []
    k = 0
    while k < len(code):
        token = code[k]
        if token.kind == "ident":
            if (token.text == "open" and k == 0) or token.text in _OPEN_KEYWORDS:
                shape.append(token.text)
            else:
                shape.append("X" if token.text in _NOT_OPEN_NAMES else "N")
        elif token.text == "-" and k + 1 < len(code) and code[k + 1].text == ">" and code[k + 1].start == token.end:
            shape.append("→")
            k += 1
        elif token.kind == "symbol" and token.text in ("(", ")", ",", "→"):
            shape.append(token.text)
        else:
            shape.append("X")
        k += 1
    return " ".join(shape)


def _is_open_line(line: str) -> bool:
    """Whether `line` is exactly one `open` command in one of Lean's forms, then at most a `--` comment."""
    shape = _open_line_shape(line)
    return shape is not None and _OPEN_FORMS.fullmatch(shape) is not None


def split_header(file_text: str) -> tuple[str, str]:
    """Split a Lean file into (header, body), header + body == file_text.

    The header is the leading run of lines that are each exactly one `import M`, `set_option NAME VALUE` or
    `open` command in any of its forms (`open [scoped] A B…`, `open A (x…)`, `open A hiding x…`,
    `open A renaming x → y, …`; an optional `--` comment after it), with blank lines and comments among
    them, up to and including the newline after the last command. The first other line starts the body, where
    the precheck treats it as untrusted code: `open … in` and `set_option … in` prefix the theorem, so they end
    the header, and so does any line that holds more than one command.
    """
    if not isinstance(file_text, str):
        raise TypeError(f"split_header(file_text) needs a str, got {type(file_text).__name__}")
    header_end, i, n = 0, 0, len(file_text)
    while i < n:
        line_end = file_text.find("\n", i)
        line_end = n if line_end < 0 else line_end
        line = file_text[i:line_end]
        stripped = line.strip()
        if not stripped or stripped.startswith("--"):
            i = line_end + 1
            continue
        if stripped.startswith("/-"):
            close = tactic_split.block_comment_end(file_text, i + line.index("/-") + 2)
            if close is None or file_text[close:].split("\n", 1)[0].strip():
                break
            i = file_text.find("\n", close)
            i = n if i < 0 else i + 1
            continue
        if not (_HEADER_LINE.fullmatch(line) or _is_open_line(line)):
            break
        header_end = min(line_end + 1, n)
        i = line_end + 1
    return file_text[:header_end], file_text[header_end:]


def _split_file_body(body: str) -> tuple[str, str]:
    """(statement, proof) of a file body: the statement runs through the declaration's first top-level `:= by`."""
    tokens = _lex(body)
    code = [t for t in tokens if t.kind != "comment"]
    declarations = [t for t in code if t.kind == "ident" and t.text in _DECLARATIONS]
    if not declarations:
        raise PrecheckError("the file declares no theorem: expected `theorem NAME … := by` after the imports")
    depth = 0
    for k, token in enumerate(code):
        if token.start < declarations[0].start:
            continue
        if token.text in tactic_split.OPENERS:
            depth += 1
        elif token.text in tactic_split.CLOSERS:
            depth -= 1
        elif (
            depth == 0
            and token.text == "by"
            and k >= 2
            and code[k - 1].text == "="
            and code[k - 2].text == ":"
            and code[k - 2].end == code[k - 1].start
        ):
            return body[: token.end], body[token.end :]
    raise PrecheckError(
        "a str request is one theorem proved in tactic mode: no top-level `:= by` found "
        "(write `theorem NAME … := by` followed by the tactics)"
    )


def _check_file_statement(tokens: list[_Token], keyword: _Token, allow_native_decide: bool) -> None:
    """A file's statement is untrusted too: one declaration, nothing that changes how Lean checks it."""
    for token in tokens:
        if token.kind == "ident" and token.text in _DECLARING_WORDS and token is not keyword:
            raise PrecheckError(
                f"a str request holds exactly one theorem; found `{token.text}`",
                token.start,
                f" besides the `{keyword.text}` theorem",
            )
    _check_tokens(tokens, allow_native_decide, allowed_commands=frozenset({keyword.text}) | _MODIFIERS)


def _check_header_options(header: str) -> None:
    for match in re.finditer(r"^[^\n]*$", header, re.MULTILINE):
        line = _HEADER_LINE.fullmatch(match.group(0))
        option = line.group("option") if line else None
        if option and _forbidden_option(option):
            raise PrecheckError(f"header: `set_option {option}`", match.start())


def _check_file_preamble(statement: str, tokens: list[_Token], keyword: _Token) -> None:
    """Before its declaration keyword a file's body may hold only comments, modifiers and `open … in` /
    `set_option NAME VALUE in` prefixes; anything else is another command, which the precheck would have to know.
    """
    code = [t for t in tokens if t.kind != "comment" and t.start < keyword.start]
    k = 0
    while k < len(code):
        token = code[k]
        if token.text in _MODIFIERS:
            k += 1
            continue
        # A forbidden option was refused by `_check_tokens` already; only the prefix's form is checked here.
        in_at = _scoped_prefix_in(code, k)
        if in_at is not None:
            k = in_at + 1
            continue
        line_start = statement.rfind("\n", 0, token.start) + 1
        line_end = statement.find("\n", token.start)
        line = statement[line_start : len(statement) if line_end < 0 else line_end].strip()
        if token.text in _PREFIX_COMMANDS and not statement[line_start : token.start].strip():
            raise PrecheckError(
                f"`{line}`",
                token.start,
                f" is neither a header line nor an `open … in`/`set_option … in` prefix of the theorem: {HEADER_RULE}",
            )
        raise PrecheckError(
            f"`{token.text}`",
            token.start,
            f" before the `{keyword.text}`: a str request is one theorem, preceded only by the header, comments, "
            "modifiers and `open … in` / `set_option NAME VALUE in`",
        )


def _is_open_argument(token: _Token) -> bool:
    """A token of `open` arguments (`scoped`, namespaces, `(names)`, `hiding`/`renaming` lists), not a keyword."""
    if token.kind == "ident":
        return token.text != "in" and token.text not in COMMAND_WORDS and token.text not in _PREFIX_COMMANDS
    return token.kind == "symbol" and token.text in ("(", ")", ",", "→")


def _check_single_definition(tokens: list[_Token], keyword: _Token) -> None:
    """Reject a top-level `:=` before the statement's final `:= by` that no `let`/`have` explains.

    Such a `:=` ends the declaration (`theorem t : P := term`), and the text up to the final `:= by` would be
    further commands, whose words the token checks could not all know.
    """
    code = [t for t in tokens if t.kind != "comment" and t.start >= keyword.end]
    depth, pending_bindings = 0, 0
    for k, token in enumerate(code[:-3]):
        if token.text in tactic_split.OPENERS:
            depth += 1
        elif token.text in tactic_split.CLOSERS:
            depth -= 1
        elif depth == 0 and token.text in ("let", "have", "letI", "haveI"):
            pending_bindings += 1
        elif depth == 0 and token.text == ":" and code[k + 1].text == "=" and code[k + 1].start == token.end:
            if not pending_bindings:
                raise PrecheckError(
                    "`:=`",
                    token.start,
                    f" ends the `{keyword.text}` before its `:= by`: a str request is one theorem proved in tactic mode",
                )
            pending_bindings -= 1


# ---------------------------------------------------------------- prepare


def _rejected(reason: str) -> VerificationResult:
    return VerificationResult(status="rejected", reason=reason)


def _assemble(
    header: str,
    statement: str,
    separator: str,
    proof: str,
    tokens: list[_Token],
    keyword: _Token,
    name: _Token | None,
    line_offset: int,
) -> Prepared:
    renamed = None
    code_statement = statement
    if name is None:
        column = keyword.start - (statement.rfind("\n", 0, keyword.start) + 1)
        replacement = EXAMPLE_REPLACEMENT + "\n" + " " * (column + len(keyword.text))
        code_statement = statement[: keyword.start] + replacement + statement[keyword.end :]
        renamed = (keyword.start, len(replacement))
        theorem_name = EXAMPLE_NAME
    else:
        theorem_name = ".".join(name.components)
    proof_start = len(code_statement) + len(separator)
    code = code_statement + separator + proof + f"\n\n#print axioms {name.text if name else EXAMPLE_NAME}"
    return Prepared(
        header=header,
        code=code,
        proof=proof,
        proof_start=proof_start,
        theorem_name=theorem_name,
        line_offset=line_offset,
        statement=statement,
        separator=separator,
        renamed_example=renamed,
    )


def prepare(
    request: Request, default_header: str, allow_native_decide: bool = False
) -> Union[Prepared, VerificationResult]:
    """The REPL command for `request`, or a `status="rejected"` result saying what the precheck found and where.

    A `ProofRequest`'s statement is trusted and must end in `:= by`; its proof body is untrusted. Its
    `header` is trusted like the statement (the caller picks both, e.g. from the dataset) and is sent
    unchecked: never fill it from model output.
    A str request is a complete file holding exactly one theorem proved with `:= by`, all of it untrusted
    (kimina snippets are model output): its header lines must each be one `import M`, `set_option NAME
    VALUE` or `open …` command (see `split_header`); only comments, modifiers and
    `open … in` / `set_option NAME VALUE in` may precede the theorem.
    """
    if not isinstance(default_header, str):
        raise TypeError(
            f"prepare(default_header=...) needs the header text as a str, got {type(default_header).__name__}"
        )
    try:
        if isinstance(request, ProofRequest):
            return _prepare_proof_request(request, default_header, allow_native_decide)
        if isinstance(request, str):
            return _prepare_file(request, allow_native_decide)
    except PrecheckError as error:
        source = request if isinstance(request, str) else request.statement + "\n" + request.proof
        return _rejected(error.reason(source))
    raise TypeError(
        f"prepare(request=...) needs a ProofRequest(statement, proof) or a str holding a Lean file, "
        f"got {type(request).__name__}"
    )


def _prepare_proof_request(request: ProofRequest, default_header: str, allow_native_decide: bool) -> Prepared:
    for field_name in ("statement", "proof"):
        if not isinstance(getattr(request, field_name), str):
            raise TypeError(
                f"ProofRequest.{field_name} must be a str, got {type(getattr(request, field_name)).__name__}"
            )
    header = default_header if request.header is None else request.header
    if not isinstance(header, str):
        raise TypeError(f"ProofRequest.header must be a str or None, got {type(header).__name__}")
    # Offsets in PrecheckErrors are moved to the submitted source, `statement + "\n" + proof`.
    tokens = _check_statement(request.statement)
    keyword, name = _declaration(tokens, "statement")
    if not request.proof.strip():
        raise PrecheckError("empty proof body")
    prepared = _assemble(header, request.statement, "\n", request.proof, tokens, keyword, name, line_offset=0)
    with _located_at(len(request.statement) + 1):
        prepared.outermost_tactics = precheck_proof(
            prepared.proof, allow_native_decide, start_column=prepared.proof_column
        )
    return prepared


def _prepare_file(file_text: str, allow_native_decide: bool) -> Prepared:
    # Offsets in PrecheckErrors are moved to the file: the header starts it, the statement and then the proof follow.
    _check_characters(file_text, "file")
    header_text, body = split_header(file_text)
    _check_header_options(header_text)
    with _located_at(len(header_text)):
        statement, proof = _split_file_body(body)
        tokens = _lex(statement)
        keyword, name = _declaration(tokens, "file")
        _check_file_statement(tokens, keyword, allow_native_decide)
        _check_file_preamble(statement, tokens, keyword)
        _check_single_definition(tokens, keyword)
    if not proof.strip():
        raise PrecheckError("empty proof body after `:= by`")
    header = header_text[:-1] if header_text.endswith("\n") else header_text
    prepared = _assemble(header, statement, "", proof, tokens, keyword, name, line_offset=header_text.count("\n"))
    with _located_at(len(header_text) + len(statement)):
        prepared.outermost_tactics = precheck_proof(
            prepared.proof, allow_native_decide, start_column=prepared.proof_column
        )
    return prepared


@contextmanager
def _located_at(base: int):
    """Move the offset of a PrecheckError raised inside from the checked text to the submitted source."""
    try:
        yield
    except PrecheckError as error:
        raise error.shifted(base) from None


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
    name = ".".join(_split_name(printed))
    # A `private theorem` prints with its mangled name `_private.<module>.0.<name>`.
    return name == theorem_name or (name.startswith("_private.") and name.endswith(".0." + theorem_name))


def _submitted_offset(prepared: Prepared, code_offset: int) -> int:
    """Map an offset in `prepared.code` to one in the submitted body (statement + separator + proof)."""
    statement_length = len(prepared.statement)
    if code_offset >= prepared.proof_start:
        return statement_length + len(prepared.separator) + code_offset - prepared.proof_start
    if prepared.renamed_example is not None:
        start, length = prepared.renamed_example
        if code_offset >= start + length:
            return code_offset - length + len("example")
        if code_offset >= start:
            return start + min(code_offset - start, len("example"))
    return code_offset


def submitted_position(prepared: Prepared, code_offset: int) -> Position:
    """The position in the submitted source of `code_offset` in `prepared.code` (clamped to the proof's end)."""
    submitted = prepared.submitted
    offset = min(_submitted_offset(prepared, min(code_offset, prepared.proof_end)), len(submitted))
    line, column = _position(submitted, offset)
    return Position(line + prepared.line_offset, column)


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


def _malformed_messages(raw) -> str | None:
    """Why a response's `messages` field is not a list of message objects, or None when it is (or is absent)."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        return f"malformed REPL response: messages is a {type(raw).__name__}, not a list of message objects"
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            return f"malformed REPL response: messages[{index}] is a {type(item).__name__}, not a message object"
    return None


def judge(prepared: Prepared, response: dict, config: LeanServerConfig, time_s: float) -> VerificationResult:
    """The verdict on the REPL's `response` to `prepared.code` (see the module docstring for the rules)."""
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

    malformed = _malformed_messages(response.get("messages"))
    if malformed is not None:
        return VerificationResult(status="error", tactics=tactics, time_s=time_s, reason=malformed)

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
        start_offset = tactic_split.offset_of(prepared.code, *start)
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
            end_position = submitted_position(prepared, tactic_split.offset_of(prepared.code, *end))
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
        start = repl_position(sorry.get("pos")) if isinstance(sorry, dict) else None
        if start is not None:
            offset = tactic_split.offset_of(prepared.code, *start)
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
    return VerificationResult(
        status="passed" if passed else "failed",
        passed=passed,
        messages=messages,
        tactics=tactics,
        first_error_tactic=len(tactics) if passed else tactic_split.first_error_tactic(tactics, errors),
        axioms=list(axioms or []),
        time_s=time_s,
        reason=reason if reason is None else reason[:500],
    )
