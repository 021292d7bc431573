"""ES with colocate vLLM at vllm_tensor_parallel_size 2 on two gloo processes (one TP group), over the vLLM stand-in
of tests/fake_vllm.py, whose engine runs on the two processes' shards put together.

    python -m torch.distributed.run --nproc_per_node 2 tests/scripts/es_vllm_tensor_parallel.py POLICY_DIR OUT_DIR

Writes OUT_DIR/rank{r}.json: for each engine generation, the index of the member whose weights the assembled engine
held bit for bit (null for none, e.g. a mix of two members' shards), the ES history, and how many completions this
process generated per member.
"""

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: `tests` is a package

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402

from tests import fake_vllm  # noqa: E402
from trl_verigate.es import es_noise, population_seeds  # noqa: E402
from trl_verigate.trainers.es import ESConfig, ESTrainer  # noqa: E402

SIGMA = 0.05


def letter_reward(completions, **kwargs):
    return [text.count("e") / max(len(text), 1) for text in completions]


def main(policy: str, out_dir: str) -> None:
    fake_vllm.patch_vllm(setattr, lambda mapping, key, value: mapping.__setitem__(key, value))
    args = ESConfig(
        output_dir=str(Path(out_dir) / "trainer"),
        use_cpu=True,
        ddp_backend="gloo",
        seed=0,
        population_size=4,
        prompts_per_iteration=2,
        num_generations=2,
        max_completion_length=6,
        max_steps=1,
        sigma=SIGMA,
        learning_rate=0.05,
        report_to="none",
        save_strategy="no",
        use_vllm=True,
        vllm_mode="colocate",
        vllm_tensor_parallel_size=2,
    )
    dataset = Dataset.from_list([{"prompt": f"Write about {topic}:"} for topic in ("cats", "dogs", "trees", "the sea")])
    trainer = ESTrainer(model=policy, reward_funcs=[letter_reward], args=args, train_dataset=dataset)
    base = {name: param.detach().clone() for name, param in trainer.model.named_parameters()}
    completions_per_generation = []
    generate = trainer._generate

    def counting_generate(prompts):
        result = generate(prompts)
        completions_per_generation.append(len(result[1]))
        return result

    trainer._generate = counting_generate
    trainer.train()
    (llm,) = fake_vllm.LLM.instances
    members = population_seeds(0, 0, 4, True)
    held = []
    for assembled in llm.engine.assembled:
        match = None
        for index, (seed, sign) in enumerate(members):
            if all(
                torch.equal(
                    assembled[name], base[name] + torch.tensor(SIGMA * sign) * es_noise(seed, name, value.shape)
                )
                for name, value in base.items()
            ):
                match = index
        held.append(match)
    rank = trainer.accelerator.process_index
    record = {"held": held, "history": trainer.es_history, "completions_per_generation": completions_per_generation}
    (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
