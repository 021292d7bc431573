"""Shared fixtures. No test touches a hub: tiny models are built locally once per session."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parent.parent
TRANSCRIPTS_DIR = REPO_ROOT.parent / "shared" / "lean-repl-transcripts"


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """Paths of the tiny random policy and PRMs: {"policy", "prm_qwen_math", "prm_math_shepherd", "prm_token_classification"}."""
    from trl_verigate.tiny import build_tiny_models

    return build_tiny_models(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def transcripts_dir():
    """The real Lean REPL transcripts in ../shared; tests using them skip when absent."""
    if not TRANSCRIPTS_DIR.is_dir():
        pytest.skip(f"Lean REPL transcripts not found at {TRANSCRIPTS_DIR}")
    return TRANSCRIPTS_DIR
