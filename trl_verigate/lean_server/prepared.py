"""A request ready for the REPL (`Prepared`), and how the code sent to Lean is assembled from its parts.

Both kinds of request (a trusted statement with an untrusted proof, a complete untrusted file) end up here: the
declaration the theorem is found by, the `example` renaming, and the appended `#print axioms`.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property

from trl_verigate.lean_server.lexer import PrecheckError, Token
from trl_verigate.lean_server.types import Tactic

# `example` has no name for `#print axioms`; it is declared under this name instead. The replacement is longer
# than `example`, so it ends with a line break and indentation that put the rest of the line back at its submitted
# column: a proof on the `by` line keeps its column, which Lean's layout rules compare with the lines below.
EXAMPLE_NAME = "verigate_example"
EXAMPLE_REPLACEMENT = f"theorem {EXAMPLE_NAME}"

DECLARATIONS = ("theorem", "lemma", "example", "def", "abbrev")


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
        theorem_name = declared_name(name)
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


@contextmanager
def located_at(base: int):
    """Move the offset of a PrecheckError raised inside from the checked text to the submitted source."""
    try:
        yield
    except PrecheckError as error:
        raise error.shifted(base) from None
