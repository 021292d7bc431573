"""The precheck's look-alike check after Unicode normalization: whether the token rules must see the normalized code,
and its tokens where they must.

`precheck._check_look_alikes` holds the proof's code (comments and literals blanked, `_code_only`) to the token rules
once more after Unicode normalization (NFKC), in case a toolchain ever normalized. Lexing the normalized text again
doubled the precheck's time on proofs written with `ℝ`, `h₀` or `x²`. Two shortcuts, tried in this order:

* `renamed_alike`: where NFKC only renames or merges identifiers (and renames symbols) that no rule reads by their
  text, the rules cannot refuse the normalized code when they accepted the code, so it is neither lexed nor checked
  again (the argument is in its docstring).
* `normalized_tokens`: most of what NFKC changes is one character for another that the lexer reads the same way
  where it stands (`ℝ` -> `R`, `𝓝` -> `N` in a name, `₀` -> `0` inside a name), so the normalized tokens are the
  code's tokens with their texts translated; around a character read differently (`x²` -> `x2` is one name, not a
  name and a symbol) the whitespace-delimited word is lexed anew. Where neither argument holds, it returns None and
  the caller lexes the whole text.

Why the code's tokens are `code_tokens(view)`: blanking replaces whole comment, string and character tokens by
spaces (line breaks kept), and no other token can take in a space or end differently before one than before the
literal it replaced (a `'` or `r` that starts a literal would have been read into a name before it); the code
inside an interpolated string's braces is blanked with its string.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections.abc import Callable, Iterable
from itertools import compress, filterfalse, repeat
from operator import itemgetter, ne

from trl_verigate.lean_server.code_tokens import CodeTokens
from trl_verigate.lean_server.lexer import (
    _ID_REST,
    PrecheckError,
    Token,
    _new_token,
    is_id_first,
    is_id_rest,
    lex,
    moved,
    split_name,
)

_KIND, _START, _TEXT = itemgetter(0), itemgetter(1), itemgetter(3)
_NOT_ASCII = re.compile(r"[^\x00-\x7f]")
# Letters that the number syntax (`0x1F`, `0b1`, `0o7`, `1e5`) reads after a digit or `0x`, and `r`, which starts a
# raw string (`r"…"`): a character normalized to one of them is read alike only where no ASCII letter or digit
# comes before it.
_NUMBER_LETTERS = frozenset("abcdefABCDEFxXoObBeE")
# Identifier characters that are no identifier start (`is_id_rest` but not `is_id_first`).
_REST_ONLY = "0-9'!?\u2080-\u209c\u1d62-\u1d6a\u2c7c"
# Whitespace as the lexer skips it: no token of a text without the characters `_words_are_tokens_apart` refuses
# spans it, and the lexer starts afresh after it.
_SPACES = " \n\r\t"
_SPACE = re.compile(f"[{_SPACES}]")
# Whitespace to `str.split` that the lexer reads as a symbol.
_OTHER_SPACE = re.compile(rf"[^\S{_SPACES}]")
_ASCII = frozenset(map(chr, range(128)))


def code_tokens(view: CodeTokens) -> list[Token]:
    """`lex(_code_only(text, tokens))` for the `view` of `tokens = lex(text)`: the code tokens outside literals,
    less the string and character literals (see the module docstring)."""
    tokens = view.outside
    if "string" in view.present_kinds or "char" in view.present_kinds:
        tokens = list(compress(tokens, map(ne, map(_KIND, tokens), repeat("string"))))
        tokens = list(compress(tokens, map(ne, map(_KIND, tokens), repeat("char"))))
    return tokens


def non_ascii_words(code: str) -> set[str]:
    """The distinct words of `code` (split at the whitespace the lexer skips) that hold a character outside ASCII."""
    # `str.split` cuts at that whitespace and at other whitespace too, which a proof may not hold (`check_characters`):
    # it is used where there is none, as the quicker of the two.
    words = re.split(f"[{_SPACES}]+", code) if _OTHER_SPACE.search(code) else code.split()
    return set(filterfalse(str.isascii, set(words)))


def _character_changes(code: str, normalized: str) -> dict[str, str] | None:
    """Each character of `code` that NFKC changes, mapped to the one character it becomes, where `normalized` (NFKC of
    `code`) is `code` translated character for character; None where it is not (a character becomes several, or
    NFKC composes: `e` + U+0301 -> `é`)."""
    if len(normalized) != len(code):
        return None
    changed = _changed_characters(set(_NOT_ASCII.findall(code)))
    return changed if changed is not None and code.translate(str.maketrans(changed)) == normalized else None


def _changed_characters(characters: Iterable[str]) -> dict[str, str] | None:
    """Each of `characters` that NFKC changes, mapped to what it becomes alone; None where one becomes several."""
    changed = {}
    for c in characters:
        d = unicodedata.normalize("NFKC", c)
        if d != c:
            if len(d) != 1:
                return None
            changed[c] = d
    return changed


def normalized_tokens(code: str, normalized: str, view: CodeTokens) -> list[Token] | None:
    """`lex(normalized)`, where `normalized` is `code` under NFKC and `view` the `CodeTokens` of the text `code` was
    blanked from; None where this cannot tell it without lexing (then the caller lexes)."""
    changed = _character_changes(code, normalized)
    if changed is None:
        return None
    table = str.maketrans(changed)
    relexed = "".join(c for c, d in changed.items() if not _read_alike(code, c, d))
    tokens = code_tokens(view)
    if relexed:
        if not _words_are_tokens_apart(normalized):
            return None
        tokens = _with_words_relexed(tokens, code, normalized, relexed)
    return _translated(tokens, table)


def _read_alike(code: str, c: str, d: str) -> bool:
    """Whether the lexer reads `d` where `code` has `c` as it reads `c`: both start and continue names alike and
    `d` is no letter the number or raw-string syntax reads (or stands where it cannot), or `c` continues a name
    wherever it stands and `d` does too."""
    if is_id_first(c):
        if not is_id_first(d) or d == "r":
            return False
        return d not in _NUMBER_LETTERS or re.search(f"[0-9A-Za-z]{re.escape(c)}", code) is None
    if is_id_rest(c) and is_id_rest(d):
        # `c` continues a name only inside a run of name characters that starts with a name start: a run starting
        # with a digit or `'` (`1₀`, or `₀` alone) is a number and a symbol, or a symbol, to the lexer.
        c = re.escape(c)
        return re.search(rf"(?<![{_ID_REST}])(?:{c}|[{_REST_ONLY}][{_ID_REST}]*?{c})", code) is None
    return False


def _words_are_tokens_apart(normalized: str) -> bool:
    """Whether no token of `normalized` can span whitespace: no string, comment, escaped name or character literal
    that could hold a space or line break starts in it."""
    return _holds_no_string_comment_or_escape(normalized) and re.search(r"'[ \n\r\t\\]", normalized) is None


def _holds_no_string_comment_or_escape(text: str) -> bool:
    """Whether no string, comment or escaped name starts in `text` (the tokens, besides a character literal, that can
    hold whitespace)."""
    return '"' not in text and "«" not in text and "--" not in text and "/-" not in text


def _with_words_relexed(tokens: list[Token], code: str, normalized: str, relexed: str) -> list[Token]:
    """`tokens` (of `code`) with those of each whitespace-delimited word holding a character of `relexed` replaced
    by the tokens of the word in `normalized`, at the same place (each distinct word lexed once).

    Each word is found from one of its characters, back to the whitespace before it (no further back than the last
    word) and on to the whitespace after it, so no character is passed over twice."""
    starts = list(map(_START, tokens))
    result: list[Token] = []
    lexed: dict[str, list[Token]] = {}
    kept_from = word_end = 0
    for found in re.finditer(f"[{re.escape(relexed)}]", code):
        position = found.start()
        if position < word_end:  # in the word just relexed
            continue
        start = 1 + max(code.rfind(space, word_end, position) for space in _SPACES)
        after = _SPACE.search(code, position)
        word_end = len(code) if after is None else after.start()
        first, after_word = bisect_left(starts, start), bisect_left(starts, word_end)
        result += tokens[kept_from:first]
        text = normalized[start:word_end]
        inner = lexed.get(text)
        if inner is None:
            inner = lexed[text] = lex(text)
        result += moved(inner, start)
        kept_from = after_word
    result += tokens[kept_from:]
    return result


def _translated(tokens: list[Token], table: dict[int, str]) -> list[Token]:
    """`tokens` with each text translated by `table` (and an identifier's components with it)."""
    texts = list(map(_TEXT, tokens))
    translations = _Translations(table)
    new_texts = list(map(translations.__getitem__, texts))
    tokens = list(tokens)
    components_of = translations.components
    for k in compress(range(len(texts)), map(ne, texts, new_texts)):
        kind, start, end, _, components = tokens[k]
        text = new_texts[k]
        if kind == "ident":
            components = components_of.get(text)
            if components is None:
                components = components_of[text] = tuple(split_name(text))
        tokens[k] = _new_token((kind, start, end, text, components))
    return tokens


class _Translations(dict):
    """Text -> its translation, each distinct text translated once; `components` caches a translated name's."""

    def __init__(self, table: dict[int, str]):
        super().__init__()
        self.table = table
        self.components: dict[str, tuple[str, ...]] = {}

    def __missing__(self, text: str) -> str:
        translated = self[text] = text.translate(self.table)
        return translated


# More distinct changed words than this and `renamed_alike` leaves the normalized code to be lexed and checked: each
# word costs two `lex` calls, and a text of many distinct words is cheaper to lex once.
_MAX_CHANGED_WORDS = 2048


def renamed_alike(code: str, words: set[str], inert: Callable[[Token], bool]) -> bool:
    """Whether the token rules accept `lex(NFKC(code))` whenever they accept `lex(code)`, seen from the words NFKC
    changes: True where each changed word's tokens are the code's with `inert` tokens renamed or merged, as below;
    False where this cannot tell (then the caller checks the normalized tokens).

    `inert(token)` is the rules' promise (`token_rules.is_inert`): an identifier or symbol for which it holds is refused
    by no rule on its own, and every rule reads it only through its kind, its span and (an identifier) its number of
    dotted components, never through its text. NFKC works word by word: the whitespace between words (` \n\r\t`) is
    no part of any canonical decomposition and has combining class 0, so nothing composes or reorders across it, and
    NFKC(code) is each word normalized. Where each word normalized is the word translated character for character
    (no character becomes several or whitespace, nothing composes: checked word by word), and no token can span
    whitespace (no string, comment or escaped name starts in either text, and no word read alone holds a character
    literal or a `'` read as a symbol, which next to whitespace could start one), the normalized tokens are the
    code's with each changed word's tokens replaced by those of the word normalized (a `'` inside a name, `h'`, is no
    token of its own). Each such word must read, token by token over the same spans, as
    * the same token;
    * an inert identifier or symbol renamed to an inert one of the same kind and number of components (`ℝ` -> `R`,
      `h₀` -> `h0`, `𝓝` -> `N`): no rule can tell the two apart;
    * an inert identifier followed by inert symbols or identifiers, merged into one inert identifier with as many
      components as the first (`x²` -> `x2`): no rule reads the symbols that vanish, and the merged name stands
      where the first one did. Two of the rules could still read the merged name where the code had none: a
      configuration item or a structure field (`(x² := e)` -> `(x2 := e)`), so no `:` may follow the merged name,
      and a `.ctor` literal (`.x²` -> `.x2`), so no `.` may come right before it.

    `words`: `non_ascii_words(code)`, the only words NFKC can change.
    """
    changed = _changed_characters(set("".join(words)).difference(_ASCII))
    if not changed or any(d in _SPACES for d in changed.values()) or not _holds_no_string_comment_or_escape(code):
        return False
    table = str.maketrans(changed)
    changed_words = []
    for word in words:
        normalized_word = word.translate(table)
        # A composition (`e` + U+0301 -> `é`) or a reordering of marks is no character-for-character translation.
        if unicodedata.normalize("NFKC", word) != normalized_word:
            return False
        if normalized_word != word:
            changed_words.append((word, normalized_word))
    if len(changed_words) > _MAX_CHANGED_WORDS:
        return False
    ending_in_a_merge = set()
    for word, normalized_word in changed_words:
        if not _holds_no_string_comment_or_escape(normalized_word):
            return False
        reading = _word_reading(word, normalized_word, inert)
        if reading is None:
            return False
        if reading == _MERGED_AT_THE_END:
            ending_in_a_merge.add(word)
    # A merge at a word's end is followed by the next word's first token: no `:` may start that word.
    return not ending_in_a_merge or ending_in_a_merge.isdisjoint(_WORD_BEFORE_A_COLON.findall(code))


# A word followed, after whitespace, by a word starting with `:` (possessive, matched from word starts: linear).
# (The whitespace and `:` are looked ahead at, not taken: a word after ` :` may itself be followed by one.)
_WORD_BEFORE_A_COLON = re.compile(rf"(?<![^{_SPACES}])([^{_SPACES}]++)(?=[{_SPACES}]++:)")
_MERGED_AT_THE_END = "merged at the end"


def _word_reading(word: str, normalized_word: str, inert: Callable[[Token], bool]) -> str | None:
    """How `normalized_word`'s tokens relate to `word`'s (see `renamed_alike`): "alike", `_MERGED_AT_THE_END` (alike,
    with a merge as the last token), or None (not shown to be read alike)."""
    try:
        ours, theirs = lex(word), lex(normalized_word)
    except PrecheckError:
        return None
    if any(token.kind == "char" or token.text == "'" for token in (*ours, *theirs)):
        return None
    i, reading = 0, "alike"
    for token in theirs:
        # The code's tokens over `token`'s span: they must start where it starts and end where it ends.
        if i >= len(ours) or ours[i].start != token.start:
            return None
        j = i + 1
        while j < len(ours) and ours[j].end <= token.end:
            j += 1
        if ours[j - 1].end != token.end:
            return None
        first = ours[i]
        if j == i + 1:
            if first != token and not (
                first.kind == token.kind
                and len(first.components) == len(token.components)
                and inert(first)
                and inert(token)
            ):
                return None
        else:
            if not (
                token.kind == "ident"
                and first.kind == "ident"
                and len(first.components) == len(token.components)
                and inert(token)
                and all(map(inert, ours[i:j]))
                and all(t.kind in ("ident", "symbol") for t in ours[i:j])
                and (i == 0 or ours[i - 1].text != ".")
            ):
                return None
            if j < len(ours) and ours[j].text == ":":
                return None
            reading = _MERGED_AT_THE_END if j == len(ours) else "alike"
        i = j
    return reading if i == len(ours) else None
