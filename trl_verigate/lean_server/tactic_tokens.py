"""The tactic splitter's tokenizer (`Tokens`): a proof body's tokens as parallel lists, for `tactics._Parser`.

Split from `tactics`, which re-exports `CHAR_LITERAL` and `block_comment_end`. It reads just what Lean's layout
rules need: each token's text, span, whether it is a literal, whether it starts a line, and its column.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from functools import cached_property
from itertools import accumulate, chain, compress, repeat
from operator import add, contains, itemgetter, methodcaller, sub

# Lean identifiers: letters (Unicode, incl. Greek and letter-like symbols such as ℕ), `_`, digits after the first
# character, `'`, `!`, `?`, `«escaped»` parts, and dotted components (`Nat.succ_le`, `h.1`). λ is a binder,
# not a letter, so `λx` is two tokens.
_ID_PART = r"(?:«[^»]*»|(?!λ)[^\W\d][\w'!?]*)"  # `«…»` may span lines, as in Lean
# A raw string `r#"…"#` ends at the first `"` followed by as many `#` as it opened with; it comes before identifiers
# so that its `r` is not read as one.
_RAW_STRING = r'r(?P<hashes>#*)".*?(?:"(?P=hashes)|\Z)'
_RAW_STRING_START = re.compile(r'r#*"')
# One character (or escape) between quotes; the precheck reads character literals with the same pattern.
CHAR_LITERAL = r"'(?:\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)|[^'\\\n])'"
# Literals (a raw string, a string, a character literal) match in the group `literal`, so each token's literal flag
# comes out of the same match as the token. A `"` that starts no string (one ending in a lone `\`) is a literal
# token of its own: it starts one to the precheck's lexer, which then finds it unterminated. Brackets, `,` and `;`
# come first: no other alternative starts with them, and bracket-dense proofs are mostly them.
_TOKEN = (
    r"[()\[\]{}⟨⟩,;]"
    rf"|(?P<literal>{_RAW_STRING}"
    r'|"(?:[^"\\]|\\.)*(?:"|\Z)'  # string literal
    rf"|{CHAR_LITERAL}"
    r'|")'
    rf"|{_ID_PART}(?:\.(?:{_ID_PART}|\d+))*"
    r"|0[xXbBoO][0-9a-fA-F_]+|\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?"
    r"|<;>|<\|>|:=|=>|<\||\|>\.|\|>|\|\||->|<->|<-|\.\.\.|\.\."
    r"|(?!--)\S"
)
# Without block comments, one `findall` returns (skipped whitespace and line comments, token, literal, a raw string's
# hashes) for each token of the whole proof. After the skip the next character always starts a token (none starts at
# whitespace or `--`) or the input ends, so nothing is ever skipped over, and the skip is possessive: nothing
# backtracks into it.
# A run of four or more of those single-character tokens (`((((`, `))]),`) is one match (group `run`), cut into one
# token per character in C: a bracket-dense proof is read with a match per run instead of one per bracket.
_TRIVIA_AND_TOKEN_RE = re.compile(rf"((?:\s++|--[^\n]*+)*+)((?P<run>[()\[\]{{}}⟨⟩,;]{{4,}})|{_TOKEN}|\Z)", re.DOTALL)
# A match's groups as `findall` returns them: trivia, token, run, literal (then a raw string's hashes).
_TRIVIA, _TEXT, _RUN, _LITERAL = itemgetter(0), itemgetter(1), itemgetter(2), itemgetter(3)
# Four run characters in a row: a proof without them has no run match (`Tokens` skips looking for one).
_FOUR_RUN = re.compile(r"[()\[\]{}⟨⟩,;]{4}")
# The run characters that open brackets, and those that close them (`Tokens.bracket_runs`).
_OPENING, _CLOSING = "([{⟨", ")]}⟩"
# With block comments (which nest, so no regex can skip them), one anchored match at a time: the skipped prefix,
# then a block comment opening (group 1) or a token (group 2). A line comment only ends at a line break, so
# backtracking into the prefix never yields a token.
_TOKEN_RE = re.compile(rf"(?:\s|--[^\n]*(?=\n|\Z))*(?:(/-)|({_TOKEN}))", re.DOTALL)
_COMMENT_DELIM_RE = re.compile(r"/-|-/")
_NEWLINE_RE = re.compile(r"\n")


class Tokens:
    """The proof's tokens as parallel lists (comments and whitespace dropped), which keeps tokenizing cheap.

    A token's start is `end - len(text)` (its text is `proof[start:end]`): the parser derives the few it needs, and
    the list of all of them (`start`) is built only when asked for.
    """

    def __init__(self, proof: str, start_column: int):
        self.proof, self.start_column = proof, start_column
        self._newlines: list[int] | None = None
        self.text: list[str] = []
        self.end: list[int] = []
        self.literal: list[bool] = []  # a string, char or raw string literal
        self.line_start: list[bool] = []  # first token on its line
        # Token index -> column, for the tokens that start a line (read off the whitespace before them at
        # tokenizing; the layout asks for these columns most); other entries are absent or meaningless.
        self.line_column: dict[int, int] | list[int] = []
        # Index of a run's first token -> index after the run, for the runs (`((((`, `))))`) made of openers only or
        # of closers only, whose depth the parser moves at once (`_cut_runs`).
        self.bracket_runs: dict[int, int] = {}
        if "/-" in proof:
            self._scan_with_block_comments(proof)
        else:
            # Each match is (trivia, token, run, literal, a raw string's hashes); the hashes are part of the token.
            # Every list below is built in C (map over the matches), not by a Python step per token.
            matches = _TRIVIA_AND_TOKEN_RE.findall(proof)
            while matches and not matches[-1][1]:  # the match at the end of the input
                matches.pop()
            trivia = list(map(_TRIVIA, matches))
            self.text = list(map(_TEXT, matches))
            # A literal starts with `"` or `'` (a raw string `r#"…"#` holds a `"`), and a run is four run characters
            # in a row: a proof without them has neither, and the pass over the matches looking for one is skipped.
            quoted = '"' in proof or "'" in proof
            if quoted:
                self.literal = list(map(bool, map(_LITERAL, matches)))
            self.end = list(accumulate(map(add, map(len, trivia), map(len, self.text))))
            self.line_start = list(map(contains, trivia, repeat("\n")))
            # Column = characters after the last line break of the skipped text: mapped over the lines in C.
            skipped = list(compress(trivia, self.line_start))
            columns = map(sub, map(len, skipped), map(add, map(methodcaller("rfind", "\n"), skipped), repeat(1)))
            runs = list(compress(range(len(matches)), map(bool, map(_RUN, matches)))) if _FOUR_RUN.search(proof) else []
            if runs:
                self._cut_runs(runs, quoted)
            if not quoted:
                self.literal = [False] * len(self.text)
            self.line_column = dict(zip(compress(range(len(self.text)), self.line_start), columns, strict=True))
        self.n = len(self.text)

    @cached_property
    def start(self) -> list[int]:
        """Each token's start offset, computed in C from the ends and texts on first use."""
        return list(map(sub, self.end, map(len, self.text)))

    def _cut_runs(self, runs: list[int], cut_literal: bool) -> None:
        """Replace each run token (indices `runs`, in order) by one token per character: a step per run, the
        characters' tokens built in C. Only a run's first character can start a line, and none is a literal: without
        `cut_literal` the caller builds the literal flags (all False) after the cut. Records `bracket_runs`."""
        lists = [self.text, self.end, self.line_start, *([self.literal] if cut_literal else [])]
        pieces: list[list] = [[] for _ in lists]
        kept = added = 0  # `added`: tokens the runs before this one grew by, so `r + added` is its index after the cut
        for r in runs:
            run, end = self.text[r], self.end[r]
            cut = (
                run,
                range(end - len(run) + 1, end + 1),
                chain((self.line_start[r],), repeat(False, len(run) - 1)),
                repeat(False, len(run)),
            )
            for piece, whole, characters in zip(pieces, lists, cut, strict=False):  # `cut` always has the literal flags
                piece.append(whole[kept:r])
                piece.append(characters)
            if not run.strip(_OPENING) or not run.strip(_CLOSING):
                self.bracket_runs[r + added] = r + added + len(run)
            kept, added = r + 1, added + len(run) - 1
        for piece, whole in zip(pieces, lists, strict=True):
            piece.append(whole[kept:])
        self.text, self.end, self.line_start, *literal = (list(chain.from_iterable(piece)) for piece in pieces)
        if cut_literal:
            self.literal = literal[0]

    def _scan_with_block_comments(self, proof: str) -> None:
        texts, ends, literals, line_starts, line_columns = (
            self.text,
            self.end,
            self.literal,
            self.line_start,
            self.line_column,
        )
        match, rfind, n = _TOKEN_RE.match, proof.rfind, len(proof)
        pos = previous_end = 0
        while pos < n:
            m = match(proof, pos)
            if m is None:  # only whitespace and comments remain
                break
            start, end = m.span(2)
            if start < 0:  # a block comment: find its (nested) end and resume after it
                pos = block_comment_end(proof, m.end(1)) or len(proof)
                continue
            texts.append(proof[start:end])
            ends.append(end)
            literals.append(m.start("literal") >= 0)
            newline = rfind("\n", previous_end, start)
            line_starts.append(newline >= 0)
            line_columns.append(start - newline - 1)
            pos = previous_end = end

    def column(self, i: int) -> int:
        """Lean's column of token i: code points from the start of its source line.

        A line's first token has it read off the whitespace before it (`line_column`), the token after that one on
        the same line from that one's; any other by a binary search over the proof's line breaks."""
        line_start, text, ends = self.line_start, self.text, self.end
        if line_start[i]:
            return self.line_column[i]
        start = ends[i] - len(text[i])
        previous = i - 1
        if previous >= 0 and line_start[previous] and "\n" not in text[previous]:
            # Token i follows the line's first token on its line (`· simp`, `case h => simp`): no search needed.
            return self.line_column[previous] + start - (ends[previous] - len(text[previous]))
        if self._newlines is None:
            # Binary search over line breaks keeps this O(log n) even on one very long line.
            self._newlines = [m.start() for m in _NEWLINE_RE.finditer(self.proof)]
        line = bisect_left(self._newlines, start)
        return start - self._newlines[line - 1] - 1 if line else start + self.start_column


class TokenSpans(Sequence):
    """The tokens as `(start, end, literal)` tuples (`ProofLayout.tokens`), the tuples built only on first use.

    The precheck reads these spans only where its lexer's reading may differ from the splitter's (comments,
    literals), and then reads the parallel lists (`starts`, `ends`, `literal`) rather than the tuples: a 1 MB proof
    has up to a million tokens, and most proofs need neither list of tuples nor starts. As a sequence (iteration,
    indexing, `==` with a list, `repr`) it is the list of tuples.
    """

    __hash__ = None  # type: ignore[assignment]  # equal to a list, so unhashable like one

    def __init__(self, tokens: Tokens):
        self._tokens = tokens
        self.ends, self.literal = tokens.end, tokens.literal

    @property
    def starts(self) -> list[int]:
        return self._tokens.start

    def literal_starts_and_ends(self) -> tuple[list[int], list[int]]:
        """The starts and ends of the literal tokens only, without building the list of every token's start."""
        ends = list(compress(self.ends, self.literal))
        return list(map(sub, ends, map(len, compress(self._tokens.text, self.literal)))), ends

    @cached_property
    def _spans(self) -> list[tuple[int, int, bool]]:
        return list(zip(self.starts, self.ends, self.literal, strict=True))

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, index):
        return self._spans[index]

    def __iter__(self):
        return iter(self._spans)

    def __eq__(self, other) -> bool:
        if isinstance(other, TokenSpans):
            return self._spans == other._spans
        return self._spans == other if isinstance(other, list) else NotImplemented

    def __repr__(self) -> str:
        return repr(self._spans)


def block_comment_end(text: str, after_opening: int) -> int | None:
    """The offset just past the `-/` closing the block comment whose `/-` ends at `after_opening` (comments
    nest), or None if it is never closed."""
    depth = 1
    for delim in _COMMENT_DELIM_RE.finditer(text, after_opening):
        depth += 1 if delim.group() == "/-" else -1
        if depth == 0:
            return delim.end()
    return None


def is_literal_text(text: str) -> bool:
    return text[0] == '"' or (text[0] == "'" and len(text) > 1) or _RAW_STRING_START.match(text) is not None
