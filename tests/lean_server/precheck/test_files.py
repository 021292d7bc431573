"""Complete files (`str` and `FileRequest` requests, `precheck.files`): the header lines, the declarations, the trusted
statement and header a `FileRequest` is held to, and what reaches the REPL."""

import pytest

from tests.lean_helpers import FILE, prepare
from trl_verigate.lean_server.core.types import (
    MINIF2F_HEADER,
    FileRequest,
    LeanServerConfig,
    ProofRequest,
    VerificationResult,
)
from trl_verigate.lean_server.precheck.prepared import Prepared
from trl_verigate.lean_server.verdict.judging import judge

IMPORTS = "import Mathlib\nimport Aesop"
PREAMBLE = "set_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"
STATEMENT = "theorem mathd_t (x : ℕ) (h₀ : x = 3) : x + 1 = 4 := by"
HELPER = "lemma helper_1 (y : ℕ) (h : y = 3) : y + 1 = 4 := by\n  subst h\n  rfl\n\n"


def _refused(result) -> str:
    assert isinstance(result, VerificationResult), f"sent to Lean: {result.header!r} / {result.code!r}"
    assert result.status == "rejected" and result.first_error_tactic == 0
    return result.reason


# ------------------------------------------------------------ what reaches the REPL


def test_the_repl_loads_the_imports_and_the_other_header_lines_travel_with_the_code():
    prepared = prepare(FILE, MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.header == IMPORTS
    # A plain file is its own claim: its own option and `open` lines run, before its declarations.
    body = FILE[FILE.index("theorem") :]  # the doc comment before it is header text, a comment
    assert prepared.code == PREAMBLE + "\n" + body + "\n\n#print axioms mathd_t"
    assert prepared.line_offset == 6 and prepared.theorem_name == "mathd_t"
    assert prepared.proof == "\n  subst h₀\n  rfl"


@pytest.mark.parametrize("option", ["maxHeartbeats 0", "maxHeartbeats 200", "maxHeartbeats 123456789"])
def test_no_option_value_costs_a_repl(option):
    prepared = prepare(FILE.replace("maxHeartbeats 400000", option), MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.header == IMPORTS


def test_a_file_may_list_a_subset_of_the_trusted_imports():
    prepared = prepare("import Mathlib\ntheorem t : 1 = 1 := by\n  rfl", MINIF2F_HEADER)
    assert isinstance(prepared, Prepared) and prepared.header == IMPORTS


def test_messages_map_back_to_the_files_lines():
    prepared = prepare(FILE, MINIF2F_HEADER)
    # The body starts at the `theorem` line (the doc comment before it is header text): `rfl` is code line 5, after
    # the 2 preamble lines, and line 9 of the file.
    response = {"env": 1, "messages": [{"severity": "error", "pos": {"line": 5, "column": 2}, "data": "x"}]}
    result = judge(prepared, response, LeanServerConfig(), 0.0)
    assert [(m.line, m.column) for m in result.messages] == [(9, 2)]
    assert FILE.split("\n")[8].strip() == "rfl"


# ------------------------------------------------------------ header lines

OPEN_HEADER_LINES = [
    "open Real intervalIntegral",
    "open scoped BigOperators Real",
    "open Nat (factorial)",
    "open Nat (factorial choose) -- binomials",
    "open Real hiding sqrt",
    "open Real hiding sqrt exp",
    "open Nat renaming factorial → fact",
    "open Nat renaming factorial -> fact, choose → binom",
    "open «Real»",
    "/- c -/ open Real",
    "open Nat /- c -/ Real",
]


@pytest.mark.parametrize("line", OPEN_HEADER_LINES)
def test_every_form_of_open_is_a_header_line(line):
    prepared = prepare(f"import Mathlib\n{line}\n\ntheorem t : True := by\n  trivial", MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.header == IMPORTS and prepared.code.startswith("open ")


NOT_OPEN_HEADER_LINES = [
    ("open Real in #eval 1", "`#eval`"),
    ("open Nat set_option debug.skipKernelTC true", "after a `open` command"),
    ("open Nat theorem x : False := sorry", "after a `open` command"),
    ("open Nat (factorial) axiom c : False", "after a `open` command"),
    ("open Nat hiding recall", "needs the names"),
    ("open Nat renaming factorial → theorem", "`theorem`"),
    ("open scoped", "without a namespace"),
    ("open Real hiding", "needs the names"),
    ("open Nat (factorial", "needs the names"),
    ("open Nat ()", "needs the names"),
    ("open Nat Real (factorial)", "takes one namespace"),
    ("open Nat renaming factorial", "renaming"),
    ("open Nat; open Real", "after a `open` command"),
    ("open #eval", "without a namespace"),
    ("open Lean", "`Lean`"),
    ("open Lean Elab Tactic", "`Lean`"),
    ("open Qq", "`Qq`"),
    ("open IO.FS", "`IO.FS`"),
    ("open Mathlib", "it holds `Mathlib.Tactic`"),
]


@pytest.mark.parametrize("line,reason", NOT_OPEN_HEADER_LINES)
def test_an_open_line_that_is_not_one_allowed_open_command_is_refused(line, reason):
    reason_given = _refused(prepare(f"import Mathlib\n{line}\ntheorem t : True := by\n  trivial", MINIF2F_HEADER))
    assert reason in reason_given and "line 2" in reason_given, reason_given


@pytest.mark.parametrize(
    "file_text,reason",
    [
        ("import Mathlib\nimport Lake\ntheorem t : True := by\n  trivial", "`import Lake`"),
        ("import Mathlib\nimport Qq\ntheorem t : True := by\n  trivial", "`import Qq`"),
        ("import Mathlib.Tactic\ntheorem t : True := by\n  trivial", "`import Mathlib.Tactic`"),
        ("import Mathlib #exit\ntheorem t : True := by\n  trivial", "holds one module name"),
        ("import Mathlib\nset_option debug.skipKernelTC true\ntheorem t : True := by\n  trivial", "debug"),
        ("import Mathlib\nset_option «debug».skipKernelTC true\ntheorem t : True := by\n  trivial", "debug"),
        ("import Mathlib\nset_option /- c -/ debug.skipKernelTC true\ntheorem t : True := by\n  trivial", "debug"),
        ("import Mathlib\nset_option debug.skipKernelTC /- c -/ true\ntheorem t : True := by\n  trivial", "debug"),
        ("import Mathlib\nset_option\n  debug.skipKernelTC true\ntheorem t : True := by\n  trivial", "NAME VALUE"),
        ("import Mathlib\nset_option warn.sorry false\ntheorem t : True := by\n  trivial", "warn.sorry"),
        ("import Mathlib\nset_option trace.Meta.synthInstance true\ntheorem t : 1 = 1 := by\n  rfl", "trace.Meta"),
        ("import Mathlib\nset_option maxHeartbeats 400000 in\nopen Nat\ntheorem t : True := by\n  trivial", "`open`"),
        ("import Mathlib\nopen Nat in axiom cheat : 1 = 2\ntheorem t : 1 = 2 := by\n  exact cheat", "`axiom`"),
        (
            'import Mathlib\nopen Lean Elab Tactic in elab "cheat" : tactic => pure ()\ntheorem t : False := by\n  cheat',
            "`Lean`",
        ),
        ("import Mathlib\nadd_aesop_rules safe (by trivial)\ntheorem t : True := by\n  aesop", "add_aesop_rules"),
        ("import Mathlib\nopen Nat\nsimproc s (1 = 2) := none\ntheorem t : True := by\n  simp", "simproc"),
    ],
)
def test_a_files_header_and_preamble_are_checked_strictly(file_text, reason):
    reason_given = _refused(prepare(file_text, MINIF2F_HEADER))
    assert reason in reason_given, reason_given


@pytest.mark.parametrize(
    "option,runs_as",
    [("maxHeartbeats 0", "1000000"), ("maxRecDepth 100000", "10000"), ("maxRecDepth 0x10", "0x10")],
)
def test_a_header_option_over_its_bound_runs_at_the_bound(option, runs_as):
    prepared = prepare(f"import Mathlib\nset_option {option}\ntheorem t : True := by\n  trivial", MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.code.startswith(f"set_option {option.split()[0]} {runs_as}\n")


# ------------------------------------------------------------ declarations

LEGITIMATE_FILES = [
    FILE,
    "import Mathlib\nimport Aesop -- tactics\n\nset_option maxHeartbeats 400000 -- miniF2F\nopen scoped BigOperators\n"
    "open Real Nat\n\ntheorem t (x : ℝ) (h : 2 * x = 4) : x = 2 := by\n  linarith",
    "import Mathlib\nopen Real in\ntheorem t : Real.sqrt 4 = 2 := by\n  norm_num",
    "import Mathlib\nset_option maxRecDepth 10000 in\nopen Nat in\n/-- doc -/\nprivate theorem t : 2 + 2 = 4 := by\n  rfl",
    "/- A file\n   with a header comment -/\nimport Mathlib\nset_option pp.proofs true\n"
    "theorem t (f : ℕ → ℕ) (s : Set ℕ) : Set.image f s ⊆ Set.range f := by\n  rintro _ ⟨x, -, rfl⟩\n  exact ⟨x, rfl⟩",
    "import Mathlib\ntheorem t : (let a := 2; a + a) = 4 := by\n  rfl",
    "import Mathlib\ntheorem t : let a := 2; a + a = 4 := by\n  intro a\n  rfl",
    # A `:= by` inside any bracket is not the theorem's; a block's `;` before a term is the term's.
    "import Mathlib\ntheorem t : ⌊have h : True := by trivial; (2 : ℝ)⌋ = 2 := by\n  norm_num",
    "import Mathlib\ntheorem t : ⌈have h : True := by trivial; (2 : ℝ)⌉ = 2 := by norm_num",
    # Binders may go on at column 0.
    "import Mathlib\ntheorem t (m n : ℕ)\n(h : m = n) :\nn = m := by\n  omega",
]


@pytest.mark.parametrize("file_text", LEGITIMATE_FILES)
def test_legitimate_files_pass_the_precheck(file_text):
    prepared = prepare(file_text, MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.statement.endswith(":= by") and "theorem" not in prepared.proof
    assert prepared.proof.strip() == file_text.rsplit(":= by", 1)[1].strip()


HELPER_FILES = [
    # A `def` the main statement uses (a plain str request: the file is its own claim).
    "import Mathlib\ndef h : ℕ := 1\ntheorem t : h = 1 := by\n  rfl",
    # Two theorems: the first is a helper, the last the main theorem.
    "import Mathlib\ntheorem t : 1 = 1 := by\n  rfl\ntheorem u : 1 = 1 := by\n  exact t",
    # Modifiers, docstrings, attributes, `open … in` and `set_option … in` on helpers; lemma and theorem alike.
    "import Mathlib\nopen Real\n\n/-- A helper. -/\n@[simp] private lemma l1 (x : ℝ) (h : 0 ≤ x) : sqrt x ^ 2 = x := by\n"
    "  exact sq_sqrt h\n\nopen Finset in\nset_option maxRecDepth 2000 in\nnoncomputable def l2 : ℝ := sqrt 4\n\n"
    "theorem t : l2 ^ 2 = 4 := by\n  unfold l2\n  exact l1 4 (by norm_num)",
    # Term-mode helpers: on the `:=` line, or starting on the next one.
    "import Mathlib\ntheorem l1 : (2 : ℕ) + 2 = 4 := rfl\ndef l2 (n : ℕ) : ℕ :=\n  n + 1\ntheorem t : l2 1 = 2 := by\n  rfl",
    "import Mathlib\ntheorem l1 (p q : Prop) (hp : p) (hq : q) : p ∧ q :=\n  ⟨hp,\n    hq⟩\n"
    "theorem t : True ∧ True := by\n  exact l1 _ _ trivial trivial",
    # `_root_.` names and a `:=` bound by `let` in a helper's statement.
    "import Mathlib\ntheorem _root_.l1 : (let a := 2; a + a) = 4 := by\n  rfl\ntheorem t : 2 + 2 = 4 := by\n  exact l1",
]


@pytest.mark.parametrize("file_text", HELPER_FILES)
def test_helper_declarations_before_the_main_theorem_are_accepted(file_text):
    prepared = prepare(file_text, MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    main_name = file_text[file_text.rindex("\ntheorem ") + 1 :].split()[1]
    assert prepared.theorem_name == main_name
    assert prepared.proof == file_text.rsplit(":= by", 1)[1]
    # Every helper `def` is sent `noncomputable` (a line of its own before the `def`, which keeps its column).
    sent_defs = prepared.code.count("noncomputable\n") + prepared.code.count("noncomputable\n        def")
    plain_defs = sum(line.startswith(("def ", "private def ")) for line in file_text.split("\n"))
    assert sent_defs == plain_defs


@pytest.mark.parametrize(
    "file_text,reason",
    [
        ("import Mathlib\naxiom cheat : (1 : ℕ) = 2\ntheorem t : (1 : ℕ) = 2 := by\n  exact cheat", "`axiom`"),
        ("import Mathlib\nopaque c : ℕ\ntheorem t : c = c := by\n  rfl", "`opaque`"),
        ("import Mathlib\nlemma h : (1 : ℕ) = 2 := by\n  sorry\ntheorem t : (1 : ℕ) = 2 := by\n  exact h", "`sorry`"),
        ("import Mathlib\ndef h : (1 : ℕ) = 2 := sorry\ntheorem t : (1 : ℕ) = 2 := by\n  exact h", "`sorry`"),
        ("import Mathlib\ninstance : OfNat ℕ 2 := ⟨1⟩\ntheorem t : (1 : ℕ) = 2 := by\n  rfl", "`instance`"),
        ('import Mathlib\nmacro "cheat" : tactic => `(tactic| sorry)\ntheorem t : False := by\n  cheat', "`macro`"),
        ('import Mathlib\nnotation "two" => (1 : ℕ)\ntheorem t : two = 1 := by\n  rfl', "`notation`"),
        ("import Mathlib\ntheorem t : 1 = 1 := by\n  rfl\ntheorem t : 1 = 1 := by\n  rfl", "declared twice"),
        ("import Mathlib\ntheorem _root_.t : 1 = 1 := by\n  rfl\ntheorem t : 1 = 1 := by\n  rfl", "declared twice"),
        ("import Mathlib\nabbrev h : ℕ := 1\ntheorem t : h = 1 := by\n  rfl", "`abbrev`"),
        ("import Mathlib\nexample : 1 = 1 := rfl\ntheorem t : 1 = 1 := by\n  rfl", "helpers are `theorem`"),
        ("import Mathlib\nunsafe def h : ℕ := 1\ntheorem t : 1 = 1 := by\n  rfl", "`unsafe`"),
        ("import Mathlib\npartial def h (n : ℕ) : ℕ := h n\ntheorem t : 1 = 1 := by\n  rfl", "`partial`"),
        ("import Mathlib\nstructure S where\n  x : ℕ\ntheorem t : 1 = 1 := by\n  rfl", "`structure`"),
        ("import Mathlib\n@[implemented_by f] def h : ℕ := 1\ntheorem t : h = 1 := by\n  rfl", "attribute"),
        ('import Mathlib\n@[extern "c"] def h : ℕ := 1\ntheorem t : h = 1 := by\n  rfl', "attribute"),
        ("import Mathlib\n@[simp, tactic] def h : ℕ := 1\ntheorem t : h = 1 := by\n  rfl", "attribute `tactic`"),
        (
            "import Mathlib\nset_option debug.skipKernelTC true in\ntheorem h : (1 : ℕ) = 2 := by\n  decide\n"
            "theorem t : (1 : ℕ) = 2 := by\n  exact h",
            "debug.skipKernelTC",
        ),
        # A command no list knows, at column 0 after a term-mode value: Lean would run it.
        ("import Mathlib\ndef h : ℕ := 1\nmy_command x\ntheorem t : h = 1 := by\n  rfl", "`my_command` at line 3"),
        ("import Mathlib\ndef h : ℕ := 1 #eval 2\ntheorem t : h = 1 := by\n  rfl", "`#eval`"),
        ("import Mathlib\ndef h : ℕ\n  | _ => 1\ntheorem t : h 0 = 1 := by\n  rfl", "no top-level `:=`"),
        ("import Mathlib\ndef h : ℕ :=\ntheorem t : 1 = 1 := by\n  rfl", "no value"),
        ("import Mathlib\nlemma h : 2 ^ 10 = 1024 := by\n  native_decide\ntheorem t : True := by\n  trivial", "native"),
        (
            "import Mathlib\ntheorem t : 1 = 1 := by\n  rfl\n theorem u : 1 = 1 := by\n  rfl",
            "reads what follows as commands",
        ),
        ("import Mathlib\ntheorem t : 1 = 1 := rfl", "term mode"),
        ("import Mathlib\ntheorem t : 1 = 1 := by sorry", "`sorry`"),
        ("import Mathlib\nopen Real\n\n", "declares no theorem"),
        ("import Mathlib\ntheorem t : 1 = 1 := by\r  rfl", "carriage return"),
        ("import Mathlib\ntheorem t : True := by trivial\n  open Nat in simp", "reads what follows as commands"),
        ("import Mathlib\nexample : True := by\n  trivial\naxiom c : False", "`axiom` at line 4, column 0"),
    ],
)
def test_every_declaration_gets_the_checks_a_proof_gets(file_text, reason):
    reason_given = _refused(prepare(file_text, MINIF2F_HEADER))
    assert reason in reason_given, reason_given


def test_native_evaluation_in_a_helper_passes_only_when_allowed():
    file_text = "import Mathlib\nlemma h : 2 ^ 10 = 1024 := by\n  native_decide\ntheorem t : True := by\n  trivial"
    assert isinstance(prepare(file_text, MINIF2F_HEADER, allow_native_decide=True), Prepared)


@pytest.mark.parametrize(
    "file_text,position",
    [
        ("import Mathlib\n\nlemma h : 1 = 1 := by\n  exact sorry\ntheorem t : 1 = 1 := by\n  rfl", "line 4, column 8"),
        ("import Mathlib\nimport Aesop\n\ntheorem t (n : ℕ) :\n    n = n := by\n  exact sorry", "line 6, column 8"),
        (
            "import Mathlib\nset_option debug.skipKernelTC true in\ntheorem t : True := by\n  trivial",
            "line 2, column 11",
        ),
        ("import Mathlib\n\ninstance : Fact (1 = 1) := ⟨rfl⟩\ntheorem t : 1 = 1 := by\n  rfl", "line 3, column 0"),
    ],
)
def test_file_rejections_are_positioned_in_the_file(file_text, position):
    assert position in _refused(prepare(file_text, MINIF2F_HEADER))


def test_a_file_proof_may_continue_the_by_line():
    prepared = prepare("import Mathlib\ntheorem t : 1 = 1 := by rfl", MINIF2F_HEADER)
    assert prepared.proof == " rfl" and prepared.separator == ""
    assert prepared.code == "theorem t : 1 = 1 := by rfl\n\n#print axioms t"
    assert [t.text for t in prepared.outermost_tactics] == ["rfl"]


@pytest.mark.parametrize(
    "file_text",
    [
        "import Mathlib\ntheorem t (n : ℕ) : aux n = n := by\n  simp [aux]\nwhere\n  aux (k : ℕ) : ℕ := k\n",
        "import Mathlib\ntheorem h1 (n : ℕ) : aux n = n := by\n  simp [aux]\nwhere\n  aux (k : ℕ) : ℕ := k\n"
        "theorem t : True := by\n  trivial\n",
    ],
    ids=["main", "helper"],
)
def test_a_where_clause_at_column_0_continues_its_declaration(file_text):
    assert isinstance(prepare(file_text, MINIF2F_HEADER), Prepared)


@pytest.mark.parametrize(
    ("file_text", "reason"),
    [
        ("import Mathlib\ntheorem t (n : ℕ) : n = n := by\n  rfl\nwhere\n  aux (k : ℕ) : ℕ := k\n#eval 1\n", "#eval"),
        ("import Mathlib\ntheorem t : (1:ℕ) = 2 := by\n  exact bad\nwhere\n  bad : (1:ℕ) = 2 := sorry\n", "sorry"),
        (
            "import Mathlib\ntheorem t : True := by\n  trivial\nwhere\n  _root_.Linarith.LinarithConfig.evil : ℕ := 1\n",
            "named plainly",
        ),
        ("import Mathlib\ntheorem t : True := by\n  trivial\nwhere\naxiom bad : False\n", "axiom"),
        (
            "import Mathlib\ntheorem t : True := by\n  trivial\nwhere\n  a : True := by\n    run_tac pure ()\n",
            "run_tac",
        ),
    ],
    ids=["command-after", "sorry", "namespaced", "axiom-after", "tactic-in-where"],
)
def test_a_where_clause_at_column_0_is_checked_like_the_proof(file_text, reason):
    assert reason in _refused(prepare(file_text, MINIF2F_HEADER))


def test_a_root_prefixed_main_theorem_is_named_without_it_and_passes_on_leans_answer():
    prepared = prepare("import Mathlib\ntheorem _root_.x : 1 = 1 := by\n  rfl", MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.theorem_name == "x" and prepared.code.endswith("\n\n#print axioms _root_.x")
    answer = {
        "severity": "info",
        "pos": {"line": prepared.print_line, "column": 0},
        "data": "'x' does not depend on any axioms",
    }
    result = judge(prepared, {"env": 1, "messages": [answer]}, LeanServerConfig(), 0.0)
    assert result.status == "passed", result.reason
    assert prepare(ProofRequest("theorem _root_.x : 1 = 1 := by", "  rfl"), MINIF2F_HEADER).theorem_name == "x"


# ------------------------------------------------------------ helper code never runs in the REPL


def test_helper_defs_are_sent_noncomputable_with_their_columns_and_positions_kept():
    file_text = (
        "import Mathlib\n"
        "private def a : ℕ := by exact 1\n"  # line 2; the proof on the `by` line keeps its column 24
        "nonrec def b : ℕ := 2\n"
        "noncomputable def c : ℕ := 3\n"
        "theorem t : a + b + c = 6 := by\n"
        "  decide"
    )
    prepared = prepare(file_text, MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.code == (
        "private noncomputable\n        def a : ℕ := by exact 1\n"
        "noncomputable\nnonrec def b : ℕ := 2\n"
        "noncomputable def c : ℕ := 3\n"
        "theorem t : a + b + c = 6 := by\n  decide\n\n#print axioms t"
    )

    def message(line, column):
        return {"severity": "error", "pos": {"line": line, "column": column}, "endPos": None, "data": "x"}

    response = {"env": 1, "messages": [message(2, 24), message(4, 11), message(7, 2), message(1, 10)]}
    result = judge(prepared, response, LeanServerConfig(), 0.0)
    # Code line 1, column 10 lies in the inserted `noncomputable`: it maps to where the insertion stands, before `def`.
    assert [(m.line, m.column) for m in result.messages] == [(2, 24), (3, 11), (6, 2), (2, 8)]


@pytest.mark.parametrize(
    "helper",
    [
        "def Linarith.LinarithConfig.evil : Linarith.LinarithConfig := {}",
        "def Nat.foo (n : ℕ) : ℕ := n",
        "protected def Foo.f : ℕ := 1",
        "def _root_.Linarith.x : ℕ := 1",
    ],
)
def test_helper_defs_have_no_namespace(helper):
    # A `def` inside a namespace is what a configuration's `.name` value would find there.
    reason = _refused(prepare(f"import Mathlib\n{helper}\ntheorem t : True := by\n  trivial", MINIF2F_HEADER))
    assert "has a namespace" in reason, reason


@pytest.mark.parametrize(
    "helper",
    ["theorem Nat.two_pos' : 0 < 2 := by norm_num", "lemma _root_.Linarith.x : True := trivial"],
)
def test_helper_theorems_may_have_a_namespace(helper):
    file_text = f"import Mathlib\n{helper}\ntheorem t : True := by\n  trivial"
    assert isinstance(prepare(file_text, MINIF2F_HEADER), Prepared)
    namespaced_main = "import Mathlib\ntheorem Nat.my_main : (2 : ℕ) + 2 = 4 := by\n  norm_num"
    prepared = prepare(namespaced_main, MINIF2F_HEADER)
    assert isinstance(prepared, Prepared) and prepared.code.endswith("#print axioms Nat.my_main")


@pytest.mark.parametrize(
    "use,reason",
    [
        ("have : (0:ℚ) < 1 := by linarith (discharger := evil)", "tactic `evil`"),
        ("nlinarith (discharger := _root_.evil)", "tactic `_root_.evil`"),
        ("simp (disch := evil.aux)", "tactic `evil.aux`"),
        ("nlinarith (discharger := .evil)", "also starts a term"),
        ("aesop (add safe tactic evil)", "`tactic` rule builder"),
    ],
)
def test_a_helper_is_never_named_where_lean_evaluates_compiled_code(use, reason):
    file_text = f"import Mathlib\ndef evil : ℕ := 1\ntheorem t : (1:ℕ) = 2 := by\n  {use}"
    assert reason in _refused(prepare(file_text, MINIF2F_HEADER))
    fine = file_text.replace(use, "field_simp (discharger := norm_num1)")
    assert isinstance(prepare(fine, MINIF2F_HEADER), Prepared)


# ------------------------------------------------------------ a file held to a trusted statement


@pytest.mark.parametrize(
    "file_text",
    [
        FILE,
        MINIF2F_HEADER
        + "\n\nlemma mathd_t (x : ℕ) -- the unknown\n    (h₀ : x = 3) :\n    x + 1 = 4 := by\n  subst h₀\n  rfl",
        MINIF2F_HEADER + "\ntheorem _root_.mathd_t (x : ℕ) (h₀ : x = 3) : x + 1 /- sum -/ = 4 := by\n  subst h₀\n  rfl",
        MINIF2F_HEADER + "\n" + HELPER + STATEMENT + "\n  exact helper_1 x h₀",
        MINIF2F_HEADER + "\nset_option maxHeartbeats 800000 in\n" + STATEMENT + "\n  subst h₀\n  rfl",
        "import Mathlib\nset_option maxHeartbeats 0\nopen Nat Real\n" + STATEMENT + "\n  subst h₀\n  rfl",
    ],
)
def test_a_file_that_states_the_trusted_statement_is_accepted(file_text):
    prepared = prepare(FileRequest(file_text, statement=STATEMENT), MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.theorem_name == "mathd_t" and prepared.header == IMPORTS
    # The trusted header's preamble runs: the statement is read in the dataset's scope, whatever the file opens.
    assert prepared.code.startswith(PREAMBLE) and prepared.trusted_preamble == PREAMBLE


@pytest.mark.parametrize(
    "main",
    [
        "theorem mathd_t (x:ℕ) (h₀:x=3) : x+1 = 4 := by",
        "theorem mathd_t ( x : ℕ ) ( h₀ : x = 3 ) : x + 1 = 4 := by",
        "theorem mathd_t (x : ℕ)\n    (h₀ : x = 3) :\n    x + 1 = 4 := by",
    ],
)
def test_a_restated_theorem_may_space_its_tokens_differently(main):
    # Spacing changes nothing Lean reads between a bracket, `:`, `=`, `+` and a name or number.
    prepared = prepare(
        FileRequest(MINIF2F_HEADER + "\n" + main + "\n  subst h₀\n  rfl", statement=STATEMENT), MINIF2F_HEADER
    )
    assert isinstance(prepared, Prepared), prepared.reason


@pytest.mark.parametrize(
    "statement,restated",
    [
        ("theorem t (n : ℕ) (h : n ! = 2) : n = 2 := by", "theorem t (n : ℕ) (h : n! = 2) : n = 2 := by"),
        ("theorem t (f : ℕ → ℕ) (h : f (1) = 2) : True := by", "theorem t (f : ℕ → ℕ) (h : f(1) = 2) : True := by"),
    ],
)
def test_spacing_that_changes_what_lean_reads_is_a_different_statement(statement, restated):
    # `n!` is one name to Lean, `n !` the factorial; `f(1)` and `f (1)` are read by different rules.
    reason = _refused(
        prepare(FileRequest("import Mathlib\n" + restated + "\n  trivial", statement=statement), "import Mathlib")
    )
    assert "does not state the trusted statement" in reason, reason


def test_a_helper_may_carry_a_simp_priority():
    file_text = (
        MINIF2F_HEADER
        + "\n@[simp 1100] lemma aux (y : ℕ) : y + 0 = y := by\n  simp\n\n"
        + STATEMENT
        + "\n  subst h₀\n  rfl"
    )
    assert isinstance(prepare(FileRequest(file_text, statement=STATEMENT), MINIF2F_HEADER), Prepared)


def test_a_file_ending_in_print_axioms_is_told_the_server_prints_them():
    file_text = MINIF2F_HEADER + "\n" + STATEMENT + "\n  subst h₀\n  rfl\n\n#print axioms mathd_t"
    reason = _refused(prepare(FileRequest(file_text, statement=STATEMENT), MINIF2F_HEADER))
    assert "command `#print` at line 9, column 0" in reason and "the server prints the axioms itself" in reason


@pytest.mark.parametrize(
    "main,differs_at",
    [
        ("theorem mathd_t (x : ℕ) (h₀ : x = 3) : x + 1 = 5 := by", "`5`"),
        ("theorem mathd_t (x : ℕ) (h₀ : x = 3) (h₁ : x = 4) : x + 1 = 4 := by", "`(`"),
        ("theorem mathd_t (x : ℤ) (h₀ : x = 3) : x + 1 = 4 := by", "`ℤ`"),
        ("theorem mathd_t {x : ℕ} (h₀ : x = 3) : x + 1 = 4 := by", "`{`"),
        ("theorem mathd_t (x : ℕ) (h₀ : x = 3) : (x + 1 = 4) := by", "`(`"),
        ("theorem mathd_t (x : ℕ) (h₀ : x = 3) : x + 1 = 4 ∨ True := by", "`∨`"),
    ],
)
def test_a_file_that_states_something_else_is_rejected_with_the_expected_statement(main, differs_at):
    reason = _refused(
        prepare(FileRequest(MINIF2F_HEADER + "\n" + main + "\n  omega", statement=STATEMENT), MINIF2F_HEADER)
    )
    assert "does not state the trusted statement" in reason and f"differs at {differs_at} at line 5" in reason, reason


def test_glued_tokens_must_stay_glued():
    statement = "theorem t (p : ℕ × ℕ) (h : p.1 = 2) : p.1 + 1 = 3 := by"
    glued = "import Mathlib\n" + statement + "\n  omega"
    assert isinstance(prepare(FileRequest(glued, statement=statement), "import Mathlib"), Prepared)
    spaced = glued.replace(": p.1 +", ": p .1 +")
    reason = _refused(prepare(FileRequest(spaced, statement=statement), "import Mathlib"))
    assert "differs at `.` at line 2, column 40" in reason, reason


@pytest.mark.parametrize(
    "file_text,reason",
    [
        (MINIF2F_HEADER + "\ntheorem other (x : ℕ) (h₀ : x = 3) : x + 1 = 4 := by\n  omega", "`other` at line 5"),
        (MINIF2F_HEADER + "\nexample (x : ℕ) (h₀ : x = 3) : x + 1 = 4 := by\n  omega", "`example` at line 5"),
        (MINIF2F_HEADER + "\n" + STATEMENT + "\n  omega\ntheorem extra : True := by\n  trivial", "`extra` at line 7"),
        (MINIF2F_HEADER + "\ndef mathd_t (x : ℕ) (h₀ : x = 3) : x + 1 = 4 := by\n  omega", "`def`"),
    ],
)
def test_the_main_theorem_is_the_last_declaration_under_the_statements_name(file_text, reason):
    assert reason in _refused(prepare(FileRequest(file_text, statement=STATEMENT), MINIF2F_HEADER))


@pytest.mark.parametrize("helper_name", ["x", "h₀", "_root_.x"])
def test_a_helper_may_not_declare_a_name_the_statement_uses(helper_name):
    file_text = MINIF2F_HEADER + f"\ndef {helper_name} : ℕ := 3\n" + STATEMENT + "\n  subst h₀\n  rfl"
    reason = _refused(prepare(FileRequest(file_text, statement=STATEMENT), MINIF2F_HEADER))
    assert "declares a name the trusted statement uses" in reason, reason


@pytest.mark.parametrize(
    "line",
    [
        "open Real renaming sqrt → cos",
        "open Real hiding sqrt",
        "open Nat Finset",
        "open scoped Nat",
        "set_option autoImplicit true",
    ],
)
def test_held_to_a_statement_the_header_may_not_change_what_names_mean(line):
    file_text = f"import Mathlib\n{line}\n{STATEMENT}\n  subst h₀\n  rfl"
    reason = _refused(prepare(FileRequest(file_text, statement=STATEMENT), MINIF2F_HEADER))
    assert "under a trusted statement" in reason and "line 2" in reason, reason
    # Sent alone the file is its own claim, and the same lines are allowed.
    assert isinstance(prepare(file_text, MINIF2F_HEADER), Prepared)


@pytest.mark.parametrize(
    "prefix", ["open Real renaming sqrt → cos in", "open Real in", "set_option autoImplicit true in"]
)
def test_held_to_a_statement_the_main_theorem_takes_no_new_prefix(prefix):
    statement = "theorem t (x : ℝ) : Real.cos x ≤ 1 := by"
    reason = _refused(
        prepare(FileRequest(f"import Mathlib\n{prefix}\n{statement}\n  simp", statement=statement), "import Mathlib")
    )
    assert "prefixes" in reason and "line 2" in reason, reason
    prefixed = f"{prefix}\n{statement}"
    assert isinstance(
        prepare(FileRequest(f"import Mathlib\n{prefixed}\n  simp", statement=prefixed), "import Mathlib"), Prepared
    )


def test_a_statement_without_a_header_is_read_under_the_default_header():
    # `open Nat` would make the dataset's `sqrt` (Real.sqrt under the default header's `open Real`) mean Nat.sqrt.
    statement = "theorem t : sqrt 5 = 2 := by"
    file_text = f"import Mathlib\nopen Nat\n\n{statement}\n  decide"
    assert "under a trusted statement" in _refused(
        prepare(FileRequest(file_text, statement=statement), "import Mathlib\nopen Real")
    )
    prepared = prepare(
        FileRequest(f"open Real\n-- note\n{statement}\n  simp", statement=statement), "import Mathlib\n\nopen Real"
    )
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.header == "import Mathlib" and prepared.code.startswith("open Real\n")
    # A plain file is its own claim: its own `open Nat` runs, not the default header's `open Real`.
    own = prepare(file_text, "import Mathlib\nopen Real")
    assert own.header == "import Mathlib" and own.code.startswith("open Nat\n")


def test_a_file_with_a_trusted_header_runs_the_trusted_header():
    file_text = "open BigOperators Real Nat Topology Rat\nimport Mathlib\n" + STATEMENT + "\n  subst h₀\n  rfl"
    trusted = MINIF2F_HEADER.replace("\n", "\n-- c\n")
    prepared = prepare(FileRequest(file_text, header=trusted), "import Lean")
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.header == IMPORTS and prepared.code.startswith(
        "set_option maxHeartbeats 400000\n-- c\nopen BigOperators"
    )


def test_a_malformed_trusted_statement_is_named():
    reason = _refused(prepare(FileRequest(FILE, statement="theorem mathd_t : True"), MINIF2F_HEADER))
    assert reason.startswith("FileRequest.statement must"), reason
    with pytest.raises(TypeError, match="FileRequest.statement"):
        prepare(FileRequest(FILE, statement=3), MINIF2F_HEADER)
