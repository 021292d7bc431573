"""Which tokens get which advantage: each trainer scores a hand-made batch of known right and wrong steps.

The policy's generation is replaced by fixed completions, so the advantages the trainers compute (their real
`_generate_and_score_completions`, rewards, oracle and scorer included) can be read against hand-derived values:
a sign error or a credit placed on the wrong token shows up here, where the training curves could only look flat.

    python -m experiments.toy_arithmetic.credit_check POLICY_DIR

Two groups of G = 4 on ``Compute: 2+3-1+4`` (answer 8): group 0 holds one right completion, group 1 none (all-zero,
GRPO's advantages vanish there).
"""

from __future__ import annotations

import argparse
import json

import torch

from experiments.toy_arithmetic.task import Problem

PROBLEM = Problem((2, 3, 1, 4), ("+", "-", "+"))
COMPLETIONS = {
    "right": "2+3-1+4=5-1+4\n5-1+4=4+4\n4+4=8\n\\boxed{8}",
    "wrong_step_2": "2+3-1+4=5-1+4\n5-1+4=3+4\n3+4=7\n\\boxed{7}",  # steps 1 and 3 right, step 2 wrong
    "wrong_step_1": "2+3-1+4=6-1+4\n6-1+4=5+4\n5+4=9\n\\boxed{9}",  # only the first step wrong
    "wrong_answer": "2+3-1+4=5-1+4\n5-1+4=4+4\n4+4=8\n\\boxed{9}",  # every step right, the answer not
}
GROUPS = (
    ("right", "wrong_step_2", "wrong_step_1", "wrong_answer"),
    ("wrong_answer", "wrong_step_2", "wrong_step_1", "wrong_step_2"),
)
NUM_GENERATIONS = 4


def _fixed_generate(tokenizer, texts: list[str]):
    """A stand-in for ``model.generate`` returning the prompt followed by ``texts`` (EOS-terminated, EOS-padded)."""
    completions = [tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for text in texts]
    width = max(len(ids) for ids in completions)
    padded = torch.tensor([ids + [tokenizer.eos_token_id] * (width - len(ids)) for ids in completions])

    def generate(input_ids, **_):
        if input_ids.shape[0] != padded.shape[0]:
            raise ValueError(
                f"the hand-made batch has {padded.shape[0]} completions, generate got {input_ids.shape[0]}"
            )
        return torch.cat([input_ids, padded.to(input_ids.device)], dim=1)

    return generate


def hand_made_advantages(method: str, policy: str, output_dir: str) -> list[dict]:
    """Per completion of the hand-made batch: its name, outcome group, and each line's tokens with the advantage
    every token of it gets from ``method``'s trainer (the advantages its loss would use)."""
    from datasets import Dataset

    from experiments.toy_arithmetic.methods import Budget, build_trainer, token_advantages

    budget = Budget(NUM_GENERATIONS, len(GROUPS), NUM_GENERATIONS * len(GROUPS), 64, 1e-4, 2, 1, 1)
    dataset = Dataset.from_list([PROBLEM.row()])
    trainer = build_trainer(method, policy, dataset, output_dir, 0, budget)
    names = [name for group in GROUPS for name in group]
    trainer.model.generate = _fixed_generate(trainer.processing_class, [COMPLETIONS[n] for n in names])
    trainer.model.train()
    output = trainer._generate_and_score_completions([PROBLEM.row() for _ in names])
    mask = output["completion_mask"].bool()
    advantages = token_advantages(output)
    tokenizer = trainer.processing_class
    rows = []
    for index, name in enumerate(names):
        ids = output["completion_ids"][index][mask[index]].tolist()
        values = advantages[index][mask[index]].tolist()
        lines, current = [], []
        for token_id, value in zip(ids, values, strict=True):
            text = tokenizer.decode([token_id])
            current.append((text, round(value, 4)))
            if "\n" in text or token_id == tokenizer.eos_token_id:
                lines.append(current)
                current = []
        if current:
            lines.append(current)
        rows.append({"name": name, "group": index // NUM_GENERATIONS, "lines": lines})
    close = getattr(trainer, "close_verifier", None)
    if close:
        close()
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", help="a policy directory (the warm start, or any tiny policy: weights do not matter)")
    parser.add_argument("--output", default="outputs/experiments/toy_arithmetic/credit_check")
    args = parser.parse_args(argv)
    for method in ("grpo", "verigate", "process", "process_noprop", "process_coef0"):
        print(f"== {method}")
        for row in hand_made_advantages(method, args.policy, f"{args.output}/{method}"):
            print(f"group {row['group']} {row['name']}:")
            for line in row["lines"]:
                print("   ", json.dumps(line))


if __name__ == "__main__":
    main()
