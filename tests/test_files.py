"""Complete files (str requests, files.py): the header split, the header-line rules and the body's checks."""

import pytest

from trl_verigate.lean_server.types import MINIF2F_HEADER, VerificationResult
from trl_verigate.lean_server.verdict import Prepared, prepare, split_header

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
        ("import Mathlib\n\ndef h : ℕ := 1\ntheorem t : h = 1 := by\n  rfl", "`def` at line 3, column 0"),
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
