"""The precheck's one tokenizer: Lean 4 source text as Lean's own tokenizer reads it.

Every rule of the precheck reads these tokens, so what is code, comment and literal must be exactly what Lean sees:
a keyword that Lean reads as code but the tokenizer reads as the inside of a string would escape every rule. Where
the two readings could differ, `tokenize` refuses (`PrecheckError`) instead of guessing: an unterminated comment,
string or `«name»`, an escape Lean does not know, and a character literal glued to the token before it (`∑'"'`
is the token `∑'` and then a string to Lean).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

# Symbols of more than one character that the rules read as one token. Longest first, so `<;>` is not `<` `;` `>`.
MULTI_CHARACTER_SYMBOLS = (
    "<;>", "<|>", "<->", "|>.", "...", ":=", "=>", "->", "<-", "<|", "|>", "..", "::", "@[", "%[", "<=", ">=", "!=",
    "==", "&&", "||", "++", "⁻¹", "//", "\\/", "/\\",
)  # fmt: skip

_ASCII_ID_REST = re.compile(r"[A-Za-z0-9_'!?]*")
_MULTI_CHARACTER_SYMBOL = re.compile("|".join(map(re.escape, MULTI_CHARACTER_SYMBOLS)))
# Tabs count one column, as in Lean's positions (the precheck refuses them in untrusted text: Lean does).
_BLANK = re.compile(r"[ \t\n]+|\r\n")
# Digits may be separated by runs of `_` (`1_000`, `0x_ff`), as Lean's `takeDigitsFn` reads them.
_NUMBER = re.compile(
    r"0[xX](?:_*[0-9a-fA-F]+)+|0[bB](?:_*[01]+)+|0[oO](?:_*[0-7]+)+"
    r"|[0-9]+(?:_+[0-9]+)*(?:\.[0-9]+(?:_+[0-9]+)*)?(?:[eE][+-]?[0-9]+(?:_+[0-9]+)*)?"
)
_HEX = "0123456789abcdefABCDEF"
# One character, or one escape, between single quotes: any character, a line break too (Lean's `charLitFnAux`).
_CHARACTER = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|[\\\"'nrt])|[^'\\])'")
_RAW_STRING_START = re.compile(r'r(#*)"')
_BLOCK_COMMENT_DELIMITER = re.compile(r"/-|-/")
# Characters a comment may follow directly: brackets, separators and the ends of literals start or end no symbol.
_COMMENT_MAY_FOLLOW = frozenset("()[]{}⟨⟩,;\"'")
# Characters after which a character literal may start: anything else glued to `'` could make a longer token.
_BEFORE_CHARACTER = frozenset(" \n([{⟨,;")


class PrecheckError(ValueError):
    """A refusal: `before` + " at line L, column C" + `after`.

    `offset` is relative to the text the raising check was given; `shifted` moves it to the submitted source, where
    `reason` turns it into a line and column.
    """

    def __init__(self, before: str, offset: int | None = None, after: str = ""):
        super().__init__(before, offset, after)
        self.before, self.offset, self.after = before, offset, after

    def shifted(self, by: int) -> PrecheckError:
        return PrecheckError(self.before, None if self.offset is None else self.offset + by, self.after)

    def reason(self, source: str) -> str:
        if self.offset is None:
            return self.before + self.after
        line, column = position(source, self.offset)
        return f"{self.before} at line {line}, column {column}{self.after}"

    def __str__(self) -> str:
        where = "" if self.offset is None else f" at offset {self.offset}"
        return f"{self.before}{where}{self.after}"


def position(text: str, offset: int) -> tuple[int, int]:
    """(line 1-based, column 0-based in code points) of `offset` in `text`."""
    offset = max(0, min(offset, len(text)))
    line_start = text.rfind("\n", 0, offset) + 1
    return text.count("\n", 0, offset) + 1, offset - line_start


@dataclass(frozen=True)
class Token:
    """One token of code (comments are not tokens).

    `kind` is "ident", "number", "string", "char" or "symbol". `column` counts code points from the start of the
    token's line (the first line starts at the tokenizer's `start_column`); `line_start` is True for the first
    token on its line.
    """

    kind: str
    text: str
    start: int
    end: int
    column: int
    line_start: bool

    @property
    def components(self) -> tuple[str, ...]:
        """An identifier's dotted name components, guillemets removed (`Lean.«ofReduceBool»` -> 2 components)."""
        return name_components(self.text) if self.kind == "ident" else ()


def name_components(name: str) -> tuple[str, ...]:
    if "«" not in name:
        return tuple(name.split("."))
    parts, current, escaped = [], [], False
    for c in name:
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
    return tuple(parts)


def _is_letter_like(c: str) -> bool:
    """Lean's `isLetterLike`: the non-ASCII letters an identifier may start with."""
    v = ord(c)
    return (
        (0x3B1 <= v <= 0x3C9 and v != 0x3BB)  # Greek small letters except λ
        or (0x391 <= v <= 0x3A9 and v not in (0x3A0, 0x3A3))  # Greek capitals except Π and Σ
        or 0x3CA <= v <= 0x3FB  # Coptic
        or 0x1F00 <= v <= 0x1FFE  # polytonic Greek
        or 0x2100 <= v <= 0x214F  # letter-like symbols: ℕ ℝ ℤ ℚ ℂ
        or 0x1D49C <= v <= 0x1D59F  # script letters: 𝓝
        or (0xC0 <= v <= 0xFF and v not in (0xD7, 0xF7))  # Latin-1 letters except × and ÷
        or 0x100 <= v <= 0x17F  # Latin Extended-A
    )


def _is_subscript(c: str) -> bool:
    """Lean's `isSubScriptAlnum`: ₀-₉, ₐ-ₜ, ᵢ-ᵪ and ⱼ."""
    v = ord(c)
    return 0x2080 <= v <= 0x2089 or 0x2090 <= v <= 0x209C or 0x1D62 <= v <= 0x1D6A or v == 0x2C7C


def is_id_first(c: str) -> bool:
    return c.isascii() and (c.isalpha() or c == "_") or (not c.isascii() and _is_letter_like(c))


def is_id_rest(c: str) -> bool:
    return is_id_first(c) or (c.isascii() and c.isdigit()) or c in "'!?" or _is_subscript(c)


def tokenize(text: str, start_column: int = 0, *, up_to_error: bool = False) -> list[Token]:
    """The code tokens of `text`, comments and whitespace skipped; raises PrecheckError where Lean's reading could
    differ (see the module docstring), or with `up_to_error` returns the tokens before that point. `start_column`:
    the column of `text[0]` in its line."""
    tokens: list[Token] = []
    try:
        _tokenize(text, start_column, tokens)
    except PrecheckError:
        if not up_to_error:
            raise
    return tokens


def _tokenize(text: str, start_column: int, tokens: list[Token]) -> None:
    n = len(text)
    line_start_offset = -start_column  # offset that column 0 of the current line has
    new_line = True
    i = 0
    while i < n:
        c = text[i]
        blank = _BLANK.match(text, i)
        if blank:
            newlines = blank.group().count("\n")
            if newlines:
                line_start_offset = blank.start() + blank.group().rfind("\n") + 1
                new_line = True
            i = blank.end()
            continue
        comment = (c == "-" or c == "/") and text.startswith(("--", "/-"), i)
        if comment and tokens and tokens[-1].end == i and _glued_to_symbol(text[i - 1]):
            raise PrecheckError(
                f"a comment right after `{text[i - 1]}`",
                i,
                ": Lean may read that symbol and the comment's first characters as one token (`//`, `\\/`); "
                "put a space before the comment",
            )
        if comment and c == "-":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if comment:
            end = _block_comment_end(text, i)
            if "\n" in text[i:end]:  # the next token is the first on its line
                line_start_offset = text.rfind("\n", i, end) + 1
                new_line = True
            i = end
            continue
        start = i
        if c == '"':
            kind, i = "string", _string_end(text, i + 1)
        elif c == "r" and _RAW_STRING_START.match(text, i):
            kind, i = "string", _raw_string_end(text, i)
        elif c == "'":
            kind, i = _quote(text, i, tokens)
        elif c.isascii() and c.isdigit():
            kind, i = "number", _NUMBER.match(text, i).end()
        elif c == "«" or is_id_first(c):
            kind, i = "ident", _identifier_end(text, i)
        else:
            kind, i = "symbol", i + _symbol_length(text, i)
        token_text = text[start:i]
        if "\n" in token_text and kind == "ident":
            raise PrecheckError("a line break inside a `«name»`", start)
        tokens.append(Token(kind, token_text, start, i, start - line_start_offset, new_line))
        if "\n" in token_text:  # a string literal spanning lines
            line_start_offset = start + token_text.rfind("\n") + 1
        new_line = False


def _glued_to_symbol(before: str) -> bool:
    """Whether a comment opener right after `before` could be the end of a longer symbol token to Lean."""
    return not (before.isspace() or is_id_rest(before) or before in _COMMENT_MAY_FOLLOW)


def _block_comment_end(text: str, i: int) -> int:
    """The end of the nested `/- … -/` comment opening at `i`.

    As Lean's `whitespace` and `finishCommentBlock` (Lean/Parser/Basic.lean) read it: the character right after `/-`
    is skipped before nesting is counted, so `/-/- -/` is one whole comment, not the start of a nested one.
    """
    depth, j = 1, i + 3
    while True:
        match = _BLOCK_COMMENT_DELIMITER.search(text, j)
        if match is None:
            raise PrecheckError("unterminated block comment `/-`", i, ": close it with `-/`")
        depth += 1 if match.group() == "/-" else -1
        j = match.end()
        if depth == 0:
            return j


def _string_end(text: str, i: int) -> int:
    """The end of the string literal whose opening `"` is just before `i`, with Lean's escapes only."""
    opening = i - 1
    while i < len(text):
        c = text[i]
        if c == '"':
            return i + 1
        if c == "\\":
            i = _escape_end(text, i, opening)
        else:
            i += 1
    raise PrecheckError("unterminated string literal", opening)


def _escape_end(text: str, i: int, literal_start: int) -> int:
    """The end of the escape at `text[i] == "\\"` in a string literal (Lean's `quotedCharCoreFn`)."""
    following = text[i + 1 : i + 2]
    if following and following in "\\\"'nrt":
        return i + 2
    if following == "x" and all(d in _HEX for d in text[i + 2 : i + 4]) and len(text[i + 2 : i + 4]) == 2:
        return i + 4
    if following == "u" and all(d in _HEX for d in text[i + 2 : i + 6]) and len(text[i + 2 : i + 6]) == 4:
        return i + 6
    if following == "\n":  # a string gap: the line break and the next line's indentation are skipped
        j = i + 2
        while j < len(text) and text[j] == " ":
            j += 1
        return j
    raise PrecheckError(f"escape `\\{following}` that Lean does not know in a string literal", literal_start)


def _raw_string_end(text: str, i: int) -> int:
    hashes = _RAW_STRING_START.match(text, i).group(1)
    body = text.find('"' + hashes, i + 2 + len(hashes))
    if body < 0:
        raise PrecheckError("unterminated raw string literal", i)
    return body + 1 + len(hashes)


def _quote(text: str, i: int, tokens: list[Token]) -> tuple[str, int]:
    """A `'` at a token start: a character literal, or the symbol `'` (`∑'`, `f ''` are Mathlib notation; `xs[i]'h`
    is Lean's token `]'`, after which `'p'` is the name `p'`)."""
    character = _CHARACTER.match(text, i)
    if character is None or (i > 0 and text[i - 1] == "]" and tokens and tokens[-1].end == i):
        return "symbol", i + 1
    glued = i > 0 and text[i - 1] not in _BEFORE_CHARACTER and (not tokens or tokens[-1].end == i)
    if glued:
        raise PrecheckError(
            f"`{character.group()}` right after `{tokens[-1].text if tokens else text[i - 1]}`",
            i,
            " is ambiguous (a character literal, or part of the token before it to Lean): put a space before it",
        )
    return "char", character.end()


def _identifier_end(text: str, i: int) -> int:
    """The end of the (dotted) identifier starting at `i` (Lean's `identFn`)."""
    n = len(text)
    while True:
        if text[i] == "«":
            close = text.find("»", i + 1)
            if close < 0:
                raise PrecheckError("unterminated identifier escape `«`", i, ": close the name with `»`")
            i = close + 1
        else:
            i += 1
            while i < n:
                i = _ASCII_ID_REST.match(text, i).end()  # most names are ASCII: one regex step per run of them
                if i < n and not text[i].isascii() and is_id_rest(text[i]):
                    i += 1
                else:
                    break
        if i + 1 < n and text[i] == "." and (text[i + 1] == "«" or is_id_first(text[i + 1])):
            i += 1
            continue
        return i


def _symbol_length(text: str, i: int) -> int:
    symbol = _MULTI_CHARACTER_SYMBOL.match(text, i)
    return len(symbol.group()) if symbol else 1


# ---------------------------------------------------------------- characters

_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})


def check_characters(text: str, what: str) -> None:
    """Refuse characters that read differently to a person than to Lean (invisible, bidirectional, control), tabs
    (Lean refuses them) and a carriage return not before a line break."""
    for i, c in enumerate(text):
        if c == "\n" or c == " " or (c.isascii() and c.isprintable()):
            continue
        if c == "\r":
            if text.startswith("\r\n", i):
                continue
            raise PrecheckError(f"lone carriage return in the {what}", i, ": use \\n line endings")
        if c == "\t":
            raise PrecheckError(f"tab in the {what}", i, ": Lean refuses tabs, indent with spaces")
        if unicodedata.category(c) in _REFUSED_CATEGORIES:
            name = unicodedata.name(c, "unnamed")
            raise PrecheckError(f"invisible or control character U+{ord(c):04X} ({name}) in the {what}", i)
