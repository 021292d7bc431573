"""One ProcessVerifiedGRPOTrainer generation+scoring step on each of 2 CPU processes; each rank writes what it saw.

Launched by tests/trainers/test_lean_process_multiprocess.py as

    python -m torch.distributed.run --nproc_per_node 2 tests/scripts/lean_process_two_process.py POLICY OUT_DIR

Three statements x 2 completions over 2 processes x 3 rows: TRL's sampler hands one statement's two completions to
different processes, so its group mean of g must be taken over both. Completion k of a group is PROOFS[k]: k = 0
passes, k = 1 fails at its second tactic (the stand-in REPL is scripted to answer an error there). Each rank runs
its own LeanServer on the stand-in REPL.
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

from tests.fake_repl import stand_in_config  # noqa: E402
from tests.launch import rollout_of_texts  # noqa: E402
from trl_verigate.lean_server import LeanServer  # noqa: E402
from trl_verigate.trainers import ProcessVerifiedConfig, ProcessVerifiedGRPOTrainer  # noqa: E402

NUM_GENERATIONS = 2
ROWS_PER_PROCESS = 3
RANK = int(os.environ.get("RANK", "0"))
STATEMENTS = [f"theorem le_succ_{k} (n : ℕ) (h : {k} ≤ n) : n ≤ n + {k} := by" for k in range(3)]
PROOFS = ["\n  norm_num\n  omega\n```", "\n  norm_num\n  linarith [fail_marker]\n  simp\n```"]
# The header's imports only, so no preamble comes before the statement in the REPL's command.
IMPORTS_ONLY = "import Mathlib\nimport Aesop"
# REPL coordinates: line 1 is the statement, the proof follows after "\n", so `linarith` sits on line 4, column 2.
SCRIPT = [
    {
        "match": "fail_marker",
        "response": {
            "env": 0,
            "messages": [
                {"severity": "error", "pos": {"line": 4, "column": 2}, "endPos": None, "data": "linarith failed"}
            ],
        },
    }
]


def rollout(prompts, trainer):
    # Global row 3 * RANK + row is completion (3 * RANK + row) % 2 of its group (groups are consecutive rows).
    texts = [PROOFS[(ROWS_PER_PROCESS * RANK + row) % NUM_GENERATIONS] for row in range(len(prompts))]
    return rollout_of_texts(trainer.processing_class, prompts, texts)


def main(policy: str, out_dir: str) -> None:
    folder = Path(out_dir) / f"lean{RANK}"
    folder.mkdir(parents=True, exist_ok=True)
    dataset = Dataset.from_dict(
        {"prompt": [f"Prove:\n{s}" for s in STATEMENTS], "formal_statement": STATEMENTS, "header": [""] * 3}
    )
    args = ProcessVerifiedConfig(
        output_dir=str(Path(out_dir) / "output"),
        per_device_train_batch_size=ROWS_PER_PROCESS,
        num_generations=NUM_GENERATIONS,
        max_completion_length=48,
        beta=0.0,
        report_to="none",
        use_cpu=True,
        ddp_backend="gloo",
        bf16=False,
        shuffle_dataset=False,  # sampler order = STATEMENTS, so the middle statement's group is split
        seed=0,
        save_strategy="no",
        max_steps=1,
    )
    with LeanServer(stand_in_config(folder, script=SCRIPT, workers=1, header=IMPORTS_ONLY)) as server:
        trainer = ProcessVerifiedGRPOTrainer(
            model=policy, args=args, train_dataset=dataset, rollout_func=rollout, verifier=server
        )
        assert trainer.accelerator.num_processes == 2, "launch with torchrun --nproc_per_node 2"
        trainer.model.train()
        inputs = next(iter(trainer.get_train_dataloader()))
        output = trainer._generate_and_score_completions(inputs)
    record = {
        "rank": RANK,
        "statements": [row["formal_statement"] for row in inputs],
        "completions": [PROOFS[(ROWS_PER_PROCESS * RANK + row) % NUM_GENERATIONS] for row in range(len(inputs))],
        "advantages": output["advantages"].tolist(),
        "completion_mask": output["completion_mask"].tolist(),
        "metrics": {name: values[-1] for name, values in trainer._metrics["train"].items() if name.startswith("lean/")},
    }
    (Path(out_dir) / f"rank{RANK}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
