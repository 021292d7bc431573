"""`make gpu-check` (scripts/gpu_check.py) where there is no GPU: it says so and exits 0, and every check rehearses
on the CPU (the vLLM ones against tests/fake_vllm.py, ZeRO-3 with real deepspeed), so the script's own code runs
before the one GPU run it gets."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launch import REPO_ROOT, offline_env

SCRIPT = REPO_ROOT / "scripts" / "gpu_check.py"


def test_without_a_gpu_it_says_so_and_exits_0(tmp_path):
    env = offline_env(tmp_path, CUDA_VISIBLE_DEVICES="")
    result = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines() == [
        "gpu-check: no CUDA GPU on this machine (torch.cuda.is_available() is False), so nothing was run. Run "
        "`make gpu-check` on a GPU node (MODEL=/path/to/model for a local policy)."
    ]


@pytest.mark.slow
def test_every_check_passes_its_cpu_rehearsal(tiny_models, tmp_path):
    rows_file = tmp_path / "rows.json"
    command = [sys.executable, str(SCRIPT), "--device", "cpu", "--fake-vllm", "--model", tiny_models["policy"]]
    command += ["--tiny", str(Path(tiny_models["policy"]).parent), "--max-tokens", "8", "--json", str(rows_file)]
    result = subprocess.run(command, env=offline_env(tmp_path), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    rows = json.loads(rows_file.read_text())
    assert [row["status"] for row in rows] == ["PASS"] * 8, result.stdout
    checks = [row["check"] for row in rows]
    assert checks[0].startswith("noise") and checks[1].startswith("zero3") and checks[2].startswith("ddp")
    assert sum(check.startswith("es:") for check in checks) == 3
    table = result.stdout[result.stdout.index("check ") :]
    assert all(check in table for check in checks) and "8 of 8 rows PASS" in table


def test_a_missing_vllm_is_a_failure_on_a_gpu_and_a_skip_in_a_rehearsal(tmp_path, monkeypatch):
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    import gpu_check_tasks

    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    for device, status in (("cuda", "FAIL"), ("cpu", "SKIP")):
        args = gpu_check_tasks.argparse.Namespace(fake_vllm=False, device=device)
        rows = gpu_check_tasks.task_verigate_vllm(args)
        assert [row["status"] for row in rows] == [status]
        assert "vllm cannot be imported" in rows[0]["figures"]
