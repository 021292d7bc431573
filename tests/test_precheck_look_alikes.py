"""The look-alike re-check's shortcut (`normalized_tokens.renamed_alike`, `token_rules.is_inert`): where NFKC only renames
or merges identifiers no rule reads by their text, the normalized code is not checked again.

The shortcut must never accept what checking the normalized tokens would refuse. Each test compares it with that
check itself (the full path, forced by turning the shortcut off) on hand-made attacks built to slip past it and on
random proofs, and holds `_RULE_TEXTS` to the texts the rules compare tokens with.
"""

from __future__ import annotations

import ast
import random
import re
import unicodedata
from pathlib import Path

import pytest

from trl_verigate.lean_server import config_values, precheck, token_rules
from trl_verigate.lean_server.lexer import Token, lex, split_name
from trl_verigate.lean_server.normalized_tokens import non_ascii_words, renamed_alike
from trl_verigate.lean_server.types import MINIF2F_HEADER, ProofRequest, VerificationResult
from trl_verigate.lean_server.verdict import prepare

STATEMENT = "theorem t (x : ℝ) (h : x = x) : x = x := by"


def outcome(proof: str, shortcut: bool, monkeypatch, allow_native_decide: bool = False) -> str:
    """`prepare`'s verdict on `proof` ("accepted" or the rejection reason), with or without the shortcut."""
    with monkeypatch.context() as patch:
        if not shortcut:
            patch.setattr(precheck, "_accepted_alike", lambda *args: False)
        result = prepare(ProofRequest(STATEMENT, proof), MINIF2F_HEADER, allow_native_decide)
    return result.reason if isinstance(result, VerificationResult) else "accepted"


def shortcut_applies(proof: str) -> bool:
    """`renamed_alike` on the proof's code, comments and literals blanked, as the look-alike check calls it."""
    code = precheck._code_only(proof, lex(proof))
    return renamed_alike(code, non_ascii_words(code), token_rules.is_inert)


# Proofs the code's own tokens pass and the normalized ones must not: each is refused only after NFKC, and each is
# built to pass through a gap in a weaker shortcut (the comment says which).
REFUSED_ONLY_AFTER_NFKC = [
    "  simp (x² := e)",  # the merged `x2` becomes a configuration item's name: no `:` may follow a merge
    "  simp (x² :=e)",
    "  simp (x²y := e)",  # a merge of three tokens
    "  simp (x²:= e)",  # the `:` inside the merged word
    "  simp a :(x² := e)",  # ... after a word that follows ` :` itself (found by review)
    "  have h :=(x² := e)",
    "  exact (h :(x²y := e))",
    # `.x2` becomes a literal constructor, the value a literal, and its options are checked: no `.` before a merge
    "  exact Foo.bar (config := { maxRecDepth := 99999, f := .x² })",
    "  set_option 𝓶axRecDepth 99999 in\n  simp",  # renamed into a bounded option
    "  simp (config := { 𝓶axRecDepth := 99999 })",
    "  set_option 𝓽race.Meta true in\n  simp",  # renamed into a forbidden option prefix
    "  decide +𝓷ative",  # renamed into `native` after `+`
    "  decide (config := { 𝓷ative := true })",
    "  field_simp (disch := 𝓭o; simp)",  # renamed into a word that makes a discharger a term
    "  exact 𝓈orry",  # renamed into a forbidden word
    "  exact Foo.𝓼orryAx",  # a forbidden name component
    "  exact 𝓻ec Foo.bar",  # renamed into `rec`, whose rule reads the name after it
]


@pytest.mark.parametrize("proof", REFUSED_ONLY_AFTER_NFKC)
def test_attacks_on_the_shortcut_are_refused_as_the_full_check_refuses_them(proof, monkeypatch):
    full = outcome(proof, shortcut=False, monkeypatch=monkeypatch)
    assert full != "accepted", full  # the attack is real: checking the normalized tokens refuses it
    assert not shortcut_applies(proof)
    assert outcome(proof, shortcut=True, monkeypatch=monkeypatch) == full


# What mathematical proofs write: the shortcut takes them, and the full check accepts them too.
TAKEN_BY_THE_SHORTCUT = [
    "  simp only [h₀, h₁, α, ℝ, x², 𝓝] at h ⊢",  # renames (ℝ, 𝓝, ₀ in a name) and a merge (x²) mid-word
    "  norm_num [(2 : ℝ) ^ 10 = 1024]",
    "  have hx : x² = x * x := by ring\n  exact hx",  # a merge at a word's end, followed by `=`, not `:`
    "  exact Nat.le_induction (m := 𝓐)",
    '  simp [show "ℝ" = "ℝ" from rfl, ℝ]',  # literals: the blanked code is checked on its own
    "  have h' : x² = x * x := by ring\n  exact h'",  # a `'` in a name before whitespace starts no literal
]


@pytest.mark.parametrize("proof", TAKEN_BY_THE_SHORTCUT)
def test_mathematical_unicode_takes_the_shortcut(proof, monkeypatch):
    assert shortcut_applies(proof)
    assert outcome(proof, shortcut=False, monkeypatch=monkeypatch) == "accepted"
    assert outcome(proof, shortcut=True, monkeypatch=monkeypatch) == "accepted"


def test_a_string_the_blanked_code_lacks_is_checked_before_the_shortcut_is_taken(monkeypatch):
    # `(m := "a")` is a literal item, but blanked it is `(m :=    )`, an item without a value: the full path refuses
    # it after NFKC, and the shortcut must not accept it on the strength of the unblanked tokens.
    proof = '  simp (m := "a") [ℝ]'
    full = outcome(proof, shortcut=False, monkeypatch=monkeypatch)
    assert "after Unicode normalization" in full
    assert shortcut_applies(proof)  # word by word NFKC only renames `ℝ`: the blanked code decides
    assert outcome(proof, shortcut=True, monkeypatch=monkeypatch) == full


# Random proofs from the shapes the rules read (options, configuration items and fields, `+flag`, named arguments,
# binders, `.ctor` values), with names and values drawn from ASCII words the rules know and from Unicode that NFKC
# renames into them or merges (`x²`), so both outcomes are common: accepted by the shortcut, refused after NFKC.
_NAMES = [
    "x²",
    "x²y",
    ".x²",
    "ℝ",
    "h₀",
    "𝓝",
    "m",
    "e",
    "maxRecDepth",
    "𝓶axRecDepth",
    "𝓽race.Meta",
    "𝓷ative",
    "native",
    "𝓭o",
    "disch",
    "Foo.x²",
    "𝓼orry",
    "α",
]
_VALUES = ["99999", "1", "e", "x²", ".x²", "true", "𝓭o; simp", "ℝ", "h₀", "(x²)", "[x², 1]", '"s"', "'c'", "⁻¹"]
_VALUES += ["h'", "ℝ'", "∑' ℝ", "＇ ＇", "＇\\ ＇", "' '", ":(x²", "h :(x²"]
_SHAPES = [
    "simp ({n} := {v})",
    "simp ({n} :={v})",
    "exact Foo.bar ({n} := {v})",
    "simp (config := {{ {n} := {v}, {n} := {v} }})",
    "exact Foo.bar (config := {{ maxRecDepth := 99999, f := {v} }})",
    "set_option {n} {v} in\n  simp",
    "decide +{n}",
    "field_simp (disch := {v})",
    "simp only [{n}, {v}] at h ⊢",
    "have {n} : {n} = {v} := by ring",
    "exact {n} {v}",
    "aesop (add unsafe {n})",
    "exact {n}:{v}",
]


def random_proofs(seed: int, count: int):
    rng = random.Random(seed)
    for _ in range(count):
        lines = []
        for _ in range(rng.randint(1, 3)):
            shape = rng.choice(_SHAPES)
            while "{n}" in shape or "{v}" in shape:
                shape = shape.replace("{n}", rng.choice(_NAMES), 1).replace("{v}", rng.choice(_VALUES), 1)
            lines.append("  " + shape.replace("{{", "{").replace("}}", "}"))
        yield "\n".join(lines)


def test_the_shortcut_never_changes_a_verdict_on_random_proofs(monkeypatch):
    taken = refused_after_nfkc = 0
    for proof in random_proofs(seed=5, count=4000):
        full = outcome(proof, shortcut=False, monkeypatch=monkeypatch)
        assert outcome(proof, shortcut=True, monkeypatch=monkeypatch) == full, proof
        if "after Unicode normalization" in full:
            refused_after_nfkc += 1
        elif full == "accepted" and not proof.isascii() and shortcut_applies(proof):
            taken += 1
    # Both sides of the shortcut were exercised: proofs it took, and proofs only the normalized check refuses.
    assert taken > 200 and refused_after_nfkc > 100, (taken, refused_after_nfkc)


def _rule_constants() -> set[str]:
    """The short string constants of the token rules: all of config_values.py, and token_rules.py's `check_tokens` and
    the helpers and word sets it reads (docstrings and messages, which hold spaces, left out)."""
    constants: set[str] = set()

    def collect(node):
        docstrings = {
            ast.get_docstring(n) for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Module))
        }
        for n in ast.walk(node):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value not in docstrings:
                if n.value and " " not in n.value and "\n" not in n.value:
                    constants.add(n.value)

    collect(ast.parse(Path(config_values.__file__).read_text(encoding="utf-8")))
    rules = {"check_tokens", "_is_keyword_argument", "_is_native", "forbidden_word"}
    word_sets = {"_OWN_RULE_WORDS", "_WATCHED_SYMBOLS", "_WATCHED_SYMBOLS_NATIVE", "_BINDING_WORDS", "PREFIX_COMMANDS"}
    for node in ast.parse(Path(token_rules.__file__).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef) and node.name in rules:
            collect(node)
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) in word_sets for t in node.targets):
            collect(node)
    return constants


# Constants the rules compare with a token's kind, or use to build names and messages, never with a token's text.
_NOT_TOKEN_TEXTS = {"ident", "symbol", "number", "string", "char", "comment"}


def test_no_text_a_rule_reads_is_inert():
    constants = _rule_constants() - _NOT_TOKEN_TEXTS
    assert {"set_option", "native", "rule_sets", "add", ":", "="} <= constants  # the scan finds the rules' texts
    for text in constants:
        kind = "ident" if re.match(r"[A-Za-z_]", text) else "symbol"
        components = tuple(split_name(text)) if kind == "ident" else ()
        assert not token_rules.is_inert(Token(kind, 0, len(text), text, components)), text


@pytest.mark.parametrize(
    ("kind", "text", "inert"),
    [
        ("ident", "R", True),
        ("ident", "h0", True),
        ("ident", "Real.sqrt", True),
        ("ident", "maxRecDepth", False),  # a bounded option
        ("ident", "foo.maxRecDepth", False),  # ... as a field's dotted suffix
        ("ident", "trace.Meta", False),  # a forbidden option
        ("ident", "Foo.native", False),
        ("ident", "sorry", False),
        ("ident", "disch", False),
        ("ident", "true", False),
        ("symbol", "−", True),  # not ASCII, no rule reads it
        ("symbol", "⟨", False),  # a bracket
        ("symbol", "+", False),
        ("number", "2", False),  # numbers are read as values
    ],
)
def test_is_inert(kind, text, inert):
    components = tuple(split_name(text)) if kind == "ident" else ()
    assert token_rules.is_inert(Token(kind, 0, len(text), text, components)) is inert


@pytest.mark.parametrize(
    ("code", "words"),
    [
        ("  simp [h₀, x²]\n  ring", {"[h₀,", "x²]"}),
        ("a\tℝ\r\nℝ b", {"ℝ"}),
        ("x\x0bℝ y", {"x\x0bℝ"}),  # a vertical tab is a symbol to the lexer, so it splits no word
        ("x\u3000ℝ", {"x\u3000ℝ"}),  # nor does an ideographic space
        ("only ascii", set()),
    ],
)
def test_non_ascii_words_are_split_where_the_lexer_skips_whitespace(code, words):
    assert non_ascii_words(code) == words


def test_nfkc_normalizes_word_by_word():
    """`renamed_alike` normalizes the code word by word: ASCII whitespace is in no canonical decomposition and has
    combining class 0, so nothing composes or reorders across it. Checked on this Python's Unicode data."""
    rng = random.Random(12)
    pieces = ["e", "\u0301", "\u0316", " ", "\n", "\t", "\r", "ℝ", "²", "\u1100", "\u1161", "\u11a8", "ﬁ", "\u0f73"]
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        words = re.split(r"([ \n\r\t]+)", text)
        assert unicodedata.normalize("NFKC", text) == "".join(unicodedata.normalize("NFKC", w) for w in words)


@pytest.mark.parametrize("proof", ["  simp [ℝ, xe\u0301]", "  simp [ℝ, e\u0316\u0301]", "  simp [ℝ, ﬁx]"])
def test_a_word_nfkc_composes_or_lengthens_is_left_to_the_full_check(proof, monkeypatch):
    # `e` + U+0301 composes to `é`, two marks reorder, `ﬁ` becomes two letters: not a translation character for
    # character, so the shortcut declines and the normalized code is lexed and checked.
    assert not shortcut_applies(proof)
    assert outcome(proof, shortcut=True, monkeypatch=monkeypatch) == outcome(
        proof, shortcut=False, monkeypatch=monkeypatch
    )
