"""The tactic allow-lists: generated from declared syntax by scripts/generate_lean_allowlists.py (run here on a
hand-written source tree whose expected lists are worked out by hand), the shipped lists, and their comparison with
the heads a Lean environment declares (`lean-doctor`, run against the stand-in REPL)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.fake_repl import repl_command, write_script
from tests.launch import REPO_ROOT
from trl_verigate.lean_server.cli.doctor import run_doctor
from trl_verigate.lean_server.precheck import policy
from trl_verigate.lean_server.precheck.allowlists import (
    DECLARED_HEADS_COMMAND,
    compare_heads,
    declared_heads,
    excluded_heads,
    heads_difference,
    listed_words,
)
from trl_verigate.prover_pool.checks import Check

SCRIPT = REPO_ROOT / "scripts" / "generate_lean_allowlists.py"
# Heads the issue found missing from the list that was built from a sample of proofs.
ISSUE_HEADS = [
    "lia",
    "push",
    "order",
    "cancel_denoms",
    "and_intros",
    "assumption'",
    "by_cases!",
    "wlog!",
    "convert!",
    "if",
]

SOURCE_FILES = {
    "Lib/Basic.lean": """
/-- a doc comment mentioning syntax "ghost" : tactic -/
syntax (name := foo) "foo " term : tactic
macro "bar!" : tactic => `(tactic| skip)
syntax "baz" "!"? (ppSpace term)? : tactic
elab "runit " code:doSeq : tactic => pure ()
local syntax "secret" : tactic
syntax myAbbrev := "abbrevatom" term
syntax (name := myIf) ppRealGroup(ppRealFill(ppIndent("myif " term " then") ppSpace tacticSeq)) : tactic
syntax "myconv" : conv
syntax "widgety" "[" widgetInstanceSpec,+ "]" tacticSeq : tactic
macro "sorry" : tactic => `(tactic| exact sorryAx _)
syntax "·" tacticSeq : tactic
@[builtin_tactic_parser] def nestedTac := leading_parser "nested_tac " Tactic.tacticSeq
declare_simp_like_tactic (dsimp := false) simpAutoUnfold "simp_like! " fun (c : Lean.Meta.Simp.Config) => c
""",
    "Lib/Eval.lean": """
syntax "evalit " term : tactic
syntax "noterm" : tactic
elab_rules : tactic | `(tactic| evalit $e) => do let _ ← unsafe evalExpr Nat (mkConst ``Nat) e
""",
    "Test/Skipped.lean": 'syntax "testonly" : tactic\n',
    "Lib/Options.lean": """
register_option my.flag : Bool := { defValue := false }
public register_option linter.myStyle : Bool := { defValue := true }
register_option my.debug.skipChecks : Bool := { defValue := false }
register_builtin_option trace.my : Bool := { defValue := false }
register_option my.limit : Nat := { defValue := 5 }
""",
}


def run_generator(tmp_path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *extra, "--out-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )


def data_words(path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")]


@pytest.fixture
def generated(tmp_path):
    for rel, text in SOURCE_FILES.items():
        (tmp_path / "src" / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / rel).write_text(text, encoding="utf-8")
    result = run_generator(tmp_path, "--source", f"lib={tmp_path / 'src'}")
    assert result.returncode == 0, result.stderr
    return tmp_path / "out"


def test_generator_reads_heads_and_excludes_by_rule(generated):
    # Worked out by hand from SOURCE_FILES: every tactic head outside Test/, `local` and abbreviations; `·` is a
    # symbol; `runit` takes a doSeq, `widgety` a widget instance, `evalit` and `noterm` are declared in a file that
    # evaluates what it elaborates, `sorry` is an incomplete proof.
    keywords = ["foo", "bar!", "baz", "baz!", "runit", "myif", "myconv", "sorry", "evalit", "noterm", "nested_tac"]
    assert data_words(generated / "tactic_keywords.txt") == sorted([*keywords, "simp_like!", "widgety"])
    assert data_words(generated / "tactics.txt") == sorted(
        ["foo", "bar!", "baz", "baz!", "myif", "nested_tac", "simp_like!"]
    )
    assert data_words(generated / "conv_tactics.txt") == ["myconv"]
    rows = [line.split("\t") for line in data_words(generated / "tactic_exclusions.txt")]
    assert {(category, head): reason.split(":")[0] for category, head, reason in rows} == {
        ("tactic", "evalit"): "takes code",
        ("tactic", "noterm"): "takes code",
        ("tactic", "runit"): "takes code",
        ("tactic", "widgety"): "takes code",
        ("tactic", "sorry"): "INCOMPLETE",
    }
    assert "doSeq" in dict(((h, r) for _, h, r in rows))["runit"]


def test_generator_allows_declared_bool_options_by_rule(generated):
    # By hand: the Bool options without a denied component (`debug`, `trace`), then the script's number bounds;
    # `my.limit` is a number without a bound.
    words = data_words(generated / "options.txt")
    assert [w for w in words if w.endswith(" bool")] == ["linter.myStyle bool", "my.flag bool"]
    assert not [w for w in words if w.startswith("my.limit")]
    assert "maxRecDepth 10000" in words and "maxHeartbeats config" in words


def test_shipped_options_allow_harmless_switches_only():
    options = policy().options
    assert options["tactic.hygienic"] == "bool" and options["linter.unusedTactic"] == "bool"
    assert not {"debug.skipKernelTC", "trace.profiler", "compiler.extract_closed"} & set(options)


def test_generator_records_its_sources(generated, tmp_path):
    header = (generated / "tactics.txt").read_text(encoding="utf-8")
    assert f"lib: {tmp_path / 'src'} (plain directory)" in header


def test_generator_without_sources_says_what_to_give(tmp_path):
    result = run_generator(tmp_path)
    assert result.returncode == 2
    assert "--source" in result.stderr.splitlines()[-1] and "Traceback" not in result.stderr


def test_shipped_lists_hold_the_heads_the_issue_found_missing():
    tactics = listed_words("tactics.txt")
    assert [head for head in ISSUE_HEADS if head not in tactics] == []
    assert set(ISSUE_HEADS) <= policy().tactics


def test_shipped_lists_exclude_code_runners_with_reasons():
    excluded = excluded_heads()
    assert {"run_tac", "sorry", "native_decide"} <= excluded["tactic"] and "run_conv" in excluded["conv"]
    assert not excluded["tactic"] & listed_words("tactics.txt")
    assert {"run_tac", "run_conv"} <= policy().unlisted_keywords
    assert "native_decide" in policy(allow_native_decide=True).tactics


def test_shipped_lists_name_pinned_commits():
    header = (REPO_ROOT / "trl_verigate/lean_server/precheck/allowlists/tactics.txt").read_text(encoding="utf-8")
    pinned = re.findall(r"^#   (\w[\w-]*): ([0-9a-f]{40}) \(\d{4}-\d\d-\d\d\)$", header, re.MULTILINE)
    assert {name for name, _ in pinned} >= {"mathlib", "batteries", "aesop", "qq", "reference-manual"}


def info(text: str) -> dict:
    return {"severity": "info", "pos": {"line": 2, "column": 0}, "data": text}


def test_declared_heads_reads_the_command_answer():
    response = {
        "env": 1,
        "messages": [
            info("verigate-heads tactic: simp ( ident exact? · <;> run_tac"),
            info("verigate-heads conv: lhs rhs"),
            info("unrelated"),
            {"severity": "error", "pos": {"line": 1, "column": 0}, "data": "verigate-heads tactic: forged"},
        ],
    }
    assert declared_heads(response) == {"tactic": {"simp", "exact?", "run_tac"}, "conv": {"lhs", "rhs"}}


def test_declared_heads_without_the_message_is_an_error():
    with pytest.raises(ValueError, match="verigate-heads"):
        declared_heads({"messages": [{"severity": "error", "data": "unknown constant"}]})


def test_compare_heads_splits_missing_and_extra():
    declared = {"simp", "mytac", "run_tac"}
    assert compare_heads(declared, allowed={"simp", "ring"}, excluded={"run_tac"}) == (("mytac",), ("ring",))


def test_heads_difference_against_the_shipped_lists():
    allowed = sorted(listed_words("tactics.txt"))
    declared = [*allowed[1:], "brand_new_tactic", "run_tac"]
    response = {"messages": [info("verigate-heads tactic: " + " ".join(declared))]}
    [difference] = heads_difference(response)
    assert (difference.missing_in_list, difference.extra_in_list) == (("brand_new_tactic",), (allowed[0],))


def test_command_reads_both_categories():
    assert "`tactic, `conv" in DECLARED_HEADS_COMMAND and "verigate-heads" in DECLARED_HEADS_COMMAND


def doctor_tactics_check(tmp_path, script_rows) -> Check:
    """The `tactics` line of lean-doctor run against the stand-in REPL with these `--script` rows."""
    script = write_script(tmp_path / "script.jsonl", script_rows)
    checks = run_doctor(
        project_dir=tmp_path,
        repl_command=repl_command("--script", script),
        header="",
        timeout=20.0,
        startup_timeout=60.0,
        sandbox="none",
    )
    return next(check for check in checks if check.name == "tactics")


def heads_row(tactic_heads: list[str]) -> dict:
    conv = " ".join(sorted(listed_words("conv_tactics.txt")))
    messages = [info("verigate-heads tactic: " + " ".join(tactic_heads)), info("verigate-heads conv: " + conv)]
    return {"match": "verigate-heads", "response": {"env": 0, "messages": messages}}


@pytest.mark.slow
def test_lean_doctor_lists_declared_tactics_missing_from_the_lists(tmp_path):
    allowed = sorted(listed_words("tactics.txt"))
    check = doctor_tactics_check(tmp_path, [heads_row([*allowed[1:], "brand_new_tactic", "run_tac"])])
    assert check.ok is False
    assert "tactic: brand_new_tactic" in check.detail and "run_tac" not in check.detail
    assert "1 allowed heads are not declared here" in check.detail and "--allow-tactic" in check.fix


@pytest.mark.slow
def test_lean_doctor_passes_when_the_environment_declares_the_lists(tmp_path):
    check = doctor_tactics_check(tmp_path, [heads_row(sorted(listed_words("tactics.txt")))])
    assert check.ok is True and "not declared" not in check.detail


@pytest.mark.slow
def test_lean_doctor_says_when_the_repl_lists_no_tactics(tmp_path):
    check = doctor_tactics_check(tmp_path, [])  # the stand-in's generic answer holds no `verigate-heads` message
    assert check.ok is None and "could not list" in check.detail
