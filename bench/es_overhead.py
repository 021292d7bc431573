"""What ES costs besides generation, measured side by side in one run; prints ratios, asserts nothing.

Every ratio compares timings taken in turn (a, b, a, b, ...) and keeps the fastest of each, so the load of this
shared machine hits both sides. [2]-[6] run on `--intra-op-threads` torch threads (default 1, generation and ES
alike; see its help).

1. Noise throughput: `es_noise` elements per second (torch ops, the one implementation on every device) as a
   fraction of a same-size fp32 `torch.clone`, both on one intra-op thread, on a tensor larger than the L3 cache.
2. Flat iteration cost: perturb + restore + update at iteration 1 (fresh master) and at iteration N (the master after
   N - 1 incremental updates; target <= 1.2x), against rebuilding the master by replaying the history from the base.
3. Population throughput: members per second of an ES iteration (tiny policy, HF generate) as a fraction of pure
   generation of the same completions without perturbation (target >= 0.9; below 0.85 on the CPU, noise generation
   would need a faster CPU path than torch ops), with the perturb, sync, restore, update, generate and reward-wait
   shares of the iteration.
4. Memory above the model's weights: the fp32 master, plus the largest transient of perturb and update (computed from
   the parameter sizes and the noise's chunk buffers), and the process's peak RSS.
5. Verification overlapped with generation: with the Lean reward on the stand-in REPL (sleeping a fixed latency per
   proof, calibrated against the measured generation time), and with a pure-latency verifier, iteration time /
   max(total generation, total verification) with async rewards (target <= 1.15) and with the same reward awaited
   member by member (about (generation + verification) / max), where verification balances generation and where it
   dominates (3x).
6. Noise and sync per member as a fraction of one member's generation, for `--model` (its size is the parameter: the
   tiny policy by default, a 0.5B-1.5B model on a GPU): ES iterations of P members, each timing its perturbation
   (θ + σ·ε written into the model), its push into the generation engine (vLLM colocate with `--member-backend vllm`,
   nothing with HF, which generates from the model itself) and its generation, all within the same iteration. Above
   0.1 at 1.5B with colocate vLLM, docs/gpu.md's in-engine alternative (noise applied by the vLLM workers) pays.

    python bench/es_overhead.py [--rounds 3 --population 4 --population-rounds 12 --overlap-population 12
                                 --overlap-rounds 2 --workers 2 --only N]
    python bench/es_overhead.py --only 6 --model Qwen/Qwen2.5-1.5B-Instruct --member-backend vllm   # on a GPU
"""

import argparse
import asyncio
import contextlib
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch
from datasets import Dataset
from transformers.utils import logging as transformers_logging

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # `tests` is a package
from tests.fake_repl import stand_in_config  # noqa: E402
from trl_verigate.es import es_noise, es_update, make_master, perturb, population_seeds, write_master  # noqa: E402
from trl_verigate.es import noise as noise_module  # noqa: E402
from trl_verigate.es.generation import generation_seed  # noqa: E402
from trl_verigate.es.state import replay_history  # noqa: E402
from trl_verigate.tiny import build_tiny_models  # noqa: E402
from trl_verigate.trainers.es import ESConfig, ESTrainer  # noqa: E402

TOPICS = ("a steam engine", "a rainbow", "a bank loan", "a vaccine", "a compiler", "a tide", "a bicycle", "a fridge")
STATEMENTS = [f"theorem bench_{k} (n : ℕ) (h : {k} ≤ n) : n ≤ n + {k} := by" for k in range(8)]


def interleaved_minimums(functions: dict, rounds: int, clock=time.perf_counter) -> dict:
    """The fastest of `rounds` timings of each function, run in turn (a, b, a, b, ...) so machine load hits both."""
    return interleaved_wall_and_cpu(functions, rounds, clock)[0]


def interleaved_wall_and_cpu(functions: dict, rounds: int, clock=time.perf_counter) -> tuple[dict, dict]:
    """`interleaved_minimums` on `clock` and, from the same calls, on this process's CPU time (which the time slices
    that other processes get on a loaded machine do not inflate)."""
    times = {name: [] for name in functions}
    cpu_times = {name: [] for name in functions}
    for _ in range(rounds):
        for name, function in functions.items():
            started, cpu_started = clock(), time.process_time()
            function()
            times[name].append(clock() - started)
            cpu_times[name].append(time.process_time() - cpu_started)
    return {name: min(values) for name, values in times.items()}, {name: min(v) for name, v in cpu_times.items()}


def best_of(function, repeats: int = 3) -> float:
    """The fastest of `repeats` timings of one function."""
    return interleaved_minimums({"function": function}, repeats)["function"]


@contextlib.contextmanager
def intra_op_threads(count: int):
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def noise_throughput(numel: int, rounds: int) -> None:
    source = torch.randn(numel)
    functions = {"clone": lambda: source.clone(), "noise": lambda: es_noise(1, "bench.weight", (numel,))}
    # One intra-op thread for both: es_noise's chunks run in the calling thread by design (see noise.CHUNK_ELEMENTS),
    # and clone's second OpenMP thread on this shared 2-core machine mostly waits for a core. Wall time and this
    # process's CPU time (which a time slice given to another process does not inflate).
    with intra_op_threads(1):
        wall, cpu = interleaved_wall_and_cpu(functions, rounds)
    print(
        f"[1] noise ({numel} elements = {numel * 4 / 2**20:.0f} MiB fp32, 1 intra-op thread, fastest of {rounds} "
        f"interleaved): {numel / wall['noise'] / 1e6:.1f} M elements/s, clone {numel / wall['clone'] / 1e6:.0f} M/s; "
        f"noise / clone throughput = {wall['clone'] / wall['noise']:.3f} wall time, "
        f"{cpu['clone'] / cpu['noise']:.3f} CPU time"
    )


def es_iteration(params: dict, master: dict, iteration: int, population: int) -> tuple[list, list]:
    """Perturb every member, restore, update with made-up fitness, write θ: an ES iteration without generation."""
    members = population_seeds(0, iteration, population, True)
    for seed, sign in members:
        perturb(params, master, seed, sign, 1e-3)
    write_master(params, master)
    fitness = [float((iteration + i) % 3) - 1.0 for i in range(population)]
    es_update(master, members, fitness, 5e-4)
    write_master(params, master)
    return members, fitness


def iteration_cost(params: dict, iterations: int, population: int, rounds: int) -> None:
    base = {name: value.clone() for name, value in params.items()}
    master = make_master(params)
    history = []
    for iteration in range(iterations - 1):  # the master after N - 1 incremental updates
        members, fitness = es_iteration(params, master, iteration, population)
        history.append(
            {
                "seeds": [s for s, _ in members],
                "signs": [g for _, g in members],
                "fitness": fitness,
                "learning_rate": 5e-4,
            }
        )
    fresh = make_master(base)
    best = interleaved_minimums(
        {
            "first": lambda: es_iteration(params, fresh, 0, population),
            "last": lambda: es_iteration(params, master, iterations - 1, population),
        },
        rounds,
    )
    replay_seconds = best_of(lambda: replay_history(make_master(base), history, 0.0), repeats=1)
    print(
        f"[2] iteration cost (perturb+restore+update, P={population}, {sum(v.numel() for v in params.values())} "
        f"parameters, fastest of {rounds} interleaved): iteration 1 {best['first'] * 1e3:.1f} ms, iteration "
        f"{iterations} {best['last'] * 1e3:.1f} ms, ratio {best['last'] / best['first']:.2f} (target <= 1.2); "
        f"replaying {iterations - 1} iterations from the base instead: {replay_seconds:.2f} s = "
        f"{replay_seconds / best['first']:.0f}x an incremental iteration"
    )


def letter_reward(completions, **kwargs):
    return [text.count("e") / max(len(text), 1) for text in completions]


async def async_letter_reward(completions, **kwargs):
    """An async reward for the overlap trainer's first iteration: TRL starts its reward event loop only when an
    async reward function is given at construction."""
    return letter_reward(completions)


def es_trainer(policy, out_dir, reward, population, max_completion_length=32, rows=None, **settings):
    """An ESTrainer after one iteration; `rows` (default: Lean prompts) and `settings` (ESConfig fields) override."""
    args = ESConfig(
        **{
            "output_dir": str(out_dir),
            "use_cpu": True,
            "seed": 0,
            "population_size": population,
            "prompts_per_iteration": 2,
            "num_generations": 4,
            "max_completion_length": max_completion_length,
            "max_steps": 1,
            "report_to": "none",
            "save_strategy": "no",
            "logging_steps": 1,
            "disable_tqdm": True,
            **settings,
        }
    )
    if rows is None:
        rows = [
            {"prompt": f"Complete the following Lean 4 code:\n\n```lean4\n{s}", "formal_statement": s}
            for s in STATEMENTS
        ]
    trainer = ESTrainer(model=policy, reward_funcs=[reward], args=args, train_dataset=Dataset.from_list(rows))
    trainer.train()  # one iteration: the Trainer's setup, and the one-off costs of the first generation
    return trainer


class IterationRunner:
    """Runs further ES iterations of a trained `es_trainer` through `training_step` (what the Trainer's loop calls
    per step), timing each and reading its es/* metrics; `reward` swaps the reward function between runs."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.inputs = next(iter(trainer.get_train_dataloader()))
        self.prompts = [example["prompt"] for example in self.inputs]

    def iteration(self, reward=None) -> tuple[float, dict]:
        if reward is not None:
            self.trainer.reward_funcs[0] = reward
        started = time.perf_counter()
        self.trainer.training_step(self.trainer.model, self.inputs)
        seconds = time.perf_counter() - started
        self.trainer.state.global_step += 1  # as the Trainer's loop does after a step
        metrics = {
            name: values[-1] for name, values in self.trainer._metrics["train"].items() if name.startswith("es/")
        }
        return seconds, metrics

    def pure_generation(self) -> None:
        """The same P generations of the same prompts, with the sampling seed of the next ES iteration, at the
        unperturbed weights: no perturbation, reward or update."""
        seed = generation_seed(self.trainer.args.seed, self.trainer.state.global_step)
        for _ in range(self.trainer.args.population_size):
            torch.manual_seed(seed)
            self.trainer._generate(self.prompts)


def population_throughput(policy, folder, population, rounds) -> None:
    """Prints [3] and [4]."""
    runner = IterationRunner(es_trainer(policy, folder / "throughput", letter_reward, population))
    iterations = []
    best, cpu = interleaved_wall_and_cpu(
        {"es": lambda: iterations.append(runner.iteration()), "generation": runner.pure_generation}, rounds
    )
    es_seconds, row = min(iterations, key=lambda timed: timed[0])
    parts = ("perturb", "sync", "restore", "update", "generate", "reward_wait")
    shares = {name: row[f"es/seconds_{name}"] / es_seconds for name in parts}
    shares["other (sync rewards, gather, metrics)"] = 1 - sum(shares.values())
    print(
        f"[3] population throughput (P={population}, fastest of {rounds} interleaved): {population / es_seconds:.2f} "
        f"members/s vs {population / best['generation']:.2f} pure generations/s = "
        f"{best['generation'] / es_seconds:.3f} wall time, {cpu['generation'] / cpu['es']:.3f} CPU time (target >= 0.9);"
        " shares of the iteration: " + ", ".join(f"{name} {share:.1%}" for name, share in shares.items())
    )
    params = runner.trainer._es_parameters()
    master_bytes = sum(p.numel() * 4 for p in params.values())
    largest = max(p.numel() * 4 for p in params.values())
    # perturb writes θ + σ·ε straight into each contiguous parameter, a strided one through one fp32 tensor; the
    # update holds the accumulators of one noise batch (a large tensor, or small ones up to a chunk). Both hold the
    # noise's chunk buffers (noise._Buffers), never a tensor-sized noise.
    scratch = noise_module._Buffers(min(largest // 4, noise_module.CHUNK_ELEMENTS), "cpu")
    buffers = sum(
        t.numel() * t.element_size() for t in (scratch.counters, *scratch.ints, *scratch.floats, scratch.noise)
    )
    indirect = [p.numel() * 4 for p in params.values() if not p.is_contiguous()]
    batches = noise_module.noise_batches(runner.trainer._es_master)
    accumulators = max(sum(params[name].numel() * 4 for name in batch) for batch in batches)
    transient = {"perturb": max(indirect, default=0) + buffers, "update": accumulators + buffers}
    print(
        f"[4] memory above the model: fp32 master {master_bytes / 2**20:.2f} MiB + at most "
        f"{max(transient.values()) / 2**20:.2f} MiB at a time ("
        + ", ".join(f"{name} {size / 2**20:.2f} MiB" for name, size in transient.items())
        + f"); process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )


class FixedProofReward:
    """The Lean reward on one fixed valid proof body per completion (the random policy writes none), async."""

    def __init__(self, server):
        from trl_verigate.rewards.lean import LeanProcessOracle, LeanProofReward

        self.reward = LeanProofReward(FixedProofOracle(LeanProcessOracle(server, timeout=120.0)))
        self.__name__ = "lean_proof"

    async def __call__(self, prompts, completions, **kwargs):
        return await self.reward(prompts, completions, **kwargs)


class FixedProofOracle:
    def __init__(self, oracle):
        self.oracle = oracle

    def verify(self, prompts, rows, completions):
        return self.oracle.verify(prompts, rows, ["\n  omega\n"] * len(completions))


class TimedBlockingReward:
    """The same reward awaited before the next member generates (the sequential baseline); adds up its wall time."""

    def __init__(self, async_reward):
        self.async_reward = async_reward
        self.seconds = 0.0
        self.__name__ = async_reward.__name__

    def __call__(self, prompts, completions, **kwargs):
        started = time.perf_counter()
        rewards = asyncio.run(self.async_reward(prompts, completions, **kwargs))
        self.seconds += time.perf_counter() - started
        return rewards


class SleepingVerifier:
    """A pure-latency verifier: each completion waits `latency` seconds for one of `workers` slots and scores 1,
    with no CPU work in this process (a Lean pool on other machines, as the trainer sees it), async."""

    def __init__(self, latency: float, workers: int):
        self.latency, self.workers = latency, workers
        self.slots = {}  # one semaphore per event loop (the sequential baseline runs a fresh loop per member)
        self.__name__ = "lean_proof"

    async def __call__(self, prompts, completions, **kwargs):
        loop = asyncio.get_running_loop()
        slots = self.slots.setdefault(loop, asyncio.Semaphore(self.workers))

        async def verify():
            async with slots:
                await asyncio.sleep(self.latency)
            return 1.0

        return list(await asyncio.gather(*(verify() for _ in completions)))


class HandOffTrace:
    """When each member's generation returned, when its async reward started running on TRL's event loop and when
    the last reward returned: the overlap path's own delays, apart from generation and verification."""

    def __init__(self, trainer):
        self.generated, self.started, self.finished = [], [], []
        generate = trainer._generate

        def traced_generate(prompts):
            result = generate(prompts)
            self.generated.append(time.perf_counter())
            return result

        trainer._generate = traced_generate

    def clear(self) -> None:
        self.generated, self.started, self.finished = [], [], []

    def reward(self, async_reward):
        trace = self

        class TracedReward:
            __name__ = async_reward.__name__

            async def __call__(self, prompts, completions, **kwargs):
                trace.started.append(time.perf_counter())
                rewards = await async_reward(prompts, completions, **kwargs)
                trace.finished.append(time.perf_counter())
                return rewards

        return TracedReward()

    def lags(self) -> tuple[float, float]:
        """(the longest delay from a member's generation to its reward's start, the delay from the last reward's
        return to now, the end of the iteration)."""
        start_lag = max(started - generated for generated, started in zip(self.generated, self.started, strict=True))
        return start_lag, time.perf_counter() - max(self.finished)


def overlap(policy, folder, population, workers, rounds, completion_length) -> None:
    """[5] in two regimes, per-member verification ≈ per-member generation (balanced) and 3x it, with two verifiers.

    - lean_server with the stand-in REPL sleeping `latency` per proof (the issue's setup): the REPLs' latency is a
      sleep, as a Lean REPL's is from the trainer's point of view, but lean_server's own client work (precheck,
      queueing, pipes) runs in this process and shares this machine's 2 loaded cores with generation.
    - a pure-latency verifier (`SleepingVerifier`, same latency and worker count, no CPU here): what overlap gives
      when verification runs elsewhere, as in the case study (isolated Lean servers).

    The latency is calibrated so that one member's proofs (prompts × generations, over `workers` slots) take `factor`
    × one member's generation. Overlap cannot hide the last member's verification, so even a perfect pipeline takes
    max(G + V/P, G/P + V), i.e. (P + 1)/P of max(G, V) in the balanced regime: P = 12 leaves 1.08.

    lean_server's client spends a few milliseconds of CPU per proof (~6 ms measured here), a fixed cost that a real
    Lean proof's seconds dwarf; 64-token completions (`completion_length`) keep the calibrated latency per proof at
    40-250 ms on this machine, where 16 tokens on one thread gave ~30 ms and that cost ~15 % of it.
    """
    from trl_verigate.lean_server import LeanServer

    trainer = es_trainer(
        policy, folder / "overlap", async_letter_reward, population, max_completion_length=completion_length
    )
    runner = IterationRunner(trainer)
    trace = HandOffTrace(trainer)
    proofs_per_member = trainer.args.prompts_per_iteration * trainer.args.num_generations
    waves = -(-proofs_per_member // workers)  # a member's proofs run in waves of `workers`
    for verifier in ("lean_server + stand-in REPL", "pure latency"):
        for regime, factor in (("balanced", 1.0), ("verification-dominated", 3.0)):
            # Calibrated right before each configuration (the load of this machine moves generation by several x
            # within minutes), on the faster of two generations (one slow spell made "balanced" runs 2x
            # verification-dominated).
            member_generation_seconds = best_of(runner.pure_generation, repeats=2) / population
            latency = factor * member_generation_seconds / waves
            with contextlib.ExitStack() as stack:
                if verifier == "pure latency":
                    async_reward = SleepingVerifier(latency, workers)
                else:
                    server_dir = folder / f"lean-{regime}"
                    server_dir.mkdir()
                    flags = ("--no-transcripts", "--latency", f"{latency:.4f}", "--housekeeping-latency", "0")
                    config = stand_in_config(server_dir, *flags, workers=workers, timeout=120.0)
                    async_reward = FixedProofReward(stack.enter_context(LeanServer(config)))
                blocking_reward = TimedBlockingReward(async_reward)
                traced_reward = trace.reward(async_reward)
                sequential_runs, overlapped_runs = [], []
                for _ in range(rounds):
                    blocking_reward.seconds = 0.0
                    seconds, row = runner.iteration(blocking_reward)
                    sequential_runs.append((seconds, row["es/seconds_generate"], blocking_reward.seconds))
                    trace.clear()
                    seconds, row = runner.iteration(traced_reward)
                    timings = (row["es/seconds_generate"], row["es/seconds_reward_wait"], *trace.lags())
                    overlapped_runs.append((seconds, *timings))
            # Each mode's fastest round, each against its own generation time: generation is what the load of this
            # shared machine slows, while the verifiers' sleeps are not, so a ratio within one run cancels the load.
            # The verification total is measured in the sequential run, where each member's wait is visible.
            sequential, generation, verification = min(sequential_runs)
            overlapped, overlapped_generation, final_wait, start_lag, end_lag = min(overlapped_runs)
            bound = max(overlapped_generation, verification)
            pipeline = max(
                overlapped_generation + verification / population, overlapped_generation / population + verification
            )
            print(
                f"[5] verification overlap, {verifier}, {regime} (P={population}, {proofs_per_member} proofs per "
                f"member on {workers} workers at {latency:.3f} s per proof, fastest of {rounds} interleaved): "
                f"verification {verification:.2f} s; overlapped: generation {overlapped_generation:.2f} s, iteration "
                f"{overlapped:.2f} s (final reward wait {final_wait:.2f} s; hand-offs: a member's reward starts at most "
                f"{start_lag * 1e3:.1f} ms after its generation, the iteration ends {end_lag * 1e3:.1f} ms after the "
                f"last reward), iteration / max(gen, verify) = "
                f"{overlapped / bound:.3f} (target <= 1.15; a perfect pipeline {pipeline / bound:.3f}); sequential: "
                f"generation {generation:.2f} s, iteration {sequential:.2f} s, iteration / max(gen, verify) = "
                f"{sequential / max(generation, verification):.3f} (expected ~ (gen + verify) / max = "
                f"{(generation + verification) / max(generation, verification):.3f})"
            )


def vllm_importable() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


def member_cost(model: str, backend: str, folder: Path, population: int, rounds: int, tokens: int) -> None:
    """[6]: (perturb + sync) / generate, both summed over one iteration's P members (so per member as well)."""
    on_gpu = torch.cuda.is_available()
    trainer = es_trainer(  # its first iteration is the warm-up: CUDA graphs, allocator growth
        model,
        folder / "member_cost",
        letter_reward,
        population,
        tokens,
        rows=[{"prompt": f"Explain in a few sentences how {topic} works."} for topic in TOPICS],
        use_cpu=not on_gpu,
        bf16=on_gpu,
        prompts_per_iteration=8,
        use_vllm=backend == "vllm",
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=0.5,
        model_init_kwargs={"dtype": "bfloat16" if on_gpu else "float32"},
    )
    runner = IterationRunner(trainer)
    timed = [runner.iteration() for _ in range(rounds)]
    _, row = min(timed, key=lambda entry: entry[0])
    perturb, sync, generate = (row[f"es/seconds_{part}"] for part in ("perturb", "sync", "generate"))
    parameters = sum(p.numel() for p in trainer._es_parameters().values())
    print(
        f"[6] noise and sync per member ({model}, {parameters / 1e6:.1f}M perturbed parameters, {backend} on "
        f"{'cuda' if on_gpu else 'cpu'}, P={population}, 8 prompts x 4 x {tokens} tokens, fastest of {rounds} "
        f"iterations): perturb {perturb / population * 1e3:.1f} ms + sync {sync / population * 1e3:.1f} ms per member "
        f"vs generation {generate / population * 1e3:.0f} ms per member = {(perturb + sync) / generate:.3f} of a "
        "member's generation (docs/gpu.md: above 0.1 at 1.5B with colocate vLLM, apply the noise inside vLLM)"
    )


def parse_arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--numel",
        type=int,
        default=1536 * 8960,
        help="elements of the noise-throughput tensor (default: an MLP projection of a 1.5B Qwen2 prover, 53 MiB, "
        "larger than this machine's L3 cache as real weights are)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved repetitions of each timing")
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--population", type=int, default=4, help="P of the population-throughput measurement")
    parser.add_argument(
        "--population-rounds",
        type=int,
        default=12,
        help="interleaved repetitions in the population-throughput measurement (its generation time moves most "
        "with the machine's load)",
    )
    parser.add_argument("--overlap-population", type=int, default=12, help="P of the overlap measurement")
    parser.add_argument("--workers", type=int, default=2, help="stand-in REPLs of the overlap measurement")
    parser.add_argument(
        "--overlap-completion-length",
        type=int,
        default=64,
        help="max_completion_length of the overlap measurement (its generation time sets the calibrated latency)",
    )
    parser.add_argument(
        "--overlap-rounds", type=int, default=2, help="interleaved repetitions in the overlap measurement"
    )
    parser.add_argument(
        "--intra-op-threads",
        type=int,
        default=1,
        help="torch intra-op threads of [2]-[6], for generation and ES alike (default 1: on this 2-core machine "
        "shared with other jobs, two OpenMP threads made the tiny policy's generation 7-15x slower and as many times "
        "more variable, each op waiting at a barrier for a descheduled thread, which swamps every ratio)",
    )
    parser.add_argument("--only", type=int, choices=range(1, 7), help="run one measurement (its number)")
    parser.add_argument("--model", default=None, help="[6]: the policy (folder or hub id); default: the tiny one")
    parser.add_argument(
        "--member-backend",
        choices=("hf", "vllm"),
        default=None,
        help="[6]: generation engine (default: vllm colocate where vllm imports and a GPU is, else hf)",
    )
    parser.add_argument("--member-population", type=int, default=4, help="[6]: P")
    parser.add_argument("--member-rounds", type=int, default=3, help="[6]: timed iterations (after a warm-up)")
    parser.add_argument("--member-tokens", type=int, default=32, help="[6]: max_completion_length (256 on a GPU)")
    return parser.parse_args()


def main():
    args = parse_arguments()
    transformers_logging.set_verbosity_error()
    if args.only in (None, 1):
        noise_throughput(args.numel, args.rounds)
    torch.set_num_threads(args.intra_op_threads)
    print(f"[2]-[6] run on {torch.get_num_threads()} intra-op thread(s) (--intra-op-threads)")
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
            iteration_cost(params, args.iterations, 2, 20 * args.rounds)  # iterations of milliseconds: more rounds
        if args.only in (None, 3, 4):
            population_throughput(policy, folder, args.population, args.population_rounds)
        if args.only in (None, 6):
            backend = args.member_backend or ("vllm" if torch.cuda.is_available() and vllm_importable() else "hf")
            member_cost(
                args.model or policy,
                backend,
                folder,
                args.member_population,
                args.member_rounds,
                args.member_tokens,
            )
        if args.only in (None, 5):
            overlap(
                policy,
                folder,
                args.overlap_population,
                args.workers,
                args.overlap_rounds,
                args.overlap_completion_length,
            )


if __name__ == "__main__":
    main()
