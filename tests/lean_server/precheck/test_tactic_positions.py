"""Every place Lean reads tactics is read as tactics, so the rules reach them: the branches of the `if` tactic, the
arguments of tactics that take a tactic sequence, alternatives after a `|` glued to them; Aesop's clauses after every
tactic that takes them; the word `trace` only as `trace "…"`; code fields nowhere; a signature's ascription binds
no name.

Expected heads and verdicts are read off Lean's syntax declarations by hand (quoted in grammar.py)."""

import pytest

from tests.lean_helpers import MINIF2F_HEADER, prepare
from trl_verigate.lean_server.core.types import ProofRequest
from trl_verigate.lean_server.precheck.layout import split_tactics
from trl_verigate.lean_server.precheck.prepared import Prepared
from trl_verigate.lean_server.precheck.scopes import bound_names, signature_binders
from trl_verigate.lean_server.precheck.tokens import tokenize

STATEMENT = "theorem t (a b : ℝ) (h : 0 < a) (hb : 0 < b) : 0 < a * b := by"


def heads(proof: str) -> list[str]:
    """The first word of every tactic the layout reads, outer first."""
    return [tactic.text.split()[0] for tactic in split_tactics(proof, "all")]


@pytest.mark.parametrize(
    "proof,expected",
    [
        ("  if h : x = 0 then simp [h] else positivity", ["if", "simp", "positivity"]),
        ("  if h : x = 0 then\n    exact h\n  else\n    simp\n  rfl", ["if", "exact", "simp", "rfl"]),
        ("  if x = 0 then simp else if x = 1 then rfl else ring", ["if", "simp", "if", "rfl", "ring"]),
        ("  exact if a then b else c", ["exact"]),  # a term `if`: its branches are terms
        ("  show_term simp", ["show_term", "simp"]),
        ("  try_suggestions simp", ["try_suggestions", "simp"]),
        ("  decreasing_with simp", ["decreasing_with", "simp"]),
        ("  as_aux_lemma => simp", ["as_aux_lemma", "simp"]),
        ("  with_annotate_state x simp", ["with_annotate_state", "simp"]),
        ("  attempt_all | simp | rfl", ["attempt_all", "simp", "rfl"]),
        ("  first_par | simp | rfl", ["first_par", "simp", "rfl"]),
        ("  first |simp | rfl", ["first", "simp", "rfl"]),
        ("  first |(simp) | rfl", ["first", "(simp)", "simp", "rfl"]),
        ("  first\n  |simp\n  | rfl", ["first", "simp", "rfl"]),
        ("  intro |_ => simp", ["intro", "simp"]),
        ("  match n with\n  |0 => rfl\n  |n+1 => simp", ["match", "rfl", "simp"]),
        ("  induction n with\n  |zero => rfl\n  |succ n ih => simp", ["induction", "rfl", "simp"]),
    ],
)
def test_every_tactic_sequence_position_is_read_as_tactics(proof, expected):
    assert heads(proof) == expected


@pytest.mark.parametrize(
    "proof,expected",
    [
        # Abs bars, glued inside: a term, in an alternative or not.
        (
            "  cases h with\n  | inl h =>\n    calc |x| = x := abs_of_nonneg h\n      _ ≤ 1 := foo\n  | inr h => simp",
            ["cases", "calc", "simp"],
        ),
        ("  first | exact abs_nonneg |x| | rfl", ["first", "exact", "rfl"]),
        ("  match n with\n  | 0 => exact abs_nonneg |(x + 1)|\n  |n+1 => simp", ["match", "exact", "simp"]),
        # An rcases pattern's bar separates patterns, not tactics (`rfl` is a pattern here).
        ("  rcases h with rfl |rfl", ["rcases"]),
        ("  obtain h |h := foo", ["obtain"]),
    ],
)
def test_a_glued_bar_that_is_no_alternative_stays_in_its_term(proof, expected):
    assert heads(proof) == expected


@pytest.mark.parametrize(
    "proof",
    [
        "  aesop (add safe tactic (by positivity))",
        '  have : String.length "{" = 1 := rfl\n  positivity',
        "  finiteness (rule_sets := [finiteness])",
        "  aesop (add safe apply mul_pos)",
        "  first |positivity | nlinarith",
        '  first |trace "trying" | positivity',
        "  if h' : a = b then positivity else positivity",
        "  show_term positivity",
        "  have oracle := hb\n  positivity",  # a hypothesis named like a code field
    ],
)
def test_honest_proofs_in_these_positions_pass(proof):
    result = prepare(ProofRequest(STATEMENT, proof), MINIF2F_HEADER)
    assert isinstance(result, Prepared), result.reason


@pytest.mark.parametrize(
    "proof,reason",
    [
        ("  aesop (add safe tactic (by plausible))", "`plausible`"),
        ("  aesop (add unsafe mul_pos)", "an Aesop rule without a builder"),
        ("  finiteness (add norm [apply mul_pos, mul_pos])", "an Aesop rule without a builder"),
        ("  continuity (add safe tactic Foo.bar)", "Aesop's `tactic` rule builder"),  # any tactic given `(add …)`
        ("  arith_mult (add safe [apply mul_pos, default Foo.bar])", "Aesop's `default` rule builder"),
        ('  have := String.length "{"\n  exact foo "{"', "a brace in a string literal"),
        ("  first |trace (toString 1) | positivity", "`trace`"),
        ("  exact (trace (toString 1) : True)", "`trace`"),
        ("  if h' : a = b then trace (toString 1) else positivity", "`trace`"),
        # After a tactic, `|t` is a bar if the tactic is complete and abs if it takes a term: refused either way.
        ("  first | nlinarith |solve_by_elim (proc := fun _ _ gs => pure gs)", "`|solve_by_elim`"),
        ("  first | nlinarith |positivity", "write `| positivity` for an alternative"),
        ("  cases h with\n  | inl h => exact foo |(left x)|\n  | inr h => simp", "`|left`"),
        # A code field is refused where the layout reads a term's named argument too (a tactic position it missed).
        ("  exact foo (proc := fun _ _ gs => pure gs)", "the configuration field `proc := …`"),
        ("  exact foo { oracle := bar }", "the configuration field `oracle := …`"),
    ],
)
def test_code_in_these_positions_is_refused(proof, reason):
    result = prepare(ProofRequest(STATEMENT, proof), MINIF2F_HEADER)
    assert not isinstance(result, Prepared) and reason in result.reason, getattr(result, "reason", "accepted")


def test_a_builderless_rule_says_why_it_names_a_builder():
    result = prepare(ProofRequest(STATEMENT, "  aesop (add norm mul_pos)"), MINIF2F_HEADER)
    assert "TacticM Unit" in result.reason and "`simp` for a `norm` rule" in result.reason, result.reason


def test_only_binder_groups_before_the_signatures_colon_bind_for_the_whole_declaration():
    signature = tokenize("theorem t (a IO : T) {α : Type} [inst : C α] : (ST : Type → Type) = ST ∧ ∀ EST, EST = EST")
    assert signature_binders(signature) == {"a", "IO", "α", "inst"}
    # The `∀`'s binder still counts among the names the statement binds (a hypothesis may be named like a keyword).
    assert bound_names(signature, signature=True) == {"a", "IO", "α", "inst", "EST"}


def test_an_ascription_in_a_helper_type_does_not_exempt_io():
    file = (
        'import Mathlib\n\ntheorem aux : (IO : Type → Type) = IO := rfl\nwhere\n  evil := IO.println "x"\n\n'
        "theorem main_t : (1:ℕ) = 1 := by\n  rfl\n"
    )
    result = prepare(file, MINIF2F_HEADER)
    assert not isinstance(result, Prepared) and "`IO`" in result.reason, getattr(result, "reason", "accepted")
