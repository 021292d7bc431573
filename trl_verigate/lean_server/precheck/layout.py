"""Where each tactic of a proof body starts and ends, at every nesting level, without running Lean.

`parse_proof` follows Lean 4's layout rules for a `by` block closely enough that its outermost spans equal the
tactic spans the Lean REPL reports with `"allTactics": true` (checked against recorded transcripts):

* A tactic block (`sepByIndent` in Lean's parser) takes its column from its first tactic. A new tactic starts after
  `;`, or on a new line at exactly that column. A line indented deeper continues the current tactic; a line at the
  block column ends it unless the tactic is visibly unfinished: the previous token needs an operand (`exact`, `:=`,
  `+`, `at`, ...; not `*` in `at *`, nor `only`), the line starts with an infix continuation (`<;>`, `|`, `=`, ...)
  or with another `calc` step. A line left of the block column ends the block unless it starts with an infix
  continuation or is a step of a `calc` whose first step is that far left.
* A top-level block is indented past the declaration's column (0): `theorem x : P := by\\nsimp` has no tactics.
* Inside brackets layout is off (Lean's `withoutPosition`).
* Nested blocks: `by` in a term, focusing bullets `·`/`.`, `case`/`next`/`on_goal`/`conv … =>`, `first | …` (and
  `solve`, `attempt_all`, `first_par`), the alternatives of tactic `match`/`induction`/`cases … with | p => …`, both
  branches of the tactic `if … then … else …`, combinators that take a sequence (`try`, `repeat`, `all_goals`,
  `show_term`, …, `with_annotate_state x`, `set_option … in`, `open … in`), `( … )`/`{ … }` blocks, Batteries' split focus
  `t <;> [t1; t2]`, and the tactic-valued items `(disch := …)`, `(discharger := …)`, `(norm := …)`.
* `t1 <;> t2`, `t1 <|> t2` and `t1 says t2` are one tactic at the outer level, with `t1` and `t2` inside.
* An alternative's right-hand side may be a hole (`| succ n => _`); a term `let x := v; body` takes its own `;`; the
  items of a split focus are separated by `;` whatever their columns (Batteries' `sepBy(tactic, "; ")`).
* A `|` glued to what follows is a bar where the syntax wants one (`first |t`) or before a pattern's `=>`; elsewhere
  in an alternative, before a tactic keyword, Lean's reading (bar or abs `|x|`) is unknown, and it is refused.

The token sets these rules read, with the grammar fact behind each, are in `grammar`.

Each node knows its mode: "tactic", or "conv" inside `conv … =>` (where `tactic =>` returns to tactic mode), so the
precheck can hold the first token of every tactic to the right allow-list.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trl_verigate.lean_server.core import GRANULARITIES, Tactic
from trl_verigate.lean_server.precheck.brackets import CLOSERS, MAX_NESTING, NESTING_HINT, OPENERS, bracket_pairs
from trl_verigate.lean_server.precheck.grammar import (
    ALTERNATIVE_HEADS,
    ARROW_HEADS,
    BAR_SEQUENCE_HEADS,
    BINDER_SYMBOLS,
    BLOCK_ENDING_WORDS,
    CALC_STEP_STARTS,
    COMPLETE_ENDINGS,
    CONTINUATIONS,
    EXPECTS_MORE,
    HOLE_ARROW_HEADS,
    IF_HEAD,
    IN_PREFIXES,
    INFIX_COMBINATORS,
    MAY_END_BLOCK,
    NOT_CALC_STEP,
    PATTERN_HEADS,
    PRE_TACTIC_HEADS,
    RAW_ARGUMENT_PREFIXES,
    SEQUENCE_PREFIXES,
    SUFFIX_WORDS,
    TACTIC_BRACKETS,
    TACTIC_KEYWORDS,
    TACTIC_LIST_HEADS,
    TACTIC_VALUED_ITEMS,
    TERM_BINDINGS,
)
from trl_verigate.lean_server.precheck.suffix import SuffixReader
from trl_verigate.lean_server.precheck.tokens import PrecheckError, Token, tokenize


@dataclass
class Node:
    """One tactic: token indices `[first, end)` (children's tokens included), the index of its head token, the mode
    it stands in ("tactic" or "conv"), and its nested tactics. `kind` is "tactic", or the infix combinator (`<;>`,
    `<|>`, `says`) joining its two children."""

    first: int
    end: int
    mode: str
    kind: str = "tactic"
    children: list[Node] = field(default_factory=list)
    # The index after the tactic block this tactic stands in: a name it binds is in scope up to there.
    block_end: int = -1


@dataclass
class ProofLayout:
    """A proof body's tactics (outermost first, each with its nested ones), the `[first, end)` token range of the
    declaration suffix after them (`termination_by`, `decreasing_by`, `where`) or None, and the token indices of the
    suffix keywords read as such (the only places those words may stand)."""

    tokens: list[Token]
    tactics: list[Node]
    end: int  # index of the first token after the tactic block
    suffix: tuple[int, int] | None = None
    clause_keywords: set[int] = field(default_factory=set)
    # Tactic blocks inside the suffix (`decreasing_by`, and `:= by` of `where` declarations): held to the same rules.
    suffix_tactics: list[Node] = field(default_factory=list)
    # Token indices of the names the `where` declarations declare.
    definition_names: list[int] = field(default_factory=list)
    # The index of each `=>` that opens a tactic block (`case … =>`, `| p =>`) -> the index after that block.
    arrow_ends: dict[int, int] = field(default_factory=dict)
    # `brackets.bracket_pairs(tokens)`, read once for all the rules.
    closers: list[int] = field(default_factory=list)

    def span(self, node: Node) -> tuple[int, int]:
        """The `[start, end)` character span of a node in the text the tokens came from."""
        return self.tokens[node.first].start, self.tokens[node.end - 1].end

    def outermost_tactics(self, text: str) -> list[Tactic]:
        return [Tactic(text[start:end], start, end) for start, end in map(self.span, self.tactics)]

    def all_tactics(self, text: str) -> list[Tactic]:
        """Every tactic at every level (the infix combinations as well as their operands), by start, outer first."""
        spans = sorted({self.span(node) for node in walk(self.tactics)}, key=lambda span: (span[0], -span[1]))
        return [Tactic(text[start:end], start, end) for start, end in spans]


def parse_proof(tokens: list[Token]) -> ProofLayout:
    """The layout of a proof body's tokens (`tokenize(body, start_column)`); the body's block must be indented past
    column 0."""
    closers = bracket_pairs(tokens)
    parser = LayoutParser(tokens)
    nodes, end = parser.sequence(0, 0, False, False, "tactic")
    layout = ProofLayout(tokens, nodes, end, closers=closers)
    if nodes and end < len(tokens) and tokens[end].text in SUFFIX_WORDS:
        layout.suffix_tactics, suffix_end = parser.declaration_suffix(end)
        layout.suffix = (end, suffix_end)
    parser.record_in(layout)
    return layout


def split_tactics(proof: str, granularity: str = "outermost", *, start_column: int = 0) -> list[Tactic]:
    """The tactics of a proof body (the text after `:= by`): `Tactic(text, start, end)` with `text ==
    proof[start:end]`; "outermost" for the top-level sequence, "all" for nested tactics too.

    `start_column` is the column of `proof[0]` in its line (after `by` when the body starts on the `by` line): Lean's
    layout compares columns. Where the tokenizer would refuse the body (an unterminated comment, say) the tactics
    before that point are split; a body nested deeper than `MAX_NESTING` has none.
    """
    if granularity not in GRANULARITIES:
        raise ValueError(f"split_tactics(granularity=...) must be one of {GRANULARITIES}, got {granularity!r}")
    if not isinstance(proof, str):
        raise TypeError(f"split_tactics(proof=...) must be a str, got {type(proof).__name__}")
    if not isinstance(start_column, int) or start_column < 0:
        raise ValueError(f"split_tactics(start_column=...) must be an int >= 0, got {start_column!r}")
    try:
        layout = parse_proof(tokenize(proof, start_column, up_to_error=True))
    except PrecheckError:
        return []
    return layout.outermost_tactics(proof) if granularity == "outermost" else layout.all_tactics(proof)


def walk(nodes: list[Node]):
    """Every node of the trees, each before its children."""
    stack = nodes[::-1]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


@dataclass
class _Reading:
    """What `LayoutParser.operand` keeps track of while it reads one tactic."""

    first: int
    head: str | None  # None for a declaration's term, whose first token is read like the rest
    block_column: int
    in_brackets: bool
    in_alternative: bool
    mode: str
    term: bool
    children: list[Node] = field(default_factory=list)
    depth: int = 0  # brackets open within the tactic
    line_column: int = -1  # the column of the line being read (`calc` steps compare with it)
    in_calc: bool = False
    calc_first_column: int | None = None
    calc_step_column: int | None = None
    in_lambda: bool = False
    seen_alternative: bool = False
    term_bindings: int = 0  # `let`/`have` terms read whose `;` is still to come
    binders: int = 0  # binder notations read (`∀`, `∑`) whose `,` is still to come
    assigned: bool = False  # a `:=` read
    term_ifs: int = 0  # term `if`s read whose `else` is still to come

    def __post_init__(self):
        self.line_column = self.block_column

    def start_calc(self, parser: LayoutParser, calc: int | None) -> None:
        """A `calc` at token index `calc` (None: not one): its steps may start at its first step's column."""
        self.in_calc = calc is not None
        following = None if calc is None else calc + 1
        self.calc_first_column = parser.tokens[following].column if self.in_calc and following < parser.n else None
        self.calc_step_column = None


class LayoutParser(SuffixReader):
    """Recursive descent over the tokens; every loop consumes at least one token, so it always terminates."""

    def __init__(self, tokens: list[Token], end: int | None = None):
        """A parser of `tokens[:end]` (all of them by default)."""
        self.tokens = tokens
        self.text = [t.text for t in tokens]
        self.n = len(tokens) if end is None else end
        self.nesting = 0
        self.clause_keywords: list[int] = []
        self.definition_names: list[int] = []  # the names of `where` declarations
        self.arrow_ends: dict[int, int] = {}  # the index of each `=>` that opens a block -> the index after it
        # Tactic `if`s whose condition (`open_conditions`) or branches (`open_ifs`) are being read: their `then` and
        # `else` end the tactics inside.
        self.open_conditions = 0
        self.open_ifs = 0

    def record_in(self, layout: ProofLayout) -> None:
        """Give `layout` what this parser read besides the tactics: suffix keywords, definition names, arrows."""
        layout.clause_keywords = set(self.clause_keywords)
        layout.definition_names = self.definition_names
        layout.arrow_ends = self.arrow_ends

    def _adjacent(self, i: int, j: int) -> bool:
        return self.tokens[i].end == self.tokens[j].start

    def _hole(self, i: int) -> bool:
        """Whether a hole (`_`, `?_`, `?name`) stands at token i: an alternative's right-hand side may be one."""
        if i >= self.n:
            return False
        if self.text[i] == "_":
            return True
        return (
            self.text[i] == "?" and i + 1 < self.n and self._adjacent(i, i + 1) and self.tokens[i + 1].kind == "ident"
        )

    def _is_bar(self, i: int) -> bool:
        """A `|` separating alternatives has space on both sides; `|x|` (abs) is written without it."""
        if self.text[i] != "|":
            return False
        if i + 1 < self.n and self._adjacent(i, i + 1):
            return False
        return not (i > 0 and self._adjacent(i - 1, i))

    def _glued_bar(self, i: int) -> bool:
        """Whether a `|` that touches a neighbour, where an alternative may start, is an alternative's bar: it is when
        a pattern and its `=>` follow on its line (no other `|` nor `:=` between; abs `|x|` holds no `=>`). Before a
        tactic keyword, `{` or `·` (through `(`s) Lean reads a bar after a tactic that is complete and abs after one
        that takes a term, which only Lean's grammar of that tactic tells: refused, with the spelling to write."""
        if self.text[i] != "|":
            return False
        depth = 0
        for j in range(i + 1, min(self.n, i + 17)):
            token = self.text[j]
            if self.tokens[j].line_start or depth < 0 or (depth == 0 and token in ("|", ":=")):
                break
            if depth == 0 and token == "=>":
                return True
            depth += (token in OPENERS) - (token in CLOSERS)
        j = i + 1
        while j < self.n and self.text[j] == "(":
            j += 1
        if j < self.n and (self.text[j] in TACTIC_KEYWORDS or self.text[j] in ("{", "·")):
            raise PrecheckError(
                f"`|{self.text[j]}`",
                self.tokens[i].start,
                ": a `|` glued to a tactic reads as an alternative's bar or as abs `|x|`; write `| "
                f"{self.text[j]}` for an alternative",
            )
        return False

    def _bar(self, reading: _Reading, i: int) -> bool:
        """Whether the `|` at token i separates alternatives of the tactic being read: spaced, or glued where the
        tactic's syntax wants a bar (after `first`, a `with`, `intro`), or glued as `_glued_bar` reads it."""
        if self._is_bar(i):
            return True
        head = reading.head
        if head in BAR_SEQUENCE_HEADS or (head in ALTERNATIVE_HEADS and self.text[i - 1] == "with"):
            return True
        if head == "intro" and i - 1 == reading.first:
            return True
        alternatives = reading.in_alternative or head in ALTERNATIVE_HEADS
        return alternatives and head not in PATTERN_HEADS and self._glued_bar(i)

    def _no_tactic_starts(self, i: int) -> bool:
        """Whether no tactic can start at token i (a literal, or `(` before one), so Lean ends the block before it:
        in `have h := by trivial; (2 : ℝ)` the `(2 : ℝ)` is the term's."""
        while i < self.n and self.text[i] == "(":
            i += 1
        return i < self.n and self.tokens[i].kind in ("number", "string", "char")

    def _ends_block(self, i: int, in_brackets: bool, in_alternative: bool) -> bool:
        text = self.text[i]
        if (text == "then" and self.open_conditions) or (text == "else" and self.open_ifs):
            return True
        if text not in MAY_END_BLOCK:
            return False
        return (
            text in CLOSERS
            or (in_brackets and text == ",")
            or (in_alternative and (self._is_bar(i) or self._glued_bar(i)))
            or (self.tokens[i].line_start and text in BLOCK_ENDING_WORDS)
            or text in SUFFIX_WORDS
        )

    def sequence(
        self,
        i: int,
        parent_column: int | None,
        in_brackets: bool,
        in_alternative: bool,
        mode: str,
        positional: bool = True,
    ) -> tuple[list[Node], int]:
        """A tactic block starting at token i; `parent_column` is None where Lean checks no indentation. Not
        `positional`: tactics separated by `;` whatever their columns (Batteries' `t <;> [t1; t2]` is
        `sepBy(tactic, "; ")`, not an indented block)."""
        tokens, text, n = self.tokens, self.text, self.n
        if i >= n or self._ends_block(i, in_brackets, in_alternative):
            return [], i
        block_column = tokens[i].column
        if parent_column is not None and block_column <= parent_column:
            return [], i
        if self.nesting >= MAX_NESTING:
            raise PrecheckError(f"tactic blocks nested more than {MAX_NESTING} deep", tokens[i].start, NESTING_HINT)
        nodes: list[Node] = []
        self.nesting += 1
        while True:
            node, i = self.operand(i, block_column, in_brackets, in_alternative, mode)
            while i < n and text[i] in INFIX_COMBINATORS:
                combinator = text[i]
                if i + 1 >= n:
                    node = Node(node.first, i + 1, mode, combinator, [node])
                    i += 1
                    break
                right, i = self.operand(i + 1, block_column, in_brackets, in_alternative, mode)
                node = Node(node.first, i, mode, combinator, [node, right])
            nodes.append(node)
            if i >= n:
                break
            if text[i] == ";":
                i += 1
                if (
                    i < n
                    and not self._ends_block(i, in_brackets, in_alternative)
                    and not (positional and tokens[i].line_start and tokens[i].column < block_column)
                    and not self._no_tactic_starts(i)
                ):
                    continue
                break
            if (
                tokens[i].line_start
                and tokens[i].column == block_column
                and not self._ends_block(i, in_brackets, in_alternative)
                and not self._no_tactic_starts(i)
            ):
                continue
            break
        self.nesting -= 1
        for node in nodes:
            node.block_end = i
        return nodes, i

    def operand(
        self, i: int, block_column: int, in_brackets: bool, in_alternative: bool, mode: str, term: bool = False
    ) -> tuple[Node, int]:
        """One tactic without infix combinators: its head, any nested blocks, and the tokens that continue it.

        `term`: the tokens are a declaration's term, where `;` continues a `let`/`have` rather than ending a tactic.
        """
        reading = _Reading(i, None if term else self.text[i], block_column, in_brackets, in_alternative, mode, term)
        i = self._head(reading)
        reading.start_calc(self, i - 1 if reading.head == "calc" else None)
        while i < self.n:
            if self.tokens[i].line_start and self._line_ends_tactic(reading, i):
                break
            following = self._step(reading, i)
            if following is None:
                break
            i = following
        if reading.head == "let" and reading.first + 1 < self.n and self.text[reading.first + 1] == "rec":
            # `let rec f … := … termination_by … decreasing_by …`: the hints belong to the `let rec`.
            kids, i = self.termination_suffix(i, block_column)
            reading.children += kids
        return Node(reading.first, i, mode, "tactic", reading.children), i

    def _head(self, reading: _Reading) -> int:
        """Read the head of the tactic at `reading.first` and the blocks it opens; returns the index after them."""
        tokens, text, n = self.tokens, self.text, self.n
        i, head, mode = reading.first, reading.head, reading.mode
        if reading.term:
            return i
        if head in ("·", "."):  # a bullet, glued to its tactic or not (Lean's `cdotTk` is `"· " <|> ". "`)
            kids, i = self.sequence(i + 1, tokens[i].column, reading.in_brackets, reading.in_alternative, mode)
        elif head in SEQUENCE_PREFIXES:
            i += 1
            if head == "iterate" and i < n and tokens[i].kind == "number":
                i += 1
            kids, i = self.sequence(i, None, reading.in_brackets, reading.in_alternative, mode)
        elif head in RAW_ARGUMENT_PREFIXES:
            kids, i = self.sequence(i + 2, None, reading.in_brackets, reading.in_alternative, mode)
        elif head == IF_HEAD and mode == "tactic":
            kids, i = self._if_branches(reading, i + 1)
        elif head in TACTIC_BRACKETS:
            kids, i = self.sequence(i + 1, None, True, False, mode, positional=head != "[")
            if i < n and text[i] == TACTIC_BRACKETS[head]:
                i += 1
        elif head in TACTIC_LIST_HEADS and i + 1 < n and text[i + 1] == "[":
            kids, i = self._tactic_list(i + 2, mode)
        else:
            return i + 1
        reading.children += kids
        return i

    def _if_branches(self, reading: _Reading, i: int) -> tuple[list[Node], int]:
        """The tactic `if c then tactics else tactics` from token i (after `if`): the condition is a term (its `by`
        blocks hold tactics), both branches are tactic sequences. Returns their tactics and the index after them."""
        text, n, kids, depth = self.text, self.n, [], 0
        self.open_conditions += 1
        while i < n and not (depth == 0 and text[i] == "then"):
            if text[i] == "by":
                block, i = self.sequence(i + 1, None, True, False, "tactic")
                kids += block
                continue
            if text[i] in CLOSERS and depth == 0:
                break
            depth += (text[i] in OPENERS) - (text[i] in CLOSERS)
            i += 1
        self.open_conditions -= 1
        self.open_ifs += 1
        for keyword in ("then", "else"):
            if i < n and text[i] == keyword:
                block, i = self.sequence(i + 1, None, reading.in_brackets, reading.in_alternative, reading.mode)
                kids += block
        self.open_ifs -= 1
        return kids, i

    def _tactic_list(self, i: int, mode: str) -> tuple[list[Node], int]:
        """The tactics of `[t1; t2; …]` from token i (after the `[`; a `,` between them is read as `;`), and the
        index after the `]`."""
        kids: list[Node] = []
        while i < self.n:
            items, i = self.sequence(i, None, True, False, mode, positional=False)
            kids += items
            if i >= self.n or self.text[i] != ",":
                break
            i += 1
        return kids, i + 1 if i < self.n and self.text[i] == "]" else i

    def _line_ends_tactic(self, reading: _Reading, i: int) -> bool:
        """Whether the line starting at token i ends the tactic: at or left of the block column, unless a `calc`
        step, an infix continuation, or the previous token's required operand goes on there."""
        tokens, text = self.tokens, self.text
        token, block_column = text[i], reading.block_column
        reading.line_column = line_column = tokens[i].column
        calc_step = False
        if reading.depth == 0 and reading.in_calc and text[i - 1] != "calc" and self._calc_step(i):
            lowest = reading.calc_step_column
            if lowest is None:
                first = reading.calc_first_column
                lowest = block_column if first is None else min(block_column, first)
            # At or left of the block column, only a line that starts the way no tactic does: Lean reads a line
            # there that starts with a keyword as the next tactic, and a name cannot be told from one.
            calc_step = line_column >= lowest and (
                line_column > block_column or token in CALC_STEP_STARTS or tokens[i].kind == "number"
            )
            if calc_step and reading.calc_step_column is None:
                reading.calc_step_column = line_column
        if reading.depth or line_column > block_column or calc_step:
            return False
        # Left of the block column Lean has ended the block; at it, only an unfinished tactic or a line starting with
        # an infix continuation goes on.
        if token in BLOCK_ENDING_WORDS:
            return True
        if token in CONTINUATIONS:
            return False
        previous = text[i - 1]
        if line_column < block_column:
            return previous != "calc"
        return not (self._expects_more(i - 1) or (previous == "only" and token == "["))

    def _step(self, reading: _Reading, i: int) -> int | None:
        """Read token i of a tactic: the index to read next, or None where the tactic ends before it."""
        token, n = self.text[i], self.n
        if token in OPENERS:
            if reading.depth == 0 and token == "(" and i + 2 < n and self.text[i + 1] in TACTIC_VALUED_ITEMS:
                if self.text[i + 2] == ":=":
                    kids, i = self.sequence(i + 3, None, True, False, "tactic")
                    reading.children += kids
                    return i + 1 if i < n and self.text[i] == ")" else i
            reading.depth += 1
            return i + 1
        if token in CLOSERS and reading.depth:
            reading.depth -= 1
            return i + 1
        if reading.depth == 0:
            return self._top_level_step(reading, i)
        return self._by_block(reading, i) if token == "by" else i + 1

    def _top_level_step(self, reading: _Reading, i: int) -> int | None:
        """Read token i outside the tactic's brackets, where separators end it and `|`, `=>`, `in` open blocks."""
        token, head, mode = self.text[i], reading.head, reading.mode
        if token == ";" and reading.term_bindings:  # `let x := v; body`: the term's own `;`
            reading.term_bindings -= 1
            return i + 1
        if token == "," and reading.binders:  # `∀ x, p`: the binder's own `,`
            reading.binders -= 1
            return i + 1
        reading.binders += token in BINDER_SYMBOLS
        reading.assigned = reading.assigned or token == ":="
        if (
            (token == ";" and not reading.term)
            or token in INFIX_COMBINATORS
            or token in CLOSERS
            or (reading.in_brackets and token == ",")
            or token in SUFFIX_WORDS
        ):
            return None
        if token in ("then", "else") and not reading.term_ifs:
            if self.open_conditions if token == "then" else self.open_ifs:
                return None  # the tactic `if`'s own keyword: it ends the condition or the branch
        reading.term_ifs += (token == IF_HEAD and i != reading.first) - (token == "else" and reading.term_ifs > 0)
        if token == "|" and self._bar(reading, i):
            if head in BAR_SEQUENCE_HEADS:
                kids, i = self.sequence(i + 1, None, reading.in_brackets, True, mode)
                reading.children += kids
                return i
            if head in ALTERNATIVE_HEADS:
                reading.seen_alternative, reading.in_lambda = True, False
            elif head in TERM_BINDINGS and not reading.assigned:
                reading.in_lambda = True  # `let f : α → β | p => e`: the definition's own alternatives
            elif reading.in_alternative and head not in PATTERN_HEADS:
                return None
        elif (
            token == "=>"
            and not reading.in_lambda
            and (head in ARROW_HEADS or (head in ALTERNATIVE_HEADS and reading.seen_alternative))
        ):
            if head in HOLE_ARROW_HEADS and self._hole(i + 1):  # `| succ n => _`: the goal is left as it is
                return i + 2 if self.text[i + 1] == "_" else i + 3
            arrow_mode = ARROW_HEADS.get(head, "same")
            block_mode = mode if arrow_mode == "same" else arrow_mode
            kids, end = self.sequence(i + 1, None, reading.in_brackets, head in ALTERNATIVE_HEADS, block_mode)
            self.arrow_ends[i] = end
            reading.children += kids
            return end
        elif token == "in" and head in IN_PREFIXES:
            kids, i = self.sequence(i + 1, None, reading.in_brackets, reading.in_alternative, mode)
            reading.children += kids
            return i
        elif token == "with" and head in PRE_TACTIC_HEADS and i + 1 < self.n and self.text[i + 1] != "|":
            # `induction x with tac | …`: the tactic run on every alternative first.
            kids, i = self.sequence(i + 1, None, reading.in_brackets, True, mode)
            reading.children += kids
            return i
        elif token in ("fun", "λ") or (token == "match" and i != reading.first):
            reading.in_lambda = True
        elif token == "calc":
            reading.start_calc(self, i)
        elif token in TERM_BINDINGS and i != reading.first:
            reading.term_bindings += 1
        if token == "by":
            return self._by_block(reading, i)
        return i + 1

    def _by_block(self, reading: _Reading, i: int) -> int:
        """The tactic block of the term `by` at token i: in brackets Lean checks no column; outside them the block is
        indented past the enclosing tactic's line."""
        if reading.depth == 0:
            parent_column = min(reading.block_column, reading.line_column)
            kids, i = self.sequence(i + 1, parent_column, reading.in_brackets, reading.in_alternative, "tactic")
        else:
            kids, i = self.sequence(i + 1, None, True, False, "tactic")
        reading.children += kids
        return i

    def _expects_more(self, j: int) -> bool:
        """Whether token j leaves its tactic unfinished."""
        return self.text[j] in EXPECTS_MORE and (self.text[j], self.text[j - 1] if j else None) not in COMPLETE_ENDINGS

    def _calc_step(self, i: int) -> bool:
        """Whether the line starting at token i reads as a `calc` step (`_ = b := proof` or `a = b := proof`)."""
        tokens, text, n = self.tokens, self.text, self.n
        if text[i] in NOT_CALC_STEP or text[i] in CONTINUATIONS or self._expects_more(i - 1):
            return False
        if text[i] == "_":
            return True
        depth = 0
        j = i
        while j < n and (j == i or not tokens[j].line_start):
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
