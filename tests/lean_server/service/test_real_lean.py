"""The verification pipeline against a real Lean REPL.

Runs when `TRL_VERIGATE_LEAN_REPL` names the REPL (binary path or argv; `TRL_VERIGATE_LEAN_PROJECT` the
project) or a built REPL sits next to the project; skipped otherwise. Core-Lean tests need no Mathlib;
the Mathlib tests run when the project has it. The recheck tests also need a checker:
`TRL_VERIGATE_RECHECK_COMMAND` (its argv, e.g. `trl-verigate lean-recheck --backend replay --project-dir
/path/to/project`); without it they skip. See docs/lean_setup.md.
"""

import asyncio
import json
import os
import shlex
import shutil
from pathlib import Path

import pytest

from tests.adversarial import CORPUS, load_corpus, request_of
from trl_verigate.lean_server import MINIF2F_HEADER, FileRequest, LeanServer, LeanServerConfig, ProofRequest, recheck
from trl_verigate.lean_server.cli.options import resolve_project_dir, resolve_repl_command
from trl_verigate.lean_server.service.http import create_app

RUN_COMMAND = (
    "TRL_VERIGATE_LEAN_REPL=/path/to/repl/.lake/build/bin/repl TRL_VERIGATE_LEAN_PROJECT=/path/to/project "
    "make test-lean"
)

RECHECK_ENV = "TRL_VERIGATE_RECHECK_COMMAND"
RECHECK_COMMAND = shlex.split(os.environ.get(RECHECK_ENV, "")) or None
RECHECK_RUN = f"{RECHECK_ENV}='trl-verigate lean-recheck --backend replay --project-dir /path/to/project' {RUN_COMMAND}"

PROJECT_DIR = resolve_project_dir(None)
REPL_COMMAND = resolve_repl_command(None, PROJECT_DIR)
HAS_MATHLIB = (PROJECT_DIR / ".lake" / "packages" / "mathlib").is_dir()
_missing = None
if REPL_COMMAND is None:
    _missing = f"no Lean REPL configured or found; run: {RUN_COMMAND} (setup: docs/lean_setup.md)"
elif shutil.which(REPL_COMMAND[0]) is None and not Path(REPL_COMMAND[0]).is_file():
    _missing = f"REPL command {REPL_COMMAND[0]!r} not found; run: {RUN_COMMAND}"

pytestmark = [
    pytest.mark.lean,
    pytest.mark.slow,
    pytest.mark.skipif(_missing is not None, reason=_missing or ""),
    # The first start of a REPL that imports Mathlib reads GBs of oleans.
    pytest.mark.timeout(1800),
]

CORE_PROOFS = [
    ProofRequest("theorem core_omega (a b : Nat) (h : a < b) : a + 1 ≤ b := by", "  omega"),
    ProofRequest("theorem core_decide : 2 ^ 10 = 1024 := by", "  decide"),
    ProofRequest("theorem core_simp (xs : List Nat) : (xs ++ []).length = xs.length := by", "  simp"),
    ProofRequest(
        "theorem core_steps (a b : Nat) (h₁ : a = 2) (h₂ : b = a + 1) : b = 3 := by",
        "  subst h₁\n  subst h₂\n  rfl",
    ),
]


def lean_config(header: str, **overrides) -> LeanServerConfig:
    overrides.setdefault("workers", 2)
    overrides.setdefault("timeout", 60.0)
    overrides.setdefault("startup_timeout", 900.0)
    return LeanServerConfig(repl_command=REPL_COMMAND, project_dir=str(PROJECT_DIR), header=header, **overrides)


@pytest.fixture(scope="module")
def core_server():
    with LeanServer(lean_config("")) as server:
        yield server


@pytest.fixture(scope="module")
def mathlib_server():
    if not HAS_MATHLIB:
        pytest.skip(f"no Mathlib in {PROJECT_DIR}/.lake/packages: create the project with `lake new proj math`")
    with LeanServer(lean_config(MINIF2F_HEADER)) as server:
        yield server


def test_core_lean_proofs_pass_with_only_standard_axioms(core_server):
    results = core_server.verify(CORE_PROOFS)
    for request, result in zip(CORE_PROOFS, results, strict=True):
        assert result.status == "passed", (request.statement, result)
        assert set(result.axioms) <= set(core_server.config.axiom_whitelist)
        assert result.first_error_tactic == len(result.tactics) >= 1
    assert [t.text for t in results[3].tactics] == ["subst h₁", "subst h₂", "rfl"]


def test_a_wrong_middle_step_is_the_first_error_tactic(core_server):
    wrong = ProofRequest(
        "theorem core_wrong (a : Nat) (h : a = 2) : a + a = 4 := by",
        "  subst h\n  exact Nat.succ_ne_zero 0\n  rfl",
    )
    [result] = core_server.verify([wrong])
    assert result.status == "failed" and not result.passed
    assert result.first_error_tactic == 1
    errors = [m for m in result.messages if m.severity == "error"]
    assert errors and errors[0].line == 3


def test_unsolved_goals_mean_every_tactic_was_valid_but_the_proof_is_incomplete(core_server):
    incomplete = ProofRequest("theorem core_incomplete (a b : Nat) : a + b = b + a ∧ True := by", "  constructor")
    [result] = core_server.verify([incomplete])
    assert result.status == "failed"
    assert any("unsolved goals" in m.text for m in result.messages)
    assert result.first_error_tactic == len(result.tactics) == 1


def test_sorry_is_refused_in_the_proof_and_through_the_axioms(core_server):
    direct = ProofRequest("theorem core_sorry : 1 = 2 := by", "  sorry")
    # The header is trusted text, so the precheck never sees this sorry: only `#print axioms` can.
    hidden = ProofRequest(
        "theorem core_uses_hidden_sorry : 1 = 2 := by",
        "  exact verigate_hidden",
        header="theorem verigate_hidden : 1 = 2 := sorry",
    )
    direct_result, hidden_result = core_server.verify([direct, hidden])
    assert direct_result.status == "rejected" and "sorry" in direct_result.reason
    assert hidden_result.status == "failed" and not hidden_result.passed
    assert "sorryAx" in hidden_result.axioms


def test_an_added_axiom_is_refused(core_server):
    cheat = ProofRequest(
        "theorem core_uses_axiom : 1 = 2 := by", "  exact verigate_cheat", header="axiom verigate_cheat : 1 = 2"
    )
    in_proof = ProofRequest("theorem core_axiom_in_proof : 1 = 2 := by", "  axiom cheat : 1 = 2")
    cheat_result, in_proof_result = core_server.verify([cheat, in_proof])
    assert cheat_result.status == "failed" and "verigate_cheat" in cheat_result.axioms
    assert in_proof_result.status == "rejected"


def test_native_decide_is_refused_by_the_precheck_and_by_the_axioms():
    native = ProofRequest("theorem core_native : 2 ^ 10 = 1024 := by", "  native_decide")
    with LeanServer(lean_config("", workers=1)) as strict:
        [refused] = strict.verify([native])
    assert refused.status == "rejected"
    # Let it through the precheck: Lean accepts it, and the whitelist still refuses Lean.ofReduceBool.
    with LeanServer(lean_config("", workers=1, allow_native_decide=True)) as lenient:
        [result] = lenient.verify([native])
    assert result.status == "failed" and not result.passed
    # Lean.ofReduceBool on older toolchains; newer ones also (or instead) name Lean.trustCompiler.
    assert {"Lean.ofReduceBool", "Lean.trustCompiler"} & set(result.axioms)


def test_a_complete_file_request_passes_and_reports_file_lines(core_server):
    good, bad = core_server.verify(
        [
            "theorem file_ok (n : Nat) : n + 0 = n := by\n  simp",
            "theorem file_bad (n : Nat) : n + 1 = n := by\n  omega",
        ]
    )
    assert good.status == "passed"
    assert bad.status == "failed" and bad.first_error_tactic == 0
    assert [m.line for m in bad.messages if m.severity == "error"][0] == 2


def test_http_service_gives_the_same_verdicts_as_in_process(core_server):
    from fastapi.testclient import TestClient

    requests = [*CORE_PROOFS[:2], ProofRequest("theorem core_sorry2 : 1 = 2 := by", "  sorry")]
    expected = [r.to_dict() for r in core_server.verify(requests)]
    with TestClient(create_app(core_server)) as http:
        body = {"requests": [{"statement": r.statement, "proof": r.proof, "header": r.header} for r in requests]}
        served = http.post("/check", json=body).json()["results"]
    for mine, theirs in zip(expected, served, strict=True):
        assert {k: v for k, v in theirs.items() if k != "time_s"} == {k: v for k, v in mine.items() if k != "time_s"}


def test_mathlib_proofs_pass(mathlib_server):
    requests = [
        ProofRequest("theorem ml_norm_num : (2 : ℝ) + 2 = 4 := by", "  norm_num"),
        ProofRequest("theorem ml_nlinarith (x : ℝ) : x ^ 2 - 2 * x + 1 ≥ 0 := by", "  nlinarith [sq_nonneg (x - 1)]"),
        MINIF2F_HEADER + "\n\ntheorem ml_file (a b : ℕ) (h : a ≤ b) : a < b + 1 := by\n  omega",
    ]
    results = mathlib_server.verify(requests)
    assert [r.status for r in results] == ["passed"] * 3, results
    for result in results:
        assert set(result.axioms) <= set(mathlib_server.config.axiom_whitelist)


def test_the_adversarial_corpus_never_passes():
    rows = load_corpus()
    assert rows, f"{CORPUS} is empty"
    # File rows bring their own header (`import Mathlib`): without Mathlib in the project Lean fails on it,
    # which must not pass either.
    header = MINIF2F_HEADER if HAS_MATHLIB else ""
    requests = [request_of(row) for row in rows]
    # Short timeout: several attacks are built to hang or exhaust memory.
    with LeanServer(lean_config(header, timeout=30.0)) as server:
        results = server.verify(requests)
    passed = [(row["id"], row["attack"]) for row, result in zip(rows, results, strict=True) if result.passed]
    assert not passed, f"attacks that passed real Lean: {passed}"
    for row, result in zip(rows, results, strict=True):
        if row["expect"] == "rejected":
            assert result.status == "rejected", (row["id"], result)


# ---------------------------------------------------------------- forging payloads and the recheck tier


# A complete fake answer to our `#print axioms` line (line 4 of a one-line statement and one-line proof), as a
# payload that runs code would write to the REPL's fd 1 ahead of the real one.
def forged_answer(theorem: str) -> str:
    answer = {
        "env": 1,
        "messages": [
            {
                "severity": "info",
                "pos": {"line": 4, "column": 0},
                "endPos": {"line": 4, "column": 6},
                "data": f"'{theorem}' does not depend on any axioms",
            }
        ],
    }
    return json.dumps(answer) + "\n\n"


def lean_string(text: str) -> str:
    """`text` as a Lean string literal; braces as `\\x7b`/`\\x7d` escapes, which the precheck does not read as code."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped.replace("{", "\\x7b").replace("}", "\\x7d") + '"'


def write_forgery(theorem: str) -> str:
    """Lean code of an IO action writing the forged answer to the REPL's own stdout."""
    return f'IO.FS.writeFile "/proc/self/fd/1" {lean_string(forged_answer(theorem))}'


# Each tries to run the forgery while Lean elaborates the proof of a false statement (the list): a
# code-running elaborator, a config elaborator, `unsafeIO`, IO run from safe code through EStateM.
FORGING_PAYLOADS = {
    "forge_eval": "  have _h : Nat := eval% (unsafeBaseIO ({io} *> pure 0)); norm_num",
    "forge_include_str": '  have _s : String := include_str (unsafeBaseIO ({io} *> pure "x")); norm_num',
    "forge_simp_config": "  simp (config := (unsafeBaseIO ({io} *> pure {{}})))",
    "forge_omega_config": "  omega (splitDisjunctions := (unsafeBaseIO ({io} *> pure true)))",
    "forge_unsafe_io": "  have _u := unsafeIO ({io}); norm_num",
    "forge_estatem": "  have _e : Unit := (EStateM.run' ({io}) ()).getD (); decide",
}


def forging_requests() -> list[ProofRequest]:
    return [
        ProofRequest(f"theorem {name} : (1 : Nat) = 2 := by", payload.format(io=write_forgery(name)))
        for name, payload in FORGING_PAYLOADS.items()
    ]


def test_forging_payloads_never_pass_the_repl_tier():
    header = MINIF2F_HEADER if HAS_MATHLIB else ""
    with LeanServer(lean_config(header, timeout=60.0)) as server:
        results = server.verify(forging_requests())
    passed = [name for name, result in zip(FORGING_PAYLOADS, results, strict=True) if result.passed]
    assert not passed, f"forging payloads that passed: {passed}"


def require_checker() -> list[str]:
    if RECHECK_COMMAND is None:
        pytest.skip(f"no checker configured; run: {RECHECK_RUN}")
    return RECHECK_COMMAND


def test_the_checker_confirms_a_proof_and_refuses_false_swapped_and_axiom_claims():
    command = require_checker()
    header = MINIF2F_HEADER if HAS_MATHLIB else ""
    whitelist = LeanServerConfig().axiom_whitelist

    def item(item_id: str, statement: str, proof=None, file=None) -> recheck.RecheckItem:
        return recheck.RecheckItem(item_id, header, statement, statement.split()[1], whitelist, proof=proof, file=file)

    items = [
        item("ok", "theorem rc_ok (a b : Nat) (h : a < b) : a + 1 ≤ b := by", proof="  omega"),
        item("false", "theorem rc_false : (1 : Nat) = 2 := by", proof="  decide"),
        # The file proves a true statement, but not the trusted one it is held to.
        item(
            "swapped",
            "theorem rc_swapped : (2 : Nat) + 2 = 5 := by",
            file=f"{header}\n\ntheorem rc_swapped : (2 : Nat) + 2 = 4 := by\n  decide\n",
        ),
        item(
            "axiom",
            "theorem rc_axiom : (1 : Nat) = 2 := by",
            file=f"{header}\n\naxiom rc_cheat : False\n\ntheorem rc_axiom : (1 : Nat) = 2 := by\n  exact rc_cheat.elim\n",
        ),
    ]
    verdicts = asyncio.run(recheck.run_checker(command, items, LeanServerConfig().recheck_timeout))
    assert verdicts["ok"].ok, verdicts["ok"].message
    assert set(verdicts["ok"].axioms or []) <= set(whitelist)
    for refused in ("false", "swapped", "axiom"):
        assert not verdicts[refused].ok, (refused, verdicts[refused])


def test_recheck_confirms_real_passes_and_no_forging_payload_or_attack_passes():
    command = require_checker()
    header = MINIF2F_HEADER if HAS_MATHLIB else ""
    rows = load_corpus()
    requests = [*CORE_PROOFS, *forging_requests(), *(request_of(row) for row in rows)]
    with LeanServer(lean_config(header, timeout=30.0, recheck_command=command)) as server:
        results = server.verify(requests)
        metrics = server.metrics()
    honest, attacks = results[: len(CORE_PROOFS)], results[len(CORE_PROOFS) :]
    assert [r.status for r in honest] == ["passed"] * len(CORE_PROOFS), honest
    assert not [r for r in attacks if r.passed]
    assert metrics["lean/rechecked"] >= len(CORE_PROOFS)
    assert metrics["lean/recheck_checker_failures"] == 0
    assert metrics["lean/recheck_seconds"] > 0


def test_a_file_request_is_rechecked_against_its_trusted_statement():
    command = require_checker()
    file_text = "theorem rc_file (n : Nat) : n + 0 = n := by\n  simp"
    with LeanServer(lean_config("", workers=1, recheck_command=command)) as server:
        [result] = server.verify([FileRequest(file_text, statement="theorem rc_file (n : Nat) : n + 0 = n := by")])
        assert server.metrics()["lean/rechecked"] == 1
    assert result.status == "passed", result
