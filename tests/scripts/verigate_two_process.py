"""One VeriGate generation+scoring step on each of several CPU processes; each rank writes what it saw to JSON.

Launched by tests/trainers/test_verigate_multiprocess.py as

    python -m torch.distributed.run --nproc_per_node 2 tests/scripts/verigate_two_process.py POLICY_DIR OUT_DIR

Three prompts x 2 completions over 2 processes x 3 rows: TRL's sampler hands the middle prompt's two completions to
different processes, which is the case VeriGate must get right (its group is normalized over both processes).
Completions are fixed by a rollout function and differ per row; the PRM is a deterministic function of step text.
"""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: `tests` is a package

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402

from tests.launch import rollout_of_texts  # noqa: E402
from trl_verigate.steps import completion_step_token_ids  # noqa: E402
from trl_verigate.trainers import VeriGateConfig, VeriGateGRPOTrainer  # noqa: E402

NUM_GENERATIONS = 2
ROWS_PER_PROCESS = 3
PROMPTS = ["Hard problem one.", "Hard problem two.", "Easy problem three."]
RANK = int(os.environ.get("RANK", "0"))


def rollout(prompts, trainer):
    """Row k of this rank gets 1-3 steps whose text names the rank and row, so every completion differs."""
    completions = [
        "\n\n".join(f"Step {step} of rank {RANK} row {row}." for step in range(1 + (RANK * 3 + row) % 3))
        for row in range(len(prompts))
    ]
    return rollout_of_texts(trainer.processing_class, prompts, completions)


class Recorder:
    """Remembers the verifier rewards and PRM scores this rank computed."""

    def __init__(self):
        self.rewards = []
        self.prm_calls = []

    def verifier(self, prompts, completions, **kwargs):
        rewards = [float(len(c)) if p.startswith("Easy") else 0.0 for p, c in zip(prompts, completions, strict=True)]
        self.rewards.extend(rewards)
        return rewards

    def score(self, prompts, steps):
        scores = [[1.0 / (1.0 + len(step.strip())) + 0.1 * index for index, step in enumerate(row)] for row in steps]
        self.prm_calls.append({"prompts": list(prompts), "steps": [list(row) for row in steps], "scores": scores})
        return scores


def main(policy: str, out_dir: str) -> None:
    recorder = Recorder()
    args = VeriGateConfig(
        output_dir=str(Path(out_dir) / "trainer"),
        per_device_train_batch_size=ROWS_PER_PROCESS,
        num_generations=NUM_GENERATIONS,
        max_completion_length=32,
        beta=0.0,
        report_to="none",
        use_cpu=True,
        ddp_backend="gloo",
        bf16=False,
        seed=0,
        shuffle_dataset=False,  # sampler order = PROMPTS, so the middle (hard) prompt is split
        save_strategy="no",
        max_steps=1,
    )
    trainer = VeriGateGRPOTrainer(
        model=policy,
        reward_funcs=recorder.verifier,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
        rollout_func=rollout,
        process_reward_model=recorder,
    )
    assert trainer.accelerator.num_processes == 2, "expected 2 processes; launch with torchrun --nproc_per_node 2"
    trainer.model.train()
    local_batch = next(iter(trainer.get_train_dataloader()))
    output = trainer._generate_and_score_completions(local_batch)
    _, step_ids = completion_step_token_ids(
        trainer.processing_class, output["completion_ids"], output["completion_mask"]
    )
    advantages = output["advantages"]
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1) * output["completion_mask"]
    record = {
        "rank": trainer.accelerator.process_index,
        "prompts": [example["prompt"] for example in local_batch],
        "rewards": recorder.rewards,
        "prm_calls": recorder.prm_calls,
        "advantages": advantages.tolist(),
        "completion_mask": output["completion_mask"].tolist(),
        "step_ids": step_ids.tolist(),
        "metrics": {name: values for name, values in trainer._metrics["train"].items() if name.startswith("verigate/")},
    }
    path = Path(out_dir) / f"rank{trainer.accelerator.process_index}.json"
    path.write_text(json.dumps(record))
    torch.distributed.barrier()


if __name__ == "__main__":
    main(*sys.argv[1:3])
