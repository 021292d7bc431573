"""`CodeTokens`: a proof's tokens as the precheck's checks read them, each derived list computed once per proof.

A 1 MB proof has up to a million tokens, and the precheck's checks (precheck.py, config_values.py,
local_definitions.py) each used to walk all of them in Python, filtering comments and literals and matching brackets
again for themselves. Here every derived list is computed once (on first use; the kinds with the comment filter
that reads them anyway), and mostly in C (`map`, `compress` over the tokens' fields), so a check can find the few
tokens it cares about (a `(` opening `(NAME :=`, an `open`, a forbidden word) without a Python step per token, read
the fields around them in C (`values_at`, `tokens_at`), and run its own rule in Python on just the few left.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from itertools import accumulate, compress, repeat
from operator import add, eq, itemgetter, ne

from trl_verigate.lean_server.layout_words import CLOSERS, OPENERS
from trl_verigate.lean_server.lexer import EnclosingOpeners, Token

_KIND, _START, _END, _TEXT = itemgetter(0), itemgetter(1), itemgetter(2), itemgetter(3)
BRACKETS = OPENERS | CLOSERS
# +1 for an opener, -1 for a closer: a running sum over tokens is the bracket depth after each.
_DEPTH_CHANGE = {**dict.fromkeys(OPENERS, 1), **dict.fromkeys(CLOSERS, -1)}


# The texts the checks find by index through `CodeTokens.indices_of`: the token checks' watched words and symbols
# (`token_rules.check_tokens`: `#`, `@`, `+`, `set_option`, `where`, `rec`, `eval`), `:` (where configuration items
# start, `config_values`) and the prefixes `open`/`set_option` (`precheck._check_scoped_prefixes`). One pass over a
# proof's texts finds them all, and each check filters that list instead of passing over every token again (three to
# five passes of ~0.035 s each on a proof of 500,000 tokens). A set with a text not listed here is found by a full
# pass, so this list only decides speed, never a result.
INDEXED_TEXTS = frozenset({"#", "@", "+", ":", "open", "set_option", "where", "rec", "eval"})


def indices_of(texts: list[str], wanted) -> list[int]:
    """The indices of the texts in `wanted` (a set, or one str), in order: one C pass over `texts`, after a test in C
    for any of them, which stops at the first (most proofs have none of most wanted texts, and numbering every text,
    `compress(range(…))`, costs more than testing it)."""
    if isinstance(wanted, str):
        if wanted not in texts:
            return []
        return list(compress(range(len(texts)), map(eq, texts, repeat(wanted))))
    if wanted.isdisjoint(texts):
        return []
    return list(compress(range(len(texts)), map(wanted.__contains__, texts)))


# Above this many list items per index, `values_at` adds the offset to each index (an int object each, ~40 ns) rather
# than shifting a copy of the whole list (~1 ns per item) and gathering with one `itemgetter`.
_ITEMS_PER_INDEX_TO_SHIFT = 32


def values_at(items: list, indices: list[int], offset: int = 0) -> Sequence:
    """`[items[i + offset] for i in indices]`, gathered in C; every `i + offset` must lie in `range(len(items))`.

    For a list of few distinct objects (texts, kinds): a shifted copy of the list only copies references to objects
    that stay in the cache. A list of tokens, a million objects apart in memory, takes ~10 ns per token to copy:
    gather from it with `tokens_at`."""
    if len(indices) < 2:
        return [items[i + offset] for i in indices]
    if offset and len(items) > _ITEMS_PER_INDEX_TO_SHIFT * len(indices):
        return list(map(items.__getitem__, map(add, indices, repeat(offset))))
    shifted = items if not offset else items[offset:] if offset > 0 else [None] * -offset + items
    return itemgetter(*indices)(shifted)


def tokens_at(tokens: list[Token], indices: list[int], offset: int = 0) -> list[Token]:
    """`[tokens[i + offset] for i in indices]`, gathered in C by index (see `values_at`)."""
    return list(map(tokens.__getitem__, map(add, indices, repeat(offset)) if offset else indices))


def outside_literals(code: list[Token]) -> list[Token]:
    """`code` less the tokens lexed from inside string literals (interpolation segments)."""
    kept: list[Token] = []
    literal_end = 0
    for token in code:
        if token.start < literal_end:
            continue
        if token.kind == "string":
            literal_end = token.end
        kept.append(token)
    return kept


def matching_closers(code: list[Token]) -> dict[int, int]:
    """Index of each opening bracket's matching closer, for the brackets that are closed."""
    return closers_in(list(map(_TEXT, code)))


def closers_in(texts: list[str]) -> dict[int, int]:
    """`matching_closers` of the tokens with these texts: a closer closes the nearest open bracket of any kind."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for k in indices_of(texts, BRACKETS):
        if texts[k] in OPENERS:
            stack.append(k)
        elif stack:
            pairs[stack.pop()] = k
    return pairs


class CodeTokens:
    """The tokens of one text (comments included, as `lex` returns them), and what the checks derive from them.

    A text is always a bracket (`(`, `⟨`, …), `:`, `=`, … only as a symbol token of that text: no identifier, number,
    literal or comment has a one-character text of those, so a check may find symbols by their text alone.
    """

    def __init__(self, tokens: list[Token], has_comments: bool = True):
        self.tokens = tokens
        self.code = tokens
        if has_comments:
            # The kinds are read once, to find the comments and to be `kinds`: each read of a token's field costs
            # more than the rest of a pass (a million tokens lie far apart in memory).
            kinds = list(map(_KIND, tokens))
            present = set(kinds)
            if "comment" in present:
                is_code = list(map(ne, kinds, repeat("comment")))
                self.code = list(compress(tokens, is_code))
                kinds = list(compress(kinds, is_code))
                present.discard("comment")
            self.kinds, self.present_kinds = kinds, frozenset(present)

    @cached_property
    def texts(self) -> list[str]:
        """The code tokens' texts."""
        return list(map(_TEXT, self.code))

    @cached_property
    def kinds(self) -> list[str]:
        """The code tokens' kinds (set by `__init__` where it looks for comments)."""
        return list(map(_KIND, self.code))

    @cached_property
    def present_kinds(self) -> frozenset[str]:
        """The kinds of the code tokens, each once (set by `__init__` where it looks for comments): `KIND in
        present_kinds` is one lookup, where `KIND in kinds` compares KIND with every kind until it finds it."""
        return frozenset(self.kinds)

    @cached_property
    def enclosing(self) -> EnclosingOpeners:
        """`lexer.enclosing_openers(code)`."""
        return EnclosingOpeners(self.code)

    @cached_property
    def outside(self) -> list[Token]:
        """`outside_literals(code)`: the code tokens not lexed from inside a string literal (the code in an
        interpolated string's `{…}`); `code` itself when there are none."""
        if "string" not in self.present_kinds:
            return self.code
        kept = outside_literals(self.code)
        return self.code if len(kept) == len(self.code) else kept

    @property
    def has_inner_tokens(self) -> bool:
        """Whether a code token was lexed from inside a string literal."""
        return self.outside is not self.code

    @cached_property
    def outside_texts(self) -> list[str]:
        return list(map(_TEXT, self.outside)) if self.has_inner_tokens else self.texts

    @cached_property
    def outside_kinds(self) -> list[str]:
        return list(map(_KIND, self.outside)) if self.has_inner_tokens else self.kinds

    @cached_property
    def _indexed(self) -> list[int]:
        return indices_of(self.texts, INDEXED_TEXTS)

    @cached_property
    def _indexed_outside(self) -> list[int]:
        return indices_of(self.outside_texts, INDEXED_TEXTS) if self.has_inner_tokens else self._indexed

    def indices_of(self, wanted, outside: bool = False) -> list[int]:
        """`indices_of(texts, wanted)` for `texts` (`outside_texts` with `outside`): where every wanted text is one of
        `INDEXED_TEXTS`, the indices of those found in one pass, filtered (in C) to the wanted ones."""
        texts = self.outside_texts if outside else self.texts
        if not (wanted in INDEXED_TEXTS if isinstance(wanted, str) else wanted <= INDEXED_TEXTS):
            return indices_of(texts, wanted)
        indexed = self._indexed_outside if outside else self._indexed
        found = values_at(texts, indexed)
        if isinstance(wanted, str):
            return (
                indexed[:]
                if found.count(wanted) == len(indexed)
                else list(compress(indexed, map(eq, found, repeat(wanted))))
            )
        return list(compress(indexed, map(wanted.__contains__, found)))

    @cached_property
    def closers_of_outside(self) -> dict[int, int]:
        """`matching_closers(outside)`: the index in `outside` of each opening bracket's matching closer."""
        return closers_in(self.outside_texts)


def depth_after(texts: list[str]) -> list[int]:
    """The bracket depth after each of `texts` (closers not matched by an opener take it below 0), summed in C."""
    return list(accumulate(map(_DEPTH_CHANGE.get, texts, repeat(0))))
