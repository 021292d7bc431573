"""A request ready for the REPL (`Prepared`), and how the code sent to Lean is assembled from its parts.

Both kinds of request (a trusted statement with an untrusted proof, a complete untrusted file) end up here: the
header's imports (what the REPL loads once, its pool key), the preamble (the header's `open` and `set_option` lines,
sent with every command so that no option value costs a REPL), the declaration the theorem is found by, the
`example` renaming, and the appended `#print axioms`.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property

from trl_verigate.lean_server.core import Position, Tactic
from trl_verigate.lean_server.precheck.tokens import PrecheckError, Token, tokenize

# `example` has no name for `#print axioms`; it is declared under this name instead. The replacement is longer
# than `example`, so it ends with a line break and indentation that put the rest of the line back at its submitted
# column: a proof on the `by` line keeps its column, which Lean's layout rules compare with the lines below.
EXAMPLE_NAME = "verigate_example"
EXAMPLE_REPLACEMENT = f"theorem {EXAMPLE_NAME}"
# Inserted before each helper `def` of a complete file (see `files.prepare_file`), then a line break and spaces back
# to the column of what follows, so nothing after it on its line moves.
NONCOMPUTABLE = "noncomputable"

DECLARATIONS = ("theorem", "lemma", "example", "def", "abbrev")


@dataclass
class Prepared:
    """A request ready for the REPL.

    `code` is sent in the env of `header` (the imports): the preamble (the header's other lines), the statement (with
    `example` renamed and helper `def`s made `noncomputable`, see `edits`), `separator`, the proof, then
    `"\\n\\n#print axioms <theorem_name>"`. `trusted_preamble` is the preamble of the trusted header the statement is
    read under ("" for a file that is its own claim), which the recheck tier elaborates the trusted statement in.
    `proof_start` is the proof's offset in `code`; `line_offset` the lines to add to REPL lines to get
    submitted-source lines (the header's line count for a str request). `statement` is the statement as submitted.
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
    # Where `code`'s statement differs from the submitted one, in code order: (offset in code, length in code,
    # length replaced in the submitted statement). A renamed `example` replaces its 7 characters with
    # `EXAMPLE_REPLACEMENT`, a line break and spaces up to the column after the submitted `example`; a helper
    # `def` gets `NONCOMPUTABLE` inserted before it (0 characters replaced), the same way.
    edits: tuple[tuple[int, int, int], ...] = ()
    trusted_preamble: str = ""
    # The characters of the preamble at the start of `code` (its first edit, when there is one).
    preamble_length: int = 0
    # The proof's top-level tactics as the precheck split them to find the `by` block's end; `judge` reuses them
    # for tactic_granularity "outermost" instead of splitting the proof again. None: `judge` splits it itself.
    outermost_tactics: list[Tactic] | None = field(default=None, repr=False, compare=False)

    @property
    def proof_end(self) -> int:
        return self.proof_start + len(self.proof)

    @cached_property
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

    # Positions are mapped once per message of Lean's answer, and a hostile proof can make Lean write one message
    # per line: each mapping is a binary search in line-start tables built once, never a walk over the text.

    @cached_property
    def _code_line_starts(self) -> list[int]:
        return _line_starts(self.code)

    @cached_property
    def _submitted_line_starts(self) -> list[int]:
        return _line_starts(self.submitted)

    @cached_property
    def _edit_starts(self) -> list[int]:
        return [start for start, _, _ in self.edits]

    @cached_property
    def _shifts_after(self) -> list[int]:
        """Code length minus submitted length of the edits up to and including each one."""
        shifts, total = [], 0
        for _, code_length, submitted_length in self.edits:
            total += code_length - submitted_length
            shifts.append(total)
        return shifts

    def offset_of(self, line: int, column: int) -> int:
        """The offset in `code` of a Lean position (line 1-based, column 0-based in code points), clamped like
        `tactics.offset_of`: a column past its line's end to that end (before a "\\r\\n"), a line past the last to
        `len(code)`."""
        if line < 1:
            raise ValueError(f"offset_of(line=...) is 1-based, got {line}")
        if column < 0:
            raise ValueError(f"offset_of(column=...) is 0-based and >= 0, got {column}")
        starts, code = self._code_line_starts, self.code
        if line > len(starts):
            return len(code)
        start = starts[line - 1]
        end = starts[line] - 1 if line < len(starts) else len(code)
        if end > start and code[end - 1] == "\r":
            end -= 1
        return min(start + column, end)

    def submitted_offset(self, code_offset: int) -> int:
        """The offset in the submitted source (statement + separator + proof) of `code_offset` in `code`; an offset
        inside an edit maps into the submitted text it replaced (its start, for an insertion)."""
        if code_offset >= self.proof_start:
            return len(self.statement) + len(self.separator) + code_offset - self.proof_start
        index = bisect.bisect_right(self._edit_starts, code_offset) - 1
        if index < 0:
            return code_offset
        start, code_length, submitted_length = self.edits[index]
        shift_before = self._shifts_after[index - 1] if index else 0
        if code_offset < start + code_length:
            return start - shift_before + min(code_offset - start, submitted_length)
        return code_offset - self._shifts_after[index]

    def submitted_position(self, code_offset: int) -> Position:
        """The position in the submitted source of `code_offset` in `code` (clamped to the proof's end), its line
        counted from the file's first line (`line_offset` added)."""
        offset = min(self.submitted_offset(min(code_offset, self.proof_end)), len(self.submitted))
        starts = self._submitted_line_starts
        line = bisect.bisect_right(starts, offset)
        return Position(line + self.line_offset, offset - starts[line - 1])


def _line_starts(text: str) -> list[int]:
    starts = [0]
    find, at = text.find, text.find("\n")
    while at >= 0:
        starts.append(at + 1)
        at = find("\n", at + 1)
    return starts


def declaration(tokens: list[Token], what: str) -> tuple[Token, Token | None]:
    """The last declaration keyword of `text` and its name token (None for `example`)."""
    keywords = [t for t in tokens if t.kind == "ident" and t.text in DECLARATIONS]
    if not keywords:
        raise PrecheckError(f"the {what} declares no theorem: expected `theorem NAME … := by` or `example … := by`")
    keyword = keywords[-1]
    if keyword.text == "example":
        return keyword, None
    following = [t for t in tokens if t.start >= keyword.end and t.kind != "comment"]
    if not following or following[0].kind != "ident":
        raise PrecheckError(f"the {what}'s `{keyword.text}`", keyword.start, " has no name")
    return keyword, following[0]


def declared_name(name: Token) -> str:
    """The constant a declaration's name token declares: dotted, guillemets removed, a leading `_root_` dropped.

    `theorem _root_.x` declares `x` (no namespace is open in a submission), and `#print axioms` names it `x`.
    """
    components = name.components
    if components[:1] == ("_root_",) and len(components) > 1:
        components = components[1:]
    return ".".join(components)


def assemble(
    header: str,
    statement: str,
    separator: str,
    proof: str,
    tokens: list[Token],
    keyword: Token,
    name: Token | None,
    line_offset: int,
    noncomputable_at: Sequence[int] = (),
    preamble: str = "",
    trusted_preamble: str = "",
) -> Prepared:
    """The Prepared for `statement + separator + proof`, with `example` renamed and `NONCOMPUTABLE` inserted at
    each offset of `noncomputable_at` (offsets in `statement`, before its main declaration keyword), and `preamble`
    (whole lines) before it all.

    Each edit ends with a line break and the spaces up to the column the text after it had, so every later token
    of its line keeps its column (Lean's layout compares columns); `Prepared.edits` maps positions back.
    """
    replacements = [(offset, 0, NONCOMPUTABLE) for offset in noncomputable_at]
    if name is None:
        replacements.append((keyword.start, len(keyword.text), EXAMPLE_REPLACEMENT))
        theorem_name = EXAMPLE_NAME
    else:
        theorem_name = declared_name(name)
    if preamble and not preamble.endswith("\n"):
        preamble += "\n"
    pieces, edits, copied_to, shift = [preamble], [], 0, len(preamble)
    if preamble:
        edits.append((0, len(preamble), 0))
    for start, length, word in sorted(replacements):
        column = start - (statement.rfind("\n", 0, start) + 1)
        replacement = word + "\n" + " " * (column + length)
        pieces += [statement[copied_to:start], replacement]
        edits.append((start + shift, len(replacement), length))
        shift += len(replacement) - length
        copied_to = start + length
    code_statement = "".join(pieces) + statement[copied_to:]
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
        edits=tuple(edits),
        trusted_preamble=trusted_preamble,
        preamble_length=len(preamble),
    )


@contextmanager
def located_at(base: int):
    """Move the offset of a PrecheckError raised inside from the checked text to the submitted source."""
    try:
        yield
    except PrecheckError as error:
        raise error.shifted(base) from None


def trusted_statement_tokens(statement: str, what: str = "statement") -> list[Token]:
    """The trusted statement's tokens; it must end in `:= by`, where the proof body is appended."""
    try:
        tokens = tokenize(statement)
    except PrecheckError as error:
        raise PrecheckError(f"{what}: {error.before}", None, error.after) from None
    if len(tokens) < 2 or [t.text for t in tokens[-2:]] != [":=", "by"]:
        raise PrecheckError(
            f"{what} must end in `:= by` (the proof body is appended on the next line); it ends in "
            f"{statement.rstrip()[-30:]!r}"
        )
    return tokens
