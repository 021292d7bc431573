"""bench/false_rejections.py: its corpus comes from at least three sources apart from tests/data/published, and it
tells accepted rows, policy refusals and wrong refusals apart (rows written by hand here)."""

from __future__ import annotations

import importlib.util
from collections import Counter

import pytest

from tests.launch import REPO_ROOT
from trl_verigate.lean_server.core.types import MINIF2F_HEADER

_SPEC = importlib.util.spec_from_file_location("false_rejections", REPO_ROOT / "bench" / "false_rejections.py")
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)

# The repositories of tests/data/published (LICENSES.md there), which the bench must not measure on.
USED_REPOSITORIES = {
    "deepseek-ai/DeepSeek-Prover-V2",
    "MoonshotAI/Kimina-Prover-Preview",
    "deepseek-ai/DeepSeek-Prover-V1.5",
}


def proof_row(proof: str) -> dict:
    return {
        "kind": "proof",
        "header": MINIF2F_HEADER,
        "statement": "theorem t (n : ℕ) : n + 0 = n := by",
        "proof": proof,
    }


@pytest.mark.parametrize(
    ("row", "verdict"),
    [
        (proof_row("\n  simp"), "accepted"),
        (proof_row("\n  native_decide"), "policy"),
        (proof_row("\n  run_tac pure ()"), "policy"),
        (proof_row("\n  some_undeclared_tactic"), "wrong"),
        (
            {
                "kind": "file",
                "header": MINIF2F_HEADER,
                "text": MINIF2F_HEADER + "\n\ntheorem t (n : ℕ) : n + 0 = n := by\n  simp\n\n#print axioms t\n",
            },
            "policy",
        ),
        (
            {
                "kind": "file",
                "header": MINIF2F_HEADER,
                "text": MINIF2F_HEADER
                + "\n\ntheorem t (n : ℕ) : n + 0 = n := by\n  some_undeclared_tactic\n\n#print axioms t\n",
            },
            "wrong",
        ),
    ],
    ids=["honest", "native", "excluded-tactic", "unknown-tactic", "file-print-axioms", "file-unknown-tactic"],
)
def test_classify_tells_policy_from_wrong_refusals(row, verdict):
    assert bench.classify(row, bench.excluded_heads())[0] == verdict


def test_corpus_has_three_new_sources_and_1500_rows():
    rows = bench.load_rows()
    repositories = Counter(row["origin"].split("@")[0].removeprefix("github.com/") for row in rows)
    assert len(rows) >= 1500
    assert len(set(repositories) - USED_REPOSITORIES) >= 3 and not set(repositories) & USED_REPOSITORIES
    assert all(row["kind"] in ("proof", "file") for row in rows)
