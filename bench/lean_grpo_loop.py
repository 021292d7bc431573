"""Does Lean verification serialize the GRPO loop? LeanProcessGRPOTrainer's step time against generation and
verification done one after the other, on the tiny CPU policy and the stand-in Lean REPL with a fixed per-proof
latency.

Two runs on the same policy, seed and prompts:

- overlapped: the trainer as shipped, generating each batch in `--chunks` chunks and verifying every chunk as soon as
  it is decoded (`lean_generation_chunks`), while the next chunk generates and TRL does its other per-batch work;
- sequential: the same trainer with verification started only when TRL asks for the reward, one chunk.

A third run overlaps with one chunk (verification hidden behind TRL's reference pass and other rewards only). It
prints per run and step (means over the measured steps): generation time, verification wall time, the hidden share
of it, and the step time; then, with generation timed alone (both one-chunk runs) and verification alone (the
sequential run), their sum and
max and each overlapped run's ratios step / max and step / sum (target: step / max <= 1.15 when verification is the
longer part), plus proofs per second and the pool's utilization (busy worker-seconds, latency x proofs, over workers
x wall time). On CPU, chunking slows the tiny model's generation itself (smaller batches); vLLM runs one chunk.

The random tiny policy writes no proofs, so the bench's oracle sends one fixed valid proof body per completion (it
reaches the REPL and costs its latency); generation stays real. Nothing is asserted: timings depend on the machine.

    python bench/lean_grpo_loop.py --latency 1.0 --workers 2 --chunks 4 --steps 3 --rounds 2
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
sys.path.insert(0, str(REPO_ROOT / "tests"))
from fake_repl import stand_in_config  # noqa: E402

from trl_verigate import LeanProcessConfig, LeanProcessGRPOTrainer  # noqa: E402
from trl_verigate.lean_server import LeanServer  # noqa: E402
from trl_verigate.rewards.lean import LeanProcessOracle, ProcessVerdict  # noqa: E402
from trl_verigate.tiny import build_tiny_models  # noqa: E402

STATEMENTS = [f"theorem bench_{k} (n : ℕ) (h : {k} ≤ n) : n ≤ n + {k} := by" for k in range(8)]


class FixedProofOracle:
    """Verifies one fixed proof body per completion (the random policy writes none); outcome only, no spans."""

    def __init__(self, oracle: LeanProcessOracle):
        self.oracle = oracle

    def verify(self, prompts, rows, completions):
        verdicts = self.oracle.verify(prompts, rows, ["\n  omega\n"] * len(completions))
        return [ProcessVerdict(verdict.status, reason=verdict.reason) for verdict in verdicts]


class SequentialLeanTrainer(LeanProcessGRPOTrainer):
    """Verification starts only when TRL asks for the reward: generation, TRL's passes, then Lean, in sequence."""

    def _generate(self, prompts):
        self.lean_reward.clear_pending()
        return GRPOTrainer._generate(self, prompts)


class StepTimer(TrainerCallback):
    def __init__(self):
        self.durations = []

    def on_step_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self.durations.append(time.perf_counter() - self.started)


def run(trainer_class, policy, server, args, chunks, out_dir):
    generation_seconds = []
    original = GRPOTrainer._generate_single_turn

    def timed(self, *call_args, **call_kwargs):
        start = time.perf_counter()
        result = original(self, *call_args, **call_kwargs)
        generation_seconds.append(time.perf_counter() - start)
        return result

    GRPOTrainer._generate_single_turn = timed
    try:
        dataset = Dataset.from_dict(
            {
                "prompt": [f"Complete the following Lean 4 code:\n\n```lean4\n{s}" for s in STATEMENTS],
                "formal_statement": STATEMENTS,
            }
        )
        config = LeanProcessConfig(
            output_dir=str(out_dir),
            use_cpu=True,
            seed=0,
            per_device_train_batch_size=args.batch,
            num_generations=args.generations,
            max_completion_length=args.max_completion_length,
            beta=0.04,  # a reference pass, part of TRL's per-batch work
            max_steps=args.steps + 1,
            report_to="none",
            save_strategy="no",
            logging_steps=1,
            lean_generation_chunks=chunks,
            lean_timeout=60.0,
            disable_tqdm=True,
        )
        oracle = FixedProofOracle(LeanProcessOracle(server, timeout=60.0))
        trainer = trainer_class(model=policy, args=config, train_dataset=dataset, process_oracle=oracle)
        trainer.remove_callback(PrinterCallback)
        timer = StepTimer()
        trainer.add_callback(timer)
        trainer.train()
    finally:
        GRPOTrainer._generate_single_turn = original
    logs = [entry for entry in trainer.state.log_history if "lean/verify_seconds" in entry][1:]  # skip warm-up
    steps = timer.durations[1:]
    per_step_generation = len(generation_seconds) // (args.steps + 1)
    generation = [
        sum(generation_seconds[i : i + per_step_generation])
        for i in range(per_step_generation, len(generation_seconds), per_step_generation)
    ]
    return {
        "step": statistics.mean(steps),
        "generation": statistics.mean(generation),
        "verify": statistics.mean(entry["lean/verify_seconds"] for entry in logs),
        "hidden": statistics.mean(entry["lean/verify_hidden_fraction"] for entry in logs),
        "proofs_per_second": statistics.mean(entry["lean/proofs_per_second"] for entry in logs),
        "pass_rate": statistics.mean(entry["lean/pass_rate"] for entry in logs),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=1.0, help="stand-in REPL seconds per proof")
    parser.add_argument("--workers", type=int, default=2, help="REPL workers in the pool")
    parser.add_argument("--chunks", type=int, default=4, help="lean_generation_chunks of the overlapped run")
    parser.add_argument("--steps", type=int, default=3, help="measured steps per run (after one warm-up step)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds over the three runs; medians are printed")
    parser.add_argument("--batch", type=int, default=16, help="completions per step")
    parser.add_argument("--generations", type=int, default=4, help="completions per prompt")
    parser.add_argument("--max-completion-length", type=int, default=32)
    args = parser.parse_args()
    transformers_logging.set_verbosity_error()

    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        policy = build_tiny_models(folder / "tiny")["policy"]
        (folder / "lean").mkdir()
        server_config = stand_in_config(
            folder / "lean", "--no-transcripts", "--latency", str(args.latency), workers=args.workers, timeout=60.0
        )
        configs = {
            "sequential (verify when asked)": (SequentialLeanTrainer, 1),
            "overlapped, 1 chunk": (LeanProcessGRPOTrainer, 1),
            f"overlapped, {args.chunks} chunks": (LeanProcessGRPOTrainer, args.chunks),
        }
        measured = {name: [] for name in configs}
        with LeanServer(server_config) as server:
            # A discarded run first: the process's first training pays one-off costs (thread pools, kernels, caches).
            run(
                SequentialLeanTrainer,
                policy,
                server,
                argparse.Namespace(**{**vars(args), "steps": 1}),
                1,
                folder / "warmup",
            )
            # Rounds in rotated order, so that drift of a shared machine's load hits every configuration alike.
            for round_index in range(args.rounds):
                names = list(configs)
                names = names[round_index % len(names) :] + names[: round_index % len(names)]
                for name in names:
                    trainer_class, chunks = configs[name]
                    out_dir = folder / f"run{round_index}-{list(configs).index(name)}"
                    measured[name].append(run(trainer_class, policy, server, args, chunks, out_dir))
    # Medians over the rounds, per quantity.
    runs = {
        name: {key: statistics.median(result[key] for result in results) for key in results[0]}
        for name, results in measured.items()
    }
    # Generation alone is the same work in both one-chunk runs; verification alone is the sequential run's.
    one_chunk = measured["sequential (verify when asked)"] + measured["overlapped, 1 chunk"]
    generation = statistics.median(result["generation"] for result in one_chunk)
    verify = runs["sequential (verify when asked)"]["verify"]

    busy = args.batch * args.latency
    print(f"stand-in latency {args.latency:.2f} s/proof, {args.workers} workers, {args.batch} proofs/step")
    print(f"{'run':34s} {'generation':>10s} {'verify wall':>11s} {'hidden':>7s} {'step':>7s}")
    for name, result in runs.items():
        print(
            f"{name:34s} {result['generation']:10.2f} {result['verify']:11.2f} {result['hidden']:7.2f} "
            f"{result['step']:7.2f}"
        )
    print(
        f"generation alone + verification alone: sum {generation + verify:.2f} s, max {max(generation, verify):.2f} s"
    )
    for name, result in runs.items():
        if name.startswith("sequential"):
            continue
        print(
            f"{name}: step / max {result['step'] / max(generation, verify):.3f} (target <= 1.15 when verification "
            f"is longer), step / sum {result['step'] / (generation + verify):.3f}"
        )
    print(f"proofs per second (verification alone) {args.batch / verify:.1f}")
    print(f"pool utilization (verification alone)  {busy / (args.workers * verify):.2f}")


if __name__ == "__main__":
    main()
