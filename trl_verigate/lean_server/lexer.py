"""The precheck's lexer: Lean's tokenizer as far as the precheck needs it, and the error every check raises.

It lexes the way Lean's tokenizer does (nested `/- -/` comments, `--` comments, strings, raw strings `r#"…"#`,
character literals, `«escaped»` identifiers, identifier characters from `Lean.isIdFirst`/`isIdRest`), so a keyword
inside a comment or string is not a false positive. Where it and Lean could disagree (an unterminated comment or
string, a character literal holding `"` glued to a symbol such as `∑'`, unpaired braces in a string literal) it
raises `PrecheckError`: Lean would fail on the first two anyway. Braces in a string are code in an interpolated
string (`s!"{…}"`, `dbg_trace "{…}"`), which depends on what precedes the literal, so the code between paired braces
is lexed too and checked like the rest of the proof. A `'` that starts no character literal is read as a symbol
(`∑'`, `∏'`, `⁻¹'`, `''` are Mathlib notation): a literal holds one character, so no reading of it can hide a word.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial
from itertools import repeat
from operator import add, itemgetter
from typing import NamedTuple

from trl_verigate.lean_server import tactics as tactic_split
from trl_verigate.lean_server.gc_pause import gc_paused

_CHAR_LITERAL = re.compile(tactic_split.CHAR_LITERAL, re.DOTALL)
# Matched at an offset (`pattern.match(text, i)`), never on `text[i:]`: a slice per token copies the rest of the
# text, which makes lexing quadratic.
_RAW_STRING_START = re.compile(r'r(#*)"')
# Lean's `isLetterLike` (`_is_letter_like`), `isIdFirst` and `isIdRest` as character classes.
_LETTER_LIKE = (
    "\u03b1-\u03ba\u03bc-\u03c9"  # α-ω except λ
    "\u0391-\u039f\u03a1\u03a2\u03a4-\u03a9"  # Α-Ω except Π, Σ
    "\u03ca-\u03fb"  # Coptic
    "\u1f00-\u1ffe"  # Polytonic Greek
    "\u2100-\u214f"  # Letter-like block
    "\U0001d49c-\U0001d59f"  # Latin script letters
    "\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u00ff"  # Latin-1 letters except × and ÷
    "\u0100-\u017f"  # Latin Extended-A
)
_ID_FIRST = "a-zA-Z_" + _LETTER_LIKE
_ID_REST = _ID_FIRST + "0-9'!?\u2080-\u209c\u1d62-\u1d6a\u2c7c"
_ID_PART = rf"(?:«[^»]*»|[{_ID_FIRST}][{_ID_REST}]*)"
# Optional parts as an alternative with the empty string: `(?:…)?` runs through `re`'s general repeat, which is slower.
_NUMBER = r"0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|[0-9]+(?:\.[0-9]+|)(?:[eE][+-]?[0-9]+|)"
# A character read as a one-character symbol wherever a token starts: anything but whitespace, a digit, an
# identifier's first character, `«`, a quote, or a `-`/`/` (which may start a comment). One right after a token is
# the next token (an identifier or number is read greedily, so it ends before it), so one match may read it with the
# token it touches (`h₀,`, `(m`, `[h]`, `:=`, `x²`): the tokens are those that separate matches would read. A run of
# four or more (`((((`, `))]),`) is one match, turned into one symbol token per character in C (for a shorter run
# building the tokens one by one is quicker).
_SYMBOL_CHARACTER = rf"""[^ \n\r\t0-9«\-/"'{_ID_FIRST}]"""
# An identifier: dotted parts, `«escaped»` ones included. Possessive: nothing after it in `_NEXT_TOKEN` can fail, so
# giving back a part would never make a match, and the quantifier that cannot give one back is quicker. It is no
# raw string start (`r"`, `r#"`), which Lean reads first.
_NAME = rf"""(?!r#*"){_ID_PART}(?:\.{_ID_PART})*+"""


def _glued_symbol(group: str) -> str:
    """The `_SYMBOL_CHARACTER` right after the token before it, in `group`, or nothing. An empty alternative rather
    than `?`: `re` runs an optional group through its general repeat, which is slower."""
    return rf"(?:(?P<{group}>{_SYMBOL_CHARACTER})|)"


# The next token after whitespace, as Lean's tokenizer reads it:
# - an identifier (`ident`), or a number (`number`), each with the symbol character right after it if any
#   (`…_glued`);
# - a symbol character (`lead`) alone, or with the identifier or number right after it or after one space (`(m`,
#   `: ℝ`, `^ 10`, `· simp`: `lead_ident`, `lead_number`, each with the symbol character after that if any), or with
#   the symbol character after it (`pair`) and then, in a run of four or more, the rest of the run (`symbols`) or the
#   name right after it or after one space (`:= by`, `:= a)`: `pair_ident`, with the symbol character after that if
#   any);
# - a line comment; a string literal without escapes whose braces, if any, pair up around text without braces
#   (`string`, `interpolated`: the code in its braces is lexed after it); another comment, literal, `'` (`special`,
#   lexed by `_lex_special`);
# - an unterminated `«` (`unterminated`, an error), or a `-` or `/` that starts no comment (`symbol`, the catch-all).
# Two alternatives start alike only at a raw string start (`r"`, which `_NAME` excludes), at `«` (an identifier's if
# it can be, `unterminated` after) and in the catch-all `symbol` (last), so the order is otherwise free: it goes from
# the most frequent in proofs to the rarest, with the comment and literal starts behind one lookahead, since every
# alternative `re` enters costs time. Each matches at its start or not at all, and the whitespace is skipped
# possessively, so nothing backtracks past the token.
# At the end of the text, after any trailing whitespace, the empty `end` matches: without it the scan searched on
# from every trailing whitespace character, each search skipping the rest of it (quadratic in trailing whitespace).
_NEXT_TOKEN = re.compile(
    r"[ \n\r\t]*+(?:"
    rf"(?P<ident>{_NAME}){_glued_symbol('ident_glued')}"
    rf"|(?P<lead>{_SYMBOL_CHARACTER})(?:"
    rf" ?+(?P<lead_ident>{_NAME}){_glued_symbol('lead_ident_glued')}"
    rf"| ?+(?P<lead_number>{_NUMBER}){_glued_symbol('lead_number_glued')}"
    rf"|(?P<pair>{_SYMBOL_CHARACTER})(?:(?P<symbols>{_SYMBOL_CHARACTER}{{2,}})"
    rf"| ?+(?P<pair_ident>{_NAME}){_glued_symbol('pair_ident_glued')}|)"
    r"|)"
    rf"|(?P<number>{_NUMBER}){_glued_symbol('number_glued')}"
    r"""|(?=[-"/r'])(?:"""
    r"(?P<line_comment>--[^\n]*+)"
    r'|(?P<string>"[^"\\{}]*+")'
    r'|(?P<interpolated>"(?:[^"\\{}]|\{[^"\\{}]*\})*+")'
    r"""|(?P<special>/-|r#*"|["'])"""
    r")"
    r"|(?P<unterminated>«)"
    r"|(?P<symbol>[^ \n\r\t])"
    r"|(?P<end>\Z)"
    r")",
    re.DOTALL,
)
(
    _LINE_COMMENT,
    _STRING,
    _INTERPOLATED,
    _IDENT,
    _IDENT_GLUED,
    _NUMBER_GROUP,
    _NUMBER_GLUED,
    _SYMBOLS,
    _LEAD,
    _LEAD_IDENT,
    _LEAD_IDENT_GLUED,
    _LEAD_NUMBER,
    _LEAD_NUMBER_GLUED,
    _PAIR,
    _SYMBOL,
    _END,
    _PAIR_IDENT,
    _PAIR_IDENT_GLUED,
) = (
    _NEXT_TOKEN.groupindex[name]
    for name in (
        "line_comment",
        "string",
        "interpolated",
        "ident",
        "ident_glued",
        "number",
        "number_glued",
        "symbols",
        "lead",
        "lead_ident",
        "lead_ident_glued",
        "lead_number",
        "lead_number_glued",
        "pair",
        "symbol",
        "end",
        "pair_ident",
        "pair_ident_glued",
    )
)
# A character that may start a comment, a literal or the `'`/`«` tokens `_lex_special` reads: a segment of an
# interpolated string without one is lexed in place.
_PLAIN_SEGMENT = re.compile(r"""[-/"'«]""")
# A `{…}` pair in a string literal whose braces pair up around text without braces; `name` where its inside is one
# identifier without `«` (`{x}`, `{h.le}`), the one token `_lex` would read there.
_BRACE_PAIR = re.compile(
    r"\{(?:(?P<name>" + rf"[{_ID_FIRST}][{_ID_REST}]*+(?:\.[{_ID_FIRST}][{_ID_REST}]*+)*+" + r")\}|[^{}]*\})"
)
_BRACE_PAIR_NAME = _BRACE_PAIR.groupindex["name"]
# What ends a run of plain characters in a string literal: its end, an escape, or a brace.
_STRING_STOP = re.compile(r'["\\{}]')


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
        line, column = position(source, self.offset)
        return f"{self.before} at line {line}, column {column}{self.after}"

    def __str__(self) -> str:
        where = "" if self.offset is None else f" at offset {self.offset}"
        return f"{self.before}{where}{self.after}"


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


def is_id_first(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z") or c == "_" or _is_letter_like(c)


def is_id_rest(c: str) -> bool:
    v = ord(c)
    return (
        is_id_first(c) or "0" <= c <= "9" or c in "'!?" or 0x2080 <= v <= 0x209C or 0x1D62 <= v <= 0x1D6A or v == 0x2C7C
    )


class Token(NamedTuple):
    """One token; a NamedTuple because a proof of 1 MB has some 300,000 of them, and a tuple is quick to build."""

    kind: str  # ident | symbol | number | string | char | comment
    start: int
    end: int
    text: str
    # An identifier's dotted name components, guillemets removed (`Lean.«ofReduceBool»` -> 2 parts); empty for
    # other kinds. Split once at lexing: every check that reads a name reads these.
    components: tuple[str, ...] = ()


# `Token(...)` from a tuple of its fields, callable from C (`map(_new_token, …)`).
_new_token = partial(tuple.__new__, Token)
# A token's fields by position (`_END` is taken: the `end` group of `_NEXT_TOKEN`).
_KIND_OF, _START_OF, _END_OF, _TEXT_OF, _COMPONENTS_OF = (itemgetter(i) for i in range(5))


def moved(tokens: list[Token], by: int) -> Iterator[Token]:
    """`tokens` with their offsets moved by `by` (the tokens of a slice of a text placed back in it, or the reverse),
    built in C."""
    starts, ends = map(add, map(_START_OF, tokens), repeat(by)), map(add, map(_END_OF, tokens), repeat(by))
    fields = zip(map(_KIND_OF, tokens), starts, ends, map(_TEXT_OF, tokens), map(_COMPONENTS_OF, tokens), strict=True)
    return map(_new_token, fields)


def split_name(text: str) -> list[str]:
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


def position(text: str, offset: int) -> tuple[int, int]:
    """(1-based line, 0-based column) of a char offset, Lean's convention."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1)


def lex(text: str) -> list[Token]:
    """Tokens of `text` as Lean's tokenizer splits them; raises PrecheckError where Lean's lexing is unclear."""
    with gc_paused():  # see gc_pause.py: a million tracked tokens make each full collection slow
        return _lex(text)


def _lex(text: str, tokens: list[Token] | None = None, i: int = 0, n: int | None = None) -> list[Token]:
    """The tokens of `text`, appended to `tokens`; with `i` and `n`, of `text[i:n]` at their offsets in `text`, which
    must then hold no character that starts a comment or literal (`_PLAIN_SEGMENT`): `_lex_special` reads to the end
    of `text`, not to `n`."""
    tokens = [] if tokens is None else tokens
    # Built with `tuple.__new__`, as `Token(...)` would, without a Python-level call per token.
    append, new, n = tokens.append, tuple.__new__, len(text) if n is None else n
    components_of = _ComponentsByName()
    while True:
        # Consecutive matches, each of one token or of a symbol character and the tokens it touches; a comment or
        # literal that the pattern cannot read whole is lexed by `_lex_special` and the scan resumes after it. At the
        # end of the text `end` matches and the scan ends. The group that matched last (`lastindex`) tells what was
        # read; the branches go from the most frequent in proofs to the rarest. Groups are read by number and with
        # `found[g]`, quicker than by name and with `found.group(g)`. The tokens of a match are placed from where it
        # ends (`found.end()`; a glued symbol is its last character) and where its token or leading symbol starts.
        for found in _NEXT_TOKEN.finditer(text, i, n):
            group = found.lastindex
            if group == _IDENT:
                name = found[group]
                append(new(Token, ("ident", found.start(group), found.end(), name, components_of[name])))
            elif group == _LEAD_IDENT:
                start, name, end = found.start(_LEAD), found[group], found.end()
                append(new(Token, ("symbol", start, start + 1, found[_LEAD], ())))
                append(new(Token, ("ident", end - len(name), end, name, components_of[name])))
            elif group == _IDENT_GLUED:
                name, end = found[_IDENT], found.end() - 1
                append(new(Token, ("ident", found.start(_IDENT), end, name, components_of[name])))
                append(new(Token, ("symbol", end, end + 1, found[group], ())))
            elif group == _LEAD_IDENT_GLUED:
                start, name, end = found.start(_LEAD), found[_LEAD_IDENT], found.end() - 1
                append(new(Token, ("symbol", start, start + 1, found[_LEAD], ())))
                append(new(Token, ("ident", end - len(name), end, name, components_of[name])))
                append(new(Token, ("symbol", end, end + 1, found[group], ())))
            elif group == _LEAD:
                end = found.end()
                append(new(Token, ("symbol", end - 1, end, found[group], ())))
            elif group == _LEAD_NUMBER:
                start, number, end = found.start(_LEAD), found[group], found.end()
                append(new(Token, ("symbol", start, start + 1, found[_LEAD], ())))
                append(new(Token, ("number", end - len(number), end, number, ())))
            elif group == _PAIR_IDENT:
                start, name, end = found.start(_LEAD), found[group], found.end()
                append(new(Token, ("symbol", start, start + 1, found[_LEAD], ())))
                append(new(Token, ("symbol", start + 1, start + 2, found[_PAIR], ())))
                append(new(Token, ("ident", end - len(name), end, name, components_of[name])))
            elif group == _PAIR:
                end = found.end()
                append(new(Token, ("symbol", end - 2, end - 1, found[_LEAD], ())))
                append(new(Token, ("symbol", end - 1, end, found[group], ())))
            elif group == _NUMBER_GLUED:
                end = found.end() - 1
                append(new(Token, ("number", found.start(_NUMBER_GROUP), end, found[_NUMBER_GROUP], ())))
                append(new(Token, ("symbol", end, end + 1, found[group], ())))
            elif group == _NUMBER_GROUP:
                append(new(Token, ("number", found.start(group), found.end(), found[group], ())))
            elif group == _SYMBOL:  # `-` or `/` starting no comment
                end = found.end()
                append(new(Token, ("symbol", end - 1, end, found[group], ())))
            elif group == _PAIR_IDENT_GLUED:
                start, name, end = found.start(_LEAD), found[_PAIR_IDENT], found.end() - 1
                append(new(Token, ("symbol", start, start + 1, found[_LEAD], ())))
                append(new(Token, ("symbol", start + 1, start + 2, found[_PAIR], ())))
                append(new(Token, ("ident", end - len(name), end, name, components_of[name])))
                append(new(Token, ("symbol", end, end + 1, found[group], ())))
            elif group == _LEAD_NUMBER_GLUED:
                start, number, end = found.start(_LEAD), found[_LEAD_NUMBER], found.end() - 1
                append(new(Token, ("symbol", start, start + 1, found[_LEAD], ())))
                append(new(Token, ("number", end - len(number), end, number, ())))
                append(new(Token, ("symbol", end, end + 1, found[group], ())))
            elif group == _SYMBOLS:
                # One token per character: (kind, start, end, text, components) zipped and built in C, by `map` calling
                # `tuple.__new__` itself (through `_new_token`, a `partial`, it takes a tenth longer).
                start, end = found.start(_LEAD), found.end()
                run = zip(repeat("symbol"), range(start, end), range(start + 1, end + 1), text[start:end], repeat(()))
                tokens.extend(map(new, repeat(Token), run))
            elif group == _LINE_COMMENT:
                append(new(Token, ("comment", found.start(group), found.end(), found[group], ())))
            elif group == _INTERPOLATED:
                start, end = found.start(group), found.end()
                append(new(Token, ("string", start, end, found[group], ())))
                _lex_brace_pairs(text, start, end - 1, tokens, components_of)
            elif group == _STRING:
                append(new(Token, ("string", found.start(group), found.end(), found[group], ())))
            elif group == _END:
                return tokens
            else:  # special, unterminated
                i = _lex_special(text, found.start(group), n, tokens)
                break


class _ComponentsByName(dict):
    """An identifier's components by its text, split on the first lookup of each distinct name (proofs repeat their
    names)."""

    def __missing__(self, name: str) -> tuple[str, ...]:
        components = self[name] = tuple(name.split(".") if "«" not in name else split_name(name))
        return components


def _lex_special(text: str, i: int, n: int, tokens: list[Token]) -> int:
    """Lex the block comment, literal or `'`/`«` token starting at `text[i]` into `tokens` (one that `_NEXT_TOKEN`
    does not read whole); returns the offset after it."""
    c = text[i]
    if text.startswith("/-", i):
        j = tactic_split.block_comment_end(text, i + 2)
        if j is None:
            raise PrecheckError("unterminated block comment `/-`", i, " swallows the rest")
        tokens.append(Token("comment", i, j, text[i:j]))
        return j
    if c == "r":
        hashes = len(_RAW_STRING_START.match(text, i).group(1))
        closing = '"' + "#" * hashes
        end = text.find(closing, i + 2 + hashes)
        if end < 0:
            raise PrecheckError("unterminated raw string", i, " swallows the rest")
        end += len(closing)
        tokens.append(Token("string", i, end, text[i:end]))
        return end
    if c == '"':
        return _lex_string(text, i, tokens)
    if c == "'":
        # Lean reads `''` as a token (Mathlib's image `f '' s`), and a `'` that is no character literal as part
        # of a symbol (`∑'`, `∏'`, `⁻¹'`) or as an error; a literal holds one character, so no reading hides a
        # word. A literal holding `"` right after a symbol is the one case where the readings part ways:
        # Lean may see `∑'` and then a string start.
        match = None if text.startswith("''", i) else _CHAR_LITERAL.match(text, i)
        if match is None:
            width = 2 if text.startswith("''", i) else 1
            tokens.append(Token("symbol", i, i + width, text[i : i + width]))
            return i + width
        if '"' in match.group(0) and i > 0 and not (text[i - 1].isspace() or text[i - 1] in "([{⟨,"):
            raise PrecheckError(
                f"ambiguous `{match.group(0)}`",
                i,
                f": after `{text[i - 1]}` Lean may read `'` as part of a symbol and `\"` as a string start; "
                "put a space before the character literal",
            )
        tokens.append(Token("char", i, match.end(), match.group(0)))
        return match.end()
    # `«` that `_NEXT_TOKEN` could not read as (part of) an identifier: no `»` closes it.
    raise PrecheckError("unterminated identifier escape `«`", i)


def _lex_string(text: str, i: int, tokens: list[Token]) -> int:
    """Lex the string literal starting at `text[i]` that `_NEXT_TOKEN` does not read whole (it has an escape, nested
    or unpaired braces, or no end) and the code in its `{…}`; returns the offset after it."""
    j, segments = _string_end_and_segments(text, i)
    tokens.append(_new_token(("string", i, j + 1, text[i : j + 1], ())))
    for start, end in segments:
        _lex_segment(text, start, end, tokens)
    return j + 1


def _lex_brace_pairs(text: str, i: int, j: int, tokens: list[Token], components_of: _ComponentsByName) -> None:
    """Lex the code in the `{…}` pairs of the string literal `text[i : j + 1]`, whose braces pair up around text
    without braces (`_NEXT_TOKEN`'s `interpolated`): the segments `_string_end_and_segments` would find."""
    for pair in _BRACE_PAIR.finditer(text, i, j):
        name = pair[_BRACE_PAIR_NAME]
        if name is None:
            _lex_segment(text, pair.start() + 1, pair.end() - 1, tokens)
        else:
            # One identifier (`{x}`): the token `_lex` would read, without setting up a scan for it.
            end = pair.end() - 1
            tokens.append(_new_token(("ident", end - len(name), end, name, components_of[name])))


def _lex_segment(text: str, start: int, end: int, tokens: list[Token]) -> None:
    """Lex the code `text[start:end]` of an interpolation segment into `tokens`, at its offsets in `text`."""
    if _PLAIN_SEGMENT.search(text, start, end) is None:
        # Lexed in place, as `_lex(text[start:end])` shifted by `start` would be: without a comment or literal the
        # segment is read by `_NEXT_TOKEN` alone, which sees the text end at `end` as it would the slice's.
        _lex(text, tokens, start, end)
        return
    try:
        segment = _lex(text[start:end])
    except PrecheckError as error:
        raise error.shifted(start) from None
    tokens.extend(moved(segment, start))


def _string_end_and_segments(text: str, i: int) -> tuple[int, list[tuple[int, int]]]:
    """The offset of the closing quote of the string literal starting at `text[i]`, and its `{…}` segments (the
    outermost pairs' insides); raises PrecheckError where it is unterminated or its braces do not pair up."""
    j, depth, segment_start, segments = i + 1, 0, 0, []
    search = _STRING_STOP.search
    while True:
        # Interpolated strings (s!, m!, f!, throwError, dbg_trace …) parse `{…}` as code. Whether this literal is
        # one depends on what precedes it, so its braces are read both ways: they must pair up inside the plain
        # literal (a `"`, `'`, `-/` within the code would break the pairing), and the code between them is lexed
        # and checked like the rest of the proof.
        stop = search(text, j)
        if stop is None:
            raise PrecheckError('unterminated string `"`', i, " swallows the rest")
        j = stop.start()
        c = text[j]
        if c == '"':
            break
        if c == "{":
            depth += 1
            segment_start = segment_start if depth > 1 else j + 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                raise _ambiguous_braces(j)
            if depth == 0:
                segments.append((segment_start, j))
        j += 2 if c == "\\" else 1
    if depth:
        raise _ambiguous_braces(j)
    return j, segments


def _ambiguous_braces(offset: int) -> PrecheckError:
    return PrecheckError(
        "unpaired brace in a string literal",
        offset,
        ': in an interpolated string (`s!"…"`) `{…}` is code, and with unpaired braces the code\'s extent is '
        "ambiguous; pair the braces or drop them",
    )


def enclosing_openers(code: list[Token]) -> EnclosingOpeners:
    """For each token of `code`, the index of the innermost bracket opened before it and still open there, or -1."""
    return EnclosingOpeners(code)


class EnclosingOpeners:
    """`enclosing_openers(code)[k]`: computed for all tokens in one pass on the first lookup, which most proofs never
    make (a scan back per token would be quadratic; a pass per proof that needs none is wasted).

    A closer closes the nearest open bracket of any kind, as a backward scan counting brackets would pair them.
    """

    def __init__(self, code: list[Token]):
        self._code = code
        self._enclosing: list[int] | None = None

    def __getitem__(self, k: int) -> int:
        if self._enclosing is None:
            self._enclosing = []
            open_brackets: list[int] = []
            for index, token in enumerate(self._code):
                self._enclosing.append(open_brackets[-1] if open_brackets else -1)
                if token.kind == "symbol":
                    if token.text in tactic_split.OPENERS:
                        open_brackets.append(index)
                    elif token.text in tactic_split.CLOSERS and open_brackets:
                        open_brackets.pop()
        return self._enclosing[k]
