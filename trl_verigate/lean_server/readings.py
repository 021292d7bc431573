"""Whether the precheck's lexer and the tactic splitter read a proof the same way, and whether tokens lie in spans.

Split from `precheck`, whose `_check_block` trusts the splitter's tactic spans only where both tokenizers agree on
what is code, literal and comment (`lexers_disagree_at`), and then asks whether every code token lies in one of
those spans (`all_inside`). Both decide in C over whole token lists where the lists allow it, and fall back to a
walk over the tokens otherwise.
"""

from __future__ import annotations

import bisect
import re
from itertools import compress, islice, repeat
from operator import attrgetter, ge, itemgetter, le, ne, not_, sub

from trl_verigate.lean_server.code_tokens import CodeTokens
from trl_verigate.lean_server.lexer import Token
from trl_verigate.lean_server.tactic_tokens import TokenSpans
from trl_verigate.lean_server.types import Tactic

_KIND, _START, _END = itemgetter(0), itemgetter(1), itemgetter(2)
_FIRST, _SECOND, _THIRD = itemgetter(0), itemgetter(1), itemgetter(2)
_LITERAL_KINDS = frozenset({"string", "char"})
_SPAN_START, _SPAN_END = attrgetter("start"), attrgetter("end")


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


def all_inside(offsets: list[int], spans: list[Tactic]) -> bool:
    """Whether every offset (sorted) lies in one of the spans, decided by counting the offsets in each span (two
    binary searches per span, in C) when the spans are in order without overlap; False also where they are not."""
    starts, ends = list(map(_SPAN_START, spans)), list(map(_SPAN_END, spans))
    if not (
        all(map(le, starts, ends))
        and _in_order_without_overlap(starts, ends)
        and all(map(le, offsets, islice(offsets, 1, None)))
    ):
        return False
    inside = sum(
        map(sub, map(bisect.bisect_left, repeat(offsets), ends), map(bisect.bisect_left, repeat(offsets), starts))
    )
    return inside == len(offsets)


def _runs_and_literals(starts: list[int], ends: list[int], literal: list[bool]) -> tuple[list[int], ...]:
    """`_reading` of tokens in text order that do not overlap, computed in C: the starts and ends of its code runs
    (a run ends where the next code token does not start at its end) and of its literals."""
    if any(literal):
        code_starts = list(compress(starts, map(not_, literal)))
        code_ends = list(compress(ends, map(not_, literal)))
        literals = (list(compress(starts, literal)), list(compress(ends, literal)))
    else:
        code_starts, code_ends, literals = starts, ends, ([], [])
    breaks = list(map(ne, code_starts[1:], code_ends))  # between code token i and i + 1: a new run starts
    return (
        code_starts[:1] + list(compress(code_starts[1:], breaks)),
        list(compress(code_ends, breaks)) + code_ends[-1:],
        *literals,
    )


def _literal_flags(splitter_tokens) -> list[bool]:
    """Each of the splitter's tokens' literal flag: `TokenSpans`' own list, or read off a list's tuples."""
    if isinstance(splitter_tokens, TokenSpans):
        return splitter_tokens.literal
    return list(map(_THIRD, splitter_tokens))


def _starts_and_ends(splitter_tokens) -> tuple[list[int], list[int]]:
    """The splitter's tokens' starts and ends: `TokenSpans`' own lists, or read off a list's tuples."""
    if isinstance(splitter_tokens, TokenSpans):
        return splitter_tokens.starts, splitter_tokens.ends
    return list(map(_FIRST, splitter_tokens)), list(map(_SECOND, splitter_tokens))


def _literal_starts_and_ends(splitter_tokens) -> tuple[list[int], list[int]]:
    """The starts and ends of the splitter's literal tokens: from `TokenSpans`' lists, or read off a list's tuples."""
    if isinstance(splitter_tokens, TokenSpans):
        return splitter_tokens.literal_starts_and_ends()
    literals = list(compress(splitter_tokens, map(_THIRD, splitter_tokens)))
    return list(map(_FIRST, literals)), list(map(_SECOND, literals))


def _in_order_without_overlap(starts: list[int], ends: list[int]) -> bool:
    """Whether the tokens are in text order and none starts before the one before it ends (so none lies inside a
    literal before it, which `_reading` would drop)."""
    return all(map(le, starts, starts[1:])) and all(map(ge, starts[1:], ends))


def _same_reading(view: CodeTokens, splitter_tokens) -> bool:
    """Whether `_reading` of the precheck's tokens and of the splitter's is the same, decided in C where both token
    lists are in text order without overlaps (a token inside a literal is dropped by `_reading`, so none may be
    left after `view.outside` drops the interpolated strings' code). False means: compare them the slow way."""
    if view.has_inner_tokens:  # `view.outside` drops them: the order they were in still decides what `_reading` drops
        starts = list(map(_START, view.code))
        if not all(map(le, starts, starts[1:])):
            return False
    ours = view.outside
    our_starts, our_ends = list(map(_START, ours)), list(map(_END, ours))
    their_starts, their_ends = _starts_and_ends(splitter_tokens)
    if not (_in_order_without_overlap(our_starts, our_ends) and _in_order_without_overlap(their_starts, their_ends)):
        return False
    our_literals = list(map(_LITERAL_KINDS.__contains__, map(_KIND, ours)))
    their_literals = _literal_flags(splitter_tokens)
    return _runs_and_literals(our_starts, our_ends, our_literals) == _runs_and_literals(
        their_starts, their_ends, their_literals
    )


# Whitespace to the splitter (`\\s`) that the lexer reads as a symbol.
_OTHER_SPACE = re.compile(r"[^\S \n\r\t]")


def read_alike_without_comments(text: str, view: CodeTokens, splitter_tokens) -> bool:
    """Whether `lexers_disagree_at` would find no disagreement, decided without comparing the code tokens: true where
    neither reading has a comment and both read the same literals.

    Both scans cover every character of the text other than whitespace with exactly one token, in text order:
    the lexer's pattern skips ` \\n\\r\\t` and reads any other character as (part of) a token, the splitter's skips
    whitespace (`\\s`) and `--` comments and does the same. Without comments in either (no `--` or `/-` in the text,
    which is all that starts one to either), without a whitespace character one skips and the other reads
    (`_OTHER_SPACE`), and with the same literal spans, both code runs are the runs of the non-whitespace characters
    outside those literals (code the lexer reads inside a literal's braces is part of the literal to both readings).
    False means: compare the tokens. `view`: the lexer's tokens of `text`, comments included (a view without comment
    tokens has `code is tokens`); `splitter_tokens`: `ProofLayout.tokens` (or a list of its tuples).
    """
    if not (view.code is view.tokens and "--" not in text and "/-" not in text and _OTHER_SPACE.search(text) is None):
        return False
    if "string" not in view.present_kinds and "char" not in view.present_kinds:
        # Every literal of the splitter's starts with a quote (`"…"`, `r#"…"#`, `'c'`): without one, it has none.
        return ('"' not in text and "'" not in text) or not any(_literal_flags(splitter_tokens))
    ours = view.outside
    ours = list(compress(ours, map(_LITERAL_KINDS.__contains__, map(_KIND, ours))))
    their_starts, their_ends = _literal_starts_and_ends(splitter_tokens)
    return list(map(_START, ours)) == their_starts and list(map(_END, ours)) == their_ends


def lexers_disagree_at(tokens: list[Token], splitter_tokens, view: CodeTokens | None = None) -> int | None:
    """The first offset where the precheck's tokens and the splitter's differ on what is code, literal or comment.

    `_check_block` trusts the splitter's spans only if both read the same code: otherwise text one of them takes
    for a string or comment could hold the line that, to Lean, ends the `by` block. `view`: `tokens`' `CodeTokens`.
    """
    view = CodeTokens(tokens) if view is None else view
    if _same_reading(view, splitter_tokens):
        return None
    ours = _reading(
        (t.start, t.end, t.kind in ("string", "char"))
        for t in sorted(tokens, key=attrgetter("start"))
        if t.kind != "comment"
    )
    theirs = _reading(splitter_tokens)
    if ours == theirs:
        return None
    differences = [set(a).symmetric_difference(b) for a, b in zip(ours, theirs, strict=True)]
    return min(start for difference in differences for start, _ in difference)
