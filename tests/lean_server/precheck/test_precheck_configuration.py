"""Issue 26's rules: configuration is data wherever a tactic's syntax puts it, names by scope, Aesop's rule tree,
`open`, the nesting bound, and the misreadings that refused honest proofs. Expected verdicts are read off Lean's
grammar by hand (the syntax quoted beside each group), never off the precheck's own output."""

import dataclasses

import pytest

from tests.lean_helpers import prepare
from tests.precheck_shapes import REJECTED_SHAPES, SHAPES
from trl_verigate.lean_server.core.types import MINIF2F_HEADER, FileRequest, ProofRequest
from trl_verigate.lean_server.precheck import policy
from trl_verigate.lean_server.precheck import prepare as bare_prepare
from trl_verigate.lean_server.precheck.prepared import Prepared

T = "theorem t (a b : ℕ) (h : a = b) (s : Finset ℕ) : (1:ℕ) = 2 := by"


def verdict(proof: str, statement: str = T):
    return prepare(ProofRequest(statement, proof), MINIF2F_HEADER)


def assert_accepted(proof: str, statement: str = T) -> None:
    result = verdict(proof, statement)
    assert isinstance(result, Prepared), result.reason


def assert_verdict(proof: str, accepted: bool, refusal: str, statement: str = T) -> None:
    """`proof` is accepted, or refused with `refusal` in the reason."""
    result = verdict(proof, statement)
    assert isinstance(result, Prepared) == accepted, getattr(result, "reason", "accepted")
    assert accepted or refusal in result.reason, result.reason


def reason(proof: str, statement: str = T) -> str:
    result = verdict(proof, statement)
    assert not isinstance(result, Prepared), f"sent to Lean: {proof!r}"
    return result.reason


# ------------------------------------------------------------ configuration after any token

# Lean core: `syntax (name := solveByElim) "solve_by_elim" "*"? optConfig …`, Mathlib: `"linarith" "!"?
# linarithArgsRest` (optConfig first), `"simpa" "?"? "!"? simpaArgsRest`, `"ring_nf" "!"? optConfig`,
# `"abel_nf" "!"? optConfig`. Each payload is code for a field that holds code, written with no refused name.
CODE_AFTER_A_FLAG = [
    "  solve_by_elim * (proc := fun _ _ gs => gs.head!.admit *> pure [])",
    "  solve_by_elim * (suspend := fun g => g.isAssigned)",
    "  linarith ! (config := { preprocessors := [Linarith.nlinarithExtras] })",
    "  linarith ! (oracle := some .simplexAlgorithmSparse)",
    "  simpa ? ! (config := { maxSteps := s.card }) using h",
    "  ring_nf ! (config := { red := cfg.red })",
    "  abel_nf ! (config := { red := .reducible, evalAtoms := fun e => e })",
    "  simp? ! (config := { maxSteps := (fun x => x) 1 })",
    "  decide +kernel (config := { kernel := g.assign g })",
    "  nlinarith (config := {}) (preprocessors := [Linarith.removeNe])",
]


@pytest.mark.parametrize("proof", CODE_AFTER_A_FLAG)
def test_configuration_after_a_flag_holds_literals_only(proof):
    assert "literals only" in reason(proof)


# Named arguments of a term are elaborated, never run: `(x := …)` right after a term stays free.
NAMED_ARGUMENTS = [
    "  exact Nat.le_induction (m := 2) (P := fun n _ => 2 ≤ n) le_rfl (fun _ _ h => h.trans (by omega))",
    "  have := congrArg (f := fun x => x + 1) h",
    "  exact absurd (a := fun x => x) rfl (by simp)",
    "  refine ⟨?_, ?_⟩ (α := ℕ)",
]


@pytest.mark.parametrize("proof", NAMED_ARGUMENTS)
def test_named_arguments_after_a_term_are_not_configuration(proof):
    assert "literals only" not in getattr(verdict(proof), "reason", "")


LITERAL_CONFIGURATIONS = [
    "  solve_by_elim * (maxDepth := 10)",
    "  linarith ! (config := { splitNe := true })",
    "  simpa ? ! (config := { maxSteps := 100 }) using h",
    "  ring_nf ! (config := { red := .reducible })",
    "  simp (config := { maxSteps := 100000 }) (disch := positivity) [h]",
    "  rw (occs := .pos [1, 2]) [Nat.add_comm]",
    "  decide +kernel",
    "  aesop (config := { maxRuleApplications := 200 }) (add safe apply le_refl) (simp_config := { zeta := false })",
]


@pytest.mark.parametrize("proof", LITERAL_CONFIGURATIONS)
def test_literal_configurations_pass_in_every_position(proof):
    assert_accepted(proof)


@pytest.mark.parametrize(
    "value",
    ['"fast"', "'x'", "Nat.succ 1", "s.env", "csref.modify id", "g.assign g", "{ c with zeta := false }"],
)
def test_only_literal_shapes_are_values(value):
    # Numerals, true/false, `.ctor`, lists and structure instances of those; a string, a name or an application is
    # none of them.
    assert "literals only" in reason(f"  simp (maxSteps := {value})")


# ------------------------------------------------------------ tactic-valued items


@pytest.mark.parametrize(
    "proof",
    [
        # Linarith has no discharger syntax: `(discharger := …)` is a configuration field, a `TacticM Unit` term.
        "  linarith (discharger := show _ from fun _ _ => pure ((), default))",
        "  field_simp (disch := fun _ => pure ())",
        "  simp (disch := (show _ from skip)) [h]",
        "  nlinarith (discharger := .evil)",
        "  linear_combination (norm := have := 1; skip) h",
    ],
)
def test_a_tactic_valued_item_starts_as_no_term_does(proof):
    assert "also starts a term" in reason(proof)


@pytest.mark.parametrize(
    "proof",
    [
        "  field_simp (disch := positivity)",
        "  simp (disch := (simp; linarith)) [h]",
        "  linear_combination (norm := ring_nf) h",
        "  field_simp (discharger := norm_num1)",
    ],
)
def test_dischargers_written_as_tactics_pass(proof):
    assert_accepted(proof)


# ------------------------------------------------------------ names by scope


@pytest.mark.parametrize(
    "proof,accepted",
    [
        # In scope: the binder's own body, the block after a pattern's `=>`, the tactics after `intro`/`have`.
        ("  have := fun (IO : ℕ) => IO.succ\n  simp", True),
        ("  intro IO\n  exact IO.symm", True),
        ("  have IO : a = b := h\n  exact IO.symm", True),
        ("  have : ∀ ST : ℕ, ST.succ > 0 := fun _ => Nat.succ_pos _\n  simp", True),
        # Out of scope: Lean reads the global namespace.
        ('  have := fun (IO : ℕ) => IO\n  have := IO.println "x"\n  simp', False),
        ("  have := (fun (EST : ℕ) => EST, EST.run)\n  simp", False),
        ("  have IO : a = b := IO.getStdout\n  simp", False),
        ("  have : ∀ ST : ℕ, ST = ST := fun _ => rfl\n  exact ST.Ref.get", False),
        ('  cases h\n  · intro IO\n    simp\n  · exact IO.println "x"', False),
        ('  exact (match a with | 0 => fun IO => IO | _ => IO.println "x")', False),
    ],
)
def test_a_bindable_root_is_exempt_only_in_its_binders_scope(proof, accepted):
    assert_verdict(proof, accepted, "metaprogramming or IO", "theorem t (a b : ℕ) (h : a = b) : b = a := by")


def test_a_statement_binder_covers_the_whole_proof():
    statement = "theorem t (a b : ℕ) (IO : a = b) : b = a := by"
    assert isinstance(verdict("  simp\n  exact IO.symm", statement), Prepared)


# ------------------------------------------------------------ Aesop's rule tree

# Aesop/Frontend/RuleExpr.lean: `rule_expr := feature | feature rule_expr | feature "[" rule_expr,+ "]"`; each branch
# from the clause to a leaf is one rule, and its builder is the last builder feature on it.


@pytest.mark.parametrize(
    "rules,accepted",
    [
        ("safe apply [le_refl, le_of_eq]", True),
        ("safe [apply le_refl, forward le_of_eq]", True),
        ("unsafe 50% [apply le_refl, (simp) Nat.add_comm]", False),
        ("safe [apply le_refl, Foo.evil]", False),
        ("safe [apply [le_refl, Foo.evil]]", True),
        ("safe [[apply le_refl], [Foo.evil]]", False),
        ("safe apply default Foo.evil", False),
        ("safe (apply) Foo.evil", False),
        ("safe apply [le_refl] Foo.evil", False),
    ],
)
def test_every_branch_of_an_aesop_rule_names_a_builder(rules, accepted):
    assert_verdict(f"  aesop (add {rules})", accepted, "Aesop")


# ------------------------------------------------------------ open


@pytest.mark.parametrize("namespace", ["Affine", "Pi", "Finset.Nat", "EuclideanGeometry", "Polynomial"])
def test_any_mathematical_namespace_may_be_opened(namespace):
    assert_accepted(f"  open {namespace} in\n  simp")


@pytest.mark.parametrize(
    "namespace", ["Lean", "Lean.Elab.Tactic", "IO", "IO.FS", "Qq", "Lake", "System", "System.FilePath", "Mathlib"]
)
def test_meta_namespaces_their_children_and_their_holders_may_not_be_opened(namespace):
    refusal = reason(f"  open {namespace} in\n  simp")
    assert "metaprogramming" in refusal or "it holds `Mathlib.Tactic`" in refusal, refusal


# ------------------------------------------------------------ the nesting bound


@pytest.mark.parametrize(
    "opening,closing",
    [("simp (disch := ", ")"), ("aesop (add safe apply (by ", "))"), ("exact (", ")"), ("· ", "")],
)
def test_nesting_beyond_32_is_refused_with_a_message_and_within_it_passes(opening, closing):
    def nested(depth):
        if opening == "· ":  # bullets nest by indentation
            return "".join("\n" + "  " * (level + 1) + "· " for level in range(depth))[1:] + "rfl"
        return "  " + opening * depth + "rfl" + closing * depth

    assert "nested more than 32 deep" in reason(nested(40))
    assert "nested more than" not in getattr(verdict(nested(12)), "reason", "")


def test_the_nested_shapes_are_measured_and_refused_past_the_bound():
    for name in ("nested_dischargers", "nested_aesop_by", "nested_config_braces"):
        assert isinstance(prepare(SHAPES[name](4096), MINIF2F_HEADER), Prepared), name
    for name in ("too_deep_dischargers", "too_deep_aesop_by", "too_deep_config_braces"):
        assert "nested more than 32 deep" in prepare(REJECTED_SHAPES[name](4096), MINIF2F_HEADER).reason, name


# ------------------------------------------------------------ misreadings of honest proofs


@pytest.mark.parametrize(
    "proof",
    [
        # A tactic keyword as a term-list item is a name: no tactic starts in a term list.
        "  simp [field, h]",
        "  rw [← field] at h",
        # Mathlib's `#s` is `Finset.card s`: a capitalised name, or a short one the proof binds.
        "  have : #s ≤ #s := le_rfl\n  simp",
        "  have : #S.filter (· > 0) = 0 := rfl\n  simp",
        # `xs[i]'h` is the token `]'`, then a name.
        "  have := (List.range 3)[0]'(by simp)\n  simp",
        # `k.val%3` is `k.val % 3`: a dotted name is no `%` elaborator token.
        "  have : a.succ%3 < 3 := Nat.mod_lt _ (by omega)\n  simp",
        # An alternative may be a hole; a term `let` takes its `;`.
        "  cases a with | zero => _ | succ n => simp",
        "  cases a\n  case zero => _\n  case succ n => simp",
        "  have : ∀ j : ℕ, j = j := fun j ↦\n    let k := j; rfl\n  simp",
        # Batteries' split focus `t <;> [t1; t2]` separates by `;`, whatever the columns.
        "  constructor <;>\n    [exact h;\n   exact h]",
        # A plain string with braces after an operator.
        '  have : "{".length = 1 := rfl\n  simp',
        # A harmless option on the options allow-list.
        "  set_option tactic.hygienic false in\n  simp",
        # A binder notation's `,` ends no tactic inside brackets: `∀ t, p` is one term.
        "  have := (by {\n    suffices ∀ t : ℕ, t = t by simp\n    intro t\n    rfl\n  } : True)\n  simp",
        "  exact ⟨by exact fun _ => ∑ i ∈ Finset.range 3, i, rfl⟩",
        # A `let` with its own match alternatives inside an induction alternative.
        "  induction a with\n  | zero => simp\n  | succ m ih =>\n    let e : ℕ × ℕ → ℕ\n      | ⟨y, z⟩ => y + z\n    simp",
    ],
)
def test_honest_shapes_once_misread_pass(proof):
    assert_accepted(proof)


@pytest.mark.parametrize(
    "proof,refusal",
    [
        ("  intro eval\n  #eval 1", "command `#eval`"),
        ("  #exit", "command `#exit`"),
        ("  #print axioms t", "command `#print`"),
        ("  have := x%3", "`x%`"),
        ("  exact let x := 1; x; run_tac pure ()", "`run_tac`"),
        ("  cases a with | zero => _ | succ n => run_tac pure ()", "`run_tac`"),
        ("  constructor <;>\n    [exact h;\n   run_tac pure ()]", "`run_tac`"),
        ('  have := toString "{(1 : ℕ)}"', "brace in a string"),
        ("  simp [h] <;> [run_tac pure ()]", "`run_tac`"),
        ("  exact ⟨by exact ∀ x : ℕ, x = x, by run_tac pure ()⟩", "`run_tac`"),
        (
            "  induction a with\n  | zero => simp\n  | succ m ih =>\n    let e : ℕ → ℕ\n      | y => y\n  | _ => run_tac pure ()",
            "`run_tac`",
        ),
    ],
)
def test_the_fixed_readings_still_refuse_their_attacks(proof, refusal):
    assert refusal in reason(proof), reason(proof)


@pytest.mark.parametrize("proof", ["  grind on_failure (pure ())", "  grind? only [h] on_failure fallback"])
def test_an_argument_that_is_code_is_refused_outside_a_configuration_too(proof):
    # Lean core: `"grind" optConfig (&" only")? (" [" grindParam,* "]")? (&" on_failure " term)?`, and
    # Elab/Tactic/Grind's `elabFallback` compiles the term and runs it with `evalConst`.
    assert "compiles and runs" in reason(proof)
    assert isinstance(verdict("  grind only [h]"), Prepared)


@pytest.mark.parametrize(
    "proof,accepted",
    [
        ("  constructor\n  map_tacs [rfl; rfl]", True),
        ("  constructor\n  map_tacs [rfl;\n run_tac pure ()]", False),
        ("  constructor\n  map_tacs [rfl, run_tac pure ()]", False),
    ],
)
def test_a_tactic_list_holds_tactics_held_to_the_allow_list(proof, accepted):
    # Batteries: `"map_tacs " "[" sepBy(tactic, "; ") "]"`: its items are tactics, not the terms of a `simp [...]`
    # list, separated by `;` whatever their columns.
    assert_verdict(proof, accepted, "tactic `run_tac`", "theorem t : True ∧ True := by")


@pytest.mark.parametrize(
    "request_",
    [
        'import Mathlib\ntheorem t : "{".length = 1 := by\n  rfl',
        FileRequest(
            'import Mathlib\ntheorem t (s : String) (h : s = "{") : s.length = 1 := by\n  subst h\n  rfl',
            'theorem t (s : String) (h : s = "{") : s.length = 1 := by',
        ),
    ],
)
def test_a_statement_holding_a_plain_brace_string_passes(request_):
    result = prepare(request_, MINIF2F_HEADER)
    assert isinstance(result, Prepared), result.reason


@pytest.mark.parametrize(
    "proof",
    [
        "  recover run_tac pure ()",
        "  checkpoint run_tac pure ()",
        "  with_unfolding_none run_tac pure ()",
        "  try_this run_tac pure ()",
        "  repeat1' run_tac pure ()",
        "  solve\n  | skip\n  | run_tac pure ()",
        "  conv_lhs => equals (1 : ℕ) => run_tac pure ()",
        "  conv_lhs => discharge => run_tac pure ()",
        "  squeeze_scope run_tac pure ()",
        "  cases a\n  case zero => _\n  case succ n => run_tac pure ()",
        # A bullet glued to its tactic is a bullet (`.run_tac`), wherever a tactic starts.
        "  constructor\n  .run_tac pure ()",
        "  constructor <;> .run_tac pure ()",
        # `intro` with match alternatives; the tactic `induction x with tac | …` runs on every alternative.
        "  intro\n  | _ => run_tac pure ()",
        "  cases a with run_tac pure ()\n  | zero => rfl\n  | succ n => rfl",
    ],
)
def test_the_sequences_of_allow_listed_combinators_are_read_as_tactics(proof):
    # Each takes a tactic sequence (`recover tacs`, `checkpoint tacs`, `solve | tacs | …`): with the keyword backstop
    # off, the layout alone must find the tactic inside and hold it to the allow-list.
    without_keywords = dataclasses.replace(policy(), keywords=frozenset())
    result = bare_prepare(ProofRequest(T, proof), MINIF2F_HEADER, without_keywords)
    assert "tactic `run_tac`" in getattr(result, "reason", "accepted"), getattr(result, "reason", "accepted")
