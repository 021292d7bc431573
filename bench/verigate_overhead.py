"""Overhead of VeriGate over plain TRL GRPO on the tiny CPU models.

Trains `trl.GRPOTrainer` and `VeriGateGRPOTrainer` on the same tiny policy, seed and prompts, one step at a time in
turn: GRPO step 1, VeriGate step 1, VeriGate step 2, GRPO step 2, ... (each trainer in its own thread, only one
running at a time, each with its own random state so both sample the very completions they would alone). A pair's
two steps run back to back on the same data, so machine load, which comes and goes over seconds, hits both alike;
per pair the ratio VeriGate / GRPO is taken, and the median of those ratios is reported with its spread. It prints:

1. the step-time ratio VeriGate / GRPO with the PRM's own time (`verigate/prm_seconds`) removed: the cost of the
   gate, step splitting and token-level advantages (target: <= 1.03);
2. the PRM calls VeriGate makes against a baseline that sends every completion to the PRM, next to the gate rate:
   the two should match, since only gated groups reach the PRM.

The reward is deterministic: half the prompts are "solvable" and every other completion of theirs gets 1, the other
prompts get 0 everywhere. Every step sees every prompt once, so the gate rate is exactly the unsolvable share.
Nothing is asserted: timings depend on the machine.

    python bench/verigate_overhead.py --steps 40
"""

import argparse
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy
import torch
from datasets import Dataset
from transformers import PrinterCallback, TrainerCallback, set_seed
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


class Turns:
    """Lets trainers that train in their own threads run one step at a time, in the order of ``schedule``.

    Each trainer has its own random state: the first turn seeds it, later turns restore what the trainer's previous
    turn left, so interleaving changes no sample.
    """

    def __init__(self, schedule: list[str], seed: int):
        self.schedule = schedule
        self.seed = seed
        self.position = 0
        self.condition = threading.Condition()
        self.random_states = {}
        self.arrived = set()

    def acquire(self, name: str) -> None:
        with self.condition:
            # The first turn waits for every trainer to reach its first step: until then the others are still
            # setting up, which may draw from the shared random state.
            self.arrived.add(name)
            self.condition.notify_all()
            self.condition.wait_for(
                lambda: (
                    self.position >= len(self.schedule)
                    or (self.arrived >= set(self.schedule) and self.schedule[self.position] == name)
                )
            )
        if name in self.random_states:
            torch_state, python_state, numpy_state = self.random_states[name]
            torch.set_rng_state(torch_state)
            random.setstate(python_state)
            numpy.random.set_state(numpy_state)
        else:
            set_seed(self.seed)

    def release(self, name: str) -> None:
        self.random_states[name] = (torch.get_rng_state(), random.getstate(), numpy.random.get_state())
        with self.condition:
            self.position += 1
            self.condition.notify_all()

    def abandon(self) -> None:
        """A trainer failed: let the other one run on unhindered so its thread ends too."""
        with self.condition:
            self.position = len(self.schedule)
            self.condition.notify_all()


class TakeTurns(TrainerCallback):
    """Holds the turn from one step's start to the next one's (so the step's logging and the next batch are inside
    it too, and never overlap the other trainer's step), and times each step, generation and rewards included."""

    def __init__(self, name: str, turns: Turns):
        self.name = name
        self.turns = turns
        self.seconds = []
        self._holding = False
        self._start = None

    def on_step_begin(self, args, state, control, **kwargs):
        if self._holding:
            self.turns.release(self.name)
        self.turns.acquire(self.name)
        self._holding = True
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.seconds.append(time.perf_counter() - self._start)

    def on_train_end(self, args, state, control, **kwargs):
        if self._holding:
            self.turns.release(self.name)
            self._holding = False


def build_dataset(num_prompts: int) -> Dataset:
    rows = [
        {
            "prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}],
            "solvable": index % 2 == 0,
        }
        for index, question in enumerate(QUESTIONS[:num_prompts])
    ]
    return Dataset.from_list(rows)


def build_trainer(kind: str, args, models: dict, dataset: Dataset, output_dir: str, turns: Turns):
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
    turn_taker = TakeTurns(kind, turns)
    trainer_kwargs = dict(
        model=models["policy"],
        reward_funcs=[alternating_reward],
        train_dataset=dataset,
        callbacks=[turn_taker],
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
    return trainer, turn_taker, counter


def train_in_turns(trainers: dict, turns: Turns) -> None:
    """Train every trainer in its own thread, the steps taken in `turns`' order; re-raise the first failure."""
    failures = []

    def train(trainer):
        try:
            trainer.train()
        except BaseException as error:  # noqa: BLE001 -- re-raised in the main thread below
            failures.append(error)
            turns.abandon()

    threads = [threading.Thread(target=train, args=(trainer,)) for trainer in trainers.values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def spread(values: list[float]) -> str:
    quartiles = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"median {quartiles[1]:.3f}, quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}, range {min(values):.3f}-{max(values):.3f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="Timed step pairs (one warm-up pair is added).")
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
    if args.steps < 2:
        parser.error("--steps must be at least 2.")

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    models = build_tiny_models(args.tiny_dir)
    dataset = build_dataset(args.num_prompts)
    # Which trainer goes first alternates from pair to pair, so neither always runs right after the other.
    schedule = [
        kind for pair in range(args.steps + 1) for kind in (("grpo", "verigate"), ("verigate", "grpo"))[pair % 2]
    ]
    turns = Turns(schedule, args.seed)
    with tempfile.TemporaryDirectory() as output_dir:
        built = {kind: build_trainer(kind, args, models, dataset, output_dir, turns) for kind in ("grpo", "verigate")}
        train_in_turns({kind: trainer for kind, (trainer, _, _) in built.items()}, turns)

    (_, grpo_timer, _), (verigate_trainer, verigate_timer, counter) = built["grpo"], built["verigate"]
    step_logs = [entry for entry in verigate_trainer.state.log_history if "loss" in entry]
    # The first pair pays one-off costs (lazy init, allocator warm-up); it is excluded from every statistic.
    grpo_seconds, verigate_seconds = grpo_timer.seconds[1:], verigate_timer.seconds[1:]
    prm_seconds = [entry["verigate/prm_seconds"] for entry in step_logs[1:]]
    net_seconds = [total - prm for total, prm in zip(verigate_seconds, prm_seconds, strict=True)]
    net_ratios = [net / grpo for net, grpo in zip(net_seconds, grpo_seconds, strict=True)]
    total_ratios = [total / grpo for total, grpo in zip(verigate_seconds, grpo_seconds, strict=True)]
    gate_rate = statistics.mean(entry["verigate/gate_rate"] for entry in step_logs[1:])
    # The counter also saw the warm-up step, whose count the trainer logged; drop it like its time.
    prm_completions = counter.completions_scored - int(step_logs[0]["verigate/prm_completions_scored"])
    completions = args.steps * len(dataset) * args.num_generations

    print(f"step pairs timed: {len(net_ratios)} (GRPO and VeriGate back to back on the same data, warm-up excluded)")
    print(f"GRPO step, s              {spread(grpo_seconds)}")
    print(f"VeriGate step, s          {spread(verigate_seconds)}")
    print(f"  of which PRM, s         {spread(prm_seconds)}")
    print(f"(1) per-pair ratio VeriGate/GRPO, PRM excluded: {spread(net_ratios)}; target <= 1.03 (median)")
    print(f"    PRM included: {spread(total_ratios)}")
    print(
        f"(2) PRM calls vs. PRM on every group: {prm_completions}/{completions} completions = "
        f"{prm_completions / completions:.3f}   gate rate = {gate_rate:.3f}"
    )
    print("    (equal unless a gated completion had no text to split into steps, which skips the PRM)")
    # Same samples in both trainers: their logged completion lengths agree step by step.
    lengths = {
        kind: [entry["completions/mean_length"] for entry in trainer.state.log_history if "loss" in entry]
        for kind, (trainer, _, _) in built.items()
    }
    print(f"same completions in every pair (mean lengths agree): {lengths['grpo'] == lengths['verigate']}")


if __name__ == "__main__":
    main()
