"""A short ES run on however many CPU processes it is launched with; each rank writes its weights and what it did.

    python -m torch.distributed.run --nproc_per_node 2 tests/scripts/es_two_process.py POLICY_DIR OUT_DIR
    python tests/scripts/es_two_process.py POLICY_DIR OUT_DIR          # the 1-process reference

ES_POPULATION (default 4) and ES_ANTITHETIC (default true) set the population.

Writes OUT_DIR/rank{r}.safetensors (the policy's weights after the run) and OUT_DIR/rank{r}.json (the history and
how many members this rank generated for).
"""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from datasets import Dataset  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

from trl_verigate.trainers.es import ESConfig, ESTrainer  # noqa: E402

ITERATIONS = 2


def letter_reward(completions, **kwargs):
    return [text.count("e") / max(len(text), 1) for text in completions]


def main(policy: str, out_dir: str) -> None:
    out = Path(out_dir)
    args = ESConfig(
        output_dir=str(out / "trainer"),
        use_cpu=True,
        ddp_backend="gloo" if int(os.environ.get("WORLD_SIZE", "1")) > 1 else None,
        seed=0,
        population_size=int(os.environ.get("ES_POPULATION", "4")),
        antithetic=os.environ.get("ES_ANTITHETIC", "true") == "true",
        prompts_per_iteration=2,
        num_generations=2,
        max_completion_length=8,
        max_steps=ITERATIONS,
        sigma=0.05,
        learning_rate=0.05,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
    )
    dataset = Dataset.from_list([{"prompt": f"Write about {topic}:"} for topic in ("cats", "dogs", "trees", "the sea")])
    trainer = ESTrainer(model=policy, reward_funcs=[letter_reward], args=args, train_dataset=dataset)
    generate = trainer._generate
    generated_prompts = []

    def counting_generate(prompts):
        generated_prompts.append([str(prompt) for prompt in prompts])
        return generate(prompts)

    trainer._generate = counting_generate
    trainer.train()
    rank = trainer.accelerator.process_index
    weights = {name: param.detach().contiguous() for name, param in trainer.model.named_parameters()}
    save_file(weights, str(out / f"rank{rank}.safetensors"))
    record = {
        "rank": rank,
        "num_processes": trainer.accelerator.num_processes,
        "history": trainer.es_history,
        "generated_prompts": generated_prompts,
    }
    (out / f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
