"""One VeriGate run in which the ranks do different PRM work: launched by tests/recipes/test_recipe_deepspeed.py.

Two prompts x 4 completions per step, one group per rank (no shuffling): the "Beta" group is separated by the reward,
the "Alpha" group is all 0 and so gated. Only one rank then has completions for the PRM. Under ZeRO-3 every PRM
forward pass gathers the PRM's sharded weights from all ranks, so the ranks must still run the same passes.

    accelerate launch --config_file recipes/accelerate/zero3.yaml --num_processes 2 ... \
        tests/scripts/verigate_uneven_prm_work.py TINY_DIR OUTPUT_DIR
"""

import json
import sys
from pathlib import Path

from datasets import Dataset

from trl_verigate import VeriGateConfig, VeriGateGRPOTrainer


def beta_separated_reward(completions, prompts, **kwargs):
    return [1.0 if prompt.startswith("Beta") and index % 2 == 0 else 0.0 for index, prompt in enumerate(prompts)]


def main(tiny_dir: str, output_dir: str):
    args = VeriGateConfig(
        output_dir=output_dir,
        num_generations=4,
        per_device_train_batch_size=4,
        max_completion_length=16,
        max_steps=2,
        report_to="none",
        logging_steps=1,
        prm_type="qwen_math",
        prm_model_name_or_path=f"{tiny_dir}/prm_qwen_math",
        prm_batch_size=2,
        bf16=False,
        ddp_backend="gloo",
        save_strategy="no",
        shuffle_dataset=False,
        seed=0,
    )
    dataset = Dataset.from_list([{"prompt": prompt} for prompt in ["Alpha question", "Beta question"] * 8])
    trainer = VeriGateGRPOTrainer(
        model=f"{tiny_dir}/policy", reward_funcs=[beta_separated_reward], args=args, train_dataset=dataset
    )
    trainer.train()
    if trainer.accelerator.is_main_process:
        logs = [{k: v for k, v in entry.items() if k.startswith("verigate/")} for entry in trainer.state.log_history]
        Path(output_dir, "verigate_logs.json").write_text(json.dumps([entry for entry in logs if entry]))


if __name__ == "__main__":
    main(*sys.argv[1:3])
