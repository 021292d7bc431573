"""Helpers for tests that launch servers or training processes: loopback ports, an offline environment, configs."""

import os
import socket
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
TINY_CONFIG = REPO_ROOT / "recipes" / "tiny" / "verigate_math.yaml"
TINY_DATA = REPO_ROOT / "recipes" / "tiny" / "math_tiny.jsonl"
RECIPE = REPO_ROOT / "recipes" / "verigate_math.py"
# What a VeriGate run logs every step, and only in steps where the PRM ran. The random tiny policy almost never answers
# right, so that is nearly every step, but an occasional lucky number (accuracy_reward falls back to the last number)
# can open a step's groups.
ALWAYS_LOGGED = (
    "verigate/gate_rate",
    "verigate/frac_zero_std_outcome",
    "verigate/prm_completions_scored",
    "verigate/prm_seconds",
    "verigate/reward_failures",
)
LOGGED_WHEN_PRM_RAN = ("verigate/prm_step_score_mean", "verigate/steps_per_completion")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def offline_env(run_dir: Path, **extra: str) -> dict:
    """This process's environment for a child run: no hub access, a private datasets cache, one thread per op."""
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_DATASETS_CACHE=str(Path(run_dir) / "datasets_cache"),
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS="1",
    )
    env.update(extra)
    return env


def write_tiny_recipe_config(tiny_models: dict, run_dir: Path, **overrides) -> Path:
    """The shipped tiny YAML, pointed at the test's tiny models and data, output under `run_dir`, plus `overrides`."""
    config = yaml.safe_load(TINY_CONFIG.read_text())
    config.update(
        model_name_or_path=tiny_models["policy"],
        prm_model_name_or_path=tiny_models["prm_qwen_math"],
        dataset_name=str(TINY_DATA),
        output_dir=str(Path(run_dir) / "output"),
        **overrides,
    )
    path = Path(run_dir) / "verigate_math.yaml"
    path.write_text(yaml.safe_dump(config))
    return path
