"""The Qwen-Math PRM under DeepSpeed ZeRO-3 (real deepspeed, two CPU processes), as VeriGateGRPOTrainer shards it:
scoring must run through the top module, whose forward pre-hook is where DeepSpeed resets its parameter-fetch trace.
Called submodule by submodule, the trace never resets: the fetch count grows with every call and prefetching never
starts. This is `make gpu-check`'s zero3_prm check (scripts/gpu_check_tasks.py), run here on the CPU."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launch import REPO_ROOT, free_port, offline_env

pytest.importorskip("deepspeed")


@pytest.mark.slow
def test_zero3_prm_fetch_trace_stays_one_pass_long_over_50_calls(tiny_models, tmp_path):
    result_file = tmp_path / "rows.json"
    command = [
        *(sys.executable, "-m", "accelerate.commands.launch"),
        *("--config_file", str(REPO_ROOT / "recipes" / "accelerate" / "zero3.yaml")),
        *("--num_processes", "2", "--mixed_precision", "no", "--main_process_port", str(free_port())),
        str(REPO_ROOT / "scripts" / "gpu_check_tasks.py"),
        *("zero3_prm", "--device", "cpu", "--calls", "50", "--json", str(result_file)),
        *("--tiny", str(Path(tiny_models["prm_qwen_math"]).parent)),
    ]
    env = offline_env(tmp_path, DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="")
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    (row,) = json.loads(result_file.read_text())["rows"]
    assert row["status"] == "PASS", row["figures"]
    after_one, after_many = row["data"]["after_one"], row["data"]["after_many"]
    assert after_one["fetched"] == after_many["fetched"] == after_many["trace"] > 0
    assert after_many["complete"]
