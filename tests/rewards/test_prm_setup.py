"""Where VeriGate's PRM goes on each process, the PRM checkpoint check before the policy loads.

Devices are resolved with fake local ranks and world sizes: torch builds `cuda:N` device objects without a GPU.
"""

import logging

import huggingface_hub.constants
import pytest
import torch
from datasets import Dataset

from trl_verigate.rewards.prm_setup import check_prm_checkpoint, launch_training_device, prm_device_for_process
from trl_verigate.trainers import VeriGateConfig, VeriGateGRPOTrainer


def device_on(prm_device, local_rank, num_processes, local_device=None, zero3=False):
    return prm_device_for_process(
        prm_device,
        local_process_index=local_rank,
        num_processes=num_processes,
        local_device=local_device if local_device is not None else f"cuda:{local_rank}",
        zero3=zero3,
    )


def test_unset_prm_device_is_each_process_training_device():
    assert [device_on(None, rank, 4) for rank in range(4)] == [torch.device(f"cuda:{rank}") for rank in range(4)]


def test_offset_is_added_to_the_local_gpu_index():
    # 4 processes per node on 8 GPUs: local rank r trains on GPU r and scores on GPU r + 4.
    devices = [device_on("cuda:+4", rank, 8) for rank in range(4)]
    assert devices == [torch.device("cuda:4"), torch.device("cuda:5"), torch.device("cuda:6"), torch.device("cuda:7")]
    assert device_on("cuda", 3, 4) == torch.device("cuda:3")


@pytest.mark.parametrize("prm_device", ["cuda:4, cuda:5,cuda:6,cuda:7", ["cuda:4", "cuda:5", "cuda:6", "cuda:7"]])
def test_a_list_gives_each_local_rank_its_entry(prm_device):
    assert device_on(prm_device, 2, 8) == torch.device("cuda:6")


def test_a_list_shorter_than_the_local_ranks_is_refused():
    with pytest.raises(ValueError, match="prm_device=.*lists 2 devices.*local rank 2"):
        device_on("cuda:4,cuda:5", 2, 4)


def test_an_absolute_gpu_is_refused_with_several_processes_and_says_what_to_write():
    with pytest.raises(ValueError, match=r"prm_device='cuda:1' names one device for all 2 processes.*'cuda:\+K'"):
        device_on("cuda:1", 0, 2)
    assert device_on("cuda:1", 0, 1) == torch.device("cuda:1")
    assert device_on("cpu", 1, 2) == torch.device("cpu")


def test_an_offset_needs_a_gpu_training_device():
    with pytest.raises(ValueError, match=r"prm_device='cuda:\+1' is relative to this process's cuda device.*cpu"):
        device_on("cuda:+1", 0, 1, local_device="cpu")


def test_zero3_keeps_the_prm_on_the_engine_device(caplog):
    with caplog.at_level(logging.WARNING, logger="trl_verigate.rewards.prm_setup"):
        assert device_on("cuda:+1", 1, 2, zero3=True) == torch.device("cuda:1")
    assert "ignored under DeepSpeed ZeRO-3" in caplog.text


def test_config_refuses_an_absolute_gpu_under_a_multi_process_launch(tmp_path, monkeypatch):
    # As torchrun/accelerate launch set them; the check runs before TrainingArguments sets up the process group.
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(ValueError, match="prm_device='cuda:1' names one device for all 2 processes"):
        VeriGateConfig(output_dir=str(tmp_path), use_cpu=True, prm_device="cuda:1")
    with pytest.raises(ValueError, match=r"prm_device='cuda:\+1' is relative .* trains on cpu"):
        VeriGateConfig(output_dir=str(tmp_path), use_cpu=True, prm_device="cuda:+1")


@pytest.mark.parametrize(
    ("accelerator", "use_cpu", "expected"),
    [
        ("xpu", False, "xpu:3"),
        ("cuda", False, "cuda:3"),
        ("mps", False, "mps"),
        ("cuda", True, "cpu"),
        (None, False, "cpu"),
    ],
)
def test_the_launch_training_device_is_the_local_rank_on_the_machines_accelerator(
    monkeypatch, accelerator, use_cpu, expected
):
    def current_accelerator(check_available=False):
        assert check_available  # built in but without a device is no accelerator
        return torch.device(accelerator) if accelerator else None

    monkeypatch.setattr(torch.accelerator, "current_accelerator", current_accelerator)
    assert launch_training_device(use_cpu, 3) == torch.device(expected)


def test_every_rank_refuses_a_list_shorter_than_the_local_ranks(tmp_path, monkeypatch):
    # Local rank 0 of 4 has an entry of its own, yet refuses the list as ranks 2 and 3 do, instead of waiting for them.
    config = VeriGateConfig(output_dir=str(tmp_path), use_cpu=True)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "0")
    config.prm_device = "cpu,cpu"
    with pytest.raises(ValueError, match=r"prm_device='cpu,cpu' lists 2 devices, one per local rank, but there is a "):
        config._check_prm_device()
    config.prm_device = "cpu,cpu,cpu,cpu"
    config._check_prm_device()


def test_config_reads_an_offset_on_an_xpu_machine(tmp_path, monkeypatch):
    # The config checks prm_device against the device accelerate will give each rank, not only against CUDA.
    import trl_verigate.trainers.verigate.verigate_config as verigate_config

    config = VeriGateConfig(output_dir=str(tmp_path), use_cpu=True)
    # A launch of 2 processes, seen from local rank 1; checked alone (the full config would set up the process group).
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(verigate_config, "launch_training_device", lambda use_cpu, local_rank: torch.device("xpu", 1))
    config.prm_device = "xpu:+2"
    config._check_prm_device()
    config.prm_device = "xpu:3"
    with pytest.raises(ValueError, match="prm_device='xpu:3' names one device for all 2 processes"):
        config._check_prm_device()


# --- the PRM checkpoint, checked before the policy loads


def write_cached_snapshot(cache_dir, repo_id: str) -> None:
    """The hub cache layout huggingface_hub reads: refs/main names a snapshot folder holding the files."""
    repo_dir = cache_dir / f"models--{repo_id.replace('/', '--')}"
    (repo_dir / "refs").mkdir(parents=True)
    (repo_dir / "refs" / "main").write_text("0123abcd")
    snapshot = repo_dir / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")


@pytest.fixture
def offline_cache(tmp_path, monkeypatch):
    cache_dir = tmp_path / "hub"
    cache_dir.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache_dir))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return cache_dir


def test_an_existing_folder_passes(tiny_models):
    check_prm_checkpoint(tiny_models["prm_qwen_math"])


@pytest.mark.parametrize("value", ["./checkpoints/my-prm", "/no/such/prm", "runs/2026/prm-final"])
def test_a_missing_folder_is_named(value, offline_cache):
    with pytest.raises(ValueError, match=f"prm_model_name_or_path='{value}' is not an existing folder"):
        check_prm_checkpoint(value)


def test_a_folder_without_config_json_is_not_a_checkpoint(tmp_path):
    # A run's output folder before its first save, or the parent of the checkpoint folder.
    (tmp_path / "checkpoint-500").mkdir()
    with pytest.raises(ValueError, match=r"prm_model_name_or_path='.*' is a folder without config\.json"):
        check_prm_checkpoint(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    check_prm_checkpoint(str(tmp_path))


def test_a_file_is_not_a_checkpoint(tmp_path):
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"")
    with pytest.raises(ValueError, match="is a file, not a checkpoint folder"):
        check_prm_checkpoint(str(weights))


def test_a_hub_id_must_be_cached_when_offline(offline_cache):
    with pytest.raises(ValueError, match="prm_model_name_or_path='org/some-prm' is no local folder.*not in the cache"):
        check_prm_checkpoint("org/some-prm")
    write_cached_snapshot(offline_cache, "org/some-prm")
    check_prm_checkpoint("org/some-prm")


def test_an_uncached_hub_id_passes_online(offline_cache, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    check_prm_checkpoint("org/some-prm")


@pytest.mark.parametrize("prm_type", ["math_shepherd", "token_classification"])
def test_the_default_qwen_prm_is_refused_for_another_prm_type(prm_type, offline_cache, monkeypatch):
    # Online and even cached, the released Qwen PRM cannot be read as another format: refused before any download.
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    write_cached_snapshot(offline_cache, "Qwen/Qwen2.5-Math-PRM-7B")
    with pytest.raises(
        ValueError,
        match=rf"prm_model_name_or_path='Qwen/Qwen2.5-Math-PRM-7B' is a qwen_math PRM, which prm_type='{prm_type}' "
        rf"cannot read: set prm_model_name_or_path to a {prm_type} checkpoint",
    ):
        check_prm_checkpoint("Qwen/Qwen2.5-Math-PRM-7B", prm_type)
    check_prm_checkpoint("Qwen/Qwen2.5-Math-PRM-7B", "qwen_math")
    check_prm_checkpoint("Qwen/Qwen2.5-Math-PRM-72B", "qwen_math")


def test_trainer_refuses_another_prm_type_with_the_default_path_before_loading_the_policy(tmp_path):
    args = VeriGateConfig(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", prm_type="math_shepherd")
    with pytest.raises(ValueError, match="prm_type='math_shepherd' cannot read"):
        VeriGateGRPOTrainer(
            model=str(tmp_path / "no-policy"),
            reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
            args=args,
            train_dataset=Dataset.from_dict({"prompt": ["What is 1 + 1?"]}),
        )


def test_trainer_reports_a_wrong_prm_path_before_loading_the_policy(tmp_path, offline_cache):
    args = VeriGateConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", prm_model_name_or_path="./typo/prm"
    )
    # The policy path is wrong too: the PRM's message coming first shows the policy was not loaded yet.
    with pytest.raises(ValueError, match="prm_model_name_or_path='./typo/prm'") as raised:
        VeriGateGRPOTrainer(
            model=str(tmp_path / "no-policy"),
            reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
            args=args,
            train_dataset=Dataset.from_dict({"prompt": ["What is 1 + 1?"]}),
        )
    assert raised.value.__cause__ is None and raised.value.__context__ is None


def test_a_given_process_reward_model_needs_no_checkpoint(tiny_models, tmp_path, offline_cache):
    args = VeriGateConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        report_to="none",
        per_device_train_batch_size=2,
        num_generations=2,
        prm_model_name_or_path="org/never-downloaded",
    )
    trainer = VeriGateGRPOTrainer(
        model=tiny_models["policy"],
        reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["What is 1 + 1?"]}),
        process_reward_model=lambda prompts, steps: [[0.5] * len(row) for row in steps],
    )
    assert trainer.process_reward_model is not None
