"""Shared fixtures. No test touches a hub: tiny models are built locally once per session."""

import os
from pathlib import Path

import pytest
from fake_repl import DEFAULT_TRANSCRIPTS

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parent.parent
# Where the stand-in REPL reads them too: one path for every test.
TRANSCRIPTS_DIR = DEFAULT_TRANSCRIPTS


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """Paths of the tiny random policy and PRMs: {"policy", "prm_qwen_math", "prm_math_shepherd", "prm_token_classification"}."""
    from trl_verigate.tiny import build_tiny_models

    return build_tiny_models(tmp_path_factory.mktemp("tiny"))


def ci_is_set() -> bool:
    """True in CI (.ci/run exports CI=true; so do GitHub Actions and GitLab), false for an unset/empty/0/false CI."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def transcripts_dir():
    """The real Lean REPL transcripts in ../shared/lean-repl-transcripts.

    Absent, a test using them skips on a developer's machine, but fails when CI is set: they hold the only checks
    against what real Lean answers (the splitter's spans against the REPL's `allTactics`, among others), and a
    CI run that skipped them all would be green without them.
    """
    if not TRANSCRIPTS_DIR.is_dir():
        message = (
            f"Lean REPL transcripts not found at {TRANSCRIPTS_DIR}: put there the *.in / *.expected.out files of "
            "the test/ folder of leanprover-community/repl (commit 8948401ab4924499421c94b7facdfca5ff27d81d)"
        )
        if ci_is_set():
            pytest.fail(f"{message}. CI is set, so their tests fail instead of skipping.", pytrace=False)
        pytest.skip(message)
    return TRANSCRIPTS_DIR
