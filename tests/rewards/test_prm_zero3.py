"""The Qwen-Math PRM under DeepSpeed ZeRO-3 (real deepspeed on the CPU).

- As VeriGateGRPOTrainer shards it (two processes): scoring must run through the top module, whose forward pre-hook
  is where DeepSpeed resets its parameter-fetch trace. Called submodule by submodule, the trace never resets: the
  fetch count grows with every call and prefetching never starts. This is `make gpu-check`'s zero3_prm check
  (trl_verigate/gpu_check_tasks.py).
- Its dtype (one process): DeepSpeed builds every model in its config's dtype, so a PRM dtype other than that one is
  refused, naming the setting, before the weights load.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launch import REPO_ROOT, free_port, offline_env

# Run in a fresh process: ZeRO-3 needs a process group, and its `zero.Init` patches torch for the whole process.
DTYPE_PROBE = """
import json, os, sys
import torch
from transformers.integrations import HfDeepSpeedConfig
from trl_verigate.rewards.prm import Qwen2ForProcessRewardModel, QwenMathPRM

path, rows = sys.argv[1], {}
for name, bf16 in (("bf16", True), ("fp32", False)):
    ds_config = HfDeepSpeedConfig(
        {"zero_optimization": {"stage": 3}, "bf16": {"enabled": bf16}, "train_micro_batch_size_per_gpu": 1}
    )
    # Without the check: whatever from_pretrained is asked for, the partitions are in the config's dtype.
    raw = Qwen2ForProcessRewardModel.from_pretrained(path, dtype=torch.float32 if bf16 else torch.bfloat16)
    row = {"unchecked": sorted({str(p.ds_tensor.dtype) for p in raw.parameters()})}
    for asked in ("float32", "bfloat16", None):
        try:
            scorer = QwenMathPRM(path, device="cpu", torch_dtype=asked)
            row[str(asked)] = sorted({str(p.ds_tensor.dtype) for p in scorer.model.parameters()})
        except ValueError as error:
            row[str(asked)] = str(error)
    rows[name] = row
    del ds_config
print(json.dumps(rows))
"""

pytest.importorskip("deepspeed")


@pytest.mark.slow
def test_zero3_prm_fetch_trace_stays_one_pass_long_over_50_calls(tiny_models, tmp_path):
    result_file = tmp_path / "rows.json"
    command = [
        *(sys.executable, "-m", "accelerate.commands.launch"),
        *("--config_file", str(REPO_ROOT / "recipes" / "accelerate" / "zero3.yaml")),
        *("--num_processes", "2", "--mixed_precision", "no", "--main_process_port", str(free_port())),
        *("-m", "trl_verigate.gpu_check_tasks", "zero3_prm", "--device", "cpu", "--calls", "50"),
        *("--json", str(result_file), "--tiny", str(Path(tiny_models["prm_qwen_math"]).parent)),
        *("--model", tiny_models["policy"], "--midsize", tiny_models["policy"]),
    ]
    env = offline_env(tmp_path, DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="")
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    row, dtype_row = json.loads(result_file.read_text())["rows"]
    assert row["status"] == "PASS", row["figures"]
    assert dtype_row["status"] == "PASS", dtype_row["figures"]
    after_one, after_many = row["data"]["after_one"], row["data"]["after_many"]
    assert after_one["fetched"] == after_many["fetched"] == after_many["trace"] > 0
    assert after_many["complete"]


@pytest.mark.slow
def test_zero3_prm_dtype_other_than_deepspeeds_is_refused_naming_the_setting(tiny_models, tmp_path):
    env = offline_env(
        tmp_path, DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="", RANK="0", LOCAL_RANK="0", WORLD_SIZE="1",
        LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
    )  # fmt: skip
    command = [sys.executable, "-c", DTYPE_PROBE, tiny_models["prm_qwen_math"]]
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    rows = json.loads(result.stdout.strip().splitlines()[-1])
    # The silent replacement the check guards against, by DeepSpeed itself.
    assert rows["bf16"]["unchecked"] == ["torch.bfloat16"] and rows["fp32"]["unchecked"] == ["torch.float32"]
    # The dtype DeepSpeed builds in, asked for or left unset, loads in it.
    assert rows["bf16"]["bfloat16"] == rows["bf16"]["None"] == ["torch.bfloat16"]
    assert rows["fp32"]["float32"] == rows["fp32"]["None"] == ["torch.float32"]
    # Any other is refused with the setting and the fix.
    assert rows["bf16"]["float32"].startswith("torch_dtype='float32' cannot be honoured under DeepSpeed ZeRO-3")
    assert "bf16.enabled in the DeepSpeed config" in rows["bf16"]["float32"]
    assert "Set torch_dtype to 'bfloat16' or leave it unset" in rows["bf16"]["float32"]
    assert rows["fp32"]["bfloat16"].startswith("torch_dtype='bfloat16' cannot be honoured under DeepSpeed ZeRO-3")
    assert "Set torch_dtype to 'float32' or leave it unset" in rows["fp32"]["bfloat16"]


def test_verigate_refuses_a_prm_dtype_zero3_would_replace_before_the_policy_loads(tiny_models, tmp_path, monkeypatch):
    from transformers import PreTrainedModel
    from transformers.integrations.deepspeed import HfDeepSpeedConfig, unset_hf_deepspeed_config

    from trl_verigate import VeriGateConfig, VeriGateGRPOTrainer

    loads = []
    monkeypatch.setattr(PreTrainedModel, "from_pretrained", classmethod(lambda cls, *a, **k: loads.append(a)))
    args = VeriGateConfig(
        output_dir=str(tmp_path), use_cpu=True, per_device_train_batch_size=2, num_generations=2, report_to="none",
        prm_model_name_or_path=tiny_models["prm_qwen_math"], prm_torch_dtype="float32",
    )  # fmt: skip
    # What TrainingArguments leaves behind under a ZeRO-3 launch with mixed_precision bf16.
    ds_config = HfDeepSpeedConfig({"zero_optimization": {"stage": 3}, "bf16": {"enabled": True}})
    try:
        with pytest.raises(ValueError, match=r"^prm_torch_dtype='float32' cannot be honoured under DeepSpeed ZeRO-3"):
            VeriGateGRPOTrainer(model=tiny_models["policy"], reward_funcs=[lambda **_: []], args=args)
    finally:
        unset_hf_deepspeed_config()
        del ds_config
    assert loads == []
