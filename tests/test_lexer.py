"""The precheck's lexer (lexer.py): tokens as Lean's tokenizer splits them, written out by hand, and the bracket
structure the aesop-phase check reads."""

from __future__ import annotations

import random

import pytest

from trl_verigate.lean_server import lexer
from trl_verigate.lean_server.lexer import PrecheckError, enclosing_openers, lex
from trl_verigate.lean_server.tactics import CLOSERS, OPENERS


def _kinds_and_texts(text: str) -> list[tuple[str, str]]:
    tokens = lex(text)
    for token in tokens:
        assert text[token.start : token.end] == token.text
    return [(token.kind, token.text) for token in tokens]


def test_identifiers_numbers_and_symbols():
    assert _kinds_and_texts("Nat.succ_le h₀ x' α ℝ 𝓝 é 12 0x1F 1.5e3 0b λx ×") == [
        ("ident", "Nat.succ_le"),
        ("ident", "h₀"),
        ("ident", "x'"),
        ("ident", "α"),
        ("ident", "ℝ"),
        ("ident", "𝓝"),
        ("ident", "é"),
        ("number", "12"),
        ("number", "0x1F"),
        ("number", "1.5e3"),
        ("number", "0"),  # `0b` without binary digits: the number 0, then the name b
        ("ident", "b"),
        ("symbol", "λ"),  # λ is a binder, not a letter
        ("ident", "x"),
        ("symbol", "×"),
    ]


def test_escaped_and_dotted_names_carry_their_components():
    tokens = lex("Lean.«ofReduceBool» «a\nb».c h.1 x.«y»z")
    assert [(t.text, t.components) for t in tokens] == [
        ("Lean.«ofReduceBool»", ("Lean", "ofReduceBool")),
        ("«a\nb».c", ("a\nb", "c")),
        ("h", ("h",)),  # `.1` is no name part
        (".", ()),
        ("1", ()),
        ("x.«y»", ("x", "y")),
        ("z", ("z",)),  # nothing continues an escaped part but a dot
    ]


def test_comments_strings_and_characters():
    text = "-- a line\n/- nested /- -/ still -/ \"s\\\"{x}\" r#\"raw \" \"# 'c' '\\n' f '' s ∑' x"
    assert _kinds_and_texts(text) == [
        ("comment", "-- a line"),
        ("comment", "/- nested /- -/ still -/"),
        ("string", '"s\\"{x}"'),
        ("ident", "x"),  # the code of the interpolation segment, lexed after its string
        ("string", 'r#"raw " "#'),
        ("char", "'c'"),
        ("char", "'\\n'"),
        ("ident", "f"),
        ("symbol", "''"),
        ("ident", "s"),
        ("symbol", "∑"),
        ("symbol", "'"),
        ("ident", "x"),
    ]


def test_interpolation_segments_are_positioned_in_the_whole_text():
    tokens = lex('s!"{a} and {b + 1}"')
    assert [(t.text, t.start) for t in tokens if t.kind != "string"] == [
        ("s!", 0),
        ("a", 4),
        ("b", 12),
        ("+", 14),
        ("1", 16),
    ]


@pytest.mark.parametrize(
    ("text", "reason", "offset"),
    [
        ("x /- open", "unterminated block comment", 2),
        ('x "open', "unterminated string", 2),
        ('x "ends in a backslash\\', "unterminated string", 2),
        ('x r##"open"#', "unterminated raw string", 2),
        ("x «open", "unterminated identifier escape", 2),
        ("x.«open", "unterminated identifier escape", 2),
        ('"a } b"', "unpaired brace", 3),
        ('"a { b"', "unpaired brace", 6),
        ("∑'\"'", "ambiguous", 1),
        ('s!"{"x"}"', "unpaired brace", 4),  # the segment's own `"` ends the literal early
    ],
)
def test_unclear_lexing_is_an_error_at_its_place(text, reason, offset):
    with pytest.raises(PrecheckError) as raised:
        lex(text)
    assert reason in raised.value.before and raised.value.offset == offset


def test_trailing_whitespace_is_no_token():
    assert lex("a \n\t\r ") == lex("a")
    assert lex(" \n ") == []


@pytest.mark.parametrize("text", ["simp", "simp   ", "simp\n\n\n", "  (a, b)\n  ", "x.1 + 2\t \r\n", "   ", ""])
def test_the_scan_tiles_the_text_to_its_end(text):
    """Each match of the lexer's pattern starts where the one before ended and the last ends at the end of the text,
    trailing whitespace included: had the pattern no match there, `finditer` would search on from every whitespace
    character, each search skipping the rest of it, and a proof ending in a megabyte of line breaks took minutes."""
    position = 0
    for match in lexer._NEXT_TOKEN.finditer(text):
        assert match.start() == position
        position = match.end()
    assert position == len(text)


def _enclosing_by_backward_scan(code, k: int) -> int:
    """The reference: scan back from k counting brackets, the first opener at depth 0 encloses it."""
    depth = 0
    for j in range(k - 1, -1, -1):
        if code[j].text in CLOSERS:
            depth += 1
        elif code[j].text in OPENERS:
            if depth == 0:
                return j
            depth -= 1
    return -1


def test_enclosing_openers_pair_brackets_as_a_backward_scan_would():
    # Tokens: f ( a , [ b ] , c ) at indices 0-9; `(` is 1, `[` is 4.
    assert [enclosing_openers(lex("f (a, [b], c)"))[k] for k in range(10)] == [-1, -1, 1, 1, 1, 4, 4, 1, 1, 1]
    rng = random.Random(7)
    for _ in range(500):
        code = lex(" ".join(rng.choice(["(", ")", "[", "]", "⟨", "⟩", "x", ","]) for _ in range(rng.randrange(1, 30))))
        enclosing = enclosing_openers(code)
        assert [enclosing[k] for k in range(len(code))] == [
            _enclosing_by_backward_scan(code, k) for k in range(len(code))
        ]


def _outcome(lexing, text: str):
    """The tokens `lexing(text)` returns, or the error it raises (its message and offset)."""
    try:
        return lexing(text)
    except PrecheckError as error:
        return error.before, error.offset


def _walked(literal: str) -> list:
    tokens = []
    lexer._lex_string(literal, 0, tokens)
    return tokens


def test_strings_read_whole_end_and_split_as_the_walk_does():
    """A string without escapes whose braces pair up around brace-free text is read with one match of the lexer's
    pattern (`string`, `interpolated`) and its segments are its brace pairs' insides (a lone name read without a
    scan); the walk over its quotes, escapes and braces must find the same end and segments, and the same tokens."""
    rng = random.Random(4)
    pieces = ["a", " ", "{", "}", "{x}", "{a b}", "{h.le}", "{x'}", "{'}", "\\", '\\"', "\n", "'", "-", "é"]
    read_whole = 0
    for _ in range(3000):
        text = '"' + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10))) + '" tail "'
        found = lexer._NEXT_TOKEN.match(text)
        if found.lastgroup not in ("string", "interpolated"):
            continue
        read_whole += 1
        end = found.end() - 1
        segments = [(pair.start() + 1, pair.end() - 1) for pair in lexer._BRACE_PAIR.finditer(text, 0, end)]
        assert lexer._string_end_and_segments(text, 0) == (end, segments), text
        literal = text[: end + 1]
        assert _outcome(lex, literal) == _outcome(_walked, literal), literal
    assert read_whole > 500


# Every way the lexer's pattern reads a match, each with a text that it reads that way (the last group to match).
GLUED_READINGS = {
    "ident": ("simp ", [("ident", "simp", 0)]),
    "ident_glued": ("h₀, ", [("ident", "h₀", 0), ("symbol", ",", 2)]),
    "lead": (": ", [("symbol", ":", 0)]),
    "pair": (":= ", [("symbol", ":", 0), ("symbol", "=", 1)]),
    "pair_ident": (":= by", [("symbol", ":", 0), ("symbol", "=", 1), ("ident", "by", 3)]),
    "pair_ident_glued": ("((h)", [("symbol", "(", 0), ("symbol", "(", 1), ("ident", "h", 2), ("symbol", ")", 3)]),
    "symbols": ("))]),", [("symbol", c, k) for k, c in enumerate("))]),")]),
    "lead_ident": ("(m ", [("symbol", "(", 0), ("ident", "m", 1)]),
    "lead_ident_glued": ("[h.le]", [("symbol", "[", 0), ("ident", "h.le", 1), ("symbol", "]", 5)]),
    "lead_number": ("(2 ", [("symbol", "(", 0), ("number", "2", 1)]),
    "lead_number_glued": ("⟨10⟩", [("symbol", "⟨", 0), ("number", "10", 1), ("symbol", "⟩", 3)]),
    "number": ("1.5e3 ", [("number", "1.5e3", 0)]),
    "number_glued": ("1024;", [("number", "1024", 0), ("symbol", ";", 4)]),
    "line_comment": ("-- (m := a)\n", [("comment", "-- (m := a)", 0)]),
    "string": ('"a, b" ', [("string", '"a, b"', 0)]),
    "interpolated": (
        '"{x} {a b}"',
        [("string", '"{x} {a b}"', 0), ("ident", "x", 2), ("ident", "a", 6), ("ident", "b", 8)],
    ),
    "special": ("'c'", [("char", "'c'", 0)]),
    "symbol": ("- 1", [("symbol", "-", 0), ("number", "1", 2)]),
}


@pytest.mark.parametrize("group", sorted(GLUED_READINGS))
def test_each_reading_of_the_pattern_gives_the_tokens_one_by_one(group):
    """The pattern reads a symbol character together with the identifier, number or symbol character it touches
    (`(m`, `h₀,`, `:=`) in one match; the tokens must be those Lean's tokenizer reads one at a time: each symbol its
    own character, each identifier and number whole, at its own offsets (shifted here by a prefix, so offsets are not
    the match's)."""
    text, expected = GLUED_READINGS[group]
    assert lexer._NEXT_TOKEN.match(text).lastgroup == group
    prefix = "x  "
    tokens = lex(prefix + text)[1:]
    assert [(t.kind, t.text, t.start - len(prefix)) for t in tokens] == expected
    assert all(t.end == t.start + len(t.text) for t in tokens)
    assert all(t.components == (tuple(t.text.split(".")) if t.kind == "ident" else ()) for t in tokens)


def test_symbols_beyond_brackets_are_read_with_the_tokens_they_touch():
    # Any character that starts no other token is a one-character symbol, glued or not: `²` after a name, `¬` and `←`
    # before one, `.` between a name and a number, `!` (a name character only after a name's first one).
    assert _kinds_and_texts("x², ¬h ←h.1 (!?) a-b c/d") == [
        ("ident", "x"),
        ("symbol", "²"),
        ("symbol", ","),
        ("symbol", "¬"),
        ("ident", "h"),
        ("symbol", "←"),
        ("ident", "h"),
        ("symbol", "."),
        ("number", "1"),
        ("symbol", "("),
        ("symbol", "!"),
        ("symbol", "?"),
        ("symbol", ")"),
        ("ident", "a"),
        ("symbol", "-"),
        ("ident", "b"),
        ("ident", "c"),
        ("symbol", "/"),
        ("ident", "d"),
    ]


def test_a_symbol_is_read_with_the_name_or_number_one_space_after_it():
    # One match reads `= b,` or `^ 10`; after two spaces or a line break the name is the next match's. The tokens
    # and offsets are the same either way (offsets counted by hand).
    tokens = lex("a = b, x ^ 10 =  c\n· simp")
    assert [(t.kind, t.text, t.start) for t in tokens] == [
        ("ident", "a", 0),
        ("symbol", "=", 2),
        ("ident", "b", 4),
        ("symbol", ",", 5),
        ("ident", "x", 7),
        ("symbol", "^", 9),
        ("number", "10", 11),
        ("symbol", "=", 14),
        ("ident", "c", 17),
        ("symbol", "·", 19),
        ("ident", "simp", 21),
    ]
    assert [match.lastgroup for match in lexer._NEXT_TOKEN.finditer("= b, ^ 10")] == [
        "lead_ident_glued",
        "lead_number",
        "end",
    ]


def test_every_reading_of_the_pattern_is_tested():
    assert set(GLUED_READINGS) == set(lexer._NEXT_TOKEN.groupindex) - {"end", "unterminated"}


def test_a_raw_string_start_is_no_identifier_after_a_run_symbol():
    # `(r"x"` is `(` and a raw string, as `( r"x"` is, not `(`, the name `r` and a string.
    for text in ['(r"x")', '( r"x")', '(r#"x"#)']:
        assert [t.kind for t in lex(text)] == ["symbol", "string", "symbol"]
