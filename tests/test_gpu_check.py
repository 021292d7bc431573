"""`make gpu-check` (`python -m trl_verigate.gpu_check`) where there is no GPU: it says so and exits 0, and every check
rehearses on the CPU with the tiny models (the vLLM ones against tests/fake_vllm.py, ZeRO-3 with real deepspeed), so
its own code runs before the one GPU run it gets. A missing optional package is a SKIP naming it."""

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launch import REPO_ROOT, offline_env
from trl_verigate import gpu_check

MODULE = [sys.executable, "-m", "trl_verigate.gpu_check"]


def test_without_a_gpu_it_says_so_and_exits_0(tmp_path):
    env = offline_env(tmp_path, CUDA_VISIBLE_DEVICES="")
    result = subprocess.run(MODULE, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines() == [
        "gpu-check: no CUDA GPU on this machine (torch.cuda.is_available() is False), so nothing was run. Run "
        "`make gpu-check` on a GPU node (MODEL=/path/to/model for a local policy)."
    ]


def rows_of(result, rows_file: Path) -> dict:
    assert rows_file.is_file(), result.stdout[-4000:] + result.stderr[-3000:]
    return {row["check"]: row for row in json.loads(rows_file.read_text())}


@pytest.mark.slow
def test_every_row_that_can_run_on_the_cpu_passes_its_rehearsal(tmp_path):
    """Offline, from outside the checkout, with the tiny models built from scratch under --models-dir: every check
    but the vLLM ones (no vllm here) runs and passes, and those say SKIP, naming vllm."""
    rows_file = tmp_path / "rows.json"
    command = [*MODULE, "--device", "cpu", "--models-dir", str(tmp_path / "models"), "--max-tokens", "8"]
    command += ["--json", str(rows_file)]
    env = offline_env(tmp_path)
    result = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=1900)
    rows = rows_of(result, rows_file)
    failed = {check: row["figures"] for check, row in rows.items() if row["status"] == "FAIL"}
    assert result.returncode == 0 and not failed, failed
    expected_passes = [
        "noise: device == CPU, bit for bit",
        "prm: the three backends in float32",
        "prm: the three backends in bfloat16",
        "peft: frozen base exact across syncs",
        "ddp: one optimizer step changes the weights",
        "verigate: 2 steps, HF generate",
        "process-verified: 2 steps, HF generate",
        "es: 2 steps, HF generate",
        "es: cost per member vs one generate call",
    ]
    if importlib.util.find_spec("deepspeed") is not None:
        expected_passes += ["zero3: PRM trace stays one pass long", "zero3: PRM in DeepSpeed's dtype, another refused"]
    assert {check for check, row in rows.items() if row["status"] == "PASS"} == set(expected_passes)
    if importlib.util.find_spec("vllm") is None:
        skipped = {check: row["figures"] for check, row in rows.items() if row["status"] == "SKIP"}
        assert skipped == dict.fromkeys(
            ("es_vllm", "evaluate_vllm", "verigate_vllm"), "vllm is not installed (pip install -e '.[vllm]')"
        )
    assert rows["peft: frozen base exact across syncs"]["data"]["drifted"] > 0
    assert f"{len(expected_passes)} of {len(rows)} rows PASS" in result.stdout


@pytest.mark.slow
def test_the_vllm_rows_rehearse_against_the_stand_in(tiny_models, tmp_path):
    rows_file = tmp_path / "rows.json"
    command = [*MODULE, "--device", "cpu", "--fake-vllm", "--models-dir", str(tmp_path / "models")]
    command += ["--model", tiny_models["policy"], "--max-tokens", "8", "--json", str(rows_file)]
    command += ["--only", "es_vllm", "evaluate_vllm", "verigate_vllm"]
    result = subprocess.run(command, env=offline_env(tmp_path), cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=1900)  # fmt: skip
    rows = rows_of(result, rows_file)
    assert [row["status"] for row in rows.values()] == ["PASS"] * 5, rows
    assert sum(check.startswith("es:") for check in rows) == 3


def test_a_missing_optional_package_is_a_skip_naming_it(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name in ("vllm", "deepspeed") else real(name))
    args = argparse.Namespace(fake_vllm=False)
    assert gpu_check.missing_package("es_vllm", args) == "vllm is not installed (pip install -e '.[vllm]')"
    assert gpu_check.missing_package("zero3_prm", args) == "deepspeed is not installed (pip install deepspeed)"
    assert gpu_check.missing_package("peft_drift", args) is None
    assert gpu_check.missing_package("es_vllm", argparse.Namespace(fake_vllm=True)) is None
