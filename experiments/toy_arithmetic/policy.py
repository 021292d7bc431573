"""The tiny policy, its supervised warm start on easy problems, and the evaluations of a policy.

The model is the tiny family of `trl_verigate.tiny` (a Qwen2ForCausalLM with its ~1k-token byte-level BPE that
splits every digit, built by the same helpers), only wider and deeper so it can learn the format. The warm start is
TRL's `SFTTrainer` on easy problems with their reference completions (prompt-completion rows: loss on the
completion only, EOS appended by TRL).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import torch
from datasets import Dataset
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer

from experiments.toy_arithmetic.oracle import ArithmeticProcessOracle
from experiments.toy_arithmetic.task import Problem
from trl_verigate.rewards.math import MathAccuracyReward
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
    base: str, problems: list[Problem], output_dir: str | Path, steps: int, batch_size: int, learning_rate: float, seed
) -> str:
    """SFT of ``base`` on the reference completions of ``problems``; saves and returns the warm-started policy."""
    dataset = Dataset.from_list([{"prompt": p.prompt, "completion": p.completion()} for p in problems])
    args = SFTConfig(
        output_dir=str(output_dir),
        max_steps=steps,
        per_device_train_batch_size=batch_size,
        learning_rate=learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=max(1, steps // 20),
        logging_steps=max(1, steps // 10),
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=seed,
        max_length=256,
        disable_tqdm=False,
    )
    trainer = SFTTrainer(model=base, args=args, train_dataset=dataset)
    trainer.train()
    trainer.save_model(str(output_dir))
    return str(output_dir)


def step_counts(texts: list[str], verdicts: list, problems: list[Problem], oracle: ArithmeticProcessOracle):
    """(steps written, right steps, completions whose first step starts from the prompt's whole chain) over the
    completions ``texts`` of ``problems`` (one problem per text); answer lines are not steps. A step is checked on its
    own, so a right step can be about another chain than the prompt's: the third count tells them apart."""
    steps = right = copies_prompt = 0
    for text, verdict, problem in tqdm(list(zip(texts, verdicts, problems, strict=True)), desc="steps", leave=False):
        lines = [text[start:end] for start, end in verdict.spans if "\\boxed" not in text[start:end]]
        steps += len(lines)
        right += sum(oracle.step_is_right(line) for line in lines)
        copies_prompt += bool(lines) and lines[0].split("=")[0].strip() == problem.expression
    return steps, right, copies_prompt


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


def pass_rate(model, tokenizer, problems: list[Problem], max_new_tokens: int, accuracy: MathAccuracyReward) -> float:
    """Greedy pass@1 on ``problems`` (the project's math reward against the boxed gold)."""
    if not problems:
        return float("nan")
    texts = generate(model, tokenizer, [p.prompt for p in problems], max_new_tokens)
    return statistics.mean(accuracy(texts, solution=[p.solution for p in problems]))


def starting_point(
    policy: str,
    problems: list[Problem],
    num_generations: int,
    max_new_tokens: int,
    temperature: float,
    seed: int,
    oracle: ArithmeticProcessOracle,
) -> dict:
    """What GRPO sees on ``problems`` at the start: sampled pass rate, the fraction of groups whose rewards are all
    equal (zero std), the fraction of those that are all-zero, the fraction of written steps that are right, and the
    fraction of completions whose first step starts from the prompt's whole chain."""
    tokenizer = AutoTokenizer.from_pretrained(policy)
    model = AutoModelForCausalLM.from_pretrained(policy)
    torch.manual_seed(seed)
    texts = generate(
        model, tokenizer, [p.prompt for p in problems], max_new_tokens, num_generations, temperature=temperature
    )
    rows = [p.row() for p in problems for _ in range(num_generations)]
    verdicts = oracle.verify([r["prompt"] for r in rows], rows, texts)
    outcomes = [1.0 if v.passed else 0.0 for v in verdicts]
    groups = [outcomes[i : i + num_generations] for i in range(0, len(outcomes), num_generations)]
    steps, right, copies_prompt = step_counts(
        texts, verdicts, [p for p in problems for _ in range(num_generations)], oracle
    )
    return {
        "pass_rate": statistics.mean(outcomes),
        "frac_zero_std": statistics.mean(float(len(set(g)) == 1) for g in groups),
        "frac_all_zero": statistics.mean(float(max(g) == 0.0) for g in groups),
        "step_right_rate": right / steps if steps else float("nan"),
        "steps_per_completion": steps / len(texts),
        "first_step_copies_prompt": copies_prompt / len(texts),
        "num_groups": len(groups),
        "num_generations": num_generations,
        "example_completion": texts[0],
    }
