"""Does Lean verification serialize the GRPO loop? ProcessVerifiedGRPOTrainer on-policy (the default) and with
`pipelined_verification` (one step off-policy), side by side, on the tiny CPU policy and the stand-in Lean REPL with a
fixed per-proof latency, in the regime where verification is longer than generation.

- on-policy: each step generates its batch, verifies it (overlapping only TRL's reference pass and other rewards)
  and trains on it: step ~ generation + verification + training;
- pipelined: each step generates the next batch and starts its verification, then trains on the batch generated at
  the step before, whose verification ran meanwhile: step ~ max(generation + training, verification).

Runs alternate in rotated order over `--rounds` rounds (medians printed), so drift of a shared machine's load hits
both alike. Per mode and step, means over the measured steps; left out are the first two steps (pipelined, the first
fills the pipeline and, the pool verifying its two batches side by side, the second finds its batch nearly verified)
and the last (it generates nothing ahead): step time (from the end of the step before, logging and data
loading included); generation time (the policy's `generate`); verification wall time of the batch trained
(submission to last verdict; pipelined, it can include waiting on the pool behind the previous batch); the share of
it hidden behind other work; proofs per second of training (proofs per step / step) and the pool's utilization (busy
worker-seconds, latency x proofs, over workers x step time). The
ratios step / max and step / sum use generation alone and verification alone, both measured in the on-policy runs
(nothing overlaps either there), so they are the same yardstick for both modes. Target: pipelined step / max <= 1.15
when verification is the longer part.

The random tiny policy writes no proofs, so the bench's oracle sends one fixed valid proof body per completion (it
reaches the REPL and costs its latency); generation stays real. Nothing is asserted: timings depend on the machine.

    python bench/lean_grpo_loop.py --latency 1.0 --workers 2 --steps 3 --rounds 2
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from datasets import Dataset
from transformers import PrinterCallback, TrainerCallback
from transformers.utils import logging as transformers_logging
from trl import GRPOTrainer

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # `tests` is a package
from tests.fake_repl import stand_in_config  # noqa: E402
from trl_verigate import ProcessVerifiedConfig, ProcessVerifiedGRPOTrainer  # noqa: E402
from trl_verigate.lean_server import LeanServer  # noqa: E402
from trl_verigate.rewards.lean import LeanProcessOracle  # noqa: E402
from trl_verigate.rewards.process import ProcessVerdict  # noqa: E402
from trl_verigate.tiny import build_tiny_models  # noqa: E402

STATEMENTS = [f"theorem bench_{k} (n : ℕ) (h : {k} ≤ n) : n ≤ n + {k} := by" for k in range(8)]
MODES = {"on-policy": False, "pipelined": True}


class FixedProofOracle:
    """Verifies one fixed proof body per completion (the random policy writes none); outcome only, no spans."""

    def __init__(self, oracle: LeanProcessOracle):
        self.oracle = oracle

    def verify(self, prompts, rows, completions):
        verdicts = self.oracle.verify(prompts, rows, ["\n  omega\n"] * len(completions))
        return [ProcessVerdict(verdict.status, reason=verdict.reason) for verdict in verdicts]


class StepTimer(TrainerCallback):
    """When each optimizer step ended. Step s lasts from the end of step s - 1 to its own end: the whole period,
    logging and data loading included, because the pool keeps verifying through them."""

    def __init__(self):
        self.ends = []

    def on_step_end(self, args, state, control, **kwargs):
        self.ends.append(time.perf_counter())


def run(pipelined: bool, policy, server, args, out_dir) -> dict[str, float]:
    """One training run of `args.steps + 3` steps; means over the measured steps 2..args.steps + 1."""
    generation_seconds: dict[int, float] = {}  # global step -> seconds generating at that step
    original = GRPOTrainer._generate_single_turn

    def timed(self, *call_args, **call_kwargs):
        start = time.perf_counter()
        result = original(self, *call_args, **call_kwargs)
        step = self.state.global_step
        generation_seconds[step] = generation_seconds.get(step, 0.0) + time.perf_counter() - start
        return result

    GRPOTrainer._generate_single_turn = timed
    try:
        dataset = Dataset.from_dict(
            {
                "prompt": [f"Complete the following Lean 4 code:\n\n```lean4\n{s}" for s in STATEMENTS],
                "formal_statement": STATEMENTS,
            }
        )
        config = ProcessVerifiedConfig(
            output_dir=str(out_dir),
            use_cpu=True,
            seed=0,
            per_device_train_batch_size=args.batch,
            num_generations=args.generations,
            max_completion_length=args.max_completion_length,
            beta=0.04,  # a reference pass, part of TRL's per-batch work
            max_steps=args.steps + 3,
            report_to="none",
            save_strategy="no",
            logging_steps=1,
            prover_timeout=60.0,
            pipelined_verification=pipelined,
            disable_tqdm=True,
        )
        oracle = FixedProofOracle(LeanProcessOracle(server, timeout=60.0))
        trainer = ProcessVerifiedGRPOTrainer(model=policy, args=config, train_dataset=dataset, process_oracle=oracle)
        trainer.remove_callback(PrinterCallback)
        timer = StepTimer()
        trainer.add_callback(timer)
        trainer.train()
    finally:
        GRPOTrainer._generate_single_turn = original
    measured = range(2, args.steps + 2)
    # A log entry's "step" is the global step after the update: entry s + 1 holds step s's metrics.
    logs = {entry["step"] - 1: entry for entry in trainer.state.log_history if "lean/verify_seconds" in entry}
    step = statistics.mean(timer.ends[s] - timer.ends[s - 1] for s in measured)
    return {
        "step": step,
        "generation": statistics.mean(generation_seconds[s] for s in measured),
        "verify": statistics.mean(logs[s]["lean/verify_seconds"] for s in measured),
        "hidden": statistics.mean(logs[s]["lean/verify_hidden_fraction"] for s in measured),
        "proofs_per_second": args.batch / step,
        "pool_utilization": args.batch * args.latency / (args.workers * step),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=1.0, help="stand-in REPL seconds per proof")
    parser.add_argument("--workers", type=int, default=2, help="REPL workers in the pool")
    parser.add_argument("--steps", type=int, default=3, help="measured steps per run (plus two first and a last)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds over the two modes; medians are printed")
    parser.add_argument("--batch", type=int, default=16, help="completions per step")
    parser.add_argument("--generations", type=int, default=4, help="completions per prompt")
    parser.add_argument("--max-completion-length", type=int, default=32)
    args = parser.parse_args()
    transformers_logging.set_verbosity_error()

    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        policy = build_tiny_models(folder / "tiny")["policy"]
        (folder / "lean").mkdir()
        flags = ("--no-transcripts", "--latency", str(args.latency), "--housekeeping-latency", "0")
        server_config = stand_in_config(folder / "lean", *flags, workers=args.workers, timeout=60.0)
        measured = {mode: [] for mode in MODES}
        with LeanServer(server_config) as server:
            # A discarded run of each mode first: the process's first training, and the first pass through each
            # mode's code, pay one-off costs (thread pools, kernels, caches).
            warmup = argparse.Namespace(**{**vars(args), "steps": 1})
            for name, pipelined in MODES.items():
                run(pipelined, policy, server, warmup, folder / f"warmup-{name}")
            for round_index in range(args.rounds):
                names = list(MODES) if round_index % 2 == 0 else list(reversed(MODES))
                for name in names:
                    out_dir = folder / f"run{round_index}-{name}"
                    measured[name].append(run(MODES[name], policy, server, args, out_dir))
                    last = measured[name][-1]
                    print(
                        f"round {round_index + 1}/{args.rounds} {name:10s} step {last['step']:.2f} s, generation "
                        f"{last['generation']:.2f} s, verification {last['verify']:.2f} s"
                    )
    runs = {
        name: {key: statistics.median(result[key] for result in results) for key in results[0]}
        for name, results in measured.items()
    }
    generation, verify = runs["on-policy"]["generation"], runs["on-policy"]["verify"]
    longest, total = max(generation, verify), generation + verify
    print(
        f"\nstand-in latency {args.latency:.2f} s/proof, {args.workers} workers, {args.batch} proofs/step, medians "
        f"of {args.rounds} rounds x {args.steps} steps"
    )
    print(
        f"generation alone {generation:.2f} s, verification alone {verify:.2f} s (on-policy runs): sum {total:.2f} s, "
        f"max {longest:.2f} s"
    )
    if verify <= generation:
        print("verification is NOT the longer part here: the target does not apply; raise --latency")
    header = (
        f"{'mode':10s} {'step':>6s} {'gen':>6s} {'verify':>6s} {'hidden':>6s} {'sum':>6s} {'max':>6s} "
        f"{'step/max':>8s} {'step/sum':>8s} {'proofs/s':>8s} {'pool util':>9s}"
    )
    print(header)
    for name, result in runs.items():
        print(
            f"{name:10s} {result['step']:6.2f} {result['generation']:6.2f} {result['verify']:6.2f} "
            f"{result['hidden']:6.2f} {total:6.2f} {longest:6.2f} {result['step'] / longest:8.3f} "
            f"{result['step'] / total:8.3f} {result['proofs_per_second']:8.2f} {result['pool_utilization']:9.2f}"
        )
    print("target: pipelined step/max <= 1.15 when verification is the longer part")


if __name__ == "__main__":
    main()
