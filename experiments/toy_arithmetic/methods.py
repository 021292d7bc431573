"""One training run of one method, from the warm start, with held-out evaluation along the way.

Every method gets the same prompts (the hard training set), the same sampling (temperature 1, ``num_generations``
per prompt, ``max_completion_length``) and the same generation budget (completions generated in total):
GRPO-like methods take ``budget // (prompts_per_step * G)`` optimizer steps, ES takes
``budget // (population * prompts_per_iteration * G)`` iterations. All trainers are used through their public
APIs, unchanged: TRL's `GRPOTrainer`, `VeriGateGRPOTrainer`, `ProcessVerifiedGRPOTrainer` (with the arithmetic process
oracle) and `ESTrainer`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from experiments.toy_arithmetic.oracle import ArithmeticProcessOracle
from experiments.toy_arithmetic.policy import pass_rate
from experiments.toy_arithmetic.task import Problem
from trl_verigate import (
    ESConfig,
    ESTrainer,
    ProcessVerifiedConfig,
    ProcessVerifiedGRPOTrainer,
    VeriGateConfig,
    VeriGateGRPOTrainer,
)
from trl_verigate.rewards.math import MathAccuracyReward

METHODS = ("grpo", "verigate", "process", "process_coef0", "es")
# Logged metrics kept per step (whichever the method logs).
KEPT_METRICS = (
    "loss",
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "completions/mean_length",
    "verigate/gate_rate",
    "verigate/frac_zero_std_outcome",
    "lean/pass_rate",
    "lean/frac_zero_std_outcome",
    "lean/first_error_relative",
    "es/reward_mean",
    "es/reward_std",
    "es/update_norm",
)


@dataclass(frozen=True)
class Budget:
    num_generations: int
    prompts_per_step: int
    completions: int
    max_completion_length: int
    learning_rate: float
    es_learning_rate: float
    eval_every_completions: int  # held-out evaluation about every this many generated completions


class HeldOutEvaluation(TrainerCallback):
    """Greedy pass rate on the held-out easy and hard problems every ``every`` steps and at the last step."""

    def __init__(self, easy: list[Problem], hard: list[Problem], every: int, max_new_tokens: int, per_step: int):
        self.easy, self.hard, self.every, self.max_new_tokens, self.per_step = (
            easy,
            hard,
            every,
            max_new_tokens,
            per_step,
        )
        self.accuracy = MathAccuracyReward()
        self.history: list[dict] = []
        self.trainer = None

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        if step % self.every and step != state.max_steps:
            return
        model, tokenizer = kwargs["model"], kwargs["processing_class"]
        self.history.append(
            {
                "step": step,
                "completions": step * self.per_step,
                "easy": pass_rate(model, tokenizer, self.easy, self.max_new_tokens, self.accuracy),
                "hard": pass_rate(model, tokenizer, self.hard, self.max_new_tokens, self.accuracy),
            }
        )


def _common(output_dir: str, seed: int, budget: Budget, steps: int) -> dict:
    return {
        "output_dir": output_dir,
        "num_generations": budget.num_generations,
        "max_completion_length": budget.max_completion_length,
        "temperature": 1.0,
        "beta": 0.0,
        "max_steps": steps,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "seed": seed,
        "disable_tqdm": True,
    }


def _grpo_args(budget: Budget) -> tuple[dict, int, int]:
    per_step = budget.prompts_per_step * budget.num_generations
    steps = budget.completions // per_step
    kwargs = {"per_device_train_batch_size": per_step, "learning_rate": budget.learning_rate}
    return kwargs, steps, per_step


def build_trainer(
    method: str, policy: str, dataset: Dataset, output_dir: str, seed: int, budget: Budget, es: dict | None = None
):
    """The trainer of ``method`` and its (steps, completions per step)."""
    accuracy = MathAccuracyReward()
    if method == "es":
        es = es or {}
        population, sigma = int(es.get("population_size", 8)), float(es.get("sigma", 1e-3))
        per_step = population * budget.prompts_per_step * budget.num_generations
        steps = budget.completions // per_step
        args = ESConfig(
            **_common(output_dir, seed, budget, steps),
            population_size=population,
            sigma=sigma,
            prompts_per_iteration=budget.prompts_per_step,
            learning_rate=float(es.get("learning_rate", budget.es_learning_rate)),
        )
        return ESTrainer(model=policy, reward_funcs=[accuracy], args=args, train_dataset=dataset), steps, per_step
    kwargs, steps, per_step = _grpo_args(budget)
    common = {**_common(output_dir, seed, budget, steps), **kwargs}
    if method == "grpo":
        trainer = GRPOTrainer(model=policy, reward_funcs=[accuracy], args=GRPOConfig(**common), train_dataset=dataset)
    elif method == "verigate":
        args = VeriGateConfig(**common, gate="all_zero", prm_type="symbolic", step_separator="\n")
        trainer = VeriGateGRPOTrainer(model=policy, reward_funcs=[accuracy], args=args, train_dataset=dataset)
    elif method in ("process", "process_coef0"):
        args = ProcessVerifiedConfig(
            **common,
            partial_tactic_score=-0.05,
            error_tactic_score=-0.1,
            process_token_assignment="first",
            process_advantage_coef=0.0 if method == "process_coef0" else 1.0,
        )
        trainer = ProcessVerifiedGRPOTrainer(
            model=policy, args=args, train_dataset=dataset, process_oracle=ArithmeticProcessOracle(accuracy=accuracy)
        )
    else:
        raise ValueError(f"method={method!r} is not one of {METHODS}")
    return trainer, steps, per_step


def run_method(
    method: str,
    policy: str,
    train: list[Problem],
    eval_easy: list[Problem],
    eval_hard: list[Problem],
    output_dir: str,
    seed: int,
    budget: Budget,
    es: dict | None = None,
) -> dict:
    """Train ``method`` once; returns its held-out curve, per-step metrics and wall time."""
    dataset = Dataset.from_list([p.row() for p in train])
    trainer, steps, per_step = build_trainer(method, policy, dataset, output_dir, seed, budget, es)
    if steps < 1:
        raise ValueError(
            f"budget.completions={budget.completions} is below one step of {method} ({per_step} completions): "
            "raise --budget"
        )
    every = max(1, min(steps, round(budget.eval_every_completions / per_step)))
    evaluation = HeldOutEvaluation(eval_easy, eval_hard, every, budget.max_completion_length, per_step)
    trainer.add_callback(evaluation)
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    metrics = [
        {"step": entry["step"], **{key: float(entry[key]) for key in KEPT_METRICS if key in entry}}
        for entry in trainer.state.log_history
        if "step" in entry and any(key in entry for key in KEPT_METRICS)
    ]
    return {
        "method": method,
        "seed": seed,
        "steps": steps,
        "completions_per_step": per_step,
        "completions": steps * per_step,
        "wall_seconds": wall,
        "eval": evaluation.history,
        "metrics": metrics,
        "es": es if method == "es" else None,
    }


def first_batch_advantages(
    method: str, policy: str, train: list[Problem], output_dir: str, seed: int, budget: Budget
) -> dict:
    """Advantages of the first generation batch (same seed, same rows) as (B, T) with the completion mask, for the
    coefficient-0 check: ProcessVerifiedGRPOTrainer with process_advantage_coef=0 must give GRPO's advantage on every
    completion token."""
    dataset = Dataset.from_list([p.row() for p in train])
    trainer, _, _ = build_trainer(method, policy, dataset, output_dir, seed, budget)
    trainer.model.train()
    rows = [p.row() for p in train[: budget.prompts_per_step] for _ in range(budget.num_generations)]
    torch.manual_seed(seed)
    output = trainer._generate_and_score_completions(rows)
    return {"advantages": token_advantages(output).tolist(), "completion_ids": output["completion_ids"].tolist()}


def token_advantages(output: dict) -> torch.Tensor:
    """(B, T) advantages of a batch TRL scored: GRPO's (B,) sequence advantage on every completion token and 0 on
    padding, or the process trainers' (B, T) as they are."""
    advantages = output["advantages"]
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1) * output["completion_mask"].float()
    return advantages
