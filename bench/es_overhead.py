"""What ES costs besides generation, measured side by side in one run; prints ratios, asserts nothing.

1. Noise throughput: `es_noise` elements per second as a fraction of a same-size fp32 `torch.clone` (target >= 0.2).
2. Flat iteration cost: perturb + restore + update at iteration 1 and at iteration N of a run (incremental fp32
   master; target <= 1.2x), against rebuilding the master by replaying the history from the base at iteration N.
3. Population throughput: members per second of an ES iteration (tiny policy, HF generate) as a fraction of pure
   generation of the same completions without perturbation (target >= 0.9), with the perturb/restore, update and
   reward shares of the iteration.
4. Memory above the model's weights: the fp32 master, plus one tensor's noise and update accumulator, plus the noise
   generator's chunk temporaries (computed from the parameter sizes), and the process's peak RSS growth.
5. Verification overlapped with generation: with the Lean reward on the stand-in REPL at a fixed latency, iteration
   time / max(total generation, total verification) with async rewards (target <= 1.15) and with the same reward
   awaited member by member (about (generation + verification) / max).

    python bench/es_overhead.py [--latency 0.3 --workers 2 --population 4 --iterations 200]
"""

import argparse
import asyncio
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from datasets import Dataset
from transformers.utils import logging as transformers_logging

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tests"))
from fake_repl import stand_in_config  # noqa: E402

from trl_verigate.es import es_noise, es_update, make_master, perturb, population_seeds, write_master  # noqa: E402
from trl_verigate.es import noise as noise_module  # noqa: E402
from trl_verigate.es.state import replay_history  # noqa: E402
from trl_verigate.tiny import build_tiny_models  # noqa: E402
from trl_verigate.trainers.es import ESConfig, ESTrainer  # noqa: E402

STATEMENTS = [f"theorem bench_{k} (n : ℕ) (h : {k} ≤ n) : n ≤ n + {k} := by" for k in range(8)]


def best_of(function, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return min(times)


def noise_throughput(numel: int) -> None:
    source = torch.randn(numel)
    clone_seconds = best_of(lambda: source.clone())
    noise_seconds = best_of(lambda: es_noise(1, "bench.weight", (numel,)))
    print(
        f"[1] noise: {numel / noise_seconds / 1e6:.1f} M elements/s, clone {numel / clone_seconds / 1e6:.1f} M/s; "
        f"noise / clone throughput = {clone_seconds / noise_seconds:.3f} (target >= 0.2)"
    )


def iteration_cost(params: dict, iterations: int, population: int) -> None:
    base = {name: value.clone() for name, value in params.items()}
    master = make_master(params)
    history, times = [], []
    for iteration in range(iterations):
        members = population_seeds(0, iteration, population, True)
        started = time.perf_counter()
        for seed, sign in members:
            perturb(params, master, seed, sign, 1e-3)
        write_master(params, master)
        fitness = [float((iteration + i) % 3) - 1.0 for i in range(population)]
        es_update(master, members, fitness, 5e-4)
        write_master(params, master)
        times.append(time.perf_counter() - started)
        history.append(
            {
                "seeds": [s for s, _ in members],
                "signs": [g for _, g in members],
                "fitness": fitness,
                "learning_rate": 5e-4,
            }
        )
    first, last = statistics.median(times[:5]), statistics.median(times[-5:])
    replay_seconds = best_of(lambda: replay_history(make_master(base), history, 0.0), repeats=1)
    print(
        f"[2] iteration cost (perturb+restore+update, P={population}, {sum(v.numel() for v in params.values())} "
        f"parameters): iteration 1 {first * 1e3:.1f} ms, iteration {iterations} {last * 1e3:.1f} ms, ratio "
        f"{last / first:.2f} (target <= 1.2); replaying {iterations} iterations from the base instead: "
        f"{replay_seconds:.2f} s = {replay_seconds / first:.0f}x an incremental iteration"
    )


def letter_reward(completions, **kwargs):
    return [text.count("e") / max(len(text), 1) for text in completions]


def es_trainer(policy, out_dir, reward, population, max_steps=1):
    args = ESConfig(
        output_dir=str(out_dir),
        use_cpu=True,
        seed=0,
        population_size=population,
        prompts_per_iteration=2,
        num_generations=4,
        max_completion_length=32,
        max_steps=max_steps,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
    )
    rows = [
        {"prompt": f"Complete the following Lean 4 code:\n\n```lean4\n{s}", "formal_statement": s} for s in STATEMENTS
    ]
    return ESTrainer(model=policy, reward_funcs=[reward], args=args, train_dataset=Dataset.from_list(rows))


def iteration_metrics(trainer) -> dict:
    """The logged es/* metrics of a one-iteration run, plus the iteration's wall time (perturbations, generations,
    reward wait and update; not the Trainer's setup), from es/members_per_second."""
    trainer.train()
    row = next(row for row in trainer.state.log_history if "es/seconds_generate" in row)
    row["iteration_seconds"] = trainer.args.population_size / row["es/members_per_second"]
    return row


def population_throughput(policy, folder, population) -> None:
    trainer = es_trainer(policy, folder / "throughput", letter_reward, population, max_steps=2)
    trainer.train()  # two iterations: the first pays one-off costs
    row = [row for row in trainer.state.log_history if "es/seconds_generate" in row][-1]
    prompts = [example["prompt"] for example in next(iter(trainer.get_train_dataloader()))]

    def pure_generation():
        for _ in range(population):
            torch.manual_seed(0)
            trainer._generate(prompts)

    generation_seconds = best_of(pure_generation, repeats=1)
    es_seconds = population / row["es/members_per_second"]
    shares = {name: row[f"es/seconds_{name}"] / es_seconds for name in ("perturb", "update", "reward_wait")}
    print(
        f"[3] population throughput: {row['es/members_per_second']:.2f} members/s vs {population / generation_seconds:.2f} "
        f"pure generations/s = {generation_seconds / es_seconds:.2f} (target >= 0.9); shares of the iteration: "
        + ", ".join(f"{name} {share:.1%}" for name, share in shares.items())
    )
    params = trainer._es_parameters()
    master_bytes = sum(p.numel() * 4 for p in params.values())
    largest = max(p.numel() for p in params.values())
    chunk_bytes = min(largest, noise_module.CHUNK_ELEMENTS) * 8 * 10
    print(
        f"[4] memory above the model: fp32 master {master_bytes / 2**20:.2f} MiB + one tensor's noise and update "
        f"accumulator {2 * largest * 4 / 2**20:.2f} MiB + noise chunk temporaries {chunk_bytes / 2**20:.2f} MiB; "
        f"process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )


class FixedProofReward:
    """The Lean reward on one fixed valid proof body per completion (the random policy writes none), async."""

    def __init__(self, server):
        from trl_verigate.rewards.lean import LeanProcessOracle, LeanProofReward

        self.reward = LeanProofReward(FixedProofOracle(LeanProcessOracle(server, timeout=60.0)))
        self.__name__ = "lean_proof"

    async def __call__(self, prompts, completions, **kwargs):
        return await self.reward(prompts, completions, **kwargs)


class FixedProofOracle:
    def __init__(self, oracle):
        self.oracle = oracle

    def verify(self, prompts, rows, completions):
        return self.oracle.verify(prompts, rows, ["\n  omega\n"] * len(completions))


def overlap(policy, folder, population, latency, workers) -> None:
    from trl_verigate.lean_server import LeanServer

    (folder / "lean").mkdir()
    config = stand_in_config(
        folder / "lean", "--no-transcripts", "--latency", str(latency), workers=workers, timeout=60.0
    )
    with LeanServer(config) as server:
        async_reward = FixedProofReward(server)

        def blocking_reward(prompts, completions, **kwargs):  # the same reward, awaited before the next member
            return asyncio.run(async_reward(prompts, completions, **kwargs))

        blocking_reward.__name__ = "lean_proof"
        iteration_metrics(es_trainer(policy, folder / "warmup", blocking_reward, population))
        sequential = iteration_metrics(es_trainer(policy, folder / "sequential", blocking_reward, population))
        overlapped = iteration_metrics(es_trainer(policy, folder / "overlapped", async_reward, population))
    generation = overlapped["es/seconds_generate"]
    # Verification alone: the sequential run's iteration minus everything that is not the reward.
    verification = sequential["iteration_seconds"] - sum(
        sequential[f"es/seconds_{name}"] for name in ("generate", "perturb", "update")
    )
    bound = max(generation, verification)
    print(
        f"[5] verification overlap (latency {latency} s, {workers} REPLs, P={population}): generation "
        f"{generation:.2f} s, verification {verification:.2f} s; iteration / max(gen, verify): overlapped "
        f"{overlapped['iteration_seconds'] / bound:.2f} (target <= 1.15), sequential "
        f"{sequential['iteration_seconds'] / bound:.2f} (expected ~ (gen + verify) / max = "
        f"{(generation + verification) / bound:.2f})"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--numel", type=int, default=1 << 22, help="elements of the noise-throughput tensor")
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.3, help="stand-in REPL seconds per proof")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", type=int, choices=range(1, 6), help="run one measurement (its number)")
    args = parser.parse_args()
    transformers_logging.set_verbosity_error()
    if args.only in (None, 1):
        noise_throughput(args.numel)
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        policy = build_tiny_models(folder / "tiny")["policy"]
        from transformers import AutoModelForCausalLM

        params = {
            name: p.detach().clone()
            for name, p in AutoModelForCausalLM.from_pretrained(policy).named_parameters()
            if p.dim() == 2 and "layers.0" in name
        }
        if args.only in (None, 2):
            iteration_cost(params, args.iterations, 2)
        if args.only in (None, 3, 4):
            population_throughput(policy, folder, args.population)
        if args.only in (None, 5):
            overlap(policy, folder, args.population, args.latency, args.workers)


if __name__ == "__main__":
    main()
