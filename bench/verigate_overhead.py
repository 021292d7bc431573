"""Overhead of VeriGate over plain TRL GRPO on the tiny CPU models.

Runs `trl.GRPOTrainer` and `VeriGateGRPOTrainer` on the same tiny policy, seed and prompts, alternating the two
(and the order within each round) so that machine drift hits both alike, and prints:

1. the step-time ratio VeriGate / GRPO with the PRM's own time (`verigate/prm_seconds`) removed: the cost of the
   gate, step splitting and token-level advantages (target: <= 1.03);
2. the PRM calls VeriGate makes against a baseline that sends every completion to the PRM, next to the gate rate:
   the two should match, since only gated groups reach the PRM.

The reward is deterministic: half the prompts are "solvable" and every other completion of theirs gets 1, the other
prompts get 0 everywhere. Every step sees every prompt once, so the gate rate is exactly the unsolvable share.
Nothing is asserted: timings depend on the machine.

    python bench/verigate_overhead.py --steps 10 --rounds 6
"""

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from datasets import Dataset
from transformers import PrinterCallback, TrainerCallback
from transformers.utils import logging as transformers_logging
from trl import GRPOConfig, GRPOTrainer

from trl_verigate import VeriGateConfig, VeriGateGRPOTrainer, build_step_scorer
from trl_verigate.tiny import build_tiny_models

REPO_ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = [
    "Tom has 3 boxes with 4 apples in each box. How many apples does he have?",
    "Solve for $x$: $2x + 7 = 19$.",
    "A train travels at 60 km per hour for 3 hours. How many kilometres does it travel?",
    "What is the remainder when $2^{10}$ is divided by 7?",
    "Maria saves 15 dollars a week. How many weeks does she need to save 120 dollars?",
    "Compute $\\binom{6}{2}$.",
    "A farmer has 17 chickens and 9 cows. How many legs do the animals have in total?",
    "Find the sum of the roots of $x^2 - 5x + 6 = 0$.",
]
SYSTEM_PROMPT = "Solve the problem step by step, one step per paragraph, and put the final answer in \\boxed{}."


def alternating_reward(completions, solvable, **kwargs):
    """1 for every other completion of a solvable prompt (TRL keeps a group's completions adjacent), else 0."""
    return [1.0 if is_solvable and index % 2 == 0 else 0.0 for index, is_solvable in enumerate(solvable)]


class CountingStepScorer:
    """Passes every call to the real PRM and counts the completions it was asked to score."""

    def __init__(self, scorer):
        self.scorer = scorer
        self.completions_scored = 0

    def score(self, prompts, steps):
        self.completions_scored += len(prompts)
        return self.scorer.score(prompts, steps)


class StepTimer(TrainerCallback):
    """Wall time of each optimizer step, generation and reward scoring included (TRL generates inside the step)."""

    def __init__(self):
        self.seconds = []
        self._start = None

    def on_step_begin(self, args, state, control, **kwargs):
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.seconds.append(time.perf_counter() - self._start)


def build_dataset(num_prompts: int) -> Dataset:
    rows = [
        {
            "prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}],
            "solvable": index % 2 == 0,
        }
        for index, question in enumerate(QUESTIONS[:num_prompts])
    ]
    return Dataset.from_list(rows)


def run_once(kind: str, args, models: dict, dataset: Dataset, output_dir: str) -> dict:
    common = dict(
        output_dir=output_dir,
        use_cpu=True,
        seed=args.seed,
        # No update, so both trainers sample the very same completions every step: generation, which dominates a
        # step, then costs both the same, and only VeriGate's own work differs. The update is still computed.
        learning_rate=0.0,
        beta=0.0,
        num_generations=args.num_generations,
        per_device_train_batch_size=len(dataset) * args.num_generations,
        max_completion_length=args.max_completion_length,
        max_steps=args.steps + 1,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
    )
    timer = StepTimer()
    trainer_kwargs = dict(
        model=models["policy"],
        reward_funcs=[alternating_reward],
        train_dataset=dataset,
        callbacks=[timer],
    )
    counter = None
    if kind == "grpo":
        trainer = GRPOTrainer(args=GRPOConfig(**common), **trainer_kwargs)
    else:
        config = VeriGateConfig(**common, prm_type="qwen_math", prm_model_name_or_path=models["prm_qwen_math"])
        counter = CountingStepScorer(build_step_scorer("qwen_math", model_name_or_path=models["prm_qwen_math"]))
        trainer = VeriGateGRPOTrainer(args=config, process_reward_model=counter, **trainer_kwargs)
    # The per-step log dicts would bury the summary; the numbers are read from `log_history` instead.
    trainer.remove_callback(PrinterCallback)
    trainer.train()

    step_logs = [entry for entry in trainer.state.log_history if "loss" in entry]
    # The first step pays one-off costs (lazy init, allocator warm-up); it is excluded from every statistic.
    result = {"step_seconds": timer.seconds[1:], "completions": args.steps * len(dataset) * args.num_generations}
    if counter is not None:
        prm_seconds = [entry["verigate/prm_seconds"] for entry in step_logs[1:]]
        result["net_step_seconds"] = [
            total - prm for total, prm in zip(result["step_seconds"], prm_seconds, strict=True)
        ]
        result["prm_seconds"] = prm_seconds
        result["gate_rates"] = [entry["verigate/gate_rate"] for entry in step_logs[1:]]
        result["prm_completions"] = counter.completions_scored
        result["prm_completions_warmup"] = int(step_logs[0]["verigate/prm_completions_scored"])
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10, help="Timed steps per run (one warm-up step is added).")
    parser.add_argument("--rounds", type=int, default=6, help="Runs of each trainer, alternated.")
    parser.add_argument("--num-prompts", type=int, default=4, help="Prompts per step (half of them solvable).")
    parser.add_argument("--num-generations", type=int, default=4, help="Completions per prompt (even).")
    parser.add_argument("--max-completion-length", type=int, default=32, help="Tokens per completion.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tiny-dir", type=Path, default=REPO_ROOT / ".tiny", help="Tiny models; built if missing.")
    args = parser.parse_args(argv)
    if args.num_generations < 2 or args.num_generations % 2:
        parser.error(f"--num-generations must be even and >= 2 (got {args.num_generations}) for the reward pattern.")
    if not 2 <= args.num_prompts <= len(QUESTIONS):
        parser.error(f"--num-prompts must be between 2 and {len(QUESTIONS)} (got {args.num_prompts}).")
    if args.steps < 1 or args.rounds < 1:
        parser.error("--steps and --rounds must be at least 1.")

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    models = build_tiny_models(args.tiny_dir)
    dataset = build_dataset(args.num_prompts)
    runs = {"grpo": [], "verigate": []}
    with tempfile.TemporaryDirectory() as output_dir:
        for round_index in range(args.rounds):
            order = ("grpo", "verigate") if round_index % 2 == 0 else ("verigate", "grpo")
            for kind in order:
                runs[kind].append(run_once(kind, args, models, dataset, output_dir))

    grpo_seconds = [s for run in runs["grpo"] for s in run["step_seconds"]]
    verigate_seconds = [s for run in runs["verigate"] for s in run["step_seconds"]]
    verigate_net = [s for run in runs["verigate"] for s in run["net_step_seconds"]]
    prm_seconds = [s for run in runs["verigate"] for s in run["prm_seconds"]]
    gate_rate = statistics.mean(rate for run in runs["verigate"] for rate in run["gate_rates"])
    # The counter also saw the warm-up step, whose count the trainer logged; drop it like its time.
    prm_completions = sum(run["prm_completions"] - run["prm_completions_warmup"] for run in runs["verigate"])
    completions = sum(run["completions"] for run in runs["verigate"])

    grpo_median, grpo_fastest = statistics.median(grpo_seconds), min(grpo_seconds)
    print(f"steps timed per trainer: {len(grpo_seconds)} ({args.rounds} rounds x {args.steps}, warm-up excluded)")
    print("                          median    fastest")
    print(f"GRPO step                 {grpo_median:.3f} s   {grpo_fastest:.3f} s")
    print(f"VeriGate step             {statistics.median(verigate_seconds):.3f} s   {min(verigate_seconds):.3f} s")
    print(f"  of which PRM            {statistics.median(prm_seconds):.3f} s   {min(prm_seconds):.3f} s")
    print(f"  without PRM             {statistics.median(verigate_net):.3f} s   {min(verigate_net):.3f} s")
    # Load from other processes only ever adds time, so on a busy machine the fastest steps are the fairer pair.
    print(
        "(1) step-time ratio VeriGate/GRPO, PRM excluded: "
        f"{statistics.median(verigate_net) / grpo_median:.3f} (medians), {min(verigate_net) / grpo_fastest:.3f} "
        f"(fastest); target <= 1.03. PRM included: {statistics.median(verigate_seconds) / grpo_median:.3f}"
    )
    print(
        f"(2) PRM calls vs. PRM on every group: {prm_completions}/{completions} completions = "
        f"{prm_completions / completions:.3f}   gate rate = {gate_rate:.3f}"
    )
    print("    (equal unless a gated completion had no text to split into steps, which skips the PRM)")


if __name__ == "__main__":
    main()
