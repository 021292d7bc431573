"""Tactic-level structure of an untrusted Lean 4 proof body, without running Lean.

`split_tactics` follows Lean 4's layout rules for a `by` block closely enough that its outermost spans equal
the tactic spans the Lean REPL reports with `"allTactics": true` (checked against recorded transcripts):

* A tactic block (`sepByIndent` in Lean's parser) takes its column from its first tactic. A new tactic starts
  after `;`, or on a new line at exactly that column. A line indented deeper continues the current tactic; a
  line at the block column ends the current tactic unless the tactic is visibly unfinished: the previous token
  needs an operand (`exact`, `:=`, `+`, `at`, ...; not `*` in `at *`, nor `only`), the line starts with an infix
  continuation (`<;>`, `|`, `=`, ...) or with another `calc` step. A line left of the block column ends the block
  unless it starts with an infix continuation or is a step of a `calc` whose first step is that far left; a
  `calc` step is never left of the first later step's column.
* A top-level block must be indented past the declaration's column (0), so `theorem x : P := by\\nsimp`
  has no tactics (Lean parses `simp` as the next command).
* Inside brackets layout is off (Lean's `withoutPosition`); comments, string and char literals are skipped.
* Nested blocks: `by`, focusing bullets `·`/`.`, `case`/`next`/`on_goal`/`conv ... =>`, `first | ...`,
  alternatives of tactic `match`/`induction`/`cases ... with | p => ...`, tactic combinators that take a
  sequence (`try`, `repeat`, `all_goals`, `any_goals`, `focus`, `classical`, ...), `( ... )`/`{ ... }`
  tactic blocks, and the `[t1; t2]` list of Batteries' split focus `t <;> [t1; t2]`. A nested block on the same line swallows a following `; tac` exactly like Lean does
  (`have h := by simp; exact h` is one tactic).
* `t1 <;> t2` is one tactic at the outer level, with `t1` and `t2` as its nested tactics.

Spans are `[start, end)` offsets (Python str indices, i.e. Unicode code points, like Lean's columns) into
the proof body; a tactic's text is `proof[start:end]`: it starts at its first token and ends at its last,
so surrounding whitespace and comments are never part of it.
"""

from __future__ import annotations

from operator import itemgetter
from typing import NamedTuple

from trl_verigate.lean_server.gc_pause import gc_paused
from trl_verigate.lean_server.layout_words import (
    ALTERNATIVE_HEADS,
    ARROW_HEADS,
    BLOCK_ENDING_WORDS,
    CLOSERS,
    COMMAND_WORDS,
    CONTINUATIONS,
    EXPECTS_MORE,
    NOT_CALC_STEP,
    NOT_DECLARATION_NAMES,
    OPENERS,
    PATTERN_HEADS,
    SEQUENCE_PREFIXES,
    STRUCTURAL,
    SUFFIX_WORDS,
    TACTIC_BRACKETS,
)
from trl_verigate.lean_server.tactic_tokens import CHAR_LITERAL, Tokens, TokenSpans, block_comment_end, is_literal_text
from trl_verigate.lean_server.types import GRANULARITIES, Tactic

# The layout vocabulary the precheck and files.py read from here as well (bracket sets, command and suffix words).
__all__ = [
    "CHAR_LITERAL",
    "CLOSERS",
    "COMMAND_WORDS",
    "OPENERS",
    "SUFFIX_WORDS",
    "ProofLayout",
    "block_comment_end",
    "TokenSpan",
    "TokenSpans",
    "first_error_tactic",
    "offset_of",
    "split_proof",
    "split_tactics",
    "split_tactics_and_tokens",
]

# The only tokens for which `_Parser._ends_block` can be true.
_MAY_END_BLOCK = CLOSERS | BLOCK_ENDING_WORDS | SUFFIX_WORDS | {",", "|"}
# Nested blocks deeper than this are read as plain tokens of their enclosing tactic: the parser recurses once
# per level, and an untrusted proof such as `by by by ...` must not exhaust Python's stack.
MAX_NESTING = 64


# Nodes are built with `tuple.__new__`, as `_Node(...)` would, without its Python-level `__new__` per tactic.
_new = tuple.__new__


class _Node(NamedTuple):
    start: int
    end: int
    children: list


class _Parser:
    """Recursive descent over the tokens; every loop consumes at least one token, so it always terminates."""

    def __init__(self, tokens: Tokens):
        self.tokens = tokens
        # A token's start is `end - len(text)`: the parser derives the few it needs (`Tokens.start`).
        self.text, self.end, self.column, self.line_start = tokens.text, tokens.end, tokens.column, tokens.line_start
        self.line_column = tokens.line_column  # only for tokens that start a line
        self.bracket_runs = tokens.bracket_runs
        self.n = tokens.n
        self.nesting = 0
        # Token indices of the suffix keywords read as such (`termination_by`, `decreasing_by`, `where`).
        self.clause_keywords: list[int] = []

    def _is_bar(self, i: int) -> bool:
        """A `|` separating alternatives has space on both sides; `|x|` (abs) is written without it."""
        if self.text[i] != "|":
            return False
        text, ends = self.text, self.end
        if i + 1 < self.n and ends[i + 1] - len(text[i + 1]) == ends[i]:
            return False
        return not (i > 0 and ends[i - 1] == ends[i] - 1)  # the `|` starts one character before its end

    def _ends_block(self, i: int, in_brackets: bool, in_alternative: bool) -> bool:
        """Whether token i ends the block it would continue; never for a token outside `_MAY_END_BLOCK`."""
        text = self.text[i]
        return (
            text in CLOSERS
            or (in_brackets and text == ",")
            or (in_alternative and self._is_bar(i))
            or (self.line_start[i] and text in BLOCK_ENDING_WORDS)
            or text in SUFFIX_WORDS
        )

    def sequence(self, i: int, parent_column, in_brackets: bool, in_alternative: bool) -> tuple[list[_Node], int]:
        """A tactic block starting at token i; `parent_column` is None where Lean checks no indentation."""
        text, column, line_start, line_column, n = self.text, self.column, self.line_start, self.line_column, self.n
        if (
            i >= n
            or self.nesting >= MAX_NESTING
            or (text[i] in _MAY_END_BLOCK and self._ends_block(i, in_brackets, in_alternative))
        ):
            return [], i
        block_column = column(i)
        if parent_column is not None and block_column <= parent_column:
            return [], i
        nodes: list[_Node] = []
        self.nesting += 1
        operand = self.operand
        while True:
            # One tactic: `operand`, then `<;> operand …` only where the next token is `<;>` (`tactic`, inlined).
            node, i = operand(i, block_column, in_brackets, in_alternative)
            if i < n and text[i] == "<;>":
                node, i = self.then_chain(node, i, block_column, in_brackets, in_alternative)
            nodes.append(node)
            if i >= n:
                break
            if text[i] == ";":
                i += 1
                if (
                    i < n
                    and (text[i] not in _MAY_END_BLOCK or not self._ends_block(i, in_brackets, in_alternative))
                    and not (line_start[i] and line_column[i] < block_column)
                ):
                    continue
                break
            if (
                line_start[i]
                and line_column[i] == block_column
                and (text[i] not in _MAY_END_BLOCK or not self._ends_block(i, in_brackets, in_alternative))
            ):
                continue
            break
        self.nesting -= 1
        return nodes, i

    def then_chain(
        self, node: _Node, i: int, block_column: int, in_brackets: bool, in_alternative: bool
    ) -> tuple[_Node, int]:
        """The tactic `node <;> t2 <;> t3 …` (left-associative), `node` the first operand and token i its `<;>`."""
        text, n = self.text, self.n
        while i < n and text[i] == "<;>":
            if i + 1 >= n:
                return _Node(node.start, self.end[i], [node]), i + 1
            right, i = self.operand(i + 1, block_column, in_brackets, in_alternative)
            node = _Node(node.start, right.end, [node, right])
        return node, i

    def operand(self, i: int, block_column: int, in_brackets: bool, in_alternative: bool) -> tuple[_Node, int]:
        """One tactic without `<;>`: its head, any nested blocks, and the tokens that continue it."""
        text, column, line_start, line_columns, n = self.text, self.column, self.line_start, self.line_column, self.n
        first = i
        head = text[i]
        children: list[_Node] = []
        if head == "·" or (head == "." and (i + 1 >= n or self.end[i + 1] - len(text[i + 1]) > self.end[i])):
            kids, i = self.sequence(i + 1, column(first), in_brackets, in_alternative)
            children.extend(kids)
        elif head in SEQUENCE_PREFIXES:
            i += 1
            if head == "iterate" and i < n and text[i][:1].isdigit():
                i += 1
            kids, i = self.sequence(i, None, in_brackets, in_alternative)
            children.extend(kids)
        elif head in TACTIC_BRACKETS:
            kids, i = self.sequence(i + 1, None, True, False)
            children.extend(kids)
            if i < n and text[i] == TACTIC_BRACKETS[head]:
                i += 1
        else:
            i += 1

        depth = 0
        line_column = block_column  # column of the line being read, where Lean saves positions (calc steps)
        in_calc = head == "calc"
        # Lean saves the column of a calc's first step and of its first later step; later steps must not be left
        # of the latter. The first later step may be anywhere at or right of the block, or of the first step.
        calc_first_column = column(first + 1) if in_calc and first + 1 < n else None
        calc_step_column = None
        in_lambda = False
        seen_alternative = False
        bracket_runs = self.bracket_runs
        while i < n:
            token = text[i]
            if line_start[i]:
                line_column = line_columns[i]
                calc_step = False
                if depth == 0 and in_calc and text[i - 1] != "calc" and self._calc_step(i):
                    lowest = calc_step_column
                    if lowest is None:
                        lowest = block_column if calc_first_column is None else min(block_column, calc_first_column)
                    calc_step = line_column >= lowest
                    if calc_step and calc_step_column is None:
                        calc_step_column = line_column
                if depth == 0 and line_column <= block_column and not calc_step:
                    # Whether the line still belongs to this tactic (inlined: it runs once per line). Left of the block
                    # column Lean has ended the block, so an unfinished-looking tactic before does not carry the line:
                    # to Lean it may be a command the precheck does not know. Only a line that no command can start
                    # (it starts with an infix continuation such as `<;>`: if Lean does not read it on, it fails to
                    # parse) and the steps of a `calc` ending the line before (a `calc` ending the `by` line puts
                    # them below the block, as in the calc transcript) go on there. At the block column the line also
                    # continues an unfinished tactic.
                    if token in BLOCK_ENDING_WORDS:
                        break
                    if token not in CONTINUATIONS:
                        previous = text[i - 1]
                        if line_column < block_column:
                            if previous != "calc":
                                break
                        elif previous not in EXPECTS_MORE:
                            if not (previous == "only" and token == "["):
                                break
                        elif not (self._expects_more(i - 1) or (previous == "only" and token == "[")):
                            break
            if token not in STRUCTURAL:
                i += 1
                continue
            # A bracket inside brackets only moves the depth, and an opener does so at depth 0 too (nothing below
            # applies to it): the common case of bracket-dense terms, without the checks below. A run of openers
            # (`((((`), or of closers that all close brackets opened in this tactic, moves it at once: no token of a
            # run starts a line, and each of its tokens would take the same branch as its first.
            if token in OPENERS:
                after = bracket_runs.get(i)
                if after is None:
                    depth += 1
                    i += 1
                else:
                    depth += after - i
                    i = after
                continue
            if depth and token in CLOSERS:
                after = bracket_runs.get(i)
                if after is None or after - i > depth:
                    depth -= 1
                    i += 1
                else:
                    depth -= after - i
                    i = after
                continue
            if depth == 0:
                if token == ";" or token == "<;>" or token in CLOSERS or (in_brackets and token == ","):
                    break
                if token in SUFFIX_WORDS:
                    break
                if token == "|" and self._is_bar(i):
                    if head == "first":
                        kids, i = self.sequence(i + 1, None, in_brackets, True)
                        children.extend(kids)
                        continue
                    if head in ALTERNATIVE_HEADS:
                        seen_alternative, in_lambda = True, False
                    elif in_alternative and head not in PATTERN_HEADS:
                        break
                elif (
                    token == "=>"
                    and not in_lambda
                    and (head in ARROW_HEADS or (head in ALTERNATIVE_HEADS and seen_alternative))
                ):
                    kids, i = self.sequence(i + 1, None, in_brackets, head in ALTERNATIVE_HEADS)
                    children.extend(kids)
                    continue
                elif token == "fun" or token == "λ" or (token == "match" and i != first):
                    in_lambda = True
                elif token == "calc":
                    in_calc = True
                    calc_first_column = column(i + 1) if i + 1 < n else None
                    calc_step_column = None
            if token == "by":
                if depth == 0:
                    kids, i = self.sequence(i + 1, min(block_column, line_column), in_brackets, in_alternative)
                else:
                    kids, i = self.sequence(i + 1, None, True, False)
                children.extend(kids)
                continue
            i += 1  # brackets moved the depth above: an opener always, a closer inside brackets, else it broke
        if head == "let" and first + 1 < n and text[first + 1] == "rec":
            # `let rec f … := … termination_by … decreasing_by …`: the hints belong to the `let rec` (Lean's
            # `letRecDecl` ends with `Termination.suffix`), at whatever column they start.
            kids, i = self.termination_suffix(i, block_column)
            children.extend(kids)
        ends = self.end
        return _new(_Node, (ends[first] - len(text[first]), ends[i - 1], children)), i

    def termination_suffix(self, i: int, anchor_column: int) -> tuple[list[_Node], int]:
        """`[termination_by MEASURE] [decreasing_by TACTICS]` at token i (Lean's `Termination.suffix`), if there.

        The measure is a term: it runs on over lines indented past `anchor_column` (the column of what the hints
        belong to) and ends at `;`, an unmatched closer, another suffix keyword or a line at or left of that column.
        `decreasing_by`'s tactics form a block indented past `anchor_column`.
        """
        text, line_start, n = self.text, self.line_start, self.n
        children: list[_Node] = []
        if i < n and text[i] in ("termination_by", "termination_by?"):
            self.clause_keywords.append(i)
            i += 1
            depth = 0
            while i < n:
                token = text[i]
                if depth == 0 and (
                    token == ";"
                    or token in SUFFIX_WORDS
                    or (line_start[i] and (self.column(i) <= anchor_column or token in BLOCK_ENDING_WORDS))
                ):
                    break
                if token in OPENERS:
                    depth += 1
                elif token in CLOSERS:
                    if depth == 0:
                        break
                    depth -= 1
                i += 1
        if i < n and text[i] == "decreasing_by":
            self.clause_keywords.append(i)
            children, i = self.sequence(i + 1, anchor_column, False, False)
        return children, i

    def declaration_suffix(self, i: int) -> tuple[list[_Node], int]:
        """What may follow the theorem's tactic block at token i: its termination hints, then `where` declarations.

        Lean's `declValSimple` is `:= declBody Termination.suffix (whereDecls)?`. The declarations of a `where`
        form a block: the first one's column (past 0) is the block's, each next one starts at that column or after
        `;`, and each is `name binders : type := body` (or equations) with its own termination hints; a line left
        of that column, or a token that cannot start a declaration there, ends the clause. Returns the tactics of
        the `decreasing_by` and `where` declarations, and the index after the suffix.
        """
        text, line_start, column, n = self.text, self.line_start, self.column, self.n
        children, i = self.termination_suffix(i, 0)
        if i >= n or text[i] != "where":
            return children, i
        self.clause_keywords.append(i)
        i += 1
        if i >= n or column(i) == 0 or not self._is_declaration_name(i):
            return children, i
        declaration_column = column(i)
        while True:
            declaration, i = self.operand(i, declaration_column, False, False)
            children.append(declaration)
            kids, i = self.termination_suffix(i, declaration_column)
            children.extend(kids)
            if i < n and text[i] == ";":
                i += 1
                if i < n and self._is_declaration_name(i) and not (line_start[i] and column(i) != declaration_column):
                    continue
                break
            if i < n and line_start[i] and column(i) == declaration_column and self._is_declaration_name(i):
                continue
            break
        return children, i

    def _is_declaration_name(self, i: int) -> bool:
        """Whether token i can name a `where` declaration: an identifier that is no keyword the splitter knows."""
        token = self.text[i]
        return (
            (token[0].isalpha() or token[0] in "_«")
            and not is_literal_text(token)
            and token not in NOT_DECLARATION_NAMES
        )

    def _expects_more(self, j: int) -> bool:
        """Whether token j leaves its tactic unfinished; `*` after `at` is the complete location "everywhere"."""
        return self.text[j] in EXPECTS_MORE and not (self.text[j] == "*" and j > 0 and self.text[j - 1] == "at")

    def _calc_step(self, i: int) -> bool:
        """Whether the line starting at token i reads as a `calc` step (`_ = b := proof` or `a = b := proof`).

        A step is one term, so a line that is no continuation, or whose `:=` comes after a `;`, is none.
        """
        text, line_start, n = self.text, self.line_start, self.n
        if text[i] in NOT_CALC_STEP or text[i] in CONTINUATIONS or self._expects_more(i - 1):
            return False
        if text[i] == "_":
            return True
        depth = 0
        j = i
        while j < n and (j == i or not line_start[j]):
            token = text[j]
            if token in OPENERS:
                depth += 1
            elif token in CLOSERS:
                depth -= 1
            elif depth == 0 and token in (";", "<;>"):
                return False
            elif token == ":=" and depth == 0:
                return True
            j += 1
        return False


def _flatten(nodes: list[_Node]) -> list[_Node]:
    """Every node of the trees, each before its children (preorder). Iterative: a chain `t <;> t <;> …` nests as
    deep as it is long, past Python's recursion limit."""
    out: list[_Node] = []
    stack = nodes[::-1]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(node.children))
    return out


# One token as the splitter reads it: `(start, end, literal)`, `[start, end)` in the proof, `literal` for a string,
# char or raw string literal. A plain tuple: a 1 MB proof has up to a million of them.
TokenSpan = tuple[int, int, bool]


def split_tactics(proof: str, granularity: str = "outermost", *, start_column: int = 0) -> list[Tactic]:
    """Split a proof body (the untrusted text after the trusted `:= by`) into its tactics.

    Args:
        proof: the proof body; it may start on the `by` line (`" exact h"`) or on the next (`"\\n  simp"`).
        granularity: "outermost" for the top-level tactic sequence (what Lean executes one after the other);
            "all" to add the nested tactics too (inside bullets, `case` blocks, nested `by` blocks, `<;>`
            operands, tactic blocks in parentheses), ordered by start offset, outer before inner.
        start_column: the column (code points) at which `proof[0]` sits in its source line, e.g. the column
            just after `by` when the body starts on the `by` line. Lean's layout rules compare columns, so
            this matters when the first line and later lines of a proof are laid out against each other.

    Returns:
        `Tactic(text, start, end)` with `text == proof[start:end]`.
    """
    _check_arguments(proof, granularity, start_column)
    with gc_paused():  # see gc_pause.py
        return _split(Tokens(proof, start_column), granularity)


def split_tactics_and_tokens(
    proof: str, granularity: str = "outermost", *, start_column: int = 0
) -> tuple[list[Tactic], list[TokenSpan]]:
    """`split_tactics`, plus the tokens the split was computed from (comments and whitespace dropped).

    The precheck compares these tokens with its own reading of the proof: the spans are only as right as the
    tokens they were built from.
    """
    layout = split_proof(proof, granularity, start_column=start_column)
    return layout.tactics, list(layout.tokens)


class ProofLayout(NamedTuple):
    """How Lean lays out a proof body: its tactics, the declaration suffix after them, and the tokens read.

    `suffix` is the `[start, end)` span of what follows the top-level tactic block as part of the theorem (Lean's
    `Termination.suffix` and `where` declarations), or None; everything else outside the tactics is, to Lean,
    further commands. `clause_keywords` are the offsets of the `termination_by`/`termination_by?`/`decreasing_by`/
    `where` tokens the layout reads as suffix keywords (the theorem's, a `where` declaration's or a `let rec`'s):
    the only places those words may stand in a proof.
    """

    tactics: list[Tactic]
    tokens: TokenSpans  # a sequence of `TokenSpan`, built on first use
    suffix: tuple[int, int] | None
    clause_keywords: frozenset[int]


def split_proof(proof: str, granularity: str = "outermost", *, start_column: int = 0) -> ProofLayout:
    """`split_tactics_and_tokens`, plus the declaration suffix after the tactic block and its keywords.

    A suffix is read only after a block with at least one tactic (Lean's `by` needs one). The tactics of
    `decreasing_by` and `where` declarations are not the proof's tactics (Lean runs them for other declarations):
    they are in no granularity.
    """
    _check_arguments(proof, granularity, start_column)
    with gc_paused():  # see gc_pause.py
        return _split_proof(proof, granularity, start_column)


def _split_proof(proof: str, granularity: str, start_column: int) -> ProofLayout:
    tokens = Tokens(proof, start_column)
    spans = TokenSpans(tokens)
    if not tokens.n:
        return ProofLayout([], spans, None, frozenset())
    parser = _Parser(tokens)
    nodes, i = parser.sequence(0, 0, False, False)
    suffix = None
    if nodes and i < tokens.n and tokens.text[i] in SUFFIX_WORDS:
        _, end = parser.declaration_suffix(i)
        suffix = (tokens.end[i] - len(tokens.text[i]), tokens.end[end - 1])
    keywords = frozenset(tokens.end[k] - len(tokens.text[k]) for k in parser.clause_keywords)
    return ProofLayout(_tactics(tokens, nodes, granularity), spans, suffix, keywords)


def _check_arguments(proof: str, granularity: str, start_column: int) -> None:
    if granularity not in GRANULARITIES:
        raise ValueError(f"split_tactics(granularity=...) must be one of {GRANULARITIES}, got {granularity!r}")
    if not isinstance(proof, str):
        raise TypeError(f"split_tactics(proof=...) must be a str, got {type(proof).__name__}")
    if not isinstance(start_column, int) or start_column < 0:
        raise ValueError(f"split_tactics(start_column=...) must be an int >= 0, got {start_column!r}")


def _split(tokens: Tokens, granularity: str) -> list[Tactic]:
    if not tokens.n:
        return []
    # The declaration starts at column 0 and Lean requires its `by` block to be indented past it.
    nodes, _ = _Parser(tokens).sequence(0, 0, False, False)
    return _tactics(tokens, nodes, granularity)


def _tactics(tokens: Tokens, nodes: list[_Node], granularity: str) -> list[Tactic]:
    if granularity == "all":
        nodes = sorted(_flatten(nodes), key=lambda node: (node.start, -node.end))
    starts, ends = list(map(itemgetter(0), nodes)), list(map(itemgetter(1), nodes))
    return list(map(Tactic, map(tokens.proof.__getitem__, map(slice, starts, ends)), starts, ends))


def offset_of(text: str, line: int, column: int) -> int:
    """The character offset in `text` of a Lean position (line 1-based, column 0-based in code points).

    Lines are split at "\\n" only; a "\\r" before it is not part of the line (Lean normalises CRLF before
    counting columns). A column past the end of its line clamps to the line's end (the offset of its line
    break), and a line past the last clamps to `len(text)`, so a position Lean reports at the end of the
    input, or one computed against slightly different text, still lands in range.
    """
    if line < 1:
        raise ValueError(f"offset_of(line=...) is 1-based, got {line}")
    if column < 0:
        raise ValueError(f"offset_of(column=...) is 0-based and >= 0, got {column}")
    start = 0
    for _ in range(line - 1):
        newline = text.find("\n", start)
        if newline < 0:
            return len(text)
        start = newline + 1
    end = text.find("\n", start)
    if end < 0:
        end = len(text)
    if end > start and text[end - 1] == "\r":
        end -= 1
    return min(start + column, end)


def first_error_tactic(tactics: list[Tactic], errors: list[tuple[int, str]]) -> int:
    """Index of the first failing tactic: tactics before it ran without error.

    `errors` holds `(offset into the proof body, message text)`; the offset is negative for an error located
    before the body (at the `by` or the declaration). The earliest error inside the body blames the first
    tactic (in list order, so the outermost one) whose span contains it; an error between tactics blames the
    next one, and an error after the last tactic the last one. Without errors in the body, errors before it
    that are all "unsolved goals" mean every tactic ran but the proof is incomplete (-> `len(tactics)`), any
    other error there means nothing can be credited (-> 0), and no errors at all gives `len(tactics)`.
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
    # Only "unsolved goals" before the body means the tactics ran and left goals; any other error there (in the
    # statement, or the kernel rejecting the declaration) means the declaration itself is broken.
    if all(text.lstrip().startswith("unsolved goals") for _, text in errors):
        return len(tactics)
    return 0
