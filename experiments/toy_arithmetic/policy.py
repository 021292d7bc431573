"""The tiny policy, its supervised warm start, and its generation.

The model is the tiny family of `trl_verigate.tiny` (a Qwen2ForCausalLM with its ~1k-token byte-level BPE that
splits every digit, built by the same helpers), only wider and deeper so it can learn the format. The warm start is
TRL's `SFTTrainer` on problems of 1-3 operations with their reference completions (prompt-completion rows: loss on
the completion only, EOS appended by TRL), checkpointed so that one checkpoint can be picked as the warm start.
"""

from __future__ import annotations

from pathlib import Path

import torch
from datasets import Dataset
from trl import SFTConfig, SFTTrainer

from experiments.toy_arithmetic.task import Problem
from trl_verigate.tiny import SEED, _qwen2_config, _save, _train_tokenizer


def build_policy(target: str | Path, hidden_size: int = 128, num_layers: int = 4) -> str:
    """Write a randomly initialised tiny policy to ``target`` and return its path."""
    from transformers import Qwen2ForCausalLM

    if not 64 <= hidden_size <= 1024 or hidden_size % 4:
        raise ValueError(f"hidden_size={hidden_size} must be a multiple of 4 in [64, 1024], e.g. 128")
    if num_layers < 1:
        raise ValueError(f"num_layers={num_layers} must be at least 1")
    tokenizer = _train_tokenizer([], [])
    config = _qwen2_config(
        tokenizer,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        initializer_range=0.02,
    )
    torch.manual_seed(SEED)
    _save(Qwen2ForCausalLM(config), tokenizer, Path(target))
    return str(target)


def warm_start(
    base: str,
    problems: list[Problem],
    output_dir: str | Path,
    steps: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
    save_every: int,
) -> list[str]:
    """SFT of ``base`` on the reference completions of ``problems``, saving a checkpoint every ``save_every`` steps
    (and at the last); returns the checkpoint directories in step order. A run killed midway resumes from its last
    checkpoint (``output_dir`` must be this warm start's own: the caller names it by the sizes that produced it)."""
    dataset = Dataset.from_list([{"prompt": p.prompt, "completion": p.completion()} for p in problems])
    args = SFTConfig(
        output_dir=str(output_dir),
        max_steps=steps,
        per_device_train_batch_size=batch_size,
        learning_rate=learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=max(1, steps // 20),
        logging_steps=max(1, steps // 10),
        save_strategy="steps",
        save_steps=save_every,
        report_to="none",
        use_cpu=True,
        seed=seed,
        max_length=256,
        disable_tqdm=False,
    )
    trainer = SFTTrainer(model=base, args=args, train_dataset=dataset)
    trainer.train(resume_from_checkpoint=bool(checkpoints(output_dir)) or None)
    return checkpoints(output_dir)


def checkpoints(directory: str | Path) -> list[str]:
    """The ``checkpoint-N`` directories under ``directory``, by N."""
    found = [path for path in Path(directory).glob("checkpoint-*") if path.name.split("-")[-1].isdigit()]
    return [str(path) for path in sorted(found, key=lambda path: int(path.name.split("-")[-1]))]


@torch.no_grad()
def generate(
    model,
    tokenizer,
    prompts: list[str],
    max_new_tokens: int,
    num_samples: int = 1,
    batch_size: int = 64,
    temperature: float | None = None,
) -> list[str]:
    """Completions of every prompt (``num_samples`` each, consecutive); greedy when ``temperature`` is None."""
    tokenizer.padding_side = "left"
    texts = []
    expanded = [prompt for prompt in prompts for _ in range(num_samples)]
    was_training = model.training
    model.eval()
    for start in range(0, len(expanded), batch_size):
        batch = tokenizer(
            expanded[start : start + batch_size], return_tensors="pt", padding=True, add_special_tokens=False
        )
        sampling = (
            {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
            if temperature
            else {"do_sample": False}
        )
        output = model.generate(**batch, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id, **sampling)
        texts += tokenizer.batch_decode(output[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
    model.train(was_training)
    return texts
