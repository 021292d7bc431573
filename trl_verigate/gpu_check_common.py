"""What the gpu-check tasks share: a table row, the vLLM stand-in for rehearsals, device settings and data built
in code (the check needs nothing from the repository)."""

from __future__ import annotations

import sys
from pathlib import Path


def row(check: str, passed: bool | None, figures: str, **data) -> dict:
    """One line of the table; `data` keeps the figures as numbers for whoever reads the JSON."""
    status = "SKIP" if passed is None else "PASS" if passed else "FAIL"
    return {"check": check, "status": status, "figures": figures, "data": data}


def install_fake_vllm(args) -> None:
    """With --fake-vllm (CPU rehearsals in a checkout): TRL's vLLM paths run against tests/fake_vllm.py."""
    if not args.fake_vllm:
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout, where `tests` is a package
    from tests import fake_vllm

    fake_vllm.patch_vllm(setattr, lambda mapping, key, value: mapping.__setitem__(key, value))


def training_device_settings(args) -> dict:
    """TrainingArguments for this device: bf16 autocast on a GPU, plain fp32 on the CPU."""
    return {"use_cpu": True, "bf16": False} if args.device == "cpu" else {"bf16": True}


def length_reward(completions, **kwargs):
    return [min(len(text), 200) / 200 for text in completions]


def math_rows(count: int) -> list[dict]:
    """`count` arithmetic word problems with their answers, the `evaluate math` format."""
    return [
        {"problem": f"Ann has {a} apples and buys {b} more. How many apples does she have now?", "answer": str(a + b)}
        for a, b in ((3 + 7 * index, 2 + 5 * index) for index in range(count))
    ]


def math_dataset(count: int):
    """`math_rows` as conversational GRPO prompts with a `solution` column (what `accuracy_reward` reads)."""
    from datasets import Dataset

    system = "Solve the problem step by step, separating steps with a blank line, and put the answer in \\boxed{}."
    return Dataset.from_list(
        [
            {
                "prompt": [{"role": "system", "content": system}, {"role": "user", "content": r["problem"]}],
                "solution": f"{r['answer']} apples. The answer is \\boxed{{{r['answer']}}}.",
            }
            for r in math_rows(count)
        ]
    )
