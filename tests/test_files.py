"""Complete files (str requests, files.py): the header split, the header-line rules and the body's checks."""

import pytest

from trl_verigate.lean_server.files import normalize_header
from trl_verigate.lean_server.lexer import PrecheckError
from trl_verigate.lean_server.types import (
    MINIF2F_HEADER,
    FileRequest,
    LeanServerConfig,
    ProofRequest,
    VerificationResult,
)
from trl_verigate.lean_server.verdict import Prepared, judge, prepare, split_header

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


@pytest.mark.parametrize(
    "file_text,reason",
    [
        ("import Mathlib\ntheorem t : 1 = 1 := by\n  rfl\n theorem u : 1 = 1 := by\n  rfl", "command `theorem`"),
        ("import Mathlib\ntheorem t : 1 = 1 := rfl", "no top-level `:= by`"),
        ("import Mathlib\nset_option debug.skipKernelTC true\ntheorem t : 1 = 1 := by\n  rfl", "debug.skipKernelTC"),
        ("import Mathlib\nset_option debug.skipKernelTC true in\ntheorem t : 1 = 1 := by\n  rfl", "debug.skipKernelTC"),
        ("import Mathlib\n@[implemented_by x] theorem t : 1 = 1 := by\n  rfl", "`@[`"),
        ("import Mathlib\ntheorem t : 1 = 1 := by sorry", "`sorry`"),
        ("import Mathlib\nopen Lean\n\n", "declares no theorem"),
        ("import Mathlib\ntheorem t : 1 = 1 := by\r  rfl", "carriage return"),
    ],
)
def test_file_requests_are_untrusted_throughout(file_text, reason):
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
    # The header runs normalized: a trailing comment is no part of the key.
    expected_header = "import Mathlib\n" + line.split(" --")[0]
    assert prepared.header == expected_header
    crlf = prepare(f"import Mathlib\r\n{line}\r\n\r\ntheorem t : True := by\r\n  trivial", MINIF2F_HEADER)
    assert isinstance(crlf, Prepared) and crlf.header == expected_header, crlf.reason


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


def test_a_file_proof_on_the_by_line_cannot_be_followed_by_a_dedented_command():
    result = prepare("import Mathlib\ntheorem t : True := by trivial\n  open Nat in simp", MINIF2F_HEADER)
    assert result.status == "rejected" and "outside" in result.reason, result.reason


# Layouts the block check must keep accepting.


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
        (
            "import Mathlib\n\ninstance : Fact (1 = 1) := ⟨rfl⟩\ntheorem t : 1 = 1 := by\n  rfl",
            "`instance` at line 3, column 0",
        ),
        ("import Mathlib\ntheorem t : True := trivial\nmy_cmd s := by\n  simp", "`:=` at line 2, column 17"),
        ("import Mathlib\nexample : True := by\n  trivial\naxiom c : False", "`axiom` at line 4, column 0"),
    ],
)
def test_file_rejections_are_positioned_in_the_file(file_text, reason):
    result = prepare(file_text, MINIF2F_HEADER)
    assert result.status == "rejected" and reason in result.reason, result.reason


def test_a_file_proof_may_continue_the_by_line():
    prepared = prepare("import Mathlib\ntheorem t : 1 = 1 := by rfl", MINIF2F_HEADER)
    assert prepared.proof == " rfl" and prepared.separator == ""
    assert prepared.code == "theorem t : 1 = 1 := by rfl\n\n#print axioms t"


# ------------------------------------------------------------ the header key


def test_normalize_header_keeps_a_normalized_header_as_it_is():
    assert normalize_header(MINIF2F_HEADER) == MINIF2F_HEADER
    assert normalize_header("") == ""


@pytest.mark.parametrize(
    "variant",
    [
        MINIF2F_HEADER + "\n",
        "-- the miniF2F header\n" + MINIF2F_HEADER,
        "import Mathlib\n\n\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat",
        "import Mathlib -- all of it\nimport Aesop\n/- options\n   and opens -/\nset_option maxHeartbeats 400000\n"
        "open BigOperators Real Nat Topology Rat -- notations",
        "  import Mathlib\nimport   Aesop\nset_option  maxHeartbeats   400000  \nopen BigOperators Real Nat Topology Rat",
        "import Mathlib\r\nimport Aesop\r\nset_option maxHeartbeats 400000\r\nopen BigOperators Real Nat Topology Rat\r\n",
        # An indented line that starts no command continues the command above.
        "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real\n  Nat Topology Rat",
    ],
)
def test_headers_that_differ_in_comments_and_whitespace_share_one_key(variant):
    assert normalize_header(variant) == MINIF2F_HEADER


@pytest.mark.parametrize(
    "header,key",
    [
        # Glued tokens stay glued, strings keep their spaces, each command keeps its line.
        ("open Nat renaming factorial -> fact", "open Nat renaming factorial -> fact"),
        ('set_option pp.proofs  "a  -- b"', 'set_option pp.proofs "a  -- b"'),
        ("import Mathlib\n  import Aesop", "import Mathlib\nimport Aesop"),
        ("open  Nat (factorial   choose )", "open Nat (factorial choose )"),
    ],
)
def test_normalize_header_keeps_what_lean_reads(header, key):
    assert normalize_header(header) == key


def test_headers_that_differ_in_what_lean_reads_keep_different_keys():
    keys = {normalize_header(h) for h in ("import Mathlib\nopen Real", "import Mathlib\nopen Nat", "import Mathlib")}
    assert len(keys) == 3


def test_normalize_header_refuses_what_it_cannot_read():
    with pytest.raises(PrecheckError, match="header: unterminated block comment"):
        normalize_header("import Mathlib\n/- never closed")
    with pytest.raises(TypeError, match="normalize_header"):
        normalize_header(None)


def test_a_comment_between_header_lines_does_not_make_a_new_header():
    # Both files run in the default header's environment: one cached REPL, no fresh `import Mathlib`.
    commented = FILE.replace("import Aesop\n", "import Aesop\n-- a note\n\n/- and a block -/\n")
    for text in (FILE, commented):
        prepared = prepare(text, MINIF2F_HEADER)
        assert isinstance(prepared, Prepared), prepared.reason
        assert prepared.header == MINIF2F_HEADER
    assert prepare(commented, MINIF2F_HEADER).line_offset == 7


# ------------------------------------------------------------ helper declarations

HELPER_FILES = [
    # A `def` the main statement uses (a plain str request: the file is its own claim).
    "import Mathlib\ndef h : ℕ := 1\ntheorem t : h = 1 := by\n  rfl",
    # Two theorems: the first is a helper, the last the main theorem.
    "import Mathlib\ntheorem t : 1 = 1 := by\n  rfl\ntheorem u : 1 = 1 := by\n  exact t",
    # Modifiers, docstrings, `open … in` and `set_option … in` on helpers; lemma and theorem alike.
    "import Mathlib\nopen Real\n\n/-- A helper. -/\nprivate lemma l1 (x : ℝ) (h : 0 ≤ x) : sqrt x ^ 2 = x := by\n"
    "  exact sq_sqrt h\n\nopen Finset in\nset_option maxRecDepth 2000 in\nnoncomputable def l2 : ℝ := sqrt 4\n\n"
    "theorem t : l2 ^ 2 = 4 := by\n  unfold l2\n  exact l1 4 (by norm_num)",
    # Term-mode helpers: on the `:=` line, or starting on the next one.
    "import Mathlib\ntheorem l1 : (2 : ℕ) + 2 = 4 := rfl\ndef l2 (n : ℕ) : ℕ :=\n  n + 1\n"
    "theorem t : l2 1 = 2 := by\n  rfl",
    "import Mathlib\ntheorem l1 (p q : Prop) (hp : p) (hq : q) : p ∧ q :=\n  ⟨hp,\n    hq⟩\n"
    "theorem t : True ∧ True := by\n  exact l1 _ _ trivial trivial",
    # `_root_.` names and a `:=` bound by `let` in a helper's statement.
    "import Mathlib\ntheorem _root_.l1 : (let a := 2; a + a) = 4 := by\n  rfl\ntheorem t : 2 + 2 = 4 := by\n  exact l1",
]


@pytest.mark.parametrize("file_text", HELPER_FILES)
def test_helper_declarations_before_the_main_theorem_are_accepted(file_text):
    prepared = prepare(file_text, MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    main_at = file_text.rindex("\ntheorem ") + 1
    main_name = file_text[main_at:].split()[1]
    assert prepared.theorem_name == main_name
    # The helpers are sent with the main theorem, whose proof alone is the body checked and split into tactics.
    assert prepared.proof == file_text.rsplit(":= by", 1)[1]
    body = file_text[len(split_header(file_text)[0]) :]
    # Each helper `def` is sent `noncomputable`, on a line of its own, the `def` keeping its column.
    sent = body.replace("private def ", "private noncomputable\n        def ")
    sent = "\n".join("noncomputable\ndef" + line[3:] if line.startswith("def ") else line for line in sent.split("\n"))
    assert prepared.code == sent + f"\n\n#print axioms {main_name}"


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
        ("import Mathlib\n@[simp] lemma h : (1 : ℕ) = 1 := by\n  rfl\ntheorem t : (1 : ℕ) = 1 := by\n  simp", "`@[`"),
        ("import Mathlib\ntheorem t : 1 = 1 := by\n  rfl\ntheorem t : 1 = 1 := by\n  rfl", "declared twice"),
        ("import Mathlib\ntheorem _root_.t : 1 = 1 := by\n  rfl\ntheorem t : 1 = 1 := by\n  rfl", "declared twice"),
        ("import Mathlib\nabbrev h : ℕ := 1\ntheorem t : h = 1 := by\n  rfl", "helper declarations are `theorem`"),
        ("import Mathlib\nexample : 1 = 1 := rfl\ntheorem t : 1 = 1 := by\n  rfl", "helper declarations are `theorem`"),
        ("import Mathlib\nunsafe def h : ℕ := 1\ntheorem t : 1 = 1 := by\n  rfl", "`unsafe`"),
        ("import Mathlib\npartial def h (n : ℕ) : ℕ := h n\ntheorem t : 1 = 1 := by\n  rfl", "`partial`"),
        ("import Mathlib\nstructure S where\n  x : ℕ\ntheorem t : 1 = 1 := by\n  rfl", "`structure`"),
        ("import Mathlib\n@[implemented_by f] def h : ℕ := 1\ntheorem t : h = 1 := by\n  rfl", "`@[`"),
        (
            "import Mathlib\nset_option debug.skipKernelTC true in\ntheorem h : (1 : ℕ) = 2 := by\n  decide\n"
            "theorem t : (1 : ℕ) = 2 := by\n  exact h",
            "debug.skipKernelTC",
        ),
        # A command the word lists do not know, at column 0 after a term-mode value: Lean would run it.
        ("import Mathlib\ndef h : ℕ := 1\nmy_command x\ntheorem t : h = 1 := by\n  rfl", "`my_command` at line 3"),
        ("import Mathlib\ndef h : ℕ := 1 #eval 2\ntheorem t : h = 1 := by\n  rfl", "`#eval`"),
        ("import Mathlib\ndef h : ℕ\n  | _ => 1\ntheorem t : h 0 = 1 := by\n  rfl", "no top-level `:=`"),
        ("import Mathlib\ndef h : ℕ :=\ntheorem t : 1 = 1 := by\n  rfl", "no value"),
        ("import Mathlib\nlemma h : 2 ^ 10 = 1024 := by\n  native_decide\ntheorem t : True := by\n  trivial", "native"),
    ],
)
def test_helper_declarations_get_the_checks_a_proof_gets(file_text, reason):
    result = prepare(file_text, MINIF2F_HEADER)
    assert isinstance(result, VerificationResult), f"sent to Lean: {result.code!r}"
    assert result.status == "rejected" and reason in result.reason, result.reason


def test_native_evaluation_in_a_helper_passes_only_when_allowed():
    file_text = "import Mathlib\nlemma h : 2 ^ 10 = 1024 := by\n  native_decide\ntheorem t : True := by\n  trivial"
    prepared = prepare(file_text, MINIF2F_HEADER, allow_native_decide=True)
    assert isinstance(prepared, Prepared), prepared.reason


def test_a_helper_rejection_is_positioned_in_the_file():
    result = prepare("import Mathlib\n\nlemma h : 1 = 1 := by\n  exact sorry\ntheorem t : 1 = 1 := by\n  rfl", "")
    assert "`sorry` at line 4, column 8" in result.reason, result.reason


# ------------------------------------------------------------ `_root_` names


def test_a_root_prefixed_main_theorem_is_named_without_it_and_passes_on_leans_answer():
    prepared = prepare("import Mathlib\ntheorem _root_.x : 1 = 1 := by\n  rfl", MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.theorem_name == "x"
    assert prepared.code.endswith("\n\n#print axioms _root_.x")
    # Lean names the constant it resolved: `x`.
    answer = {
        "severity": "info",
        "pos": {"line": prepared.print_line, "column": 0},
        "data": "'x' does not depend on any axioms",
    }
    result = judge(prepared, {"env": 1, "messages": [answer]}, LeanServerConfig(), 0.0)
    assert result.status == "passed", result.reason
    request = ProofRequest("theorem _root_.x : 1 = 1 := by", "  rfl")
    assert prepare(request, MINIF2F_HEADER).theorem_name == "x"


# ------------------------------------------------------------ a file held to a trusted statement

STATEMENT = "theorem mathd_t (x : ℕ) (h₀ : x = 3) : x + 1 = 4 := by"
HELPER = "lemma helper_1 (y : ℕ) (h : y = 3) : y + 1 = 4 := by\n  subst h\n  rfl\n\n"


@pytest.mark.parametrize(
    "file_text",
    [
        FILE,
        # Comments and layout are not compared; `lemma` is `theorem`, and `_root_.mathd_t` is `mathd_t`.
        MINIF2F_HEADER
        + "\n\nlemma mathd_t (x : ℕ) -- the unknown\n    (h₀ : x = 3) :\n    x + 1 = 4 := by\n  subst h₀\n  rfl",
        MINIF2F_HEADER + "\ntheorem _root_.mathd_t (x : ℕ) (h₀ : x = 3) : x + 1 /- sum -/ = 4 := by\n  subst h₀\n  rfl",
        MINIF2F_HEADER + "\n" + HELPER + STATEMENT + "\n  exact helper_1 x h₀",
        MINIF2F_HEADER + "\nset_option maxHeartbeats 0 in\n" + STATEMENT + "\n  subst h₀\n  rfl",
    ],
)
def test_a_file_that_states_the_trusted_statement_is_accepted(file_text):
    prepared = prepare(FileRequest(file_text, statement=STATEMENT), MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.theorem_name == "mathd_t"


@pytest.mark.parametrize(
    "main,differs_at",
    [
        ("theorem mathd_t (x : ℕ) (h₀ : x = 3) : x + 1 = 5 := by", "`5`"),  # the type
        ("theorem mathd_t (x : ℕ) (h₀ : x = 3) (h₁ : x = 4) : x + 1 = 4 := by", "`(`"),  # an added hypothesis
        ("theorem mathd_t (x : ℤ) (h₀ : x = 3) : x + 1 = 4 := by", "`ℤ`"),  # a binder's type
        ("theorem mathd_t {x : ℕ} (h₀ : x = 3) : x + 1 = 4 := by", "`{`"),  # a binder's kind
        ("theorem mathd_t (x : ℕ) (h₀ : x = 3) : (x + 1 = 4) := by", "`(`"),  # brackets
        ("theorem mathd_t (x : ℕ) (h₀ : x = 3) : x + 1 = 4 ∨ True := by", "`∨`"),  # a longer type
        ("def mathd_t (x : ℕ) (h₀ : x = 3) : x + 1 = 4 := by", "`def`"),  # not a theorem
    ],
)
def test_a_file_that_states_something_else_is_rejected_with_the_expected_statement(main, differs_at):
    result = prepare(FileRequest(MINIF2F_HEADER + "\n" + main + "\n  omega", statement=STATEMENT), MINIF2F_HEADER)
    assert isinstance(result, VerificationResult), f"sent to Lean: {result.code!r}"
    assert result.status == "rejected" and "does not state the trusted statement" in result.reason, result.reason
    assert f"differs at {differs_at} at line 5" in result.reason, result.reason
    assert result.reason.endswith(f"expected `{STATEMENT}`"), result.reason


def test_glued_tokens_must_stay_glued():
    # `p.1` projects; `p .1` applies `p` to `.1`: the same characters, another statement.
    statement = "theorem t (p : ℕ × ℕ) (h : p.1 = 2) : p.1 + 1 = 3 := by"
    glued = "import Mathlib\n" + statement + "\n  omega"
    assert isinstance(prepare(FileRequest(glued, statement=statement), "import Mathlib"), Prepared)
    spaced = glued.replace(": p.1 +", ": p .1 +")
    result = prepare(FileRequest(spaced, statement=statement), "import Mathlib")
    assert result.status == "rejected" and "differs at `.` at line 2, column 40" in result.reason, result.reason


@pytest.mark.parametrize(
    "file_text,reason",
    [
        # Another name, or the statement's theorem not last.
        (MINIF2F_HEADER + "\ntheorem other (x : ℕ) (h₀ : x = 3) : x + 1 = 4 := by\n  omega", "`other` at line 5"),
        (MINIF2F_HEADER + "\nexample (x : ℕ) (h₀ : x = 3) : x + 1 = 4 := by\n  omega", "`example` at line 5"),
        (
            MINIF2F_HEADER + "\n" + STATEMENT + "\n  omega\ntheorem extra : True := by\n  trivial",
            "`extra` at line 7",
        ),
    ],
)
def test_the_main_theorem_is_the_last_declaration_under_the_statements_name(file_text, reason):
    result = prepare(FileRequest(file_text, statement=STATEMENT), MINIF2F_HEADER)
    assert result.status == "rejected" and reason in result.reason, result.reason
    assert "is not the trusted statement's `mathd_t`" in result.reason and STATEMENT in result.reason


@pytest.mark.parametrize("helper_name", ["x", "h₀", "_root_.x"])  # binders of the statement
def test_a_helper_may_not_declare_a_name_the_statement_uses(helper_name):
    file_text = MINIF2F_HEADER + f"\ndef {helper_name} : ℕ := 3\n" + STATEMENT + "\n  subst h₀\n  rfl"
    result = prepare(FileRequest(file_text, statement=STATEMENT), MINIF2F_HEADER)
    assert result.status == "rejected" and "declares a name the trusted statement uses" in result.reason


@pytest.mark.parametrize(
    "helper",
    [
        "def f (n : ℕ) : ℕ := n + 1",  # the statement's `f`
        "def sqrt (x : ℝ) : ℝ := x",  # `sqrt` of `Real.sqrt`
    ],
)
def test_helpers_cannot_shadow_what_the_statement_names(helper):
    statement = "theorem t (f : ℕ → ℕ) (n : ℕ) (h : f n = Real.sqrt 4) : n.foo = 1 := by"
    file_text = "import Mathlib\n" + helper + "\n" + statement + "\n  sorry"
    result = prepare(FileRequest(file_text, statement=statement), "import Mathlib")
    assert result.status == "rejected" and "declares a name the trusted statement uses" in result.reason, result.reason


def test_helpers_with_fresh_names_are_accepted_under_a_statement():
    file_text = MINIF2F_HEADER + "\ndef succ_helper (n : ℕ) : ℕ := n + 1\n" + HELPER + STATEMENT
    prepared = prepare(FileRequest(file_text + "\n  exact helper_1 x h₀", statement=STATEMENT), MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason


@pytest.mark.parametrize(
    "opening",
    ["open Real renaming sqrt → cos", "open Real hiding sqrt", "open Nat renaming sqrt -> cos, log → exp"],
)
def test_held_to_a_statement_the_header_may_not_rename_or_hide_names(opening):
    statement = "theorem t : Real.cos 0 = 1 := by"
    file_text = f"import Mathlib\n{opening}\n{statement}\n  simp"
    # Without a trusted header the server's default header is the trusted one, and it has no such line.
    result = prepare(FileRequest(file_text, statement=statement), MINIF2F_HEADER)
    assert result.status == "rejected", f"sent to Lean under {result.header!r}"
    assert "header line `open " in result.reason, result.reason
    assert "at line 2, column 0 is not a line of the trusted header" in result.reason, result.reason
    # Sent alone the file is its own claim, and the same header is allowed.
    assert isinstance(prepare(file_text, ""), Prepared)


def test_a_statement_without_a_header_is_read_under_the_default_header():
    # `open Nat` would make the dataset's `sqrt` (Real.sqrt under the miniF2F header's `open Real`) mean Nat.sqrt.
    statement = "theorem t : sqrt 5 = 2 := by"
    file_text = f"import Mathlib\nopen Nat\n\n{statement}\n  decide"
    result = prepare(FileRequest(file_text, statement=statement), "import Mathlib\nopen Real")
    assert result.status == "rejected", f"sent to Lean under {result.header!r}"
    assert "header line `open Nat` at line 2, column 0 is not a line of the trusted header" in result.reason
    # The default header's own lines are accepted, and the REPL runs the default header, not the file's.
    subset = f"open Real\n-- note\n{statement}\n  simp"
    prepared = prepare(FileRequest(subset, statement=statement), "import Mathlib\n\nopen Real")
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.header == "import Mathlib\nopen Real" and prepared.line_offset == 1  # the `open Real` line
    # A plain str file (no trusted statement) is its own claim and still runs its own header.
    assert prepare(file_text, "import Mathlib\nopen Real").header == "import Mathlib\nopen Nat"


@pytest.mark.parametrize(
    "prefix",
    ["open Real renaming sqrt → cos in", "open Real in", "set_option autoImplicit true in"],
)
def test_held_to_a_statement_the_main_theorem_takes_no_new_prefix(prefix):
    statement = "theorem t (x : ℝ) : Real.cos x ≤ 1 := by"
    result = prepare(
        FileRequest(f"import Mathlib\n{prefix}\n{statement}\n  simp", statement=statement), "import Mathlib"
    )
    assert result.status == "rejected" and "prefixes at line 2" in result.reason, result.reason
    # A prefix the trusted statement has itself is the statement's.
    prefixed = f"{prefix}\n{statement}"
    assert isinstance(
        prepare(FileRequest(f"import Mathlib\n{prefixed}\n  simp", statement=prefixed), "import Mathlib"), Prepared
    )


def test_a_malformed_trusted_statement_is_named():
    result = prepare(FileRequest(FILE, statement="theorem mathd_t : True"), MINIF2F_HEADER)
    assert result.status == "rejected" and result.reason.startswith("FileRequest.statement must be"), result.reason
    with pytest.raises(TypeError, match="FileRequest.statement"):
        prepare(FileRequest(FILE, statement=3), MINIF2F_HEADER)


# ------------------------------------------------------------ a file held to a trusted header


def test_a_file_with_the_trusted_header_runs_the_trusted_header():
    commented = "-- note\n" + MINIF2F_HEADER.replace("\n", "\n\n") + " -- opens\n"
    file_text = commented + STATEMENT + "\n  subst h₀\n  rfl"
    prepared = prepare(FileRequest(file_text, statement=STATEMENT, header=MINIF2F_HEADER), "import Lean")
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.header == MINIF2F_HEADER and prepared.line_offset == commented.count("\n")


def test_a_file_header_may_be_a_subset_of_the_trusted_header_in_any_order():
    file_text = "open BigOperators Real Nat Topology Rat\nimport Mathlib\n" + STATEMENT + "\n  subst h₀\n  rfl"
    trusted = MINIF2F_HEADER.replace("\n", "\n-- c\n")
    prepared = prepare(FileRequest(file_text, header=trusted), "import Lean")
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.header == MINIF2F_HEADER  # the trusted header runs, normalized


@pytest.mark.parametrize(
    "line",
    [
        "open Real renaming sqrt → cos",
        "open Nat Finset",
        "open scoped Nat",
        "import Mathlib.Tactic",
        "set_option autoImplicit true",
    ],
)
def test_a_header_line_not_in_the_trusted_header_is_rejected(line):
    file_text = f"import Mathlib\n{line}\n" + STATEMENT + "\n  subst h₀\n  rfl"
    result = prepare(FileRequest(file_text, statement=STATEMENT, header=MINIF2F_HEADER), "")
    assert isinstance(result, VerificationResult), f"sent to Lean: {result.header!r}"
    assert f"header line `{line}` at line 2, column 0 is not a line of the trusted header" in result.reason


def test_a_malformed_trusted_header_is_named():
    result = prepare(FileRequest(FILE, header="import Mathlib\n/- open"), "")
    assert result.status == "rejected" and result.reason.startswith("FileRequest.header: unterminated"), result.reason
    with pytest.raises(TypeError, match="FileRequest.header"):
        prepare(FileRequest(FILE, header=["import Mathlib"]), "")


# ------------------------------------------------------------ helper code never runs in the REPL


def test_helper_defs_are_sent_noncomputable_with_their_columns_and_positions_kept():
    # A `def` has compiled code that `linarith (discharger := …)`, a `(config := .ctor)` or Aesop's `tactic` builder
    # could evalConst; sent `noncomputable`, it has none. Lean's modifier order puts it after `private`, before
    # `nonrec`; a `def` already `noncomputable` is left alone.
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

    # Lean's positions in the code map back to the file: `exact` is code line 2, column 24 -> file line 2, column 24;
    # `b` is code line 4, column 11 -> file line 3, column 11; `decide` is code line 7 -> file line 6.
    def message(line, column):
        return {"severity": "error", "pos": {"line": line, "column": column}, "endPos": None, "data": "x"}

    response = {"env": 1, "messages": [message(2, 24), message(4, 11), message(7, 2), message(1, 10)]}
    result = judge(prepared, response, LeanServerConfig(), 0.0)
    # Code line 1, column 10 lies in the inserted `noncomputable`: it maps to where the insertion stands, before `def`.
    assert [(m.line, m.column) for m in result.messages] == [(2, 24), (3, 11), (6, 2), (2, 8)]
    assert file_text.split("\n")[1][24:29] == "exact" and file_text.split("\n")[2][11] == "b"


@pytest.mark.parametrize(
    "helper",
    [
        "def Linarith.LinarithConfig.evil : Linarith.LinarithConfig := {}",  # what `(config := .evil)` finds
        "def Nat.foo (n : ℕ) : ℕ := n",  # would also make `n.foo` mean it
        "protected def Foo.f : ℕ := 1",
        "theorem _root_.Linarith.x : True := trivial",
    ],
)
def test_helper_names_have_no_namespace(helper):
    result = prepare(f"import Mathlib\n{helper}\ntheorem t : True := by\n  trivial", MINIF2F_HEADER)
    assert result.status == "rejected" and "has a namespace: helper names are plain" in result.reason, result.reason


@pytest.mark.parametrize(
    "use",
    [
        "have : (0:ℚ) < 1 := by linarith (discharger := evil)",
        "nlinarith (discharger := _root_.evil)",
        "simp (disch := evil.aux)",
        "open evil in\n  nlinarith",
    ],
)
def test_a_helper_is_never_named_where_lean_evaluates_compiled_code(use):
    file_text = f"import Mathlib\ndef evil : ℕ := 1\ntheorem t : (1:ℕ) = 2 := by\n  {use}"
    result = prepare(file_text, MINIF2F_HEADER)
    assert result.status == "rejected" and "names a helper of this file" in result.reason, result.reason
    # A library tactic as the discharger is fine next to helpers.
    fine = file_text.replace(use, "field_simp (discharger := norm_num1)")
    assert isinstance(prepare(fine, MINIF2F_HEADER), Prepared)


def test_a_file_header_may_add_resource_options_and_reopen_what_the_trusted_header_opens():
    # Options that bound Lean's work cannot change what the statement means: they run after the trusted header.
    # `open Nat Real` opens nothing the trusted header's `open … Real Nat …` does not (any order, any subset).
    file_text = "import Mathlib\nset_option maxHeartbeats 0\nopen Nat Real\nset_option maxRecDepth 2000\n" + STATEMENT
    prepared = prepare(FileRequest(file_text + "\n  subst h₀\n  rfl", statement=STATEMENT), MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.header == MINIF2F_HEADER + "\nset_option maxHeartbeats 0\nset_option maxRecDepth 2000"
    # Their bounds still hold.
    too_deep = file_text.replace("2000", "100000") + "\n  subst h₀\n  rfl"
    result = prepare(FileRequest(too_deep, statement=STATEMENT), MINIF2F_HEADER)
    assert result.status == "rejected" and "at most 10000" in result.reason, result.reason


@pytest.mark.parametrize(
    "line,command",
    [
        ("/- c -/ open Real", "open Real"),
        ("open Real /- c -/", "open Real"),
        ("open Nat /- c -/ Real", "open Nat Real"),
        ("/- c -/ import Aesop -- note", "import Aesop"),
        ("set_option /- c -/ maxHeartbeats 400000", "set_option maxHeartbeats 400000"),
    ],
)
def test_a_block_comment_on_a_header_line_is_a_comment(line, command):
    # The lexer says where the comment ends, so the line is the command Lean reads, and the header runs without it.
    file_text = f"import Mathlib\n{line}\n\ntheorem t : True := by\n  trivial"
    assert split_header(file_text)[0] == f"import Mathlib\n{line}\n"
    prepared = prepare(file_text, MINIF2F_HEADER)
    assert isinstance(prepared, Prepared), prepared.reason
    assert prepared.header == f"import Mathlib\n{command}" and prepared.line_offset == 2


@pytest.mark.parametrize(
    "line", ["/- c -/ set_option debug.skipKernelTC true", "set_option debug.skipKernelTC /- c -/ true"]
)
def test_a_comment_does_not_hide_a_forbidden_header_option(line):
    result = prepare(f"import Mathlib\n{line}\ntheorem t : True := by\n  trivial", MINIF2F_HEADER)
    assert result.status == "rejected" and "debug.skipKernelTC" in result.reason, result.reason


def test_a_refused_header_option_says_why():
    result = prepare("import Mathlib\nset_option trace.Meta.synthInstance true\n" + STATEMENT + "\n  rfl", "")
    assert result.status == "rejected", result.reason
    assert result.reason == (
        "header: `set_option trace.Meta.synthInstance` at line 2, column 0 (trace, profiler and diagnostics options "
        "only add output, and flood the response)"
    )


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
    # Lean's grammar puts `where` after the declaration's body, often at column 0 in prover outputs.
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
    ],
    ids=["command-after", "sorry", "namespaced", "axiom-after"],
)
def test_a_where_clause_at_column_0_is_checked_like_the_proof(file_text, reason):
    result = prepare(file_text, MINIF2F_HEADER)
    assert isinstance(result, VerificationResult) and result.status == "rejected", result
    assert reason in result.reason, result.reason


# ------------------------------------------------------------ the body's readings, computed once

_BODY_PIECES = [
    "theorem a : True := by",
    "lemma b (x : ℕ) : x = x := by",
    "def c : ℕ := 1",
    "private ",
    "@[simp] ",
    "example : 1 = 1 := by",
    "\n",
    "\n  ",
    "  trivial",
    "  rfl",
    ' s!"{x}\ntheorem d := by" ',
    ' s!"{f\ntheorem d}" ',  # a column-0 declaration word in interpolated code: no declaration ends there
    ' s!"{f\ntheorem d\nlemma e}" ',  # ... nor after a keyword inside the string
    '"s"',
    "'c'",
    "-- theorem e\n",
    "/- lemma f -/",
    "where",
    " by",
    "by'",
    " x",
    "'\"'",
    "(",
    ")",
]


def _lexed_bodies(seed: int, count: int):
    """(body, lex(body)) for `count` random bodies of `_BODY_PIECES` (those the lexer refuses left out)."""
    import random

    from trl_verigate.lean_server.lexer import lex

    rng = random.Random(seed)
    for _ in range(count):
        body = "".join(rng.choice(_BODY_PIECES) for _ in range(rng.randint(1, 12)))
        try:
            yield body, lex(body)
        except PrecheckError:
            continue


def test_declarations_end_where_the_token_walk_ends_them():
    """`_declaration_end` (column-0 starts found in C, strings by binary search) against the walk it replaced: each
    token after the keyword in turn, skipping those before the end of the last string seen."""

    from trl_verigate.lean_server import files

    def walked_end(body, code, k):
        end, literal_end = k + 1, 0
        while end < len(code):
            token = code[end]
            if token.start >= literal_end and files._is_declaration_start(body, token):
                return end
            if token.kind == "string":
                literal_end = token.end
            end += 1
        return end

    ended_early = 0
    for body, tokens in _lexed_bodies(seed=8, count=3000):
        code = [t for t in tokens if t.kind != "comment"]
        starts = [k for k, t in enumerate(code) if files._is_declaration_start(body, t)]
        strings = [k for k, t in enumerate(code) if t.kind == "string"]
        for k in range(len(code)):
            expected = walked_end(body, code, k)
            assert files._declaration_end(code, k, starts, strings) == expected, (body, k)
            ended_early += expected < len(code)
    assert ended_early > 1000


def test_the_proof_tokens_cut_from_the_body_are_the_proof_lexed_alone():
    """`prepare_file` hands the main theorem's proof to the precheck as the body's tokens after `by`, moved back:
    they must be `lex` of the proof itself, wherever `by` stands and whatever follows it."""

    from trl_verigate.lean_server import files
    from trl_verigate.lean_server.lexer import lex

    cut = 0
    for body, tokens in _lexed_bodies(seed=9, count=3000):
        for by in (t for t in tokens if t.text == "by" and t.kind == "ident"):
            try:
                expected = lex(body[by.end :])
            except PrecheckError:
                continue
            after = files._after(tokens, by.end)
            # None (lex the proof itself) only where a token runs past `by`: a `by` inside a string's braces.
            assert after == expected or (after is None and any(t.end > by.end for t in tokens if t.start < by.start))
            cut += after is not None
    assert cut > 1000


def test_a_main_by_inside_an_interpolated_string_gets_the_proof_lexed_alone():
    # Found by review: `by` inside `{…}`, so the text after it starts inside the string token. The proof after `by`
    # is `}"`, whose `"` opens a string that never ends: the reason lexing the proof alone gives.
    result = prepare('example : s!"{:= by}"', MINIF2F_HEADER)
    assert result.status == "rejected"
    assert result.reason.startswith('unterminated string `"` at line 1, column 20'), result.reason
