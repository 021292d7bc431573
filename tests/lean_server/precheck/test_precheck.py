"""The precheck of proof bodies: the boundary (`precheck.rules`) a proof is held to, what `prepare` refuses and why."""

import json

import pytest

from tests.launch import TESTS_DIR
from tests.lean_helpers import prepare
from trl_verigate.lean_server.core.types import MINIF2F_HEADER, ProofRequest, VerificationResult
from trl_verigate.lean_server.precheck import policy
from trl_verigate.lean_server.precheck.prepared import EXAMPLE_NAME, Prepared
from trl_verigate.lean_server.precheck.tokens import tokenize

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
    # Locals that happen to share a name with a metaprogramming namespace, and their fields: a rule about names.
    ("theorem t (a b : ℕ) (EST : a = b) (IO : b = a) : b = a := by", "  exact EST.symm"),
    ("theorem t (a b : ℕ) (ST : a = b) : b = a := by", "  have h := ST.symm\n  exact h"),
    ("theorem t (p : Prop) (hp : p) : p := by", "  have IO : p := hp\n  exact IO"),
    (
        "theorem t (a b : ℕ) (h : a = b) : b = a := by",
        "  obtain ⟨EST⟩ : ∃ _ : a = b, True := ⟨h, trivial⟩\n  exact EST.symm",
    ),
    # A binder named `stop`, passed as a named argument.
    (
        "theorem t (stop : ℕ) (h : stop = 3) : stop + 0 = 3 := by",
        "  simpa using (Nat.add_zero stop).trans (n := stop) h",
    ),
    # A trusted statement's strings are never read by the rules.
    ('theorem h : "{".length = 1 := by', "  rfl"),
]


@pytest.mark.parametrize("statement,proof", LEGITIMATE)
def test_the_precheck_accepts_legitimate_proofs(statement, proof):
    prepared = prepare(ProofRequest(statement, proof), MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    # The REPL loads the imports; the header's other lines travel with the command.
    assert prepared.header == "import Mathlib\nimport Aesop"
    preamble = "set_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat\n"
    renamed = f"theorem {EXAMPLE_NAME}\n" + " " * len("example")
    assert prepared.code.startswith(preamble + statement.replace("example", renamed, 1) + "\n" + proof)
    assert prepared.code[prepared.proof_start : prepared.proof_end] == proof


T = "theorem t : 2 + 2 = 5 := by"


def assert_rejected(proof: str, reason: str = "") -> VerificationResult:
    """``proof`` of `T` under the minif2f header is refused before Lean, for a reason containing ``reason``."""
    result = prepare(ProofRequest(T, proof), MINIF2F_HEADER)
    assert isinstance(result, VerificationResult), f"sent to Lean: {result.code!r}"
    assert result.status == "rejected" and reason in result.reason, result.reason
    return result


def assert_accepted(proof: str) -> Prepared:
    """``proof`` of `T` under the minif2f header passes the precheck and would be sent to Lean."""
    result = prepare(ProofRequest(T, proof), MINIF2F_HEADER)
    assert isinstance(result, Prepared), result.reason
    return result


REJECTED = [
    ("  sorry", "`sorry`"),
    ("  exact sorry", "`sorry`"),
    ("  admit", "`admit`"),
    ("  norm_num\n  stop\n  simp", "`stop`"),
    ("  apply?", "`apply?`"),
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
    ("  norm_num\n  constant c : Nat", "tactic `constant`"),
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
    ("  open Lean in exact ofReduceBool _ _ rfl", "`Lean`"),
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
    ("  exact foo)\nsimp", "closes the `by` block"),
    ('  have := s!"{(1}"\nsimp', "`s!` before a string"),
    ("  norm_num\n\tsimp", "tab"),
    ("  norm_num\raxiom c : False", "carriage return"),
    ("  norm_num /- open comment", "unterminated block comment"),
    ('  have := "open string', "unterminated string"),
    ("  have := ∑'\"' = 1", "ambiguous"),
    ("  have «x : True := trivial", "identifier escape"),
    ('  have := s!"{sorry}"', "`s!` before a string"),
    ('  exact (fun _ => trivial) s!"{(by native_decide : True)}"', "`s!` before a string"),
    ('  have := s!"{"x"}"', "`s!` before a string"),
    ("  have := s!\"{ '}' sorry }\"", "`s!` before a string"),
    ("  have := s!\"{ '{' }\"", "`s!` before a string"),
    ('  have := s!"{ x /- } -/ }"', "`s!` before a string"),
    ("  so\u200brry", "U+200B"),
    ("  norm_num -- \u202e hidden", "U+202E"),
    ("  norm_num \ufeff", "U+FEFF"),
    ("   ", "empty proof"),
    # Aesop's `tactic` rule builder runs the named constant with evalConst; printing macros hide their IO names.
    ("  aesop (add safe tactic Lean.Elab.Tactic.evalTactic)", "`tactic` rule builder"),
    ("  aesop (add unsafe 50% tactic foo)", "`tactic` rule builder"),
    ('  exact (println! "x")', "`println!`"),
    ('  exact dbg_trace "x"; trivial', "`dbg_trace`"),
    ('  exact (dbgTrace "x" fun _ => trivial)', "`dbgTrace`"),
    # Auxiliary definitions may not be declared into a namespace, where `.ctor` config values could find them.
    ("  exact go\n  where _root_.Linarith.LinarithConfig.evil : ℕ := 1", "named plainly"),
    ("  let rec Nat.evil : ℕ := 1\n  rfl", "named plainly"),
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
        assert_rejected(proof, f"command `{word}`")


# Code the top-level tactic block does not cover has closed the `by` block: Lean reads it as commands, at any
# column between 0 and the block's (a declaration suffix, `termination_by`/`decreasing_by`/`where`, is read by
# the splitter as Lean reads it: see test_declaration_suffixes_are_accepted).
OUTSIDE_THE_BLOCK = [
    "  norm_num\n set_option pp.all true",
    "  skip\n open Nat in\n  skip",
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


# Lean's `declValSimple` is `:= declBody Termination.suffix (whereDecls)?`, and a `let rec` ends in its own
# `Termination.suffix`: published prover outputs use both. The splitter reads where each ends, as Lean does.
DECLARATION_SUFFIXES = [
    "  exact aux n\nwhere\n  aux (k : ℕ) : k = k := by\n    induction k with\n    | zero => rfl\n    | succ j ih => rfl",
    "  exact t.h\n where h : False := t.h",
    "  exact t.h\n    where h : False := t.h",
    "  exact a₀\nwhere\n  a₀ : True := trivial\n  b (n : ℕ) : n = n := rfl",
    "  exact t\n termination_by 0\n decreasing_by all_goals simp_wf",
    "  cases n\n  · simp\n  · exact t\ntermination_by n\ndecreasing_by\n  simp_wf\n  omega",
    "  exact aux 3\nwhere\n  aux : ℕ → ℕ\n    | 0 => 0\n    | n + 1 => aux n\n  termination_by n => n\n  decreasing_by omega",
    "  let rec go : ℕ → ℕ\n    | 0 => 0\n    | n + 1 => go n\n  termination_by n => n\n  exact go 3",
    "  rfl\n  termination_by? n",
    # A `where` helper whose statement holds non-ASCII notation.
    "  exact a\nwhere\n  a : (0 : ℝ) ≤ 1 := by norm_num",
]


@pytest.mark.parametrize("proof", DECLARATION_SUFFIXES)
def test_declaration_suffixes_are_accepted(proof):
    result = assert_accepted(proof)
    assert all("where" not in t.text for t in result.outermost_tactics)


# A suffix is held to the proof's rules, and ends where Lean ends it: what follows is a command again, refused by
# its word, or as code outside the tactic block or at column 0 (whichever check meets it first).
_OUTSIDE = ("closes the `by` block", "outside a declaration suffix")
SUFFIX_ATTACKS = [
    ("  exact a\nwhere\n  a : True := trivial\n#eval IO.println 1", ("command `#eval`", *_OUTSIDE)),
    ("  exact a\nwhere\n  a : True := trivial\ntheorem b : True := trivial", ("command `theorem`", *_OUTSIDE)),
    ("  exact a\nwhere\n  a : True := trivial\n  axiom ax : False", ("command `axiom`",)),
    ("  exact a\nwhere\n  a : True := trivial\nunknown_command x", _OUTSIDE),
    ("  exact a\nwhere\n  a : True := trivial\n unknown_command x", _OUTSIDE),
    ("  exact a\nwhere\n  a : False := sorry", ("`sorry`",)),
    ("  exact a\nwhere\n  @[implemented_by f] a : True := trivial", ("attribute `@[`", *_OUTSIDE)),
    ("  exact t\ntermination_by 0\ndecreasing_by native_decide", ("native_decide",)),
    ("  exact a\nwhere\n  a : True := by\n    simp (config := cfg)", ("literals only",)),
    # `where` that the layout does not read as a suffix keyword is a command word, or no keyword at all, as before.
    ("  simp [h, where]", ("outside a declaration suffix",)),
    ('  exact "where"\nb : True := trivial', _OUTSIDE),
    ("  simp -- where\n  exact a\nb : True := trivial", _OUTSIDE),
    ("where\n  a : True := trivial", _OUTSIDE),  # no tactic before it: Lean's `by` needs one
]


@pytest.mark.parametrize(("proof", "reasons"), SUFFIX_ATTACKS)
def test_a_suffix_cannot_smuggle_commands(proof, reasons):
    result = prepare(ProofRequest(T, proof), MINIF2F_HEADER)
    assert isinstance(result, VerificationResult), f"sent to Lean: {result.code!r}"
    assert result.status == "rejected" and any(reason in result.reason for reason in reasons), result.reason


# Every `where` declaration and every definition of a `let rec` is named plainly, not only the first: one declared
# into a configuration's namespace would be reached by a `.ctor` value.
_PLAIN = "named plainly"
LOCAL_DEFINITION_NAMES = [
    ("  exact a\nwhere\n  a : True := trivial\n  _root_.Linarith.LinarithConfig.evil : ℕ := 1", _PLAIN),
    ("  exact a\nwhere\n  a : True := trivial\n  Linarith.LinarithConfig.evil : ℕ := 1", _PLAIN),
    ("  exact a\nwhere\n  a : True := trivial; _root_.X.evil : ℕ := 1", _PLAIN),
    ("  exact a\nwhere\n  a : True := trivial\n  «X.y».z : True := trivial", _PLAIN),
    ("  let rec f : ℕ := 1, _root_.X.evil : ℕ := 2\n  rfl", _PLAIN),
]
# A `where`/`let rec` definition of non-`Prop` type is a compiled `def`: no tactic-valued item may name it (it stands
# where a tactic does, so the allow-list refuses it). `simp (config := .aux)` is no attack: `.aux` resolves in
# `Simp.Config`'s namespace, where no plainly named definition is.
_RUN = "is not on the allow-list"
LOCAL_DEFINITIONS_RUN = [
    ("  linarith (discharger := aux)\nwhere\n  aux : ℕ := 1", _RUN),
    ("  field_simp (disch := simp; aux)\nwhere\n  aux : ℕ := 1", _RUN),
    ("  linarith (norm := t.aux)\nwhere\n  aux : ℕ := 1", _RUN),
    ("  let rec aux : ℕ := 1\n  simp (disch := aux)", _RUN),
    ("  let rec f : ℕ := 1, aux : ℕ := 2\n  simp (disch := aux)", _RUN),
    # A later `where` declaration naming an earlier one in its own proof.
    ("  exact a\nwhere\n  a : True := by\n    simp\n  b : True := by\n    linarith (discharger := a)", _RUN),
]


@pytest.mark.parametrize(("proof", "reason"), LOCAL_DEFINITION_NAMES + LOCAL_DEFINITIONS_RUN)
def test_where_and_let_rec_definitions_are_named_plainly_and_never_run(proof, reason):
    assert_rejected(proof, reason)


# What those rules must leave alone: a library discharger next to a `where` clause, a `let rec` before a tactic
# whose arguments are separated by `,` (no `let rec` definition), a named argument given a `where` definition.
@pytest.mark.parametrize(
    "proof",
    [
        "  field_simp (disch := positivity)\n  exact aux\nwhere\n  aux : True := trivial",
        "  let rec go : ℕ → ℕ\n    | 0 => 0\n    | n + 1 => go n\n  use go 3, h.2",
        "  exact Nat.le_of_lt_succ (m := aux)\nwhere\n  aux : ℕ := 1",
    ],
)
def test_where_and_let_rec_definitions_used_as_terms_are_accepted(proof):
    assert_accepted(proof)


@pytest.mark.parametrize("proof", OUTSIDE_THE_BLOCK)
def test_code_outside_the_top_level_tactic_block_is_rejected(proof):
    assert_rejected(proof)


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


def test_rejection_reasons_give_the_position_in_the_submitted_source():
    # Like `Message`s: a ProofRequest's source is `statement + "\n" + proof`, so proof line 3 is line 4.
    result = prepare(ProofRequest(T, "  norm_num\n  simp\n    exact sorry"), MINIF2F_HEADER)
    assert result.reason.startswith("`sorry` at line 4, column 10")
    result = prepare(ProofRequest(T, "  norm_num\n  exact (Lean.mkConst)"), MINIF2F_HEADER)
    assert result.reason.startswith("`Lean.mkConst` names `Lean`") and "at line 3, column 9" in result.reason


NATIVE_SPELLINGS = [
    "  decide (config := { native := Bool.true })",
    "  decide (config := { native := !false })",
    "  decide (config := { native := (true) })",
    "  decide (config := { Lean.Meta.DecideConfig.native := true })",
    "  decide (config := { «native» := true })",
    "  decide (config := Lean.Meta.DecideConfig.mk false true true false)",
    "  decide +«native»",
    "  bv_decide?",
    '  bv_check "proof.lrat"',
]


@pytest.mark.parametrize("proof", NATIVE_SPELLINGS)
def test_native_evaluation_is_rejected_under_any_spelling(proof):
    result = assert_rejected(proof)
    assert any(word in result.reason for word in ("native", "bv_", "literals only", "`Lean")), result.reason


# `apply?` and `hint` close a goal they cannot prove with `admitGoal` (sorryAx); `plausible` compiles and runs the
# goal; `slim_check` is its removed old name.
@pytest.mark.parametrize("proof", ["  apply?", "  hint", "  plausible", "  slim_check"])
def test_tactics_that_admit_or_run_the_goal_are_rejected(proof):
    assert prepare(ProofRequest(T, proof), MINIF2F_HEADER).status == "rejected"


# `observe` is `have h : t := by exact?`: library search that either finds a proof or fails, so it reaches Lean.
@pytest.mark.parametrize("proof", ["  observe h : 1 = 1\n  exact h", "  observe? h : 1 = 1\n  exact h"])
def test_observe_reaches_lean(proof):
    assert isinstance(prepare(ProofRequest(T, proof), MINIF2F_HEADER), Prepared)


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
# Lean reads these as different identifiers, or as no token at all: where a tactic stands they are no allowed tactic.
# (Lean never normalizes Unicode, so a look-alike in a term is an unknown name, which fails on its own.)
DIFFERENT_NAME_TO_LEAN = [
    "  ｓｏｒｒｙ",
    "  ѕоrrу",
    "  sοrry",
    "  ａｄｍｉｔ",
    "  norm_num\n  ＃ｅｘｉｔ",
    "  ｎａｔｉｖｅ＿ｄｅｃｉｄｅ",
]


@pytest.mark.parametrize("proof", SAME_NAME_TO_LEAN)
def test_spellings_lean_treats_as_the_same_name_are_rejected(proof):
    assert_rejected(proof)


@pytest.mark.parametrize("proof", DIFFERENT_NAME_TO_LEAN)
def test_look_alikes_in_tactic_position_are_no_allowed_tactic(proof):
    assert_rejected(proof, "is not on the allow-list")


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
        '  have : "ab".length = 2 := rfl\n  simp',
    ],
)
def test_mathematical_unicode_and_harmless_near_misses_pass_the_precheck(proof):
    assert isinstance(prepare(ProofRequest(T, proof), MINIF2F_HEADER), Prepared)


@pytest.mark.parametrize(
    "proof,accepted",
    [
        ('  have : "{}".length = 2 := rfl\n  simp', True),
        ('  have : "a{b}c{{d}}".length = 10 := rfl\n  simp', True),
        ('  have : s!"{1 + 1}" = "2" := rfl\n  simp', False),
        ('  have : toString "{1 + 1}" = "2" := rfl\n  simp', False),
        ('  have : (fun s => s) ("a" ++ "{") = "a{" := rfl\n  simp', True),
        ('  have : id ("x") "{1}" = "" := rfl\n  simp', False),
    ],
)
def test_a_brace_in_a_string_is_refused_only_where_a_word_could_interpolate_it(proof, accepted):
    # Lean reads the braces of a string after `s!`, `m!`, `throwError`, `trace[…]` and other interpolating words as
    # code, and they may hold quotes; after an operator, a separator or an opening bracket a string is plain.
    result = prepare(ProofRequest(T, proof), MINIF2F_HEADER)
    assert isinstance(result, Prepared) == accepted, getattr(result, "reason", "accepted")
    if not accepted:
        assert "before a string" in result.reason or "brace in a string literal" in result.reason, result.reason
    assert isinstance(prepare(ProofRequest('theorem h : "{".length = 1 := by', "  rfl"), MINIF2F_HEADER), Prepared)


@pytest.mark.parametrize(
    "statement,reason",
    [
        ("theorem t : 1 = 1 :=", "must end in `:= by`"),
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


SCOPED_PREFIXES = [
    ("open Real in", True),
    ("open Nat hiding succ in", True),
    ("open Nat (succ) in", True),
    ("set_option maxRecDepth 10000 in", True),
    ("set_option pp.proofs true in", True),
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
    ("  aesop (add apply foo unsafe)", False),
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
        assert in_proof.status == "rejected" and in_file.status == "rejected"
        assert "at line 2, column" in in_proof.reason and "at line 2, column" in in_file.reason, in_file.reason


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
    (token,) = tokenize(code)
    assert token.kind == "ident" and token.components == components


# ------------------------------------------------------------ code-running elaborators, IO, configs, options

# Each reaches Lean today only if the precheck misses it; each runs code of the proof's choosing while Lean
# elaborates (or is a command that leaves the `by` block).
CODE_RUNNING = [
    ("  have h := eval% (2 ^ 10 : ℕ)\n  simp", "`eval%`"),
    ("  have h := eval%(2 ^ 10 : ℕ)\n  simp", "`eval%`"),
    ('  have s : String := include_str "/proc/self/environ"\n  simp', "`include_str`"),
    ('  have h := from_lrat "p cnf 1 1  1 0" "1 0"\n  simp', "`from_lrat`"),
    ("  success_if_fail_with_msg (toString 1) simp", "`success_if_fail_with_msg`"),
    ("  with_panel_widgets [w] simp", "`with_panel_widgets`"),
    ('  rfl\n  lrat_proof foo "p cnf 1 1  1 0" "1 0"', "command `lrat_proof`"),
    ("  rfl\n  show_panel_widgets [w]", "command `show_panel_widgets`"),
    ('  rfl\n  extend_docs Nat.add after "x"', "command `extend_docs`"),
    ("  rfl\n  register_linter_set linter.x := []", "command `register_linter_set`"),
    ("  rfl\n  with_weak_namespace Foo", "command `with_weak_namespace`"),
    ("    rfl\n  with_weak_namespace Foo", "command `with_weak_namespace`"),
]


@pytest.mark.parametrize("proof,reason", CODE_RUNNING)
def test_code_running_elaborators_and_commands_are_rejected(proof, reason):
    assert_rejected(proof, reason)


@pytest.mark.parametrize(
    "proof",
    [
        "  simp [Polynomial.eval_add]",
        "  have h : 7 % 2 = 1 := by norm_num\n  omega",
        "  have h : (7%2) = 1 := by norm_num\n  omega",
        "  have eval := 3\n  simp",
        "  norm_num [Nat.succ_eq_add_one]",
    ],
)
def test_eval_as_a_name_or_modulo_is_not_eval_percent(proof):
    assert_accepted(proof)


UNSAFE_AND_IO = [
    ("  exact (unsafeIO (pure 1)).toOption.get!", "`unsafeIO`"),
    ("  exact unsafeBaseIO (pure rfl)", "`unsafeBaseIO`"),
    ("  exact (unsafeEIO (pure rfl)).toOption.get!", "`unsafeEIO`"),
    ("  exact unsafeCast ()", "`unsafeCast`"),
    ("  exact (ptrAddrUnsafe 1).toNat", "`ptrAddrUnsafe`"),
    ('  exact (EStateM.run\' (IO.FS.readFile "x") ()).getD ""', "`EStateM`"),
    ('  have h := (IO.getEnv "HOME" ()).toOption\n  simp', "`IO`"),
    ("  have h := IO.RealWorld\n  simp", "`IO`"),
    ("  have h : BaseIO Unit := pure ()\n  simp", "`BaseIO`"),
    ("  have h : EIO Unit Unit := pure ()\n  simp", "`EIO`"),
    ('  have h := System.FilePath.readDir "/"\n  simp', "`System`"),
    ("  have h := runST (fun _ => pure 1)\n  simp", "`runST`"),
    ("  have h := ST.Ref.get\n  simp", "`ST`"),
    ("  open IO in\n  simp", "`IO`"),
    ("  have d : Lean.Elab.Tactic.TacticM Unit := pure ()\n  simp", "`Lean`"),
    ("  have m : Lean.Meta.MetaM Unit := pure ()\n  simp", "`Lean`"),
    ("  have c : CoreM Unit := pure ()\n  simp", "`CoreM`"),
    ("  exact «unsafeIO» (pure rfl)", "`unsafeIO`"),
]


@pytest.mark.parametrize("proof,reason", UNSAFE_AND_IO)
def test_unsafe_code_and_io_names_are_rejected(proof, reason):
    assert_rejected(proof, reason)


def test_no_published_prover_output_names_io_or_unsafe_code():
    """The IO/unsafe names are refused on the claim that proofs never use them: 730 published outputs don't."""
    import gzip
    import json

    rows = [
        json.loads(line)
        for path in sorted((TESTS_DIR / "data" / "published").glob("*.jsonl.gz"))
        for line in gzip.open(path, "rt", encoding="utf-8")
        if line.strip()
    ]
    texts = [row["text"] if "text" in row else row["statement"] + "\n" + row["proof"] for row in rows]
    assert len(texts) >= 700
    rules = policy()
    for text in texts:
        tokens = tokenize(text)
        for k, token in enumerate(tokens):
            if token.kind == "ident" and not (k and tokens[k - 1].text == "import"):
                first = token.components[1:] if token.components[0] == "_root_" else token.components
                assert not any(first[: len(ns)] == ns for ns in rules.meta_namespaces), token.text
                assert not rules.meta_names & set(token.components), token.text
                assert not any("unsafe" in part.lower() for part in token.components), token.text


CONFIG_LITERALS = [
    "  simp (config := { maxSteps := 100000 })",
    "  simp (config := {zeta := false, decide := true})",
    "  simp (config := {\n    zeta := false\n    decide := true })",
    "  simp_all (config := {decide := true})",
    "  omega (splitDisjunctions := false)",
    "  simp +arith -zeta",
    "  simp +arith (maxSteps := 500)",
    "  decide (config := { maxRecDepth := 4000 })",
    "  decide (maxRecDepth := (4000))",
    "  decide (config := {kernel := true})",
    "  decide (config := {})",
    "  rw (occs := .pos [1, 2]) [Nat.add_comm]",
    "  simp (config := { maxSteps := (100000) })",
    "  linarith (config := { splitNe := true })",
    '  simp (config := .default) [show "a" = "a" from rfl]',
    "  simp (disch := positivity) [Nat.add_comm]",
    "  field_simp (discharger := norm_num)",
    "  linear_combination (norm := ring_nf) h",
    "  aesop (rule_sets := [-default, Foo])",
    # `(disch := …)`, `(discharger := …)` and `(norm := …)` hold tactic sequences (Lean's `valConfigItem` excludes
    # the first two): each tactic is held to the allow-list like any other.
    "  simp (disch := simp [h]) [h]",
    "  simp (disch := (simp; linarith))",
    "  linear_combination (norm := skip; ring_nf) h",
    "  exact foo (x := by simp)",
    # Named arguments of a qualified function are elaborated, never evaluated.
    "  exact Nat.le_induction (m := 2) (P := fun n _ => 2 ≤ n) le_rfl (fun _ _ h => h.trans (by omega))",
    "  exact h.trans (b := x + 1) (by omega)",
]


@pytest.mark.parametrize("proof", CONFIG_LITERALS)
def test_configuration_items_with_literal_values_pass(proof):
    assert_accepted(proof)


CONFIG_CODE = [
    "  simp (config := Simp.neutralConfig)",
    "  simp (maxSteps := Nat.succ 100)",
    "  omega (splitDisjunctions := h)",
    "  linarith (splitNe := (fun _ => true) ())",
    "  rw (offsetCnstrs := Id.run do pure true) [h]",
    "  simp (config := let c := {}; c)",
    "  simp (config := { c with zeta := false })",
    "  simp (config := { maxSteps := (unsafeIO (pure 5)).toOption.get! })",
    "  simp (config := { maxSteps := 2 ^ 10 })",
    "  simp (config := {maxSteps := 10}) (contextual := ((fun x => x) true))",
    "  decide (config := ⟨false, true, true, false⟩)",
    "  decide (config := .mk false true true false)",
    "  aesop (config := { maxRuleApplications := id 200 })",
    "  grind (splits := default)",
    # A bracket inside a string's `{…}` must not close the item early and make its value look literal.
    '  simp (config := "{)}" ++ toString (id "x" fun _ => 1))',
    '  simp "{Nat.succ}" (config := Simp.neutralConfig)',
    # The discharger-like names take a single tactic or constant: linarith's `discharger` is an evaluated config field.
    # Nesting deep enough to exhaust a recursive parser is refused, not crashed on.
    "  simp (config := " + "[" * 5000 + "1" + "]" * 5000 + ")",
]


@pytest.mark.parametrize("proof", CONFIG_CODE)
def test_configuration_items_with_code_are_rejected(proof):
    result = assert_rejected(proof)
    assert any(word in result.reason for word in ("literal", "unsafe", "nested more than")), result.reason
    assert not isinstance(prepare(ProofRequest(T, proof), MINIF2F_HEADER, allow_native_decide=True), Prepared)


@pytest.mark.parametrize(
    "proof",
    [
        "  linarith (discharger := do Lean.Elab.Tactic.evalTactic (← `(term| rfl)))",
        "  linarith (discharger := (fun _ => pure ()) ())",
        "  field_simp (disch := do evil; pure ())",
        "  field_simp (disch := id do evil; pure ())",
        "  field_simp (disch := have h := evil; h)",
        "  field_simp (disch := let e := evil; e)",
        "  field_simp (disch := by exact evil; rfl)",
        "  field_simp (disch := fun _ => evil; rfl)",
        "  field_simp (disch := Lean.evil; skip)",
    ],
)
def test_a_dischargers_tactics_are_held_to_the_allow_list(proof):
    # Refused as a tactic off the allow-list, or as a tactic that also starts a term (which a tactic without a
    # discharger reads as a configuration value).
    result = prepare(ProofRequest(T, proof), MINIF2F_HEADER)
    assert result.status == "rejected", result
    assert "is not on the allow-list" in result.reason or "also starts a term" in result.reason, result.reason


@pytest.mark.parametrize(
    "proof",
    [
        "  decide (config := { kernel := true, native := true })",
        "  decide (config := {\n    kernel := false\n    native := true })",
        "  decide (native := true)",
    ],
)
def test_native_stays_refused_inside_a_literal_configuration(proof):
    assert_rejected(proof, "native")
    assert isinstance(prepare(ProofRequest(T, proof), MINIF2F_HEADER, allow_native_decide=True), Prepared)


@pytest.mark.parametrize(
    "proof",
    [
        "  have native := Nat.le_refl 2\n  exact native",
        "  let native := 3\n  simp",
        "  exact?",
        "  rw [_root_.add_comm]",
        "  exact _root_.Nat.le_refl 2",
    ],
)
def test_proof_level_false_rejections_are_fixed(proof):
    assert_accepted(proof)


@pytest.mark.parametrize(
    "proof",
    [
        # Lean's parser never reads `(disch := …)`/`(discharger := …)` as a configuration item (`valConfigItem` has
        # `notFollowedBy(&"discharger" <|> &"disch")`): it is the discharger syntax, a tactic sequence.
        "  field_simp (disch := simp; linarith)",
        "  field_simp (discharger := simp <;> linarith)",
        "  simp (disch := simp [foo] at h; linarith) [h]",
    ],
)
def test_a_discharger_may_be_a_tactic_sequence(proof):
    assert_accepted(proof)


RESOURCE_OPTIONS = [
    ("  set_option maxRecDepth 100000 in\n  simp", "at most 10000"),
    ("  set_option maxHeartbeats 0 in\n  simp", "no limit"),
    ("  set_option maxRecDepth 0x100000 in\n  simp", "at most 10000"),
    ("  set_option maxRecDepth 1e9 in\n  simp", "natural number"),
    ("  set_option exponentiation.threshold 100000 in\n  norm_num", "at most 4096"),
    ("  set_option trace.Meta.synthInstance true in\n  simp", "trace.Meta.synthInstance"),
    ("  set_option trace.profiler true in\n  simp", "trace.profiler"),
    ("  set_option profiler true in\n  simp", "profiler"),
    ("  set_option profiler.threshold 0 in\n  simp", "profiler.threshold"),
    ("  set_option diagnostics true in\n  simp", "diagnostics"),
    ("  set_option tactic.simp.trace true in\n  simp", "tactic.simp.trace"),
    # Options set through a configuration's items or fields follow the same rules.
    ("  decide (config := { maxRecDepth := 1000000 })", "at most 10000"),
    ("  decide (maxRecDepth := 1000000)", "at most 10000"),
    ("  simp (config := { opt.exponentiation.threshold := 100000 })", "at most 4096"),
    ("  simp (trace.Meta.Tactic.simp := true)", "trace.Meta.Tactic.simp"),
    # A parenthesized numeral is the same literal to Lean: the bound reads through the parentheses.
    ("  decide (maxRecDepth := (100000))", "at most 10000"),
    ("  decide (config := { maxRecDepth := (100000) })", "at most 10000"),
    ("  simp (config := { exponentiation.threshold := ((1000000)) })", "at most 4096"),
]


@pytest.mark.parametrize("proof,reason", RESOURCE_OPTIONS)
def test_resource_options_are_refused_or_bounded(proof, reason):
    assert_rejected(proof, reason)
    if "set_option" not in proof or "at most" in reason or "no limit" in reason:
        return
    # The same option on a file's header line is refused the same way (a value over its bound runs at the bound).
    option_line = proof.split("\n")[0].strip().removesuffix(" in")
    in_file = prepare("import Mathlib\n" + option_line + "\ntheorem t : 2 + 2 = 4 := by\n  norm_num", MINIF2F_HEADER)
    assert in_file.status == "rejected" and reason in in_file.reason, in_file.reason


@pytest.mark.parametrize(
    "option,runs_as",
    [
        ("maxHeartbeats 0", "set_option maxHeartbeats 1000000"),
        ("maxHeartbeats 9999999", "set_option maxHeartbeats 1000000"),
        ("maxRecDepth 1000000", "set_option maxRecDepth 10000"),
        ("maxRecDepth 500", "set_option maxRecDepth 500"),
    ],
)
def test_a_files_header_option_over_its_bound_runs_at_the_bound(option, runs_as):
    prepared = prepare(f"import Mathlib\nset_option {option}\ntheorem t : 2 + 2 = 4 := by\n  norm_num", MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.code.startswith(runs_as + "\n") and prepared.header == "import Mathlib\nimport Aesop"


@pytest.mark.parametrize(
    "option",
    [
        "maxRecDepth 10000",
        "maxRecDepth 0x2710",
        "maxHeartbeats 400000",
        "synthInstance.maxHeartbeats 100000",
        "exponentiation.threshold 4096",
        "linter.unusedVariables false",
    ],
)
def test_resource_options_within_bounds_pass(option):
    result = prepare(ProofRequest(T, f"  set_option {option} in\n  simp"), MINIF2F_HEADER)
    assert isinstance(result, Prepared), result.reason


_THEOREM = "theorem t : 2 + 2 = 4 := by\n  norm_num"


@pytest.mark.parametrize(
    "header,reason",
    [
        ("import Mathlib\nopen IO.FS\n", "`IO"),
        ("import Mathlib\nopen System\n", "`System`"),
        ("import Mathlib\nopen Lean\n", "`Lean`"),
        ("import Mathlib\nopen Qq\n", "`Qq`"),
        ("import Mathlib\nopen Real renaming sqrt → unsafeIO\n", "`unsafeIO`"),
        ("import Mathlib\nset_option trace.Meta.synthInstance true\n", "trace.Meta.synthInstance"),
        ("import Mathlib\nset_option debug.skipKernelTC true\n", "debug.skipKernelTC"),
        ("import Mathlib\nimport Lake\n", "`import Lake`"),
        ("import Mathlib\nimport Qq\n", "`import Qq`"),
    ],
)
def test_a_files_header_lines_are_held_to_the_proof_rules(header, reason):
    result = prepare(header + _THEOREM, MINIF2F_HEADER)
    assert result.status == "rejected" and reason in result.reason, result.reason


@pytest.mark.parametrize(
    "header",
    [
        MINIF2F_HEADER + "\n",
        "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 0\n\nopen BigOperators Real Nat Topology Rat\n",
        "import Mathlib\nopen scoped BigOperators\nopen Real renaming sqrt → rt\nopen Nat hiding succ\n"
        "open Finset (range sum)\nset_option maxRecDepth 10000\n",
    ],
)
def test_ordinary_file_headers_are_accepted(header):
    assert isinstance(prepare(header + _THEOREM, MINIF2F_HEADER), Prepared)


def test_a_trace_option_in_a_files_header_is_refused():
    file_text = "import Mathlib\nset_option trace.Meta.Tactic.simp true\ntheorem t : 2 + 2 = 4 := by\n  norm_num"
    result = prepare(file_text, MINIF2F_HEADER)
    assert result.status == "rejected" and "trace.Meta.Tactic.simp" in result.reason, result.reason


@pytest.mark.parametrize(
    "proof,corrected",
    [
        ("omega", '"  omega"'),
        ("intro x\nsimp at x", '"  intro x\\n  simp at x"'),
        ("  intro x\nsimp", '"  simp"'),
    ],
)
def test_a_body_not_indented_under_the_statement_is_shown_indented(proof, corrected):
    result = assert_rejected(proof, "closes the `by` block")
    assert result.reason.endswith(f"e.g. {corrected}"), result.reason
    # The shown form is accepted.
    assert isinstance(prepare(ProofRequest(T, json.loads(corrected)), MINIF2F_HEADER), Prepared)


def test_the_allow_lists_alone_refuse_every_tactic_position_attack():
    """The boundary is the allow-lists, not the word lists: with no command word and no meta name known, every corpus
    attack that stands where a tactic does (or opens a namespace) is still refused."""
    import dataclasses

    from tests.adversarial import load_corpus, request_of
    from trl_verigate.lean_server.precheck import prepare as bare_prepare

    without_words = dataclasses.replace(policy(), commands=frozenset(), meta_names=frozenset(), meta_namespaces=())
    tactic_attacks = [
        row
        for row in load_corpus()
        if row["expect"] == "rejected"
        and "not on the allow-list" in getattr(prepare(request_of(row), MINIF2F_HEADER), "reason", "")
    ]
    assert len(tactic_attacks) >= 15, len(tactic_attacks)
    for row in tactic_attacks:
        result = bare_prepare(request_of(row), MINIF2F_HEADER, without_words)
        assert isinstance(result, VerificationResult) and "not on the allow-list" in result.reason, row["id"]


# ------------------------------------------------------------ how Lean's tokenizer reads comments and numbers


@pytest.mark.parametrize(
    "text,expected",
    [
        # Lean's `whitespace` skips the character after `/-` before it counts nesting: `/-/- -/` is one comment.
        ("a /-/- -/ X -/", ["a", "X", "-", "/"]),
        ("a /- /- x -/ -/ b", ["a", "b"]),
        ("a /--/ X -/ b", ["a", "b"]),  # a doc comment's body starts after `/--` as well
        ("a /-/-/ b", ["a", "b"]),
        # Digit separators (`takeDigitsFn`): one number.
        ("1_000 0x_ff 0b1_0 2_5.0_1 3_", ["1_000", "0x_ff", "0b1_0", "2_5.0_1", "3", "_"]),
    ],
)
def test_the_tokenizer_reads_comments_and_numbers_as_lean_does(text, expected):
    assert [t.text for t in tokenize(text)] == expected


def test_a_numeric_option_value_may_use_digit_separators():
    proof = "  set_option maxRecDepth 1_000 in\n  decide"
    assert isinstance(prepare(ProofRequest("theorem t : True := by", proof), MINIF2F_HEADER), Prepared)


# ------------------------------------------------------------ which binders exempt a meta-looking name

BINDER_SCOPES = [
    # A bound `IO`, `ST` or `EST` (statement or proof binder), and its fields, are the proof's own.
    ("theorem t (a b : ℕ) (h : a = b) : b = a := by", "  have IO := h\n  exact IO.symm", True),
    ("theorem t (a b : ℕ) : a = b → b = a := by", "  intro EST\n  exact EST.symm", True),
    # A binder named `Lean` (no `bindable` root) exempts nothing, wherever it is bound.
    ("theorem t : True := by", "  have : ∀ Lean : ℕ, Lean = Lean := fun _ => rfl\n  exact Lean.trivial", False),
    ("theorem t (Lean : ℕ) : True := by", "  exact Lean.trivial", False),
    # A type ascription is no binder.
    ("theorem t : True := by", '  have _h := (IO : Type → Type)\n  have := IO.println "x"\n  trivial', False),
    # The names that run or fake code are refused even under a bound root.
    ("theorem t (IO : Prop) : True := by", "  exact IO.ofReduceBool _ _ rfl", False),
]


@pytest.mark.parametrize("statement,proof,accepted", BINDER_SCOPES)
def test_only_a_bound_bindable_root_exempts_its_names(statement, proof, accepted):
    result = prepare(ProofRequest(statement, proof), MINIF2F_HEADER)
    assert isinstance(result, Prepared) == accepted, getattr(result, "reason", "accepted")


def test_trace_stands_only_as_the_tactic_with_a_string():
    # Mathlib's `trace e` runs `e`; where the layout might misread a tactic position as a term, a bare `trace` must
    # not pass, so the word stands only as `trace "…"`. The matrix trace is written `Matrix.trace`.
    accepted = ["  simp [Matrix.trace, Fin.sum_univ_two]", '  trace "checking"\n  trivial']
    for proof in accepted:
        assert isinstance(prepare(ProofRequest("theorem t : True := by", proof), MINIF2F_HEADER), Prepared), proof
    refused = prepare(ProofRequest("theorem t : True := by", "  trace (1 + 1)\n  trivial"), MINIF2F_HEADER)
    assert "`trace` at line 2, column 2 takes one string literal" in refused.reason
    refused = prepare(ProofRequest("theorem t : True := by", "  open Matrix in\n  simp [trace]"), MINIF2F_HEADER)
    assert "`trace` at line 3, column 8 stands only as the tactic" in refused.reason, refused.reason


@pytest.mark.parametrize(
    "namespace,holds", [("Mathlib", "Mathlib.Tactic"), ("Std", "Std.Internal"), ("Batteries", "Batteries.Tactic")]
)
def test_a_namespace_that_holds_a_meta_namespace_cannot_be_opened(namespace, holds):
    result = prepare(ProofRequest("theorem t : True := by", f"  open {namespace} in\n  trivial"), MINIF2F_HEADER)
    assert result.status == "rejected" and f"it holds `{holds}`" in result.reason, result.reason


@pytest.mark.parametrize(
    "proof,accepted",
    [
        ("  aesop (add safe apply le_refl)", True),
        ("  aesop (add norm simp Nat.add_comm, unsafe 50% apply le_refl)", True),
        ("  aesop (add safe le_refl)", False),  # no builder: Aesop may run the constant as a tactic
        ("  aesop (add safe apply le_refl, unsafe 50% le_refl)", False),
    ],
)
def test_every_aesop_rule_names_a_builder(proof, accepted):
    result = prepare(ProofRequest("theorem t : True := by", proof), MINIF2F_HEADER)
    assert isinstance(result, Prepared) == accepted, getattr(result, "reason", "accepted")
    if not accepted:
        assert "an Aesop rule without a builder" in result.reason


@pytest.mark.parametrize(
    "proof",
    [
        "  try obtain\n  plausible",
        "  try rcases\n  run_tac pure ()",
        "  try have\n  run_tac pure ()",
        "  norm_num\n  try replace\n  stop",
        "  try suffices\n  plausible",
        "  try let\n  plausible",
    ],
)
def test_a_tactic_whose_operand_is_optional_does_not_hide_the_next_line(proof):
    # Lean parses the optional operand as empty and reads the next line as a tactic of its own.
    result = prepare(ProofRequest("theorem t : True := by", proof), MINIF2F_HEADER)
    assert result.status == "rejected" and "is not on the allow-list" in result.reason, result


@pytest.mark.parametrize(
    "proof,accepted",
    [
        ("  calc (1:ℕ) = 1 := rfl\n  _ = 1 := rfl", True),
        ("  calc (1:ℕ) = 1 := rfl\n  1 = 1 := rfl", True),
        ("  calc (1:ℕ) = 1 := rfl\n  run_tac x := pure ()", False),
        ("  calc (1:ℕ) = 1 := rfl\n  · have h := 1\n    plausible", False),
    ],
)
def test_a_calc_step_at_the_block_column_starts_as_no_tactic_does(proof, accepted):
    result = prepare(ProofRequest("theorem t : (1:ℕ) = 1 := by", proof), MINIF2F_HEADER)
    assert isinstance(result, Prepared) == accepted, getattr(result, "reason", "accepted")


# ------------------------------------------------------------ the keyword backstop

LAYOUT_MISSES = [
    "  rcases h with h |plausible",  # an rcases pattern's bar: the layout reads patterns, Lean would too
]


@pytest.mark.parametrize("proof", LAYOUT_MISSES)
def test_a_tactic_keyword_off_the_allow_list_is_refused_wherever_it_stands(proof):
    import dataclasses

    from trl_verigate.lean_server.precheck import prepare as bare_prepare

    request = ProofRequest("theorem t (h : 1 = 1 ∨ 1 = 1) : (1:ℕ) = 2 := by", proof)
    result = prepare(request, MINIF2F_HEADER)
    assert result.status == "rejected" and "`plausible`" in result.reason and "a tactic keyword" in result.reason
    # These are places the layout does not see a tactic start: without the keyword list they would reach Lean.
    without_keywords = dataclasses.replace(policy(), keywords=frozenset())
    assert isinstance(bare_prepare(request, MINIF2F_HEADER, without_keywords), Prepared)


def test_only_the_trusted_statement_may_bind_a_tactic_keyword_as_a_name():
    # `stop` bound by the statement is a name; bound by the proof it could be read as the tactic where the layout errs.
    trusted = ProofRequest("theorem t (stop : ℕ) (h : stop = 3) : stop = 3 := by", "  exact h")
    assert isinstance(prepare(trusted, MINIF2F_HEADER), Prepared)
    untrusted = ProofRequest("theorem t : True := by", "  have stop : True := trivial\n  exact stop")
    assert "`stop` at line 2, column 7, a tactic keyword" in prepare(untrusted, MINIF2F_HEADER).reason


def test_the_keyword_list_holds_the_tactics_that_run_code_or_fake_proofs():
    # Named from Lean's, Mathlib's and Plausible's documentation, not from the list itself.
    keywords = policy().keywords
    for name in ("plausible", "run_tac", "polyrith", "stop", "sorry", "admit", "native_decide", "run_conv", "exact?"):
        assert name in keywords, name
    assert "plausible" in policy().unlisted_keywords and "simp" not in policy().unlisted_keywords
