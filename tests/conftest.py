"""Shared fixtures. No test touches a hub: tiny models are built locally once per session."""

import os

import pytest

from tests.fake_repl import DEFAULT_TRANSCRIPTS
from tests.machine import ci_is_set, missing_coq_programs

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs two workers on a 2-core machine: one torch thread each (and in the processes they start), as
    # two threads per worker would spin against each other for the same cores.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

# Where the stand-in REPL reads them too: one path for every test.
TRANSCRIPTS_DIR = DEFAULT_TRANSCRIPTS


@pytest.fixture(autouse=True)
def verified_checkers_in_tmp(monkeypatch, tmp_path):
    """The record of checkers lean-doctor verified lives in a test's own folder, never in the user's cache."""
    monkeypatch.setenv("TRL_VERIGATE_CACHE", str(tmp_path / "trl-verigate-cache"))


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """Paths of the tiny random policy and PRMs: {"policy", "prm_qwen_math", "prm_math_shepherd", "prm_token_classification"}."""
    from trl_verigate.tiny import build_tiny_models

    return build_tiny_models(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def tokenizer(tiny_models):
    """The tiny policy's tokenizer."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_models["policy"])


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


@pytest.fixture
def no_model_load(monkeypatch):
    """Fails the test if `trl-verigate evaluate` loads a model; the list of the loads tried (empty is good)."""
    from trl_verigate.evaluate.generation import HFBackend

    loaded = []

    def refuse(*args, **kwargs):
        loaded.append(args)
        raise AssertionError("a model was loaded before the arguments were checked")

    monkeypatch.setattr(HFBackend, "from_pretrained", classmethod(refuse))
    return loaded


@pytest.fixture(scope="session")
def coq_required():
    """Real Coq for the tests that use it: skipped without it, naming the install command; failed instead under CI."""
    from trl_verigate.coq.config import INSTALL_COMMAND

    missing = missing_coq_programs()
    if missing:
        message = f"Coq is not installed ({', '.join(missing)} missing): `{INSTALL_COMMAND}`"
        if ci_is_set():
            pytest.fail(f"{message}. CI is set, so the Coq tests fail instead of skipping.", pytrace=False)
        pytest.skip(message)


def pytest_collection_modifyitems(config, items):
    """Files with slow tests are collected first. `make test`'s two xdist workers take whole files in this order, so
    the files of short tests only come last and fill in beside whatever slow file is still running. About 30 files
    have a slow test, so the longest ones (the GPU-check rehearsal, the Coq standard-library spans) can still start
    late. The sort is stable: each file keeps its own order."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)
