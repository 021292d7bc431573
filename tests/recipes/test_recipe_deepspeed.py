"""The shipped DeepSpeed accelerate configs run the math recipe end to end through the real deepspeed library.

`accelerate launch --config_file recipes/accelerate/zero{2,3}.yaml` trains the tiny policy with the tiny PRM on two CPU
processes; only what a GPU-less box needs is overridden (process count, precision, CPU/gloo). Each rank's DeepSpeed
engine writes its own ZeRO partition of the optimizer state, which is how the test knows both ranks trained under the
config's ZeRO stage rather than under plain DDP.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from tests.launch import (
    ALWAYS_LOGGED,
    LOGGED_WHEN_PRM_RAN,
    RECIPE,
    REPO_ROOT,
    TINY_CONFIG,
    TINY_DATA,
    free_port,
    offline_env,
    write_tiny_recipe_config,
)

pytest.importorskip("deepspeed")

NUM_PROCESSES = 2
TRAIN_STEPS = 2


def write_deepspeed_tiny_config(tiny_models: dict, run_dir: Path) -> Path:
    """The shipped tiny YAML, pointed at the test's tiny models, with the settings DeepSpeed on CPU needs."""
    return write_tiny_recipe_config(
        tiny_models,
        run_dir,
        max_steps=TRAIN_STEPS,
        report_to="none",
        # A checkpoint holds trainer_state.json (the logged metrics) and each rank's DeepSpeed ZeRO partition.
        save_strategy="steps",
        save_steps=TRAIN_STEPS,
        # use_cpu makes accelerate build a plain multi-CPU state and silently drop DeepSpeed.
        use_cpu=False,
        # TRL turns bf16 on by default, and transformers refuses bf16 without a GPU unless use_cpu is set.
        bf16=False,
        # With no GPU accelerate picks no process-group backend and counts one process per rank, while DeepSpeed
        # counts two and rejects the batch sizes; gloo is also what DeepSpeed's CPU accelerator communicates with.
        ddp_backend="gloo",
    )


def launch_env(run_dir: Path) -> dict:
    # DeepSpeed picks its accelerator at import; pin it to the CPU one, and hide GPUs so a GPU box runs the same.
    return offline_env(run_dir, DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="")


def launch_recipe(accelerate_config: str, config: Path, run_dir: Path) -> subprocess.CompletedProcess:
    command = [
        *(sys.executable, "-m", "accelerate.commands.launch"),
        *("--config_file", str(REPO_ROOT / "recipes" / "accelerate" / accelerate_config)),
        # The shipped configs are for 8 GPUs in bf16.
        *("--num_processes", str(NUM_PROCESSES), "--mixed_precision", "no"),
        *("--main_process_port", str(free_port())),
        *(str(RECIPE), "--config", str(config)),
    ]
    return subprocess.run(command, cwd=REPO_ROOT, env=launch_env(run_dir), capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def deepspeed_runs(tiny_models, tmp_path_factory):
    """accelerate config name -> (finished process, output dir); each config is launched once per module."""
    runs = {}

    def run(accelerate_config: str):
        if accelerate_config not in runs:
            run_dir = tmp_path_factory.mktemp(accelerate_config.removesuffix(".yaml"))
            config = write_deepspeed_tiny_config(tiny_models, run_dir)
            runs[accelerate_config] = (launch_recipe(accelerate_config, config, run_dir), run_dir / "output")
        return runs[accelerate_config]

    return run


def finished_run(deepspeed_runs, accelerate_config: str) -> Path:
    result, output_dir = deepspeed_runs(accelerate_config)
    assert result.returncode == 0, (
        f"{accelerate_config} launch failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    )
    return output_dir


@pytest.mark.slow
@pytest.mark.parametrize(("accelerate_config", "zero_stage"), [("zero2.yaml", 2), ("zero3.yaml", 3)])
def test_deepspeed_config_trains_on_both_ranks_logs_verigate_metrics_and_saves_a_loadable_policy(
    deepspeed_runs, tiny_models, accelerate_config, zero_stage
):
    from transformers import AutoModelForCausalLM

    output_dir = finished_run(deepspeed_runs, accelerate_config)
    checkpoint = output_dir / f"checkpoint-{TRAIN_STEPS}"

    # Every rank's engine saved its own slice of the optimizer state, under the config's ZeRO stage.
    for rank in range(NUM_PROCESSES):
        shard = checkpoint / f"global_step{TRAIN_STEPS}" / f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt"
        assert shard.is_file(), f"rank {rank} wrote no DeepSpeed optimizer partition at {shard}"
        optimizer_state = torch.load(shard, map_location="cpu", weights_only=False)["optimizer_state_dict"]
        assert int(optimizer_state["zero_stage"]) == zero_stage
        # ZeRO-1/2 record one count per parameter group, ZeRO-3 a single one.
        partition_counts = optimizer_state["partition_count"]
        if not isinstance(partition_counts, list):
            partition_counts = [partition_counts]
        assert partition_counts and set(partition_counts) == {NUM_PROCESSES}, partition_counts

    log_history = json.loads((checkpoint / "trainer_state.json").read_text())["log_history"]
    step_logs = [entry for entry in log_history if "verigate/gate_rate" in entry]
    assert [entry["step"] for entry in step_logs] == list(range(1, TRAIN_STEPS + 1))
    for entry in step_logs:
        for metric in ALWAYS_LOGGED:
            assert metric in entry, f"{metric} missing from logged step {entry['step']}: {sorted(entry)}"
        assert 0.0 <= entry["verigate/gate_rate"] <= 1.0
    prm_steps = [entry for entry in step_logs if entry["verigate/prm_completions_scored"] > 0]
    assert prm_steps, "no step sent a gated group to the PRM"
    for entry in prm_steps:
        for metric in LOGGED_WHEN_PRM_RAN:
            assert metric in entry, f"{metric} missing from step {entry['step']} where the PRM ran"
        assert entry["verigate/steps_per_completion"] >= 1.0
        assert 0.0 <= entry["verigate/prm_step_score_mean"] <= 1.0  # Qwen-Math PRM scores are probabilities

    # One step consumes per_device_train_batch_size / num_generations prompts on each process: the epoch only
    # advances by the two-process share if both ranks drew their own prompts.
    tiny_config = yaml.safe_load(TINY_CONFIG.read_text())
    prompts_per_step = NUM_PROCESSES * tiny_config["per_device_train_batch_size"] // tiny_config["num_generations"]
    num_prompts = len(TINY_DATA.read_text().splitlines())
    assert [entry["epoch"] for entry in step_logs] == pytest.approx(
        [step * prompts_per_step / num_prompts for step in range(1, TRAIN_STEPS + 1)]
    )

    # Under ZeRO-3 the saved weights are gathered from both ranks' shards; they must form the whole policy.
    trained, loading_info = AutoModelForCausalLM.from_pretrained(output_dir, output_loading_info=True)
    assert not loading_info["missing_keys"] and not loading_info["mismatched_keys"], loading_info
    initial = AutoModelForCausalLM.from_pretrained(tiny_models["policy"]).state_dict()
    trained_state = trained.state_dict()
    assert trained_state.keys() == initial.keys()
    for name, tensor in trained_state.items():
        assert tensor.shape == initial[name].shape, f"{name}: saved {tuple(tensor.shape)}, policy {initial[name].shape}"
        assert torch.isfinite(tensor).all(), f"{name} holds non-finite values"
    assert any(not torch.equal(trained_state[name], initial[name]) for name in initial), "the optimizer never stepped"


@pytest.mark.slow
def test_zero3_sees_the_same_first_batch_as_zero2(deepspeed_runs):
    """Same seed and data: step 1 generates from the untouched policy, so rewards and PRM scores must agree. ZeRO-3
    gathers the sharded policy for generation (and would have to gather a sharded PRM); a wrong gather shows here."""
    first_steps = {}
    for accelerate_config in ("zero2.yaml", "zero3.yaml"):
        output_dir = finished_run(deepspeed_runs, accelerate_config)
        log_history = json.loads((output_dir / f"checkpoint-{TRAIN_STEPS}" / "trainer_state.json").read_text())
        first_steps[accelerate_config] = next(entry for entry in log_history["log_history"] if entry.get("step") == 1)
    zero2, zero3 = first_steps["zero2.yaml"], first_steps["zero3.yaml"]
    compared = ("reward", "num_tokens", "verigate/gate_rate", "verigate/prm_completions_scored", *LOGGED_WHEN_PRM_RAN)
    for metric in compared:
        assert metric in zero2 and metric in zero3, f"{metric} missing from step 1"
        assert zero3[metric] == pytest.approx(zero2[metric], rel=1e-4), metric


@pytest.mark.slow
def test_zero3_ranks_with_different_prm_work_stay_in_step(tiny_models, tmp_path):
    """Only one rank has gated completions; the sharded PRM's forward passes must still match across ranks."""
    tiny_dir = str(Path(tiny_models["policy"]).parent)
    command = [
        *(sys.executable, "-m", "accelerate.commands.launch"),
        *("--config_file", str(REPO_ROOT / "recipes" / "accelerate" / "zero3.yaml")),
        *("--num_processes", str(NUM_PROCESSES), "--mixed_precision", "no"),
        *("--main_process_port", str(free_port())),
        *(str(REPO_ROOT / "tests" / "scripts" / "verigate_uneven_prm_work.py"), tiny_dir, str(tmp_path / "output")),
    ]
    result = subprocess.run(
        command, cwd=REPO_ROOT, env=launch_env(tmp_path), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-6000:]
    logs = json.loads((tmp_path / "output" / "verigate_logs.json").read_text())
    assert [entry["verigate/gate_rate"] for entry in logs] == [0.5, 0.5]
    # One group of 4 completions gated per step; the padding requests of the other rank are not counted.
    assert [entry["verigate/prm_completions_scored"] for entry in logs] == [4.0, 4.0]
