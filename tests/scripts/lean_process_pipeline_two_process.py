"""Three pipelined ProcessVerifiedGRPOTrainer steps (`pipelined_verification`) on each of 2 CPU processes; each rank
writes which generation call each step trained on, whether it carried old log-probs, and the logged staleness.

Launched by tests/trainers/test_lean_process_pipeline.py as

    python -m torch.distributed.run --nproc_per_node 2 tests/scripts/lean_process_pipeline_two_process.py POLICY OUT

Every rank must run the same sequence of generations, log-prob passes and gathers; a mismatch hangs or fails here.
"""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: `tests` is a package

from datasets import Dataset  # noqa: E402

from tests.launch import rollout_of_texts  # noqa: E402
from trl_verigate.rewards.process import ProcessVerdict  # noqa: E402
from trl_verigate.trainers import ProcessVerifiedConfig, ProcessVerifiedGRPOTrainer  # noqa: E402

RANK = int(os.environ.get("RANK", "0"))
NUM_GENERATIONS = 2
PROMPTS = ["Prove: a + b = b + a", "Prove: a * b = b * a"]


class OkOracle:
    def verify(self, prompts, rows, completions):
        return [ProcessVerdict("passed" if "ok" in c else "failed") for c in completions]


def main(policy: str, out_dir: str) -> None:
    calls = []  # global step of each generation call on this rank
    trained = []  # (global step, generation calls seen in the rows, carries old log-probs) per loss call

    def rollout(prompts, trainer):
        calls.append(trainer.state.global_step)
        texts = [f"call {len(calls)} {'ok' if row % 2 == 0 else 'no'}" for row in range(len(prompts))]
        return rollout_of_texts(trainer.processing_class, prompts, texts)

    args = ProcessVerifiedConfig(
        output_dir=str(Path(out_dir) / "output"),
        per_device_train_batch_size=NUM_GENERATIONS,
        num_generations=NUM_GENERATIONS,
        max_completion_length=16,
        learning_rate=0.05,
        beta=0.0,
        report_to="none",
        use_cpu=True,
        ddp_backend="gloo",
        bf16=False,
        seed=0,
        save_strategy="no",
        logging_steps=1,
        max_steps=3,
        pipelined_verification=True,
    )
    trainer = ProcessVerifiedGRPOTrainer(
        model=policy,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS, "formal_statement": PROMPTS}),
        rollout_func=rollout,
        process_oracle=OkOracle(),
    )
    assert trainer.accelerator.num_processes == 2, "launch with torchrun --nproc_per_node 2"
    compute = trainer._compute_loss

    def recorded(model, inputs):
        texts = trainer.processing_class.batch_decode(inputs["completion_ids"], skip_special_tokens=True)
        seen = sorted({int(text.split()[1]) for text in texts})
        trained.append((trainer.state.global_step, seen, "old_per_token_logps" in inputs))
        return compute(model, inputs)

    trainer._compute_loss = recorded
    trainer.train()
    staleness = [entry["pipeline/staleness"] for entry in trainer.state.log_history if "pipeline/staleness" in entry]
    record = {"rank": RANK, "calls": calls, "trained": trained, "staleness": staleness}
    (Path(out_dir) / f"rank{RANK}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
