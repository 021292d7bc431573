"""One training run of one method from the warm start, evaluated at its middle and last step.

Every method generates the same number of completions (``Budget.completions``) from the same prompt pool, drawn
without replacement by TRL's sampler (seeded by the run's seed, so two methods of one seed see the same prompts in
the same order). GRPO-like methods sample G completions per prompt at temperature 1 and take
``completions // (prompts_per_step * G)`` optimizer steps (lr constant, `max_grad_norm` 1, beta 0,
`num_iterations` 1); ES decodes greedily, one completion per prompt, and takes ``completions // (P * es_prompts)``
iterations, perturbing only the norm weights (`ES_PARAM_REGEX`). Every arm's outcome reward is the faithful pass;
the control arm ``prm_outcome`` is GRPO with VeriGate's noisy PRM as its outcome reward. The trainers are the
project's, through their public APIs; `MeasuredVeriGate` only reads what VeriGate computed, to check its mechanism.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from experiments.toy_arithmetic.evaluation import evaluate_policy
from experiments.toy_arithmetic.oracle import (
    ArithmeticProcessOracle,
    FaithfulPassReward,
    NoisyChainStepScorer,
    PRMOutcomeReward,
)
from experiments.toy_arithmetic.task import Problem
from trl_verigate import (
    ESConfig,
    ESTrainer,
    ProcessVerifiedConfig,
    ProcessVerifiedGRPOTrainer,
    VeriGateConfig,
    VeriGateGRPOTrainer,
)

# The arms of the comparison (the ablation and the control among them), then the coefficient-0 check's arm.
METHODS = ("grpo", "verigate", "process", "process_noprop", "es", "prm_outcome", "process_coef0")
PROCESS_METHODS = ("process", "process_noprop", "process_coef0")
PRM_FLIP_SHARE = 0.2  # the share of VeriGate's PRM labels flipped
ES_PARAM_REGEX = r"norm\.weight$"  # ES perturbs the RMSNorm weights only (1,152 of the policy's parameters)
DEFAULT_PROCESS = {"d1": -0.05, "d2": -0.1}  # the trainer's defaults, for runs outside the d1/d2 grid
# Logged metrics kept per step (whichever the method logs).
KEPT_METRICS = (
    "loss",
    "grad_norm",
    "reward",
    "frac_reward_zero_std",
    "completions/mean_length",
    "verigate/gate_rate",
    "verigate/frac_zero_std_outcome",
    "lean/pass_rate",
    "lean/frac_zero_std_outcome",
    "lean/first_error_relative",
    "lean/tactics_per_proof",
    "lean/empty_fraction",
    "es/reward_mean",
    "es/reward_std",
    "es/update_norm",
    "mechanism/gated_pairs",
    "mechanism/gated_concordant",
)


@dataclass(frozen=True)
class Budget:
    num_generations: int  # G of the GRPO-like methods
    prompts_per_step: int
    completions: int  # generated completions per run, every method
    max_completion_length: int
    learning_rate: float
    es_population: int
    es_prompts: int  # prompts per ES member (greedy: one completion each)
    eval_samples: int  # sampled completions per held-out prompt


class HeldOutEvaluation(TrainerCallback):
    """`evaluation.evaluate_policy` at the middle step and the last step of a run, the hard set at the last only."""

    def __init__(self, sets: dict[str, list[Problem]], budget: Budget, per_step: int):
        self.sets, self.budget, self.per_step = sets, budget, per_step
        self.oracle = ArithmeticProcessOracle()
        self.history: list[dict] = []

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        if step not in (state.max_steps // 2, state.max_steps):
            return
        metrics = evaluate_policy(
            kwargs["model"],
            kwargs["processing_class"],
            self.sets["held_out"],
            self.sets["eval_easy"],
            self.budget.eval_samples,
            self.budget.max_completion_length,
            self.oracle,
            self.sets["hard"] if step == state.max_steps else None,
        )
        self.history.append({"step": step, "completions": step * self.per_step, **metrics})


class MeasuredVeriGate(VeriGateGRPOTrainer):
    """VeriGate, unchanged, plus one measurement of its mechanism: within each gated group, over the pairs of
    completions whose goal-tracking valid prefixes differ, how often the one with the longer prefix gets the higher
    advantage on its first token (step 1's advantage, the group-normalised sum of all its step scores); a tie counts
    one half. Logged as ``mechanism/gated_pairs`` and ``mechanism/gated_concordant`` (sums per step)."""

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        advantages = output["advantages"]
        if advantages.dim() == 1:  # no gated group in this batch
            return output
        texts = self.processing_class.batch_decode(output["completion_ids"], skip_special_tokens=True)
        reports = ArithmeticProcessOracle().reports(inputs, texts)
        pairs, concordant = gated_concordance(reports, advantages[:, 0].tolist(), self.num_generations)
        self._metrics["train"]["mechanism/gated_pairs"].append(float(pairs))
        self._metrics["train"]["mechanism/gated_concordant"].append(concordant)
        return output


def gated_concordance(reports: list, first_token_advantages: list[float], group_size: int) -> tuple[int, float]:
    """(pairs, concordant) over the all-zero groups of ``reports`` (consecutive groups of ``group_size``): pairs whose
    valid prefixes differ, and how many of them order their first-token advantages the same way (a tie: 1/2)."""
    pairs, concordant = 0, 0.0
    for start in range(0, len(reports), group_size):
        group = range(start, start + group_size)
        if any(reports[i].outcome for i in group):
            continue
        for i in group:
            for j in group:
                if reports[i].valid_prefix > reports[j].valid_prefix:
                    pairs += 1
                    difference = first_token_advantages[i] - first_token_advantages[j]
                    concordant += 1.0 if difference > 0 else 0.5 if difference == 0 else 0.0
    return pairs, concordant


def _grpo_common(output_dir: str, seed: int, budget: Budget, steps: int) -> dict:
    return {
        "output_dir": output_dir,
        "num_generations": budget.num_generations,
        "per_device_train_batch_size": budget.prompts_per_step * budget.num_generations,
        "max_completion_length": budget.max_completion_length,
        "temperature": 1.0,
        "learning_rate": budget.learning_rate,
        "lr_scheduler_type": "constant",
        "max_grad_norm": 1.0,
        "beta": 0.0,
        "num_iterations": 1,
        "max_steps": steps,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "seed": seed,
        "disable_tqdm": True,
    }


def steps_of(method: str, budget: Budget) -> tuple[int, int]:
    """(steps, completions per step) of ``method`` under ``budget``."""
    per_step = (
        budget.es_population * budget.es_prompts if method == "es" else budget.prompts_per_step * budget.num_generations
    )
    return budget.completions // per_step, per_step


def prompts_per_step(method: str, budget: Budget) -> int:
    """Prompts a step draws from the pool: every ES member answers the same ``es_prompts``."""
    return budget.es_prompts if method == "es" else budget.prompts_per_step


def build_trainer(
    method: str, policy: str, dataset: Dataset, output_dir: str, seed: int, budget: Budget, setting: dict | None = None
):
    """The trainer of ``method``; ``setting`` is the grid point: {"sigma", "learning_rate"} for ES, {"d1", "d2"} for
    the process trainers (default `DEFAULT_PROCESS`)."""
    faithful = FaithfulPassReward()
    steps, _ = steps_of(method, budget)
    if method == "es":
        args = ESConfig(
            output_dir=output_dir,
            max_completion_length=budget.max_completion_length,
            max_steps=steps,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            use_cpu=True,
            seed=seed,
            disable_tqdm=True,
            greedy=True,
            antithetic=True,
            population_size=budget.es_population,
            prompts_per_iteration=budget.es_prompts,
            sigma=float(setting["sigma"]),
            learning_rate=float(setting["learning_rate"]),
            es_param_regex=ES_PARAM_REGEX,
        )
        return ESTrainer(model=policy, reward_funcs=[faithful], args=args, train_dataset=dataset)
    common = _grpo_common(output_dir, seed, budget, steps)
    if method in ("grpo", "prm_outcome"):
        reward = faithful if method == "grpo" else PRMOutcomeReward(NoisyChainStepScorer(PRM_FLIP_SHARE))
        return GRPOTrainer(model=policy, reward_funcs=[reward], args=GRPOConfig(**common), train_dataset=dataset)
    if method == "verigate":
        args = VeriGateConfig(**common, gate="all_zero", prm_type="symbolic", step_separator="\n")
        return MeasuredVeriGate(
            model=policy,
            reward_funcs=[faithful],
            args=args,
            train_dataset=dataset,
            process_reward_model=NoisyChainStepScorer(PRM_FLIP_SHARE),
        )
    if method in PROCESS_METHODS:
        scores = setting or DEFAULT_PROCESS
        args = ProcessVerifiedConfig(
            **common,
            partial_tactic_score=float(scores["d1"]),
            error_tactic_score=float(scores["d2"]),
            process_token_assignment="first",
            first_error_propagation=method != "process_noprop",
            process_advantage_coef=0.0 if method == "process_coef0" else 1.0,
        )
        return ProcessVerifiedGRPOTrainer(
            model=policy, args=args, train_dataset=dataset, process_oracle=ArithmeticProcessOracle()
        )
    raise ValueError(f"method={method!r} is not one of {METHODS}")


def run_method(
    method: str,
    policy: str,
    sets: dict[str, list[Problem]],
    output_dir: str,
    seed: int,
    budget: Budget,
    setting: dict | None = None,
) -> dict:
    """Train ``method`` once on ``sets["pool"]``, evaluated on ``sets["held_out"]``, ``sets["eval_easy"]`` and (at
    the end) ``sets["hard"]``; returns its evaluations, per-step metrics, grid point and wall time."""
    pool = sets["pool"]
    steps, per_step = steps_of(method, budget)
    if steps < 1:
        raise ValueError(
            f"budget.completions={budget.completions} is below one step of {method} ({per_step} completions): "
            "raise --budget"
        )
    if steps * prompts_per_step(method, budget) > len(pool):
        raise ValueError(f"{method} needs more prompts than the pool's {len(pool)}: raise --pool-problems")
    trainer = build_trainer(
        method, policy, Dataset.from_list([p.row() for p in pool]), output_dir, seed, budget, setting
    )
    evaluation = HeldOutEvaluation(sets, budget, per_step)
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
        "setting": setting,
    }


def first_batch_advantages(
    method: str, policy: str, pool: list[Problem], output_dir: str, seed: int, budget: Budget
) -> dict:
    """Advantages of the first generation batch (same seed, same rows) as (B, T) with the completion ids, for the
    coefficient-0 check: process_advantage_coef=0 must give GRPO's advantage on every completion token."""
    trainer = build_trainer(method, policy, Dataset.from_list([p.row() for p in pool]), output_dir, seed, budget)
    trainer.model.train()
    rows = [p.row() for p in pool[: budget.prompts_per_step] for _ in range(budget.num_generations)]
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
