"""The verdict: the precheck (`prepare`) and the judgement of REPL answers (`judge`)."""

import json
import random

import pytest

from trl_verigate.lean_server import verdict
from trl_verigate.lean_server.tactics import split_tactics, split_tactics_and_tokens
from trl_verigate.lean_server.types import (
    MINIF2F_HEADER,
    LeanServerConfig,
    Position,
    ProofRequest,
    VerificationResult,
)
from trl_verigate.lean_server.verdict import (
    EXAMPLE_NAME,
    Prepared,
    is_axioms_answer,
    judge,
    parse_axioms_message,
    prepare,
    split_header,
)

CONFIG = LeanServerConfig()
NATIVE = LeanServerConfig(
    allow_native_decide=True, axiom_whitelist=CONFIG.axiom_whitelist + ("Lean.ofReduceBool", "Lean.trustCompiler")
)
CLEAN_AXIOMS = ["propext", "Classical.choice", "Quot.sound"]

LEGITIMATE = [
    ("theorem t (n : ℕ) (h₀ : n % 5 = 3) : 2 * n % 5 = 1 := by", "  omega"),
    ("theorem t (x : ℝ) (h₀ : 2 * x + 3 = 7) : x = 2 := by", "  linarith"),
    ("theorem t (a b : ℝ) : a ^ 2 + b ^ 2 ≥ 2 * a * b := by", "  nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)]"),
    ("theorem t : (2 : ℝ) ^ 3 = 8 := by", "  norm_num"),
    ("theorem t (a b : ℕ) (h : a = b) : b = a := by", "  simp [h]"),
    (
        "theorem t (a b c : ℝ) (h₁ : a = b) (h₂ : b = c) : a = c := by",
        "  calc a = b := h₁\n    _ = c := h₂",
    ),
    (
        "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q := by",
        "  constructor\n  · exact hp\n  · exact hq",
    ),
    ("theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q := by", "  constructor\n  . exact hp\n  . exact hq"),
    (
        "theorem t (n : ℕ) : n * 0 = 0 ∨ n = 0 := by",
        "  cases n with\n  | zero => simp\n  | succ k => left; simp",
    ),
    ("theorem t (x : ℝ) (hx : 0 < x) : 0 < x ^ 2 := by", "  have h : 0 < x * x := by\n    positivity\n  nlinarith [h]"),
    ("theorem t : (1 : ℕ) + 1 = 2 := by", "  -- sorry for the mess, no axiom here, no #exit either\n  norm_num"),
    ("theorem t : (1 : ℕ) + 1 = 2 := by", "  /- we could `sorry` /- nested -/ or `native_decide` -/\n  rfl"),
    ('theorem t : "#eval".length = 5 := by', '  have h : "#eval sorry" ≠ "" := by decide\n  rfl'),
    ("theorem t : 'a' ≠ '\"' := by", "  decide"),
    ("theorem t (x : ℝ) (h₀ : x ≠ 0) : x / x = 1 := by", "  field_simp"),
    ("theorem t : ∀ ε > (0 : ℝ), ∃ δ > 0, δ < ε := by", "  intro ε hε\n  exact ⟨ε / 2, by positivity, by linarith⟩"),
    ("theorem t (f : ℕ → ℕ) (h : ∀ x, f x = x) : f 2 = 2 := by", "  set_option maxRecDepth 10000 in\n  simp [h]"),
    ("theorem t (a : ℤ) (h' : a = 2) : a ^ 2 = 4 := by", "  subst h'\n  norm_num"),
    (
        "theorem t : Real.sqrt 4 = 2 := by",
        "  rw [show (4 : ℝ) = 2 ^ 2 by norm_num]\n  exact Real.sqrt_sq (by norm_num)",
    ),
    ("example : (3 : ℤ) ∣ 12 := by", "  decide"),
]


@pytest.mark.parametrize("statement,proof", LEGITIMATE)
def test_the_precheck_accepts_legitimate_proofs(statement, proof):
    prepared = prepare(ProofRequest(statement, proof), MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.header == MINIF2F_HEADER
    renamed = f"theorem {EXAMPLE_NAME}\n" + " " * len("example")
    assert prepared.code.startswith(statement.replace("example", renamed, 1) + "\n" + proof)
    assert prepared.code[prepared.proof_start : prepared.proof_end] == proof


def test_prepared_code_appends_print_axioms_two_lines_after_the_proof():
    prepared = prepare(ProofRequest("theorem foo : 1 = 1 := by", "  rfl"), "import Mathlib")
    assert prepared.code == "theorem foo : 1 = 1 := by\n  rfl\n\n#print axioms foo"
    assert (prepared.proof_start, prepared.theorem_name, prepared.line_offset) == (26, "foo", 0)
    assert prepared.print_line == 4


def test_a_request_header_overrides_the_default_header():
    prepared = prepare(ProofRequest("theorem foo : 1 = 1 := by", "  rfl", header="import Lean"), MINIF2F_HEADER)
    assert prepared.header == "import Lean"


T = "theorem t : 2 + 2 = 5 := by"

REJECTED = [
    ("  sorry", "`sorry`"),
    ("  exact sorry", "`sorry`"),
    ("  admit", "`admit`"),
    ("  norm_num\n  stop\n  simp", "`stop`"),
    ("  apply?", "`apply?`"),
    ("  exact?", "`exact?`"),
    ("  exact sorryAx _ false", "sorryAx"),
    ("  exact _root_.«sorryAx» _ false", "sorryAx"),
    ("  norm_num\naxiom cheat : False", "column 0"),
    ("  norm_num\n  axiom cheat : False", "command `axiom`"),
    ("  norm_num\n  theorem x : False := cheat", "command `theorem`"),
    ("  norm_num\n  lemma x : False := cheat", "command `lemma`"),
    ("  norm_num\n  def x := 1", "command `def`"),
    ("  norm_num\n  abbrev x := 1", "command `abbrev`"),
    ("  norm_num\n  instance : Inhabited Empty := sorry", "command `instance`"),
    ("  norm_num\n  structure S where", "command `structure`"),
    ("  norm_num\n  class C where", "command `class`"),
    ("  norm_num\n  inductive I | a", "command `inductive`"),
    ("  norm_num\n  namespace N", "command `namespace`"),
    ("  norm_num\n  section", "command `section`"),
    ("  norm_num\n  end", "command `end`"),
    ("  norm_num\n  mutual", "command `mutual`"),
    ("  norm_num\n  import Lean", "command `import`"),
    ("  norm_num\n  opaque o : Nat", "command `opaque`"),
    ("  norm_num\n  constant c : Nat", "command `constant`"),
    ('  norm_num\n  macro "x" : tactic => `(tactic| rfl)', "command `macro`"),
    ("  norm_num\n  macro_rules | `(tactic| rfl) => `(tactic| sorry)", "command `macro_rules`"),
    ('  norm_num\n  syntax "x" : tactic', "command `syntax`"),
    ('  norm_num\n  elab "x" : tactic => pure ()', "command `elab`"),
    ("  norm_num\n  elab_rules : tactic | _ => pure ()", "command `elab_rules`"),
    ('  norm_num\n  notation "x" => 1', "command `notation`"),
    ('  norm_num\n  infix:50 " ~ " => Eq', "command `infix`"),
    ('  norm_num\n  infixl:50 " ~ " => Eq', "command `infixl`"),
    ('  norm_num\n  infixr:50 " ~ " => Eq', "command `infixr`"),
    ('  norm_num\n  prefix:50 "~" => Not', "command `prefix`"),
    ('  norm_num\n  postfix:50 "~" => Not', "command `postfix`"),
    ('  norm_num\n  scoped notation "x" => 1', "command `scoped`"),
    ("  norm_num\n  attribute [simp] Nat.add_comm", "command `attribute`"),
    ("  norm_num\n  #exit", "`#exit`"),
    ("  norm_num\n  #eval 1", "`#eval`"),
    ("  norm_num\n  #print axioms t", "`#print`"),
    ("  #check Nat\n  norm_num", "`#check`"),
    ("  run_cmd pure ()", "`run_cmd`"),
    ("  run_tac pure ()", "`run_tac`"),
    ("  run_elab pure ()", "`run_elab`"),
    ("  exact by_elab pure (Lean.mkConst ``trivial)", "`by_elab`"),
    ("  set_option debug.skipKernelTC true in\n  norm_num", "debug.skipKernelTC"),
    ("  set_option debug.byAsSorry true in\n  norm_num", "debug.byAsSorry"),
    ("  norm_num\n  unsafe def x : Nat := 1", "command `unsafe`"),
    ("  norm_num\n  @[implemented_by f] def g : Nat := 1", "`@[`"),
    ('  norm_num\n  @[extern "c_fn"] opaque g : Nat', "`@[`"),
    ("  native_decide", "native_decide"),
    ("  exact Lean.ofReduceBool _ _ rfl", "ofReduceBool"),
    ("  open Lean in exact ofReduceBool _ _ rfl", "ofReduceBool"),
    ("  decide +native", "+native"),
    ("  decide (config := { native := true })", "native evaluation"),
    ("  bv_decide", "bv_decide"),
    ("norm_num", "column 0"),
    # Inside brackets Lean checks no columns, but a command word or `#` command there is still refused.
    ("  exact (foo\n#eval 1)", "`#eval`"),
    ("  exact (foo\naxiom cheat : False)", "command `axiom`"),
    ("  nlinarith [foo,\ntheorem x : False := cheat]", "command `theorem`"),
    ("  exact ⟨foo,\nset_option debug.skipKernelTC true in bar⟩", "debug.skipKernelTC"),
    # Column 0 outside brackets: after the list closes, after a stray closer, after a bracket in a string.
    ("  nlinarith [foo\n]\nsimp", "column 0"),
    ("  exact foo)\nsimp", "column 0"),
    ('  have := s!"{(1}"\nsimp', "column 0"),
    ("  norm_num\n\tsimp", "tab"),
    ("  norm_num\raxiom c : False", "carriage return"),
    ("  norm_num /- open comment", "unterminated block comment"),
    ('  have := "open string', "unterminated string"),
    ("  have := ∑'\"' = 1", "ambiguous"),
    ("  have «x : True := trivial", "identifier escape"),
    ('  have := s!"{sorry}"', "`sorry`"),
    ('  exact dbg_trace "{(by native_decide : True)}"; trivial', "native_decide"),
    ('  have := s!"{"x"}"', "unpaired brace"),
    ("  have := s!\"{ '}' sorry }\"", "unpaired brace"),
    ("  have := s!\"{ '{' }\"", "unpaired brace"),
    ('  have := s!"{ x /- } -/ }"', "unpaired brace"),
    ("  so\u200brry", "U+200B"),
    ("  norm_num -- \u202e hidden", "U+202E"),
    ("  norm_num \ufeff", "U+FEFF"),
    ("   ", "empty proof"),
]


@pytest.mark.parametrize("proof,reason", REJECTED)
def test_the_precheck_rejects_each_rule_and_says_what_and_where(proof, reason):
    result = prepare(ProofRequest(T, proof), MINIF2F_HEADER)
    assert isinstance(result, VerificationResult)
    assert result.status == "rejected" and not result.passed
    assert result.first_error_tactic == 0
    assert reason in result.reason, result.reason


# Commands of Lean, Batteries and Mathlib (and declaration suffixes) that each pass as a line after a proof unless
# the precheck knows their keyword; `%`/`?` suffixes are separate tokens or part of the word, as in Lean.
LATE_COMMANDS = [
    'notation3 "ℵ" => (1 : ℕ)',
    'binder_predicate x " > " y:term => `($x > $y)',
    "recall Nat.add_comm",
    "register_hint simp",
    "initialize_simps_projections Nat",
    "mk_iff_of_inductive_prop Nat.le foo",
    "gen_injective_theorems% Nat",
    "set_premise_selector foo",
    "add_tactic_doc foo",
    "deprecate to foo",
    "to_additive_ignore_args 1",
    "insert_to_additive_translation a b",
    "register_error_explanation foo",
    'recommended_spelling "x" for "y" in [foo]',
    "variable? [Foo]",
    "termination_by? n",
    "partial_fixpoint",
    "inductive_fixpoint",
    "coinductive_fixpoint",
    "assert_not_imported Foo",
    "reset_grind_attrs%",
    "grind_propagator foo",
    "builtin_simproc_decl foo (_) := fun _ => pure .continue",
    "simproc_pattern% foo",
]


@pytest.mark.parametrize("command", LATE_COMMANDS)
def test_commands_after_the_proof_are_rejected_at_the_block_column_and_inside_it(command):
    word = command.split()[0].rstrip("%")
    for proof in (f"  rfl\n  {command}", f"  rfl\n    {command}"):
        result = prepare(ProofRequest(T, proof), MINIF2F_HEADER)
        assert isinstance(result, VerificationResult), f"sent to Lean: {proof!r}"
        assert result.status == "rejected" and f"command `{word}`" in result.reason, result.reason


# Code the top-level tactic block does not cover has closed the `by` block: Lean reads it as commands or as a
# declaration suffix (`where`, `termination_by`), at any column between 0 and the block's.
OUTSIDE_THE_BLOCK = [
    "  norm_num\n set_option pp.all true",
    "  skip\n open Nat in\n  skip",
    "  exact t.h\n where h : False := t.h",
    "  exact t.h\n    where h : False := t.h",
    "  exact t\n termination_by 0\n decreasing_by all_goals simp_wf",
    "  trivial\n deriving Repr",
    "    norm_num\n  simp",
    "  norm_num\n    set_option pp.all true",
    "  norm_num\n    open Nat",
    "  constructor\n  · simp\n · simp",
]


# The same escapes, hidden from a splitter that lexes strings or escaped names differently from Lean: the line
# dedented to column 1 must still be seen, or it would reach Lean as a command.
OUTSIDE_THE_BLOCK += [
    '  have s : String := r#"a " b"#\n  skip\n trivial',
    '  have s : String := r##"a "# ( "# "##\n  skip\n trivial',
    '  simp [«x\n   "»]\n  skip\n trivial',
    "  simp [«x\n   (»]\n  skip\n trivial",
]


# A finished tactic that ends in a token which elsewhere needs more (`*`, `only`) still ends where Lean ends it: the
# dedented line is a command to Lean, whether or not the precheck knows its keyword.
OUTSIDE_THE_BLOCK += [
    "    simp at *\n  linarith",
    "    simp at *\n  recall Nat.add_comm",
    '    simp at *\n  notation3 "ℵ" => (1 : ℕ)',
    "    simp only\n  recall Nat.add_comm",
    "    norm_num at h ⊢\n  recall Nat.add_comm",
    # A line with `:=` below the block is no `calc` step: the step column Lean saved is further right.
    "    calc 2 + 2 = 4 := rfl\n      _ = 5 := h\n  recall Nat.add_comm (n m : ℕ) : n + m = m + n := Nat.add_comm n m",
    "    calc 2 + 2 = 4 := rfl\n  unknown_command x : y := z",
    # A split focus list ends at its `]`: a dedented line after it is a command again.
    "    constructor <;> [skip; skip]\n  unknown_command x : y := z",
    "    constructor <;> [skip;\n skip]\n  unknown_command x : y := z",
]


@pytest.mark.parametrize("proof", OUTSIDE_THE_BLOCK)
def test_code_outside_the_top_level_tactic_block_is_rejected(proof):
    result = prepare(ProofRequest(T, proof), MINIF2F_HEADER)
    assert isinstance(result, VerificationResult), f"sent to Lean: {result.code!r}"
    assert result.status == "rejected" and result.reason


def test_a_file_proof_on_the_by_line_cannot_be_followed_by_a_dedented_command():
    result = prepare("import Mathlib\ntheorem t : True := by trivial\n  open Nat in simp", MINIF2F_HEADER)
    assert result.status == "rejected" and "outside" in result.reason, result.reason


# Layouts the block check must keep accepting.
LAYOUTS = [
    "  constructor\n  · simp\n  · nlinarith [sq_nonneg (a - b),\n      sq_nonneg (a + b)]",
    "  calc a ^ 2 + b ^ 2 = (a - b) ^ 2 + 2 * a * b := by ring\n    _ ≥ 2 * a * b := by nlinarith [sq_nonneg (a - b)]",
    "  calc\n    a = a := rfl\n    _ = a := by\n      rfl",
    "  constructor <;>\n    simp_all",
    "  refine ⟨?_, ?_⟩\n  <;> norm_num",
    "  exact\n    foo bar\n      baz",
    "  have h : 0 ≤ (a - b) ^ 2 :=\n    sq_nonneg _\n  linarith",
    "  case left => simp\n  case right =>\n    simp",
    "  cases x\n  next => simp\n  next n =>\n    simp",
    "  induction x with\n  | zero => simp\n  | succ n ih =>\n    simp_all",
    "  rcases h with ⟨x, rfl⟩ | ⟨y, rfl⟩\n  · simp\n  · simp",
    "  have key : ∀ z : ℕ, z + 0 = z := fun z => by simp\n  exact key 1",
    "  have h : 0 < 2 := by\n    norm_num\n  linarith",
    "  conv => lhs; rw [add_comm]",
    "  conv =>\n    lhs\n    rw [add_comm]",
    "  show _ ≥ _ from le_of_sub_nonneg (by nlinarith [sq_nonneg (a - b)])",
    "  match x with\n  | 0 => simp\n  | n + 1 => simp",
    "  first\n  | linarith\n  | nlinarith [sq_nonneg (a - b)]",
    "  open Real in\n  nlinarith [Real.sqrt_nonneg 2]",
    "  set_option maxHeartbeats 800000 in\n  nlinarith [sq_nonneg (a - b)]",
    "  intro x\n  -- a comment at column 0 below is fine\n-- like this\n  simp",
    "  simp\n  /- a block comment\nat column 0 -/\n  rfl",
    "  obtain ⟨y, hy⟩ := h\n  subst hy\n  positivity",
    "  suffices h : 0 ≤ (a - b) ^ 2 by nlinarith\n  positivity",
    "  apply foo\n  all_goals\n    simp",
    "  have := calc a = a := rfl\n    _ = a := rfl\n  simp",
    "  exact fun ⟨h1, h2⟩ =>\n    h1",
    "  nlinarith [sq_nonneg (a - b), sq_nonneg (a + b),\n    mul_self_nonneg (a - 1)]",
    "  by_cases h : x ≤ 2\n  · interval_cases x <;> simp_all\n  · push_neg at h\n    omega",
    "  constructor; simp; simp",
    "  constructor\n  · simp;\n  · simp",
    '  have s : String := r#"a " b"#\n  skip\n  trivial',
    '  have s : String := r"plain"\n  trivial',
    "  simp [«x\n   y»]\n  skip",
    '  have := s!"{(1 : ℕ) + 1}"\n  trivial',
    "  have : (1_000 : ℕ) = 1000 := rfl\n  trivial",
    # Batteries' split focus `t <;> [t1; t2]`: its `;` and `]` lie inside the `<;>` tactic.
    # Lean checks no columns inside brackets, so a term list may continue at column 0.
    "  nlinarith [sq_nonneg (a - b),\nsq_nonneg (a + b)]",
    "  nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)\n]",
    "  exact ⟨by simp,\nby simp⟩",
    "  constructor <;> [exact hp; exact hq]",
    "  refine ⟨?_, ?_, ?_⟩ <;> [exact hp; exact hq; exact hr]",
    "  rcases mul_eq_zero.mp h' with h'' | h''\n  <;> [left; right]\n  <;> linarith",
]


@pytest.mark.parametrize("proof", LAYOUTS)
def test_the_block_check_accepts_legitimate_layouts(proof):
    prepared = prepare(ProofRequest("theorem t (a b : ℝ) (x : ℕ) (h : True) : True := by", proof), MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason


def _lexers_agree(proof: str) -> bool:
    splitter_tokens = split_tactics_and_tokens(proof)[1]
    return verdict._lexers_disagree_at(verdict._lex(proof), splitter_tokens) is None


# Pieces whose extent only a careful lexer gets right: literals with quotes, escapes and hashes inside, nested
# comments, names escaped across lines, interpolations, and symbols built from `'`.
LEXER_PIECES = [
    'r#"a " b"#',
    'r"x"',
    'r##"q "# "##',
    "«x\n   y»",
    '"s \\" t"',
    "'a'",
    "'\\''",
    "'\"'",
    "/- c /- n -/ -/",
    "-- line comment\n",
    's!"{x} and {y}"',
    "(",
    ")",
    "⌊x⌋",
    ":=",
    "1_000",
    "h₀",
    "∑' i",
    "f '' s",
    "x.1",
    "\n  ",
]


def test_the_precheck_and_the_splitter_read_the_same_tokens():
    proofs = [proof for _, proof in LEGITIMATE] + LAYOUTS + [proof for _, proof in PRIME_NOTATION]
    rng = random.Random(0)
    proofs += ["  " + " ".join(rng.choice(LEXER_PIECES) for _ in range(6)) for _ in range(400)]
    lexed = 0
    for proof in proofs:
        try:
            verdict._lex(proof)
        except verdict.PrecheckError:
            continue
        lexed += 1
        assert _lexers_agree(proof), proof
    assert lexed > 300


def test_rejection_reasons_give_the_position_in_the_submitted_source():
    # Like `Message`s: a ProofRequest's source is `statement + "\n" + proof`, so proof line 3 is line 4.
    result = prepare(ProofRequest(T, "  norm_num\n  simp\n    exact sorry"), MINIF2F_HEADER)
    assert result.reason == "`sorry` at line 4, column 10"
    result = prepare(ProofRequest(T, '  have := s!"{(1 : ℕ)} {sorry}"'), MINIF2F_HEADER)
    assert result.reason == "`sorry` at line 2, column 24"


@pytest.mark.parametrize(
    "file_text,reason",
    [
        # The file's own lines: the header's lines count, in the statement and in the proof alike.
        (
            "import Mathlib\nset_option debug.skipKernelTC true in\ntheorem t : True := by\n  trivial",
            "`set_option debug.skipKernelTC` at line 2, column 0",
        ),
        (
            "import Mathlib\nimport Aesop\n\ntheorem t (n : ℕ) :\n    n = n := by\n  exact sorry",
            "`sorry` at line 6, column 8",
        ),
        ("import Mathlib\ntheorem t : True := by trivial\n  open Nat in simp", "`open` at line 3, column 2"),
        ("import Mathlib\nset_option warn.sorry false\ntheorem t : True := by\n  trivial", "at line 2, column 0"),
        ("import Mathlib\n\ndef h : ℕ := 1\ntheorem t : h = 1 := by\n  rfl", "`def` at line 3, column 0"),
        ("import Mathlib\ntheorem t : True := trivial\nmy_cmd s := by\n  simp", "`:=` at line 2, column 17"),
        ("import Mathlib\nexample : True := by\n  trivial\naxiom c : False", "`axiom` at line 4, column 0"),
    ],
)
def test_file_rejections_are_positioned_in_the_file(file_text, reason):
    result = prepare(file_text, MINIF2F_HEADER)
    assert result.status == "rejected" and reason in result.reason, result.reason


NATIVE_SPELLINGS = [
    "  decide (config := { native := Bool.true })",
    "  decide (config := { native := !false })",
    "  decide (config := { native := (true) })",
    "  decide (config := { Lean.Meta.DecideConfig.native := true })",
    "  decide (config := { «native» := true })",
    "  decide (config := Lean.Meta.DecideConfig.mk false true true false)",
    "  decide (config := ⟨false, true, true, false⟩)",
    "  decide (config := .mk false true true false)",
    "  decide +«native»",
    "  bv_decide?",
    '  bv_check "proof.lrat"',
]


@pytest.mark.parametrize("proof", NATIVE_SPELLINGS)
def test_native_evaluation_is_rejected_under_any_spelling(proof):
    result = prepare(ProofRequest(T, proof), MINIF2F_HEADER)
    assert isinstance(result, VerificationResult), f"sent to Lean: {result.code!r}"
    assert result.status == "rejected", result.reason
    assert "native" in result.reason or "DecideConfig" in result.reason or "bv_" in result.reason, result.reason


@pytest.mark.parametrize(
    "proof", ["  hint", "  observe h : 1 = 1", "  observe? h : 1 = 1", "  plausible", "  slim_check"]
)
def test_search_and_counterexample_tactics_are_rejected(proof):
    assert prepare(ProofRequest(T, proof), MINIF2F_HEADER).status == "rejected"


@pytest.mark.parametrize(
    "proof",
    ["  decide", "  decide +kernel", "  simp (config := { decide := true })", "  exact native_lemma", "  omega"],
)
def test_kernel_decide_and_other_configs_pass(proof):
    assert isinstance(prepare(ProofRequest(T, proof), MINIF2F_HEADER), Prepared)


@pytest.mark.parametrize(
    "proof",
    [
        "  native_decide",
        "  decide +native",
        "  decide (config := { native := true })",
        "  exact Lean.ofReduceBool _ _ rfl",
        "  bv_decide",
    ],
)
def test_native_evaluation_passes_the_precheck_only_when_allowed(proof):
    assert prepare(ProofRequest(T, proof), MINIF2F_HEADER).status == "rejected"
    assert isinstance(prepare(ProofRequest(T, proof), MINIF2F_HEADER, allow_native_decide=True), Prepared)


# Lean reads these as the forbidden name itself: caught by comparing dotted components without guillemets.
SAME_NAME_TO_LEAN = [
    "  exact «sorryAx» _ false",
    "  exact _root_.sorryAx _ false",
    "  exact Lean.«ofReduceBool» _ _ rfl",
    "  exact «Lean».«ofReduceBool» _ _ rfl",
    "  exact «sorry»",
]
# Lean reads these as different identifiers (or none at all); rejected as look-alikes anyway.
DIFFERENT_NAME_TO_LEAN = [
    "  ｓｏｒｒｙ",  # fullwidth: NFKC maps it to ASCII
    "  ѕоrrу",  # Cyrillic: NFKC keeps it, the confusables map catches it
    "  sοrry",  # Greek omicron: a valid Lean identifier, just not `sorry`
    "  exact 𝐬𝐨𝐫𝐫𝐲Ax _ false",  # mathematical bold letters are Lean identifier characters
    "  ａｄｍｉｔ",
    "  norm_num\n  ＃ｅｘｉｔ",  # fullwidth `#`: only NFKC of the whole text shows `#exit`
    "  ｎａｔｉｖｅ＿ｄｅｃｉｄｅ",
]


@pytest.mark.parametrize("proof", SAME_NAME_TO_LEAN)
def test_spellings_lean_treats_as_the_same_name_are_rejected(proof):
    result = prepare(ProofRequest(T, proof), MINIF2F_HEADER)
    assert result.status == "rejected"
    assert "look-alike" not in result.reason


@pytest.mark.parametrize("proof", DIFFERENT_NAME_TO_LEAN)
def test_look_alikes_of_forbidden_words_are_rejected(proof):
    result = prepare(ProofRequest(T, proof), MINIF2F_HEADER)
    assert result.status == "rejected"
    assert "look-alike" in result.reason or "NFKC" in result.reason, result.reason


# Mathlib tokens that end in `'` (`∑'`, `∏'`, image `''`, preimage `⁻¹'`) are not character literals.
PRIME_NOTATION = [
    ("theorem t (f : ℕ → ℝ) : True := by", "  have : ∑' n : ℕ, (0:ℝ) = 0 := tsum_zero\n  trivial"),
    ("theorem t (f : ℕ → ℝ) : True := by", "  have : ∏' n : ℕ, (1:ℝ) = 1 := tprod_one\n  trivial"),
    ("theorem t (f : ℕ → ℝ) : True := by", "  have : f '' Set.univ = Set.range f := Set.image_univ\n  trivial"),
    ("theorem t (f : ℝ → ℝ) (s : Set ℝ) : True := by", "  have : f ⁻¹' s = f ⁻¹' s := rfl\n  trivial"),
    ("theorem t (f : ℝ → ℝ) (s : Set ℝ) : True := by", "  have h : (f ⁻¹' s) ⊆ f⁻¹' s := subset_refl _\n  trivial"),
    ("theorem t (f : ℕ → ℕ) (s : Set ℕ) : f '' s ⊆ Set.range f := by", "  rintro _ ⟨x, -, rfl⟩\n  exact ⟨x, rfl⟩"),
    ("theorem t : ∑' n : ℕ, (0 : ℝ) = 0 := by", "  simp"),
    ("theorem t : 'a' ≠ 'b' := by", "  have : ['x', 'y'].length = 2 := rfl\n  decide"),
]


@pytest.mark.parametrize("statement,proof", PRIME_NOTATION)
def test_prime_notations_are_not_character_literals(statement, proof):
    prepared = prepare(ProofRequest(statement, proof), MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    file_text = "import Mathlib\n" + statement + "\n" + proof
    assert isinstance(prepare(file_text, MINIF2F_HEADER), Prepared)


def test_a_quote_character_literal_glued_to_a_symbol_is_ambiguous_and_rejected():
    # Lean may read `∑'` as one token and then `"` as a string start, where a char-literal reading sees `'"'`.
    result = prepare(ProofRequest(T, "  have := ∑'\"' x \"\n  exact sorry"), MINIF2F_HEADER)
    assert result.status == "rejected"
    result = prepare(ProofRequest(T, '  have := ∑\'"\' x "; rfl " = 1\n  rfl'), MINIF2F_HEADER)
    assert result.status == "rejected" and "ambiguous" in result.reason, result.reason


@pytest.mark.parametrize(
    "proof",
    [
        "  exact ⟨by norm_num, by positivity⟩",
        "  intro α β hαβ\n  simpa using hαβ",
        "  have h₀' : (x₁ : ℝ) ≤ x₂ := by linarith\n  exact h₀'",
        "  simp [Finset.sum_range_succ, ℝ, ℕ, ℤ, ℚ, ℂ]",
        "  rw [Real.rpow_natCast]\n  norm_num [x², 𝓝, ε]",
        "  exact Nat.le_of_lt_succ (by omega) -- Übung: à la",
        "  exact stopping_time_pos hσ",
        "  exact h.sorry_free",
        '  have : "{}".length = 2 := rfl\n  simp',
        '  have : s!"{1 + 1}" = "2" := rfl\n  simp',
        '  have : "a{b}c{{d}}".length = 10 := rfl\n  simp',
    ],
)
def test_mathematical_unicode_and_harmless_near_misses_pass_the_precheck(proof):
    assert isinstance(prepare(ProofRequest(T, proof), MINIF2F_HEADER), Prepared)


@pytest.mark.parametrize(
    "statement,reason",
    [
        ("theorem t : 1 = 1 :=", "must end in `:= by`"),
        ("theorem t : 1 = 1 := by -- proof below", "must end in `:= by`"),
        ("theorem t : 1 = 1 := sorry /- := by", "unterminated block comment"),
        ("theorem t : 1 = 1 : = by", "must end in `:= by`"),
        ("def : 1 = 1 := by", "has no name"),
        ("have h : 1 = 1 := by", "declares no theorem"),
    ],
)
def test_statements_must_end_in_colon_eq_by_outside_comments(statement, reason):
    result = prepare(ProofRequest(statement, "  rfl"), MINIF2F_HEADER)
    assert result.status == "rejected" and reason in result.reason, result.reason


def test_a_comment_opened_by_the_statement_cannot_be_closed_by_the_proof():
    result = prepare(ProofRequest("theorem t : 1 = 2 := sorry /- := by", "-/"), MINIF2F_HEADER)
    assert result.status == "rejected" and result.reason.startswith("statement: unterminated block comment")


def test_bad_arguments_name_the_argument():
    with pytest.raises(TypeError, match="request"):
        prepare(42, MINIF2F_HEADER)
    with pytest.raises(TypeError, match="default_header"):
        prepare(ProofRequest(T, "  rfl"), None)
    with pytest.raises(TypeError, match="ProofRequest.proof"):
        prepare(ProofRequest(T, None), MINIF2F_HEADER)


# ------------------------------------------------------------ files (str requests)

FILE = (
    "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat\n"
    "\n/-- The sum. -/\ntheorem mathd_t (x : ℕ) (h₀ : x = 3) : x + 1 = 4 := by\n  subst h₀\n  rfl"
)


def test_split_header_takes_leading_imports_options_and_opens():
    header, body = split_header(FILE)
    assert header == MINIF2F_HEADER + "\n"
    assert header + body == FILE
    assert split_header("import Mathlib\n-- note\n/- block\n-/\nopen Real\ntheorem t := by") == (
        "import Mathlib\n-- note\n/- block\n-/\nopen Real\n",
        "theorem t := by",
    )
    # `open … in` scopes the declaration that follows, so it is not header.
    assert split_header("import Mathlib\nopen Real in\ntheorem t := by") == (
        "import Mathlib\n",
        "open Real in\ntheorem t := by",
    )
    assert split_header("theorem t : True := by trivial") == ("", "theorem t : True := by trivial")


def test_a_file_request_shares_the_default_headers_worker_and_counts_header_lines():
    prepared = prepare(FILE, "import Lean")
    assert prepared.header == MINIF2F_HEADER
    assert prepared.line_offset == 4
    assert prepared.theorem_name == "mathd_t"
    assert prepared.proof == "\n  subst h₀\n  rfl"
    assert prepared.code == FILE[len(MINIF2F_HEADER) + 1 :] + "\n\n#print axioms mathd_t"


def test_file_request_messages_are_in_file_coordinates():
    prepared = prepare(FILE, MINIF2F_HEADER)
    # REPL line 4 is `  rfl` (line 1 of the body is blank, 2 the docstring, 3 the theorem).
    response = {
        "messages": [
            {
                "severity": "error",
                "pos": {"line": 5, "column": 2},
                "endPos": {"line": 5, "column": 5},
                "data": "The rfl tactic failed",
            },
            axioms_message(prepared, CLEAN_AXIOMS),
        ],
        "env": 1,
    }
    result = judge(prepared, response, CONFIG, 0.5)
    assert FILE.split("\n")[8] == "  rfl"
    assert [(m.line, m.column, m.end) for m in result.messages] == [(9, 2, Position(9, 5))]
    assert result.status == "failed" and result.first_error_tactic == 1


@pytest.mark.parametrize(
    "file_text,reason",
    [
        ("import Mathlib\ndef h : ℕ := 1\ntheorem t : h = 1 := by\n  rfl", "exactly one theorem"),
        ("import Mathlib\ntheorem t : 1 = 1 := by\n  rfl\ntheorem u : 1 = 1 := by\n  rfl", "column 0"),
        ("import Mathlib\ntheorem t : 1 = 1 := rfl", "no top-level `:= by`"),
        ("import Mathlib\nset_option debug.skipKernelTC true\ntheorem t : 1 = 1 := by\n  rfl", "debug.skipKernelTC"),
        ("import Mathlib\nset_option debug.skipKernelTC true in\ntheorem t : 1 = 1 := by\n  rfl", "debug.skipKernelTC"),
        ("import Mathlib\n@[implemented_by x] theorem t : 1 = 1 := by\n  rfl", "`@[`"),
        ("import Mathlib\ntheorem t : 1 = 1 := by sorry", "`sorry`"),
        ("import Mathlib\nopen Lean\n\n", "declares no theorem"),
        ("import Mathlib\ntheorem t : 1 = 1 := by\r  rfl", "carriage return"),
    ],
)
def test_file_requests_hold_one_theorem_and_are_untrusted_throughout(file_text, reason):
    result = prepare(file_text, MINIF2F_HEADER)
    assert result.status == "rejected" and reason in result.reason, result.reason


LEGITIMATE_FILES = [
    FILE,
    "import Mathlib\nimport Aesop -- tactics\n\nset_option maxHeartbeats 400000 -- miniF2F\nopen scoped BigOperators\n"
    "open Real Nat\n\ntheorem t (x : ℝ) (h : 2 * x = 4) : x = 2 := by\n  linarith",
    "import Mathlib\nopen Real in\ntheorem t : Real.sqrt 4 = 2 := by\n  norm_num",
    "import Mathlib\nset_option maxRecDepth 10000 in\nopen Nat in\n/-- doc -/\nprivate theorem t : 2 + 2 = 4 := by\n  rfl",
    '/- A file\n   with a header comment -/\nimport Mathlib\nset_option pp.proofs "always"\n'
    "theorem t (f : ℕ → ℕ) (s : Set ℕ) : Set.image f s ⊆ Set.range f := by\n  rintro _ ⟨x, -, rfl⟩\n  exact ⟨x, rfl⟩",
    "import Mathlib\ntheorem t : (let a := 2; a + a) = 4 := by\n  rfl",
    "import Mathlib\ntheorem t : let a := 2; a + a = 4 := by\n  intro a\n  rfl",
    # A `:= by` inside any bracket, `⌊…⌋` included, is not the theorem's.
    "import Mathlib\ntheorem t : ⌊have h : True := by trivial; (2 : ℝ)⌋ = 2 := by\n  norm_num",
    "import Mathlib\ntheorem t : ⌈have h : True := by trivial; (2 : ℝ)⌉ = 2 := by norm_num",
]


@pytest.mark.parametrize("file_text", LEGITIMATE_FILES)
def test_legitimate_files_pass_the_precheck(file_text):
    prepared = prepare(file_text, MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.statement.endswith(":= by") and "theorem" not in prepared.proof
    assert prepared.proof.strip() == file_text.rsplit(":= by", 1)[1].strip()


# `open` header lines in each of Lean's forms, names in any case and with Unicode letters as Lean allows.
OPEN_HEADER_LINES = [
    "open Real intervalIntegral",
    "open scoped intervalIntegral",
    "open scoped BigOperators Real",
    "open Nat (factorial)",
    "open Nat (factorial choose) -- binomials",
    "open Real hiding sqrt",
    "open Real hiding sqrt exp",
    "open Nat renaming factorial → fact",
    "open Nat renaming factorial -> fact, choose → binom",
    "open Finset.Nat α₁",
    "open «Real»",
]
# Lines that are no single `open` command: the prefix form `open … in`, a command after the names, or a malformed
# form. They are not header: the body's checks see them.
NOT_OPEN_HEADER_LINES = [
    "open Real in",
    "open Real intervalIntegral in",
    "open Real in #eval 1",
    "open Nat set_option debug.skipKernelTC true",
    "open Nat theorem x : False := sorry",
    "open Nat (factorial) axiom c : False",
    "open Nat hiding recall",
    "open Nat renaming factorial → theorem",
    "open scoped",
    "open Nat scoped Real",
    "open Real hiding",
    "open Nat (factorial",
    "open Nat ()",
    "open Nat Real (factorial)",
    "open Nat renaming factorial",
    "open Nat renaming factorial → fact,",
    "open Nat hiding (factorial)",
    "open Nat /- c -/ Real",
    "open Nat; open Real",
    "open #eval",
]


@pytest.mark.parametrize("line", OPEN_HEADER_LINES)
def test_every_form_of_open_is_a_header_line(line):
    assert split_header(f"import Mathlib\n{line}\ntheorem t : True := by\n  trivial") == (
        f"import Mathlib\n{line}\n",
        "theorem t : True := by\n  trivial",
    )
    prepared = prepare(f"import Mathlib\n{line}\n\ntheorem t : True := by\n  trivial", MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.header == f"import Mathlib\n{line}"
    crlf = prepare(f"import Mathlib\r\n{line}\r\n\r\ntheorem t : True := by\r\n  trivial", MINIF2F_HEADER)
    assert isinstance(crlf, Prepared) and crlf.header == f"import Mathlib\r\n{line}\r", crlf.reason


@pytest.mark.parametrize("line", NOT_OPEN_HEADER_LINES)
def test_an_open_line_with_more_or_less_than_an_open_command_is_not_header(line):
    file_text = f"import Mathlib\n{line}\ntheorem t : True := by\n  trivial"
    assert split_header(file_text)[0] == "import Mathlib\n"
    result = prepare(file_text, MINIF2F_HEADER)
    if line.endswith(" in"):  # the prefix form scopes the theorem and is checked with it
        assert isinstance(result, Prepared) and result.header == "import Mathlib", result.reason
    else:
        assert isinstance(result, VerificationResult), f"sent to Lean: {result.header!r} / {result.code!r}"
        assert result.status == "rejected" and "line 2" in result.reason, result.reason


@pytest.mark.parametrize(
    "file_text,reason",
    [
        # Header lines are single `import M`, `set_option NAME VALUE` or `open NAMESPACES` commands, nothing more.
        ("import Mathlib\nopen Nat set_option debug.skipKernelTC true\ntheorem t : True := by\n  trivial", "debug"),
        ("import Mathlib\nopen Nat set_option pp.all true\ntheorem t : True := by\n  trivial", "`open Nat set"),
        (
            "import Mathlib\nset_option maxHeartbeats 400000 in\nopen Nat\ntheorem t : True := by\n  trivial",
            "`open Nat`",
        ),
        ("import Mathlib\nset_option «debug».skipKernelTC true\ntheorem t : True := by\n  trivial", "debug"),
        ("import Mathlib\nset_option /- c -/ debug.skipKernelTC true\ntheorem t : True := by\n  trivial", "debug"),
        ("import Mathlib\nset_option\n  debug.skipKernelTC true\ntheorem t : True := by\n  trivial", "debug"),
        ("import Mathlib #exit\ntheorem t : True := by\n  trivial", "`import"),
        ("import Mathlib\nopen Nat in axiom cheat : 1 = 2\ntheorem t : 1 = 2 := by\n  exact cheat", "axiom"),
        ('import Mathlib\nopen Nat in #eval IO.Process.run {cmd := "id"}\ntheorem t : True := by\n  trivial', "#eval"),
        (
            'import Mathlib\nopen Lean Elab Tactic in elab "cheat" : tactic => do (← getMainGoal).assign '
            "(mkConst ``True.intro)\ntheorem t : False := by\n  cheat",
            "elab",
        ),
        ("import Mathlib\nset_option warn.sorry false\ntheorem t : True := by\n  trivial", "warn.sorry"),
        ("import Mathlib\nopen Nat hiding foo set_option x\ntheorem t : True := by\n  trivial", "`open"),
        # Before the theorem: only comments, modifiers and `open … in` / `set_option … in`.
        ("import Mathlib\nadd_aesop_rules safe (by trivial)\ntheorem t : True := by\n  aesop", "add_aesop_rules"),
        ("import Mathlib\nopen Nat\nsimproc s (1 = 2) := none\ntheorem t : True := by\n  simp", "simproc"),
        (
            # `my_command` stands for any command the word lists do not know.
            "import Mathlib\ntheorem t : True := trivial\nmy_command s (1 = 2) := by\n  exact fun _ => pure none",
            "`:=` at line 2",
        ),
    ],
)
def test_a_files_header_and_preamble_are_checked_strictly(file_text, reason):
    result = prepare(file_text, MINIF2F_HEADER)
    assert isinstance(result, VerificationResult), f"sent to Lean: {result.header!r} / {result.code!r}"
    assert result.status == "rejected" and reason in result.reason, result.reason


# `open …` and `set_option …` prefixing a tactic (in a proof) or the theorem (in a file's preamble); the bare commands
# are tested where they are header lines (files) or close the `by` block (proofs).
SCOPED_PREFIXES = [
    ("open Real in", True),
    ("open Nat hiding succ in", True),
    ("open Nat (succ) in", True),
    ("set_option maxRecDepth 10000 in", True),
    ('set_option pp.proofs "always" in', True),
    ("set_option linter.unusedVariables false in", True),
    ("open scoped Real in", True),
    ("open scoped Real Nat in", True),
    ("open scoped in", False),
    ("open in", False),
    ("set_option maxRecDepth in", False),
    # Lean's `set_option` takes an option name, then true, false, a number or a string.
    ("set_option maxRecDepth + in", False),
    ("set_option 10000 maxRecDepth in", False),
    ("set_option maxRecDepth (10000) in", False),
]


# Aesop's rule phases: `unsafe` is the command modifier elsewhere, a phase only right after `add` or a clause's `,`.
AESOP_PHASES = [
    ("  aesop (add unsafe 50% apply le_refl)", True),
    ("  aesop (add safe apply le_refl, unsafe 10% apply le_refl)", True),
    ("  aesop? (add norm simp Nat.add_comm) (add unsafe apply le_refl)", True),
    ("  exact unsafe foo", False),
    ("  simp [add, unsafe]", False),
    ("  aesop (add foo unsafe)", False),
    ("  aesop (rule_sets := [unsafe])", False),
]


@pytest.mark.parametrize("proof,accepted", AESOP_PHASES)
def test_unsafe_is_allowed_only_as_an_aesop_rule_phase(proof, accepted):
    result = prepare(ProofRequest("theorem t : True := by", proof), MINIF2F_HEADER)
    if accepted:
        assert isinstance(result, Prepared), result.reason
    else:
        assert isinstance(result, VerificationResult) and "command `unsafe`" in result.reason


@pytest.mark.parametrize("prefix,is_prefix", SCOPED_PREFIXES)
def test_a_proof_and_a_file_preamble_accept_the_same_scoped_prefixes(prefix, is_prefix):
    in_proof = prepare(ProofRequest("theorem t : True := by", f"  {prefix}\n  trivial"), MINIF2F_HEADER)
    in_file = prepare(f"import Mathlib\n{prefix}\ntheorem t : True := by\n  trivial", MINIF2F_HEADER)
    if is_prefix:
        assert isinstance(in_proof, Prepared), in_proof.reason
        assert isinstance(in_file, Prepared), in_file.reason
    else:
        assert in_proof.status == "rejected" and "prefix" in in_proof.reason, in_proof.reason
        assert in_file.status == "rejected" and "prefix" in in_file.reason, in_file.reason
        assert "at line 2, column 2" in in_proof.reason and "at line 2, column 0" in in_file.reason


def test_a_file_proof_may_continue_the_by_line():
    prepared = prepare("import Mathlib\ntheorem t : 1 = 1 := by rfl", MINIF2F_HEADER)
    assert prepared.proof == " rfl" and prepared.separator == ""
    assert prepared.code == "theorem t : 1 = 1 := by rfl\n\n#print axioms t"


# ------------------------------------------------------------ judge


def axioms_message(prepared: Prepared, axioms: list[str], name: str | None = None, line=None, column=0) -> dict:
    name = name or prepared.theorem_name
    text = f"'{name}' depends on axioms: [{', '.join(axioms)}]" if axioms else f"'{name}' does not depend on any axioms"
    line = prepared.print_line if line is None else line
    return {
        "severity": "info",
        "pos": {"line": line, "column": column},
        "endPos": {"line": line, "column": 6},
        "data": text,
    }


def hand_prepared(cmd: str, name: str) -> Prepared:
    """A Prepared whose code starts with a recorded transcript command verbatim (so its positions apply).

    The recorded commands use `sorry`, which `prepare` would reject, so it is built by hand: the statement runs
    through `:= by` (or `:=` for term-mode proofs) and the proof is the rest, on the same line.
    """
    cut = cmd.index(":= by") + len(":= by") if ":= by" in cmd else cmd.index(":=") + len(":=")
    return Prepared(
        header="",
        code=cmd + f"\n\n#print axioms {name}",
        proof=cmd[cut:],
        proof_start=cut,
        theorem_name=name,
        line_offset=0,
        statement=cmd[:cut],
        separator="",
    )


def transcript(transcripts_dir, name: str) -> list[tuple[dict, dict]]:
    def blocks(path):
        return [json.loads(b, strict=False) for b in path.read_text(encoding="utf-8").split("\n\n") if b.strip()]

    return list(
        zip(blocks(transcripts_dir / f"{name}.in"), blocks(transcripts_dir / f"{name}.expected.out"), strict=True)
    )


def test_judge_fails_a_tactic_sorry_and_blames_the_sorry(transcripts_dir):
    (request, response), *_ = transcript(transcripts_dir, "tactic_sorry")
    prepared = hand_prepared(request["cmd"], "f")
    response = dict(response, messages=response["messages"] + [axioms_message(prepared, ["sorryAx"])])
    result = judge(prepared, response, CONFIG, 1.0)
    assert result.status == "failed" and not result.passed
    assert result.reason == "uses sorry"
    assert [t.text for t in result.tactics] == ["sorry"]
    assert result.first_error_tactic == 0
    assert [(m.severity, m.line, m.column, m.end, m.text) for m in result.messages] == [
        ("warning", 1, 4, Position(1, 5), "declaration uses `sorry`")
    ]
    assert result.axioms == ["sorryAx"] and result.time_s == 1.0


def test_judge_fails_term_mode_sorries_even_without_an_axioms_answer(transcripts_dir):
    for request, response in transcript(transcripts_dir, "dup_sorries"):
        prepared = hand_prepared(request["cmd"], request["cmd"].split()[1])
        result = judge(prepared, response, CONFIG, 0.0)
        assert result.status == "failed" and result.reason == "uses sorry"
        assert result.messages[0].column == 8


def test_judge_on_an_incomplete_proof_credits_every_tactic(transcripts_dir):
    (first_request, first), (second_request, second) = transcript(transcripts_dir, "incomplete")
    prepared = hand_prepared(first_request["cmd"], "f")
    result = judge(prepared, first, CONFIG, 0.0)
    # "unsolved goals" at the `by`, before the body: every tactic ran, the proof is incomplete.
    assert result.status == "failed" and result.reason.startswith("error at line 1, column 15: unsolved goals")
    assert result.first_error_tactic == len(result.tactics) == 1
    assert result.messages[0].end == Position(1, 32)

    prepared = hand_prepared(second_request["cmd"], "f")
    result = judge(prepared, second, CONFIG, 0.0)
    # The earliest error inside the body is in the `{ apply Nat.succ }` block, the second tactic.
    assert [t.text for t in result.tactics] == ["by_cases x", "{ apply Nat.succ }"]
    assert result.first_error_tactic == 1
    assert [(m.line, m.column) for m in result.messages] == [(3, 19), (1, 26)]


def test_judge_blames_the_tactic_holding_a_nested_sorry(transcripts_dir):
    (request, response), *_ = transcript(transcripts_dir, "have_by_sorry")
    prepared = hand_prepared(request["cmd"], "foo")
    result = judge(prepared, response, CONFIG, 0.0)
    assert result.status == "failed"
    assert result.first_error_tactic == 0 and len(result.tactics) == 1


def test_judge_reports_repl_error_objects_as_errors(transcripts_dir):
    (request, response), *_ = transcript(transcripts_dir, "unknown_environment")
    assert response == {"message": "Unknown environment."}
    result = judge(hand_prepared(request["cmd"], "f"), response, CONFIG, 0.2)
    assert result.status == "error" and not result.passed
    assert result.reason == "Unknown environment."
    _, (request, response) = transcript(transcripts_dir, "unknown_tactic")
    result = judge(hand_prepared("def f : Nat := by exat 42", "f"), response, CONFIG, 0.0)
    assert result.status == "error" and "unknown tactic" in result.reason


def test_judge_uses_invalid_tactic_transcript_as_failed(transcripts_dir):
    (request, response), *_ = transcript(transcripts_dir, "invalid_tactic")
    result = judge(hand_prepared(request["cmd"], "my_theorem"), response, CONFIG, 0.0)
    assert result.status == "failed" and result.reason == "uses sorry"


def test_judge_passes_a_clean_proof_with_its_tactics(transcripts_dir):
    (request, response), *_ = transcript(transcripts_dir, "all_tactics")
    prepared = hand_prepared(request["cmd"], "f")
    response = dict(response, messages=[axioms_message(prepared, [])])
    result = judge(prepared, response, CONFIG, 0.3)
    assert result.status == "passed" and result.passed and result.reason is None
    assert [t.text for t in result.tactics] == ["have t := 37", "exact t"]
    assert result.first_error_tactic == 2
    assert result.messages == [] and result.axioms == []


SPLIT_REQUESTS = [
    ProofRequest("theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q := by", "  constructor\n  · exact hp\n  · exact hq"),
    ProofRequest(
        "theorem t (x : ℝ) (hx : 0 < x) : 0 < x ^ 2 := by", "  have h : 0 < x * x := by\n    positivity\n  nlinarith"
    ),
    "import Mathlib\nexample : 2 + 2 = 4 := by norm_num\n                        <;> rfl",
    "import Mathlib\ntheorem t (n : ℕ) : n + 0 = n := by simp; omega",
]


@pytest.mark.parametrize("request_", SPLIT_REQUESTS)
def test_judge_reports_the_tactics_the_precheck_split_at_either_granularity(request_, monkeypatch):
    prepared = prepare(request_, MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    response = {"env": 1, "messages": [axioms_message(prepared, [])]}
    column = prepared.proof_column
    outermost = split_tactics(prepared.proof, start_column=column)
    every = split_tactics(prepared.proof, "all", start_column=column)
    assert prepared.outermost_tactics == outermost
    assert judge(prepared, response, LeanServerConfig(tactic_granularity="all"), 0.0).tactics == every

    # The default granularity reuses the precheck's split instead of splitting the proof a second time.
    def no_second_split(*args, **kwargs):
        raise AssertionError("judge split the proof again")

    monkeypatch.setattr(verdict.tactic_split, "split_tactics", no_second_split)
    result = judge(prepared, response, CONFIG, 0.0)
    assert result.passed and result.tactics == outermost and result.first_error_tactic == len(outermost)
    result.tactics.clear()
    assert prepared.outermost_tactics == outermost, "the verdict's list is the Prepared's own"


def test_a_hand_built_prepared_without_the_precheck_split_is_split_by_judge(transcripts_dir):
    (request, response), *_ = transcript(transcripts_dir, "all_tactics")
    prepared = hand_prepared(request["cmd"], "f")
    assert prepared.outermost_tactics is None
    result = judge(prepared, dict(response, messages=[axioms_message(prepared, [])]), CONFIG, 0.0)
    assert [t.text for t in result.tactics] == ["have t := 37", "exact t"]


@pytest.mark.parametrize(
    "code,components",
    [
        ("Nat.succ_le_of_lt", ("Nat", "succ_le_of_lt")),
        ("Lean.«ofReduceBool»", ("Lean", "ofReduceBool")),
        ("«a.b».c", ("a.b", "c")),
        ("_root_.sorryAx", ("_root_", "sorryAx")),
        ("h₀", ("h₀",)),
    ],
)
def test_an_identifiers_name_components_are_split_at_lexing(code, components):
    (token,) = verdict._lex(code)
    assert token.kind == "ident" and token.components == components


@pytest.mark.parametrize(
    "text,parsed",
    [
        ("'foo' does not depend on any axioms", ("foo", [])),
        ("'foo' depends on axioms: [propext]", ("foo", ["propext"])),
        (
            "'Nat.foo_bar'' depends on axioms: [propext, Classical.choice, Quot.sound]",
            ("Nat.foo_bar'", ["propext", "Classical.choice", "Quot.sound"]),
        ),
        ("'«my thm»' depends on axioms: [sorryAx]", ("«my thm»", ["sorryAx"])),
        ("foo depends on axioms: [propext]", None),
        ("'foo' depends on axioms: propext", None),
        ("unsolved goals", None),
    ],
)
def test_axioms_messages_of_both_forms_are_parsed(text, parsed):
    assert parse_axioms_message(text) == parsed


def clean_prepared() -> Prepared:
    return prepare(ProofRequest("theorem t (a b : ℕ) : a + b = b + a := by", "  omega"), MINIF2F_HEADER)


@pytest.mark.parametrize(
    "axioms,config,passed,reason",
    [
        ([], CONFIG, True, None),
        (CLEAN_AXIOMS, CONFIG, True, None),
        (["propext", "sorryAx"], CONFIG, False, "uses sorry (sorryAx among its axioms)"),
        (["propext", "cheat"], CONFIG, False, "axiom cheat not in whitelist"),
        (
            CLEAN_AXIOMS,
            LeanServerConfig(axiom_whitelist=("propext",)),
            False,
            "axiom Classical.choice not in whitelist",
        ),
        (["sorryAx"], LeanServerConfig(axiom_whitelist=("sorryAx",)), False, "uses sorry (sorryAx among its axioms)"),
        (["Lean.ofReduceBool"], CONFIG, False, "axiom Lean.ofReduceBool not in whitelist"),
        (["Lean.trustCompiler"], CONFIG, False, "axiom Lean.trustCompiler not in whitelist"),
        (["propext", "Lean.ofReduceBool"], NATIVE, True, None),
        (["Lean.trustCompiler"], NATIVE, True, None),
        # Native evaluation needs both keys: the precheck switch and the axioms in the whitelist.
        (
            ["Lean.ofReduceBool"],
            LeanServerConfig(allow_native_decide=True),
            False,
            "axiom Lean.ofReduceBool not in whitelist",
        ),
        (
            ["Lean.ofReduceBool"],
            LeanServerConfig(axiom_whitelist=NATIVE.axiom_whitelist),
            False,
            "axiom Lean.ofReduceBool not in whitelist",
        ),
    ],
)
def test_the_axiom_whitelist_is_enforced(axioms, config, passed, reason):
    prepared = clean_prepared()
    result = judge(prepared, {"messages": [axioms_message(prepared, axioms)], "env": 1}, config, 0.0)
    assert (result.passed, result.reason) == (passed, reason)
    assert result.axioms == axioms
    assert result.status == ("passed" if passed else "failed")


def test_an_axioms_answer_elsewhere_or_for_another_name_does_not_count():
    prepared = clean_prepared()
    fakes = [
        axioms_message(prepared, [], line=2, column=2),  # e.g. printed by `trace` inside the proof
        axioms_message(prepared, [], column=3),
        axioms_message(prepared, [], name="Nat.add_comm"),
        dict(axioms_message(prepared, []), severity="warning"),
    ]
    for fake in fakes:
        result = judge(prepared, {"messages": [fake], "env": 1}, CONFIG, 0.0)
        assert not result.passed and result.reason.startswith("no `#print axioms` answer for `t`")
    # Where the answer sits and what it says decide, not the name: the judge then checks the name.
    assert [is_axioms_answer(prepared, fake) for fake in fakes] == [False, False, True, False]
    assert is_axioms_answer(prepared, axioms_message(prepared, CLEAN_AXIOMS))
    assert not is_axioms_answer(prepared, dict(axioms_message(prepared, []), data="declaration uses `sorry`"))
    assert not is_axioms_answer(prepared, "not a message")
    # A fake clean answer next to the real one listing sorryAx: the real one decides.
    result = judge(prepared, {"messages": [fakes[0], axioms_message(prepared, ["sorryAx"])], "env": 1}, CONFIG, 0.0)
    assert not result.passed and result.axioms == ["sorryAx"]
    assert [(m.line, m.column) for m in result.messages] == [(2, 2)]


@pytest.mark.parametrize("order", [["sorryAx"], CLEAN_AXIOMS], ids=["sorry_first", "clean_first"])
def test_two_axioms_answers_for_the_theorem_fail_whatever_their_order(order):
    # One `#print axioms` gives one answer; a second one at its position was not written by it.
    prepared = clean_prepared()
    answers = [
        axioms_message(prepared, order),
        axioms_message(prepared, [a for a in ("sorryAx", "propext") if a not in order] or ["propext"]),
    ]
    result = judge(prepared, {"messages": answers, "env": 1}, CONFIG, 0.0)
    assert result.status == "failed" and not result.passed
    assert result.reason.startswith("2 `#print axioms` answers for `t`"), result.reason
    assert "sorryAx" in result.axioms


@pytest.mark.parametrize("warning", ["declaration uses `sorry`", "declaration uses 'sorry'"])
def test_both_sorry_warning_quote_styles_fail(warning):
    prepared = clean_prepared()
    message = {"severity": "warning", "pos": {"line": 1, "column": 8}, "endPos": {"line": 1, "column": 9}}
    response = {"messages": [dict(message, data=warning), axioms_message(prepared, CLEAN_AXIOMS)], "env": 1}
    result = judge(prepared, response, CONFIG, 0.0)
    assert not result.passed and result.reason == "uses sorry"


def test_errors_after_the_proof_are_clamped_to_its_end_and_fail():
    prepared = clean_prepared()
    error = {
        "severity": "error",
        "pos": {"line": prepared.print_line, "column": 14},
        "endPos": {"line": prepared.print_line, "column": 15},
        "data": "Unknown constant `t`",
    }
    result = judge(prepared, {"messages": [error], "env": 1}, CONFIG, 0.0)
    assert not result.passed and "Unknown constant" in result.reason
    assert (result.messages[0].line, result.messages[0].column) == (2, 7)
    assert result.first_error_tactic == len(result.tactics)


def test_an_error_on_the_line_after_at_star_blames_that_lines_tactic():
    prepared = prepare(ProofRequest(T, "  norm_num at *\n  linarith"), MINIF2F_HEADER)
    error = {
        "severity": "error",
        "pos": {"line": 3, "column": 2},
        "endPos": {"line": 3, "column": 10},
        "data": "linarith failed",
    }
    result = judge(prepared, {"env": 1, "messages": [error]}, CONFIG, 0.0)
    assert [t.text for t in result.tactics] == ["norm_num at *", "linarith"]
    assert result.first_error_tactic == 1


def test_a_parse_error_at_the_appended_print_blames_the_last_tactic():
    # An unfinished last tactic (`exact (rfl`) runs into our `#print axioms`: Lean's parse error sits there.
    prepared = prepare(
        ProofRequest("theorem x : 1 = 1 ∧ 2 = 2 := by", "  constructor\n  · rfl\n  · exact (rfl"), MINIF2F_HEADER
    )
    parse_error = {
        "severity": "error",
        "pos": {"line": prepared.print_line, "column": 0},
        "endPos": None,
        "data": "unexpected token '#print'; expected ')', ',' or ':'",
    }
    unsolved = {
        "severity": "error",
        "pos": {"line": 1, "column": 29},
        "endPos": {"line": 1, "column": 31},
        "data": "unsolved goals\ncase right\n⊢ 2 = 2",
    }
    for messages in ([parse_error], [parse_error, unsolved], [unsolved, parse_error]):
        result = judge(prepared, {"messages": messages, "env": 1}, CONFIG, 0.0)
        assert result.status == "failed"
        assert [t.text for t in result.tactics] == ["constructor", "· rfl", "· exact (rfl"]
        assert result.first_error_tactic == 2


@pytest.mark.parametrize("text", ["Unknown constant `t`", "unknown constant 't'"])
def test_an_unknown_constant_at_the_print_says_nothing_about_the_tactics(text):
    # The theorem never reached the environment (e.g. the kernel refused it): no tactic is to blame.
    prepared = prepare(ProofRequest("theorem t : 1 = 1 ∧ 2 = 2 := by", "  constructor\n  · rfl\n  · rfl"), "")
    error = {
        "severity": "error",
        "pos": {"line": prepared.print_line, "column": 14},
        "endPos": {"line": prepared.print_line, "column": 15},
        "data": text,
    }
    result = judge(prepared, {"messages": [error], "env": 1}, CONFIG, 0.0)
    assert not result.passed and result.first_error_tactic == 3


def test_example_is_renamed_and_positions_map_back_to_the_submitted_columns():
    prepared = prepare(ProofRequest("example (n : ℕ) : n + 0 = n := by", "  simp"), MINIF2F_HEADER)
    # The rest of the `example` line keeps its column, one line down.
    assert prepared.code.startswith(f"theorem {EXAMPLE_NAME}\n        (n : ℕ) : n + 0 = n := by\n  simp\n")
    assert prepared.theorem_name == EXAMPLE_NAME and prepared.statement.startswith("example")
    response = {
        "messages": [
            # the declaration keyword, as Lean reports "declaration uses sorry" for examples
            {"severity": "warning", "pos": {"line": 1, "column": 0}, "endPos": {"line": 1, "column": 24}, "data": "w"},
            # `n + 0` in the statement, below the renamed keyword
            {"severity": "error", "pos": {"line": 2, "column": 18}, "endPos": {"line": 2, "column": 23}, "data": "e"},
            {"severity": "error", "pos": {"line": 3, "column": 2}, "endPos": {"line": 3, "column": 6}, "data": "simp"},
            axioms_message(prepared, []),
        ],
        "env": 1,
    }
    result = judge(prepared, response, CONFIG, 0.0)
    assert prepared.submitted == prepared.statement + "\n" + prepared.proof
    assert prepared.submitted.split("\n")[0][18:23] == "n + 0"
    assert [(m.line, m.column, m.end) for m in result.messages] == [
        (1, 0, Position(1, 7)),
        (1, 18, Position(1, 23)),
        (2, 2, Position(2, 6)),
    ]
    assert result.first_error_tactic == 0


def _aligned_example_file(tactic_column_shift: int) -> str:
    line = "example : True ∧ True := by constructor"
    column = line.index("constructor") + tactic_column_shift
    return f"import Mathlib\n{line}\n{' ' * column}trivial\n{' ' * column}trivial"


def test_a_renamed_example_keeps_the_columns_of_a_proof_on_its_by_line():
    # `trivial` aligned under `constructor`: three tactics to Lean, so to the precheck and the judge too.
    prepared = prepare(_aligned_example_file(0), MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    by_line = prepared.code.split("\n")[1]
    assert by_line.index("constructor") == _aligned_example_file(0).split("\n")[1].index("constructor")
    assert prepared.proof_column == len("example : True ∧ True := by")
    result = judge(prepared, {"messages": [axioms_message(prepared, [])], "env": 1}, CONFIG, 0.0)
    assert result.passed and [t.text for t in result.tactics] == ["constructor", "trivial", "trivial"]
    # Deeper than `constructor`, the lines continue it, for the judge as for Lean.
    prepared = prepare(_aligned_example_file(len(EXAMPLE_NAME) + 1), MINIF2F_HEADER)
    result = judge(prepared, {"messages": [axioms_message(prepared, [])], "env": 1}, CONFIG, 0.0)
    assert len(result.tactics) == 1
    # Shallower, they end the block: the precheck refuses what Lean would read as commands.
    result = prepare(_aligned_example_file(-1), MINIF2F_HEADER)
    assert result.status == "rejected" and "outside" in result.reason, result.reason


def test_judge_rejects_bad_arguments():
    with pytest.raises(TypeError, match="prepared"):
        judge({"code": "x"}, {}, CONFIG, 0.0)
    with pytest.raises(TypeError, match="response"):
        judge(clean_prepared(), "not a dict", CONFIG, 0.0)


@pytest.mark.parametrize(
    "messages,where",
    [
        ([None], "messages[0]"),
        (["text"], "messages[0]"),
        ("not a list", "messages"),
        ({"severity": "info"}, "messages"),
    ],
)
def test_a_malformed_messages_field_is_an_error_verdict(messages, where):
    prepared = clean_prepared()
    # A clean axioms answer next to the malformed item must not make it pass.
    if isinstance(messages, list):
        messages = [axioms_message(prepared, CLEAN_AXIOMS)] + messages
        where = "messages[1]"
    result = judge(prepared, {"messages": messages, "env": 1}, CONFIG, 0.0)
    assert result.status == "error" and not result.passed
    assert f"malformed REPL response: {where}" in result.reason, result.reason


def test_passed_is_exactly_status_passed():
    assert VerificationResult("passed").passed is True
    assert VerificationResult("failed").passed is False
    assert VerificationResult.from_dict({"status": "passed"}).passed is True
    with pytest.raises(ValueError, match="passed=False contradicts status='passed'"):
        VerificationResult("passed", passed=False)
    with pytest.raises(ValueError, match="passed=True contradicts status='timeout'"):
        VerificationResult("timeout", passed=True)
    with pytest.raises(ValueError, match="status must be one of"):
        VerificationResult("ok")
    with pytest.raises(ValueError, match="tactic_granularity must be one of \\('outermost', 'all'\\)"):
        LeanServerConfig(tactic_granularity="nested")


def test_results_round_trip_through_dicts():
    prepared = clean_prepared()
    result = judge(prepared, {"messages": [axioms_message(prepared, CLEAN_AXIOMS)], "env": 1}, CONFIG, 0.25)
    assert VerificationResult.from_dict(result.to_dict()) == result
