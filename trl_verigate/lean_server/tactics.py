"""Tactic-level structure of an untrusted Lean 4 proof body, without running Lean.

`split_tactics` follows Lean 4's layout rules for a `by` block closely enough that its outermost spans equal
the tactic spans the Lean REPL reports with `"allTactics": true` (checked against recorded transcripts):

* A tactic block (`sepByIndent` in Lean's parser) takes its column from its first tactic. A new tactic starts
  after `;`, or on a new line at exactly that column. A line indented deeper continues the current tactic; a
  line at or left of the block column ends the current tactic (and, left of it, the block) unless the tactic
  is visibly unfinished: the previous token needs an operand (`exact`, `:=`, `+`, `at`, ...), the line starts
  with an infix continuation (`<;>`, `|`, `=`, ...) or with another `calc` step.
* A top-level block must be indented past the declaration's column (0), so `theorem x : P := by\\nsimp`
  has no tactics (Lean parses `simp` as the next command).
* Inside brackets layout is off (Lean's `withoutPosition`); comments, string and char literals are skipped.
* Nested blocks: `by`, focusing bullets `·`/`.`, `case`/`next`/`on_goal`/`conv ... =>`, `first | ...`,
  alternatives of tactic `match`/`induction`/`cases ... with | p => ...`, tactic combinators that take a
  sequence (`try`, `repeat`, `all_goals`, `any_goals`, `focus`, `classical`, ...), and `( ... )`/`{ ... }`
  tactic blocks. A nested block on the same line swallows a following `; tac` exactly like Lean does
  (`have h := by simp; exact h` is one tactic).
* `t1 <;> t2` is one tactic at the outer level, with `t1` and `t2` as its nested tactics.

Spans are `[start, end)` offsets (Python str indices, i.e. Unicode code points, like Lean's columns) into
the proof body; a tactic's text is `proof[start:end]`: it starts at its first token and ends at its last,
so surrounding whitespace and comments are never part of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from trl_verigate.lean_server.types import Tactic

__all__ = ["first_error_tactic", "offset_of", "split_tactics"]

GRANULARITIES = ("outermost", "all")

# Lean identifiers: letters (Unicode, incl. Greek, letter-like symbols such as ℕ), `_`, digits after the first
# character, `'`, `!`, `?`, `«escaped»` parts, and dotted components (`Nat.succ_le`, `h.1`). λ, Π and Σ are
# binders, not letters, in Lean.
_ID_PART = r"(?:«[^»\n]*»|[^\W\dλΠΣ](?:[^\WλΠΣ]|['!?])*)"
_TOKEN_RE = re.compile(
    r"(?P<ws>\s+)"
    r"|(?P<lc>--[^\n]*)"
    r"|(?P<bc>/-)"
    r'|(?P<str>"(?:[^"\\]|\\.)*(?:"|\Z))'
    r"|(?P<chr>'(?:\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)|[^'\\\n])')"
    rf"|(?P<id>{_ID_PART}(?:\.(?:{_ID_PART}|\d+))*)"
    r"|(?P<num>0[xXbBoO][0-9a-fA-F_]+|\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?)"
    r"|(?P<sym><;>|<\|>|:=|=>|<\||\|>\.|\|>|\|\||->|<->|<-|\.\.\.|\.\.|.)",
    re.DOTALL,
)
_COMMENT_DELIM_RE = re.compile(r"/-|-/")

_OPENERS = frozenset("([{⟨⦃⟦‹⌊⌈⟪")
_CLOSERS = frozenset(")]}⟩⦄⟧›⌋⌉⟫")
_BULLETS = frozenset({"·", "."})
# Combinators whose argument is a whole tactic sequence (Lean: `"try " tacticSeq`), so `try simp; ring`
# tries both tactics.
_SEQUENCE_PREFIXES = frozenset(
    {
        "try",
        "repeat",
        "repeat'",
        "iterate",
        "all_goals",
        "any_goals",
        "focus",
        "classical",
        "fail_if_success",
        "with_reducible",
        "with_reducible_and_instances",
        "with_unfolding_all",
        "unhygienic",
    }
)
# Tactics whose `=>` opens a tactic sequence.
_ARROW_HEADS = frozenset({"case", "case'", "next", "on_goal", "conv", "conv_lhs", "conv_rhs"})
# Tactics with `| pattern => tactics` alternatives.
_ALTERNATIVE_HEADS = frozenset({"match", "induction", "cases", "fun_induction", "fun_cases"})
# Tactics in which `|` separates patterns rather than ending an enclosing alternative.
_PATTERN_HEADS = frozenset({"rcases", "obtain", "rintro", "cases'", "induction'", "case", "case'"})
# Tactics that cannot be a `calc` step even though they contain `:=`.
_NOT_CALC_STEP = frozenset({"have", "let", "obtain", "set", "show", "suffices", "replace", "haveI", "letI", "calc"})
# Tokens that can only start a new command: a proof body never continues past them at the block's column.
_COMMAND_WORDS = frozenset(
    {
        "theorem",
        "lemma",
        "def",
        "example",
        "abbrev",
        "instance",
        "structure",
        "class",
        "inductive",
        "namespace",
        "section",
        "end",
        "variable",
        "universe",
        "axiom",
        "noncomputable",
        "private",
        "protected",
        "termination_by",
        "decreasing_by",
        "where",
        "deriving",
        "mutual",
        "attribute",
        "macro",
        "macro_rules",
        "syntax",
        "elab",
        "notation",
        "infix",
        "infixl",
        "infixr",
        "prefix",
        "postfix",
        "opaque",
        "import",
        "#",
    }
)
# Tokens after which the tactic is unfinished: Lean's parser takes the next token whatever its column.
_EXPECTS_MORE = frozenset(
    {
        "exact",
        "apply",
        "refine",
        "refine'",
        "use",
        "exists",
        "existsi",
        "exacts",
        "show",
        "from",
        "have",
        "let",
        "obtain",
        "rcases",
        "rintro",
        "specialize",
        "calc",
        "suffices",
        "rw",
        "rewrite",
        "rwa",
        "erw",
        "nth_rewrite",
        "nth_rw",
        "simp_rw",
        "unfold",
        "at",
        "with",
        "using",
        "generalizing",
        "fun",
        "then",
        "else",
        "if",
        "match",
        "induction",
        "cases",
        "by_cases",
        "set",
        "change",
        "convert",
        "convert_to",
        "replace",
        "haveI",
        "letI",
        "subst",
        "clear",
        "revert",
        "generalize",
        "injection",
        "only",
        "in",
        "first",
        "case",
        "case'",
        "next",
        "on_goal",
        ":=",
        "=>",
        ",",
        "←",
        "<-",
        "→",
        "->",
        "↔",
        "<->",
        "∧",
        "∨",
        "=",
        "≠",
        "<",
        ">",
        "≤",
        "≥",
        "+",
        "-",
        "*",
        "/",
        "%",
        "^",
        "∣",
        "•",
        "∘",
        "|",
        "<|",
        "|>",
        "|>.",
        "<|>",
        "$",
        ":",
        "∈",
        "∉",
        "⊆",
        "⊂",
        "∪",
        "∩",
        "×",
        "¬",
        "∀",
        "∃",
        "λ",
        "√",
        "↑",
        "@",
        "<;>",
        "▸",
        "≡",
        "∑",
        "∏",
    }
)
# Tokens that continue the previous line's tactic when they start a line: trailing (infix) parsers and
# keywords that no tactic starts with.
_CONTINUATIONS = frozenset(
    {
        "<;>",
        "|",
        ":=",
        "=>",
        "=",
        "≠",
        "<",
        ">",
        "≤",
        "≥",
        "+",
        "-",
        "*",
        "/",
        "%",
        "^",
        "∣",
        "•",
        "∘",
        "∧",
        "∨",
        "↔",
        "→",
        "->",
        "<|",
        "|>",
        "|>.",
        "<|>",
        "$",
        "▸",
        "∈",
        "∉",
        "⊆",
        "∪",
        "∩",
        "×",
        "≡",
        "at",
        "with",
        "using",
        "generalizing",
        "from",
        "then",
        "else",
    }
)


class _Token(NamedTuple):
    text: str
    start: int
    end: int
    column: int  # Lean column (code points from the start of the source line)
    line_start: bool  # first token on its line


class _Node(NamedTuple):
    start: int
    end: int
    children: list


def _tokenize(proof: str, start_column: int) -> list[_Token]:
    tokens: list[_Token] = []
    append = tokens.append
    match = _TOKEN_RE.match
    n = len(proof)
    pos = 0
    line_begin = -start_column  # offset where the current source line begins (before proof[0] on line one)
    new_line = False
    while pos < n:
        m = match(proof, pos)
        kind = m.lastgroup
        end = m.end()
        if kind == "ws" or kind == "lc":
            newline = proof.rfind("\n", pos, end)
            if newline >= 0:
                line_begin, new_line = newline + 1, True
        elif kind == "bc":
            depth = 1
            for delim in _COMMENT_DELIM_RE.finditer(proof, end):
                depth += 1 if delim.group() == "/-" else -1
                if depth == 0:
                    end = delim.end()
                    break
            else:
                end = n
            newline = proof.rfind("\n", pos, end)
            if newline >= 0:
                line_begin, new_line = newline + 1, True
        else:
            append(_Token(m.group(), pos, end, pos - line_begin, new_line))
            new_line = False
            if kind == "str":
                newline = proof.rfind("\n", pos, end)
                if newline >= 0:
                    line_begin = newline + 1
        pos = end
    return tokens


class _Parser:
    """Recursive descent over tokens; every loop consumes at least one token, so it always terminates."""

    def __init__(self, tokens: list[_Token]):
        self.tokens = tokens
        self.n = len(tokens)

    def _is_bar(self, i: int) -> bool:
        """A `|` separating alternatives has space on both sides; `|x|` (abs) is written without it."""
        tokens = self.tokens
        if tokens[i].text != "|":
            return False
        if i + 1 < self.n and tokens[i + 1].start == tokens[i].end:
            return False
        return not (i > 0 and tokens[i - 1].end == tokens[i].start)

    def _ends_block(self, i: int, in_brackets: bool, in_alternative: bool) -> bool:
        token = self.tokens[i]
        text = token.text
        return (
            text in _CLOSERS
            or (in_brackets and text == ",")
            or (in_alternative and self._is_bar(i))
            or (token.line_start and text in _COMMAND_WORDS)
        )

    def sequence(self, i: int, parent_column, in_brackets: bool, in_alternative: bool) -> tuple[list[_Node], int]:
        """A tactic block starting at token i; `parent_column` is None where Lean checks no indentation."""
        tokens, n = self.tokens, self.n
        if i >= n or self._ends_block(i, in_brackets, in_alternative):
            return [], i
        if parent_column is not None and tokens[i].column <= parent_column:
            return [], i
        block_column = tokens[i].column
        nodes: list[_Node] = []
        while True:
            node, i = self.tactic(i, block_column, in_brackets, in_alternative)
            nodes.append(node)
            if i >= n:
                break
            token = tokens[i]
            if token.text == ";":
                i += 1
                if i < n and not self._ends_block(i, in_brackets, in_alternative):
                    following = tokens[i]
                    if not (following.line_start and following.column < block_column):
                        continue
                break
            if (
                token.line_start
                and token.column == block_column
                and not self._ends_block(i, in_brackets, in_alternative)
            ):
                continue
            break
        return nodes, i

    def tactic(self, i: int, block_column: int, in_brackets: bool, in_alternative: bool) -> tuple[_Node, int]:
        """One tactic of a block, `t1 <;> t2 <;> t3` (left-associative) included."""
        tokens, n = self.tokens, self.n
        node, i = self.operand(i, block_column, in_brackets, in_alternative)
        while i < n and tokens[i].text == "<;>":
            if i + 1 >= n:
                return _Node(node.start, tokens[i].end, [node]), i + 1
            right, i = self.operand(i + 1, block_column, in_brackets, in_alternative)
            node = _Node(node.start, right.end, [node, right])
        return node, i

    def operand(self, i: int, block_column: int, in_brackets: bool, in_alternative: bool) -> tuple[_Node, int]:
        tokens, n = self.tokens, self.n
        first = i
        head = tokens[i].text
        children: list[_Node] = []
        line_column = block_column
        if head == "·" or (head == "." and (i + 1 >= n or tokens[i + 1].start > tokens[i].end)):
            kids, i = self.sequence(i + 1, tokens[first].column, in_brackets, in_alternative)
            children.extend(kids)
        elif head in _SEQUENCE_PREFIXES:
            i += 1
            if head == "iterate" and i < n and tokens[i].text[:1].isdigit():
                i += 1
            kids, i = self.sequence(i, None, in_brackets, in_alternative)
            children.extend(kids)
        elif head == "(" or head == "{":
            kids, i = self.sequence(i + 1, None, True, False)
            children.extend(kids)
            if i < n and tokens[i].text == (")" if head == "(" else "}"):
                i += 1
        else:
            i += 1

        depth = 0
        in_calc = head == "calc"
        in_lambda = False
        seen_alternative = False
        while i < n:
            token = tokens[i]
            text = token.text
            if depth == 0:
                if token.line_start:
                    if token.column <= block_column and (
                        text in _COMMAND_WORDS
                        or not (
                            tokens[i - 1].text in _EXPECTS_MORE
                            or text in _CONTINUATIONS
                            or (in_calc and self._calc_step(i))
                        )
                    ):
                        break
                    line_column = token.column
                if text == ";" or text == "<;>" or text in _CLOSERS or (in_brackets and text == ","):
                    break
                if self._is_bar(i):
                    if head == "first":
                        kids, i = self.sequence(i + 1, None, in_brackets, True)
                        children.extend(kids)
                        continue
                    if head in _ALTERNATIVE_HEADS:
                        seen_alternative, in_lambda = True, False
                    elif in_alternative and head not in _PATTERN_HEADS:
                        break
                elif (
                    text == "=>"
                    and not in_lambda
                    and (head in _ARROW_HEADS or (head in _ALTERNATIVE_HEADS and seen_alternative))
                ):
                    kids, i = self.sequence(i + 1, None, in_brackets, head in _ALTERNATIVE_HEADS)
                    children.extend(kids)
                    continue
                elif text == "fun" or text == "λ" or (text == "match" and i != first):
                    in_lambda = True
                elif text == "calc":
                    in_calc = True
            elif token.line_start:
                line_column = token.column
            if text == "by":
                if depth == 0:
                    parent = min(block_column, line_column)
                    kids, i = self.sequence(i + 1, parent, in_brackets, in_alternative)
                else:
                    kids, i = self.sequence(i + 1, None, True, False)
                children.extend(kids)
                continue
            if text in _OPENERS:
                depth += 1
            elif text in _CLOSERS:
                depth -= 1
            i += 1
        return _Node(tokens[first].start, tokens[i - 1].end, children), i

    def _calc_step(self, i: int) -> bool:
        """Whether the line starting at token i reads as a `calc` step (`_ = b := proof` or `a = b := proof`)."""
        tokens, n = self.tokens, self.n
        if tokens[i].text == "_":
            return True
        if tokens[i].text in _NOT_CALC_STEP:
            return False
        depth = 0
        j = i
        while j < n and (j == i or not tokens[j].line_start):
            text = tokens[j].text
            if text in _OPENERS:
                depth += 1
            elif text in _CLOSERS:
                depth -= 1
            elif text == ":=" and depth == 0:
                return True
            j += 1
        return False


def _flatten(nodes: Iterable[_Node], out: list[_Node]) -> None:
    for node in nodes:
        out.append(node)
        _flatten(node.children, out)


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
    if granularity not in GRANULARITIES:
        raise ValueError(f"split_tactics(granularity=...) must be one of {GRANULARITIES}, got {granularity!r}")
    if not isinstance(proof, str):
        raise TypeError(f"split_tactics(proof=...) must be a str, got {type(proof).__name__}")
    if not isinstance(start_column, int) or start_column < 0:
        raise ValueError(f"split_tactics(start_column=...) must be an int >= 0, got {start_column!r}")
    tokens = _tokenize(proof, start_column)
    if not tokens:
        return []
    # The declaration starts at column 0 and Lean requires its `by` block to be indented past it.
    nodes, _ = _Parser(tokens).sequence(0, 0, False, False)
    if granularity == "all":
        flat: list[_Node] = []
        _flatten(nodes, flat)
        flat.sort(key=lambda node: (node.start, -node.end))
        nodes = flat
    return [Tactic(proof[node.start : node.end], node.start, node.end) for node in nodes]


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
    next one, and an error after the last tactic the last one. Without errors in the body, "unsolved goals"
    before it means every tactic ran but the proof is incomplete (-> `len(tactics)`), any other error there
    means nothing can be credited (-> 0), and no errors at all gives `len(tactics)`.
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
    if any(text.lstrip().startswith("unsolved goals") for _, text in errors):
        return len(tactics)
    if errors:
        return 0
    return len(tactics)
