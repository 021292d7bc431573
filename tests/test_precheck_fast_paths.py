"""The precheck's fast paths (decisions made in C over whole token lists) against the plain rules they stand for.

`lexers_disagree_at` first compares the two readings as run and literal boundaries computed in C, and falls back to
walking them only when that says they differ; `CodeTokens.outside` skips the literal walk when no code lies inside a
string; the lexer reads runs of brackets as one match. Each is checked here against a reference written out plainly
in this file, on hand-made and random inputs, including the orders and overlaps the fast paths must refuse to judge.
"""

from __future__ import annotations

import random

import pytest

from trl_verigate.lean_server import precheck
from trl_verigate.lean_server.code_tokens import CodeTokens
from trl_verigate.lean_server.lexer import Token, lex


def random_texts(pieces, seed, count, shortest=1, longest=16):
    """`count` texts, each `shortest`..`longest` pieces drawn from `pieces` by random.Random(seed)."""
    rng = random.Random(seed)
    for _ in range(count):
        yield "".join(rng.choice(pieces) for _ in range(rng.randint(shortest, longest)))


def outcome(function, *args):
    try:
        return function(*args)
    except ValueError as error:
        return type(error)


def random_spans(rng, count):
    """Spans in text order, touching or apart, some of them literals; sometimes shuffled or overlapping."""
    spans, position = [], 0
    for _ in range(count):
        position += rng.choice([0, 0, 1, 2])
        width = rng.randint(1, 4)
        spans.append((position, position + width, rng.random() < 0.2))
        position += width
    if rng.random() < 0.2 and len(spans) > 1:
        i = rng.randrange(len(spans) - 1)
        spans[i], spans[i + 1] = spans[i + 1], spans[i]
    if rng.random() < 0.2 and spans:
        start, end, literal = spans[rng.randrange(len(spans))]
        spans.append((start + 1, end + 2, not literal))
        spans.sort()
    return spans


def as_tokens(spans, rng):
    kinds = {True: ("string", "char"), False: ("ident", "symbol", "number")}
    tokens = [Token(rng.choice(kinds[literal]), start, end, "x") for start, end, literal in spans]
    if rng.random() < 0.3 and tokens:  # a comment, which neither reading counts
        tokens.insert(rng.randrange(len(tokens)), Token("comment", 0, 1, "-- c"))
    return tokens


def test_lexers_disagree_at_matches_the_plain_walk_on_random_readings(monkeypatch):
    """`lexers_disagree_at`'s quick agreement (`_same_reading`) gives the outcome of its plain walk over the two
    readings (`_reading`), on random readings that agree or differ by a cut, a longer token or another kind."""
    from trl_verigate.lean_server import readings

    rng = random.Random(7)
    cases = []
    for _ in range(3000):
        ours = random_spans(rng, rng.randint(0, 12))
        # The splitter's reading: the same spans, or the same with code tokens cut differently or changed.
        theirs = list(ours)
        if rng.random() < 0.5 and theirs:
            i = rng.randrange(len(theirs))
            start, end, literal = theirs[i]
            choice = rng.random()
            if choice < 0.4 and not literal and end - start > 1:
                theirs[i : i + 1] = [(start, start + 1, False), (start + 1, end, False)]  # cut, same run
            elif choice < 0.7:
                theirs[i] = (start, end + 1, literal)  # ends later: touches the next token or overlaps it
            else:
                theirs[i] = (start, end, not literal)  # a different reading
        cases.append((as_tokens(ours, rng), theirs))
    quick = [outcome(precheck.lexers_disagree_at, tokens, theirs) for tokens, theirs in cases]
    monkeypatch.setattr(readings, "_same_reading", lambda view, splitter_tokens: False)
    walked = [outcome(precheck.lexers_disagree_at, tokens, theirs) for tokens, theirs in cases]
    for case, fast, plain in zip(cases, quick, walked, strict=True):
        assert fast == plain, case
    agreeing = walked.count(None)
    assert 300 < agreeing < 2700  # both outcomes were exercised


def test_code_outside_literals_drops_exactly_the_tokens_inside_a_string():
    code = lex('have : s!"{a} and {b}" = x := rfl')
    view = CodeTokens(code)
    # `a` and `b`, lexed from inside the literal, follow it in `code` and are left out.
    assert [t.text for t in code if t.kind != "comment"][4:6] == ["a", "b"]
    assert [t.text for t in view.outside] == ["have", ":", "s!", '"{a} and {b}"', "=", "x", ":", "=", "rfl"]
    assert view.has_inner_tokens
    plain = CodeTokens(lex("exact (h.trans h') -- a comment"))
    assert not plain.has_inner_tokens and plain.outside is plain.code
    assert [t.text for t in plain.code] == ["exact", "(", "h.trans", "h'", ")"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("((((h))))", ["("] * 4 + ["h"] + [")"] * 4),
        ("⟨(a, b)⟩,,", ["⟨", "(", "a", ",", "b", ")", "⟩", ",", ","]),
        ("x := (((1)))", ["x", ":", "=", "(", "(", "(", "1", ")", ")", ")"]),
        ("f (((-- c\n a)))", ["f", "(", "(", "(", "-- c", "a", ")", ")", ")"]),
    ],
)
def test_bracket_runs_lex_one_token_per_character(text, expected):
    tokens = lex(text)
    assert [t.text for t in tokens] == expected
    # Every token's span holds its text, and the symbols are one character each.
    assert all(text[t.start : t.end] == t.text for t in tokens)
    assert all(t.end - t.start == 1 for t in tokens if t.kind == "symbol")


# Pieces of proofs around what NFKC changes: names it maps letter for letter (`ℝ`, `𝓝`), subscripts in and out of
# names (`h₀`, `₀`), letters the number syntax reads after a digit (`ℯ` -> `e`, `𝐱` -> `x`, `ℂ` -> `C`), symbols that
# become digits or ASCII punctuation (`²`, `¹`, fullwidth `＂`, `－`, `＇`), ligatures that change the length (`ﬁ`),
# compositions (`e` + U+0301), and the comments, literals and escapes the code is blanked from.
_NFKC_PIECES = [
    *" \n  ",
    "ℝ",
    "ℕ",
    "ℂ",
    "𝓝",
    "ℯ",
    "𝐱",
    "ℓ",
    "₀",
    "₁",
    "ₐ",
    "ₓ",
    "²",
    "¹",
    "⁻",
    "ｓ",
    "＂",
    "－",
    "＇",
    "ﬁ",
    "e\u0301",
    "α",
    "λ",
    "h",
    "x",
    "0",
    "1",
    "0x",
    "1.5",
    "e",
    "r",
    "_",
    ".",
    ",",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ":=",
    "'",
    "''",
    "«a b»",
    "--c\n",
    "/- c -/",
    '"s"',
    's!"{x}"',
    "'a'",
    "sorry",
    "simp",
    " at ",
    "#",
    "@[",
    "+",
]


def test_normalized_tokens_are_the_lexed_normalized_code():
    """`normalized_tokens` (tokens of NFKC(code) built from the code's) against lexing the normalized code, on random
    texts; and `code_tokens`, the code's tokens, against lexing the blanked code."""
    import unicodedata

    from trl_verigate.lean_server.normalized_tokens import code_tokens, normalized_tokens
    from trl_verigate.lean_server.precheck import _code_only

    built = lexed = 0
    for text in random_texts(_NFKC_PIECES, seed=11, count=6000, longest=14):
        try:
            tokens = lex(text)
        except precheck.PrecheckError:
            continue
        view = CodeTokens(tokens)
        code = _code_only(text, tokens)
        assert code_tokens(view) == lex(code), text
        normalized = unicodedata.normalize("NFKC", code)
        if normalized == code:
            continue
        fast = normalized_tokens(code, normalized, view)
        try:
            expected = lex(normalized)
        except precheck.PrecheckError:
            assert fast is None, text
            continue
        if fast is None:
            lexed += 1
        else:
            built += 1
            assert fast == expected, text
    assert built > 1000 and lexed > 300  # both ways were taken


_LAYOUT_PIECES = [
    *" \n  ",
    "\u00a0",
    "\u2003",
    "\x0b",
    "\r\n",
    "h",
    "h'",
    "x.1",
    "1_000",
    "1.5e3",
    "0x1F",
    ":=",
    "<;>",
    "=>",
    "|>.",
    "..",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "⟨",
    "⟩",
    "·",
    ".",
    ",",
    ";",
    "λ",
    "ℝ",
    "₀",
    "«a b»",
    "«a--b»",
    "'",
    "''",
    "'a'",
    "∑'",
    '"s"',
    's!"{x}"',
    'r#"x"#',
    "--c\n",
    "/- c -/",
    "-",
    "/",
    "simp",
    "exact",
    "by",
]


def test_readings_agree_without_comparing_only_where_they_do():
    """`read_alike_without_comments` says the lexer's and the splitter's readings agree only where
    `lexers_disagree_at` (which compares them) finds no disagreement, on random texts."""
    from trl_verigate.lean_server.readings import lexers_disagree_at, read_alike_without_comments
    from trl_verigate.lean_server.tactics import split_proof

    quick = 0
    for text in random_texts(_LAYOUT_PIECES, seed=5, count=6000):
        try:
            tokens = lex(text)
        except precheck.PrecheckError:
            continue
        view = CodeTokens(tokens)
        layout = split_proof(text)
        if read_alike_without_comments(text, view, layout.tokens):
            quick += 1
            assert lexers_disagree_at(tokens, layout.tokens, view) is None, text
    assert quick > 1000


def _is_config_item(code, k):
    """The reference: `code[k]` opens `(NAME := …`."""
    if code[k].text != "(" or k + 3 >= len(code) or code[k + 1].kind != "ident":
        return False
    colon, equals = code[k + 2], code[k + 3]
    return colon.text == ":" and equals.text == "=" and equals.start == colon.end


_CONFIG_PIECES = [" ", "(", ")", "x", "Nat.f", "1", ":", "=", ":=", ": =", "(x :=", "(1 :=", "(x : =", "[", "{", '"s"']


def test_config_items_are_where_the_plain_test_finds_them():
    from trl_verigate.lean_server.config_values import _config_items

    found = 0
    for text in random_texts(_CONFIG_PIECES, seed=3, count=3000, shortest=0, longest=14):
        view = CodeTokens(lex(text))
        expected = [k for k in range(len(view.outside)) if _is_config_item(view.outside, k)]
        assert _config_items(view) == expected, text
        found += bool(expected)
    assert found > 500


_ITEM_PIECES = [
    " ",
    "Nat.f",
    "simp",
    "exact",
    "h",
    "(m := a)",
    "(m := 1)",
    "(m := true)",
    '(m := "s")',
    "(disch := simp)",
    "(norm := ring_nf)",
    "(maxRecDepth := 100000)",
    "(maxRecDepth := 10)",
    "(trace.x := 1)",
    "(m := Nat.g)",
    "(m := (a))",
    "(m := [a])",
    ")",
    "(",
    "[m := a]",
]


def test_short_configuration_items_get_the_verdicts_of_the_general_walk(monkeypatch):
    """Where every item's value is one token (`_all_short`), `check_config_values` decides them in one loop over
    precomputed fields; the general walk (bracket pairing, `_is_literal`, `_is_named_argument`) must reach the same
    verdict, refusal and position included, on random sequences of items."""
    from trl_verigate.lean_server import config_values

    def verdict(text):
        view = CodeTokens(lex(text))
        try:
            config_values.check_config_values(view.code, view)
        except precheck.PrecheckError as error:
            return str(error)
        return None

    short = [
        t
        for t in random_texts(_ITEM_PIECES, seed=9, count=3000, longest=10)
        if (colons := config_values._config_colons(view := CodeTokens(lex(t))))
        and config_values._all_short(view, colons)
    ]
    fast = [verdict(t) for t in short]
    monkeypatch.setattr(config_values, "_all_short", lambda view, colons: False)
    assert [verdict(t) for t in short] == fast
    assert len(short) > 500 and 100 < sum(v is None for v in fast) < len(short) - 100  # both verdicts seen


# (proof, None if accepted, else the refusal's start), each derived by hand from the rules of `check_config_values`:
# an item after a dotted name, or continuing a chain of items that starts after one (each `(` right after the `)`
# before it), is a named argument; any other non-literal value is refused at its `(`, naming the token before it.
_SHORT_ITEMS_BY_HAND = [
    ("exact Nat.f (m := a) (m := b) (m := c)", None),  # one chain after a dotted name
    ("exact f (m := a) (m := b)", "`(m := …)` at offset 8 after `f` has a non-literal value"),
    ("(m := a)", "`(m := …)` at offset 0 after `` has a non-literal value"),  # the first token: nothing before it
    # `h` ends the chain: the third item starts a chain of its own after an undotted name.
    ("exact Nat.f (m := a) (m := b) h (m := c)", "`(m := …)` at offset 32 after `h` has a non-literal value"),
    # A `]` closes the first item: the second one is after `]`, not `)`, so it starts a chain.
    ("exact Nat.f (m := a] (m := b)", "`(m := …)` at offset 21 after `]` has a non-literal value"),
    # Two chains, the second after a dotted name again; `disch` takes a tactic name, `m` a literal anywhere.
    ("exact Nat.f (m := a) (m := b); simp (disch := simp) (m := 1); exact Nat.g (m := c)", None),
    # A literal value is refused only through an option its name sets; the first refusal in token order wins.
    ("exact Nat.f (m := 1) (maxRecDepth := 100000)", "`set_option maxRecDepth 100000`: at most 10000"),
    ("simp (trace.x := true) (m := a)", "`trace.x :=` sets the option `trace.x` at offset 6"),
    ("simp (m := a) (trace.x := true)", "`(m := …)` at offset 5 after `simp` has a non-literal value"),
]


@pytest.mark.parametrize("proof, refusal", _SHORT_ITEMS_BY_HAND)
def test_short_configuration_items_by_hand(proof, refusal, monkeypatch):
    """Chains of items, their ends, the first token of the code, and which of two refusals comes first, decided over
    fields gathered in C (`_check_short_items`) and, for the same verdict, by the general walk."""
    from trl_verigate.lean_server import config_values

    view = CodeTokens(lex(proof))
    assert config_values._all_short(view, config_values._config_colons(view))
    for walk in ("short", "general"):
        if walk == "general":
            monkeypatch.setattr(config_values, "_all_short", lambda view, colons: False)
        if refusal is None:
            config_values.check_config_values(view.code, view)
        else:
            with pytest.raises(precheck.PrecheckError) as error:
                config_values.check_config_values(view.code, view)
            assert str(error.value).startswith(refusal), walk


def test_a_name_that_sets_no_option_refuses_no_literal(monkeypatch):
    """`_may_set_an_option` lets `_check_options_in_config` skip a field, and `_check_short_items` a literal item:
    where it says no, the check without that skip (every dotted suffix held to the option rules) must accept every
    literal; where it says yes, it must refuse some."""
    from trl_verigate.lean_server import config_values

    may_set_an_option = config_values._may_set_an_option
    monkeypatch.setattr(config_values, "_may_set_an_option", lambda parts: True)  # no name skipped
    names = ["m", "maxRecDepth", "simp.maxRecDepth", "maxSteps", "exponentiation.threshold", "trace", "trace.x"]
    names += ["x.trace.y", "debug.skipKernelTC", "warn.sorry", "warn", "pp.all", "profiler", "diagnostics", "decide"]
    values = ["1", "10000", "100000", "0x10000", "true", "false", '"s"', "'c'"]
    for name in names:
        refused = 0
        for value in values:
            name_token, value_token = (t for t in lex(f"{name} {value}"))
            try:
                config_values._check_options_in_config(name_token, [value_token])
            except precheck.PrecheckError:
                refused += 1
        assert may_set_an_option(name_token.components) == (refused > 0), name


def test_values_at_is_a_plain_gather_by_either_route(monkeypatch):
    """`values_at` shifts a copy of the list where indices are dense and adds the offset to each index where they
    are sparse; both routes, at every offset that stays in range, must give `[items[i + offset] for i in indices]`."""
    from trl_verigate.lean_server import code_tokens

    rng = random.Random(4)
    for _ in range(300):
        items = [rng.choice("ab()") for _ in range(rng.randint(1, 40))]
        indices = sorted(rng.sample(range(len(items)), rng.randint(0, len(items))))
        for per_index in (0, 10**9):  # always shift, never shift
            monkeypatch.setattr(code_tokens, "_ITEMS_PER_INDEX_TO_SHIFT", per_index)
            for offset in range(-3, 4):
                if indices and not (0 <= indices[0] + offset and indices[-1] + offset < len(items)):
                    continue
                expected = [items[i + offset] for i in indices]
                assert list(code_tokens.values_at(items, indices, offset)) == expected
                assert code_tokens.tokens_at(items, indices, offset) == expected


def test_code_tokens_drop_comments_and_read_each_kind_once():
    """`CodeTokens` reads the kinds of all tokens once, to find the comments and to keep as `kinds` and
    `present_kinds`."""
    pieces = [" ", "x", "-- c\n", "/- d -/", "(", ":=", '"s"', "1", "'c'"]
    with_comments = 0
    for text in random_texts(pieces, seed=6, count=500):
        tokens = lex(text)
        view = CodeTokens(tokens)
        assert view.code == [t for t in tokens if t.kind != "comment"], text
        assert view.kinds == [t.kind for t in view.code], text
        assert view.present_kinds == {t.kind for t in view.code}, text
        without_comments = CodeTokens(view.code, has_comments=False)
        assert (without_comments.kinds, without_comments.present_kinds) == (view.kinds, view.present_kinds)
        with_comments += len(view.code) < len(tokens)
    assert 100 < with_comments < 450


_INDEXED_PIECES = [*" \n:#@+()x", ":=", "open", "set_option", "where", "rec", "eval", "in", "native", "simp"]
_INDEXED_PIECES += ['s!"{a : b}"', '"{open}"', "-- open\n"]


def test_indices_of_a_view_are_those_of_a_pass_over_its_texts():
    """`CodeTokens.indices_of` filters one pass over `INDEXED_TEXTS`; for every wanted set (a single text, a subset,
    a set with a text outside `INDEXED_TEXTS`), of the code or of the code outside literals, it must return what a
    plain pass over those texts returns."""
    from trl_verigate.lean_server.code_tokens import INDEXED_TEXTS

    wanted_sets = [":", "open", "simp", frozenset({"#", "@"}), frozenset({"open", "set_option"}), INDEXED_TEXTS]
    wanted_sets += [frozenset({"where", "simp"}), frozenset({"+", "native"}), frozenset()]
    found = 0
    for text in random_texts(_INDEXED_PIECES, seed=12, count=1500):
        view = CodeTokens(lex(text))
        for outside in (False, True):
            texts = view.outside_texts if outside else view.texts
            for wanted in wanted_sets:
                test = wanted.__eq__ if isinstance(wanted, str) else wanted.__contains__
                expected = [k for k, t in enumerate(texts) if test(t)]
                assert view.indices_of(wanted, outside=outside) == expected, (text, wanted, outside)
                found += len(expected)
    assert found > 10_000


def test_literal_and_run_flags_of_the_findall_scan_are_those_of_the_one_match_per_token_scan():
    """The findall scan skips looking for literals in a proof without `"` or `'`, and for runs in one without four
    brackets, `,` or `;` in a row. On random proofs with and without them (character literals, raw strings, primes,
    runs of exactly four), its tokens and literal flags must be those of the scan that matches one token at a time."""

    from trl_verigate.lean_server.tactic_tokens import Tokens

    pieces = ["(", ")", "((((", "(((", ",", ";", " ", "\n  ", "h", "h'", "'a'", '"s"', 'r"x"', 'r#"y"#', "''", ":="]
    literal_free = with_literals = 0
    for proof in random_texts(pieces, seed=5, count=3000, longest=12):
        scanned, one_by_one = Tokens(proof, 0), Tokens(proof + "\n/- c -/", 0)
        for field in ("text", "start", "end", "literal"):
            assert getattr(scanned, field) == getattr(one_by_one, field), (proof, field)
        quoted = '"' in proof or "'" in proof
        literal_free += not quoted
        with_literals += any(scanned.literal) and '"' not in proof  # a character literal alone
    assert literal_free > 300 and with_literals > 100
