"""PEFT base weights across TRL's real vLLM weight sync (`VLLMGeneration.sync_weights`, colocate, on the vLLM
stand-in of tests/fake_vllm.py): each sync merges the moving LoRA adapters into the bf16 base and unmerges them.
Without `keep_base_exact_across_syncs` the base drifts; with it, no base weight changes, in TRL's GRPOTrainer and in
the VeriGate and process-verified GRPO trainers, which install it."""

import pytest
import torch
from datasets import Dataset
from peft import LoraConfig
from trl import GRPOConfig, GRPOTrainer

from tests import fake_vllm
from trl_verigate import ProcessVerifiedConfig, ProcessVerifiedGRPOTrainer, VeriGateConfig, VeriGateGRPOTrainer
from trl_verigate.peft_sync import FrozenBase, keep_base_exact_across_syncs, merged_into
from trl_verigate.rewards.process import ProcessVerdict

SYNCS = 200


def length_reward(completions, **kwargs):
    return [float(len(text)) for text in completions]


@pytest.fixture
def grpo_trainer(monkeypatch, tiny_models, tmp_path):
    fake_vllm.install(monkeypatch)
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=4,
        use_vllm=True,
        vllm_mode="colocate",
        model_init_kwargs={"dtype": "bfloat16"},
        report_to="none",
        save_strategy="no",
    )
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    return GRPOTrainer(
        model=tiny_models["policy"],
        reward_funcs=[length_reward],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": "Count:"}] * 2),
        peft_config=lora,
    )


def sync_with_moving_adapters(trainer, sync, syncs: int = SYNCS) -> tuple[int, int]:
    """`syncs` syncs, the adapters moved before each as an optimizer step would; (base weights changed, of all)."""
    model = trainer.model
    base = {name: param.detach().clone() for name, param in merged_into(model).items()}
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for _ in range(syncs):
            for name, param in model.named_parameters():
                if "lora_" in name:
                    param.add_(torch.randn(param.shape, generator=generator).to(param.dtype), alpha=0.05)
            sync()
    changed = sum(int((param.detach() != base[name]).sum()) for name, param in merged_into(model).items())
    return changed, sum(value.numel() for value in base.values())


def test_trls_sync_drifts_a_bf16_base_and_the_guard_keeps_it_exact(grpo_trainer):
    trainer = grpo_trainer
    generation = trainer.vllm_generation
    assert {param.dtype for param in merged_into(trainer.model).values()} == {torch.bfloat16}
    # TRL's own sync, unwrapped: the base drifts.
    drifted, total = sync_with_moving_adapters(trainer, generation.sync_weights)
    assert total > 0 and drifted > 0.01 * total, (drifted, total)
    # The drifted base is the one now protected: from here on it must not change by a single bit.
    frozen = keep_base_exact_across_syncs(trainer)
    assert isinstance(frozen, FrozenBase) and set(frozen.params) == set(merged_into(trainer.model))
    changed, _ = sync_with_moving_adapters(trainer, generation.sync_weights)
    assert changed == 0
    # The engine still received merged weights: the adapters reached vLLM.
    (llm,) = fake_vllm.LLM.instances
    engine = dict(llm.llm_engine.model_executor.driver_worker.model_runner.model.named_parameters())
    name = "model.layers.0.self_attn.q_proj.weight"
    base_value = frozen.values[f"base_model.model.{name.removesuffix('.weight')}.base_layer.weight"]
    assert not torch.equal(engine[name].detach().to(base_value.dtype), base_value)


def test_a_failed_sync_still_restores_the_base(grpo_trainer):
    trainer, model = grpo_trainer, grpo_trainer.model
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.fill_(0.5)  # merging now changes the base

    def merge_then_fail():  # a sync that stops with the adapters merged, as a lost engine would leave it
        model.merge_adapter()
        raise RuntimeError("engine gone")

    trainer.vllm_generation.sync_weights = merge_then_fail
    frozen = keep_base_exact_across_syncs(trainer)
    with pytest.raises(RuntimeError, match="engine gone"):
        trainer.vllm_generation.sync_weights()
    assert all(torch.equal(param, frozen.values[name]) for name, param in merged_into(model).items())


def test_nothing_is_installed_without_peft_or_without_vllm(monkeypatch, tiny_models, tmp_path):
    fake_vllm.install(monkeypatch)
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), use_cpu=True, per_device_train_batch_size=2, num_generations=2,
        max_completion_length=4, use_vllm=True, vllm_mode="colocate", report_to="none", save_strategy="no",
    )  # fmt: skip
    dataset = Dataset.from_list([{"prompt": "Count:"}] * 2)
    plain = GRPOTrainer(model=tiny_models["policy"], reward_funcs=[length_reward], args=args, train_dataset=dataset)
    sync = plain.vllm_generation.sync_weights
    assert keep_base_exact_across_syncs(plain) is None and plain.vllm_generation.sync_weights == sync
    args.use_vllm = False
    lora = LoraConfig(r=4, target_modules=["q_proj"], task_type="CAUSAL_LM")
    hf = GRPOTrainer(
        model=tiny_models["policy"], reward_funcs=[length_reward], args=args, train_dataset=dataset, peft_config=lora
    )
    assert keep_base_exact_across_syncs(hf) is None


class PassEveryProof:
    """A process oracle standing in for the prover (no sync path reaches it)."""

    def verify(self, prompts, rows, completions):
        return [ProcessVerdict("passed") for _ in completions]


def trl_verigate_trainer(kind: str, tiny_models, tmp_path):
    common = dict(
        output_dir=str(tmp_path / kind), use_cpu=True, per_device_train_batch_size=2, num_generations=2,
        max_completion_length=4, use_vllm=True, vllm_mode="colocate", model_init_kwargs={"dtype": "bfloat16"},
        report_to="none", save_strategy="no",
    )  # fmt: skip
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    dataset = Dataset.from_list([{"prompt": "theorem t : 1 + 1 = 2 := by", "formal_statement": "1 + 1 = 2"}] * 2)
    if kind == "verigate":
        return VeriGateGRPOTrainer(model=tiny_models["policy"], reward_funcs=[length_reward], args=VeriGateConfig(
            gate="none", **common), train_dataset=dataset, peft_config=lora)  # fmt: skip
    return ProcessVerifiedGRPOTrainer(model=tiny_models["policy"], args=ProcessVerifiedConfig(**common),
                                      train_dataset=dataset, peft_config=lora, process_oracle=PassEveryProof())  # fmt: skip


@pytest.mark.parametrize("kind", ["verigate", "process_verified"])
def test_the_grpo_trainers_keep_the_base_exact_across_trls_syncs(kind, monkeypatch, tiny_models, tmp_path):
    fake_vllm.install(monkeypatch)
    trainer = trl_verigate_trainer(kind, tiny_models, tmp_path)
    generation = trainer.vllm_generation
    changed, total = sync_with_moving_adapters(trainer, generation.sync_weights)
    assert total > 0 and changed == 0
    # The same trainer through TRL's method itself, past the restore: the base drifts.
    drifted, _ = sync_with_moving_adapters(trainer, lambda: type(generation).sync_weights(generation))
    assert drifted > 0.01 * total
