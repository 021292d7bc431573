"""The whole experiment: warm start and its checkpoint pick, the start evaluation, the coefficient-0 check, the ES
grid, every method x seed, the report with the pre-registered decisions (docs/experiments.md).

    python -m experiments.toy_arithmetic.launch [--quick] [--output DIR] [--seeds 0 1 2] [...]

Writes DIR/results.json, DIR/results.md (tables and decisions) and DIR/*.png. ``--quick`` is a small preset meant to
finish in under 10 minutes on 2 CPU cores (a smoke test: it decides nothing); any size flag overrides the preset.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from experiments.toy_arithmetic.task import MAX_OPERAND

PRESETS = {
    # Sizes of the full run, chosen to fit about an hour on the shared 2-core machine (measured: docs/experiments.md).
    "full": {
        "hidden_size": 128, "num_layers": 4, "sft_problems": 3000, "sft_steps": 1200, "sft_batch_size": 32,
        "sft_save_every": 150, "pool_problems": 4096, "calibration_problems": 64, "eval_problems": 96,
        "easy_problems": 64, "num_generations": 8, "prompts_per_step": 4, "budget": 5120,
        "max_completion_length": 56, "seeds": [0, 1, 2], "eval_samples": 16, "es_population": 8, "es_prompts": 16,
        "es_grid": [[1e-3, 5e-4], [1e-3, 2e-3], [3e-3, 5e-4], [3e-3, 2e-3]], "ablation_seeds": [],
    },
    "quick": {
        "hidden_size": 128, "num_layers": 4, "sft_problems": 600, "sft_steps": 200, "sft_batch_size": 32,
        "sft_save_every": 100, "pool_problems": 256, "calibration_problems": 16, "eval_problems": 16,
        "easy_problems": 16, "num_generations": 4, "prompts_per_step": 2, "budget": 64,
        "max_completion_length": 56, "seeds": [0, 1, 2], "eval_samples": 4, "es_population": 2, "es_prompts": 4,
        "es_grid": [[1e-3, 5e-4], [3e-3, 2e-3]], "ablation_seeds": [0],
    },
}  # fmt: skip
REPO_ROOT = Path(__file__).resolve().parents[2]
MAIN_METHODS = ["grpo", "verigate", "process", "es"]
ABLATIONS = ["verigate_arith", "process_noprop"]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="GRPO vs VeriGate vs process-verified GRPO vs ES on toy arithmetic.")
    parser.add_argument("--quick", action="store_true", help="the small preset (under 10 minutes on 2 CPU cores)")
    parser.add_argument("--output", type=Path, default=Path("outputs/experiments/toy_arithmetic"))
    parser.add_argument("--methods", nargs="+", default=MAIN_METHODS, help=f"of {MAIN_METHODS}")
    parser.add_argument(
        "--ablations", nargs="*", default=ABLATIONS, help=f"control/ablation arms run on --ablation-seeds: {ABLATIONS}"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="launchers that run the methods side by side once the warm start is done (default: min(2, CPUs)); "
        "each is one process with --threads threads",
    )
    # A launcher started by --jobs: it runs its methods' pieces and leaves results.json and the report to its parent.
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--task-seed", type=int, default=1234, help="seed of the problem sets")
    parser.add_argument("--sft-operations", type=int, nargs="+", default=[1, 2, 3], help="operations, warm start")
    parser.add_argument("--rl-operations", type=int, nargs="+", default=[3], help="operations, RL and held-out")
    parser.add_argument("--easy-operations", type=int, nargs="+", default=[1, 2], help="operations, forgetting set")
    parser.add_argument(
        "--max-operand", type=int, default=MAX_OPERAND, help="operands are 1..N, every intermediate result in [0, 3N]"
    )
    parser.add_argument("--learning-rate", type=float, default=1e-4, help="GRPO-like methods (constant)")
    parser.add_argument("--sft-learning-rate", type=float, default=3e-3)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1: a tiny model gains little from more; on a busy 2-core CPU, 2 threads ran "
        "its forward+backward 10-20x slower)",
    )
    for name, value in PRESETS["full"].items():
        flag = "--" + name.replace("_", "-")
        if name == "es_grid":
            parser.add_argument(flag, type=str, default=None, help="ES grid as 'sigma:alpha,...', e.g. 1e-3:5e-4")
        elif isinstance(value, list):
            parser.add_argument(flag, type=int, nargs="*" if name == "ablation_seeds" else "+", default=None)
        else:
            parser.add_argument(flag, type=type(value), default=None)
    args = parser.parse_args(argv)
    preset = PRESETS["quick" if args.quick else "full"]
    for name, value in preset.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if isinstance(args.es_grid, str):
        try:
            args.es_grid = [[float(s), float(a)] for s, a in (item.split(":") for item in args.es_grid.split(","))]
        except ValueError as error:
            parser.error(f"--es-grid {args.es_grid!r}: write sigma:alpha pairs like 1e-3:5e-4,3e-3:2e-3 ({error})")
    check_sizes(parser, args)
    return args


def check_sizes(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """One-line errors, before anything loads, for sizes the run cannot honour."""
    for flag, chosen, allowed in (
        ("--methods", args.methods, MAIN_METHODS),
        ("--ablations", args.ablations, ABLATIONS),
    ):
        unknown = set(chosen) - set(allowed)
        if unknown:
            parser.error(f"{flag}: unknown {sorted(unknown)}; choose from {' '.join(allowed)}")
    if args.num_generations < 2:
        parser.error(f"--num-generations {args.num_generations} is too small (GRPO needs >= 2 generations)")
    for name in ("prompts_per_step", "eval_problems", "easy_problems", "calibration_problems", "sft_steps",
                 "sft_save_every", "eval_samples", "es_prompts"):  # fmt: skip
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)} must be at least 1")
    grpo_step = args.prompts_per_step * args.num_generations
    if args.budget < grpo_step:
        parser.error(f"--budget {args.budget} is below one GRPO step ({grpo_step} completions)")
    if args.budget // grpo_step * args.prompts_per_step > args.pool_problems:
        parser.error(
            f"--pool-problems {args.pool_problems} is below the {args.budget // grpo_step * args.prompts_per_step} "
            "prompts a run draws (no prompt may repeat): raise it or lower --budget"
        )
    if "es" in args.methods:
        es_step = args.es_population * args.es_prompts
        if args.es_population < 2 or args.es_population % 2 or args.budget < es_step:
            parser.error(
                f"--es-population {args.es_population}: needs an even P >= 2 (antithetic pairs) with --budget >= "
                f"P x --es-prompts = {es_step}"
            )
        if any(sigma <= 0 or alpha <= 0 for sigma, alpha in args.es_grid):
            parser.error(f"--es-grid {args.es_grid}: sigma and alpha must be positive")
    if args.max_operand < 2:
        parser.error(f"--max-operand {args.max_operand} must be at least 2")
    if not args.seeds:
        parser.error("--seeds: give at least one seed")
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs} must be at least 1")


# Flags that do not change any finished piece's result: a rerun with other values reuses what is on disk.
NOT_IN_FINGERPRINT = {"output", "methods", "ablations", "seeds", "ablation_seeds", "threads", "quick", "jobs", "worker"}
# The only flags the warm start depends on (it is trained with the first seed): changing the RL sizes keeps it.
WARM_START_FLAGS = (
    "task_seed",
    "sft_operations",
    "max_operand",
    "hidden_size",
    "num_layers",
    "sft_problems",
    "sft_steps",
    "sft_batch_size",
    "sft_learning_rate",
    "sft_save_every",
)
# What the calibration and the start evaluation add (the split sizes move every later set).
SPLIT_FLAGS = (*WARM_START_FLAGS, "rl_operations", "easy_operations", "pool_problems", "calibration_problems",
               "eval_problems", "easy_problems", "max_completion_length", "num_generations", "eval_samples")  # fmt: skip


class FinishedPieces:
    """Each finished piece (the warm start, an ES sweep point, one method x seed run) is written to
    ``DIR/finished/NAME.json`` as soon as it ends, with a fingerprint of the sizes that produced it. A rerun with the
    same sizes (after a crash, or with more seeds or methods) loads it instead of recomputing it; a piece written
    under other sizes is recomputed and overwritten. Every piece is deterministic (seeded, CPU), so a loaded piece
    equals a recomputed one, as long as the code is the same: the fingerprint holds the sizes, not the code, so
    after a code change use a new output directory (or delete ``finished/``)."""

    def __init__(self, output: Path, args: argparse.Namespace):
        self.directory = output / "finished"
        self.directory.mkdir(parents=True, exist_ok=True)
        sizes = {k: v for k, v in vars(args).items() if k not in NOT_IN_FINGERPRINT}
        self.fingerprint = json.loads(json.dumps(sizes, default=str))

    def digest(self, flags: tuple[str, ...]) -> str:
        """A short name for the values of ``flags`` (the warm start's directory is named by its sizes)."""
        values = json.dumps({k: self.fingerprint[k] for k in flags}, sort_keys=True)
        return hashlib.sha256(values.encode()).hexdigest()[:10]

    def get(self, name: str, compute, flags: tuple[str, ...] | None = None, extra=None, usable=lambda value: True):
        """The piece ``name``: loaded when written under the same ``flags`` (default: every sizing flag) and
        ``extra`` (e.g. the first seed) and ``usable(value)`` holds (e.g. the files it names still exist), else
        computed by ``compute()`` and written."""
        fingerprint = self.fingerprint if flags is None else {k: self.fingerprint[k] for k in flags}
        fingerprint = {**fingerprint, "extra": extra}
        path = self.directory / f"{name}.json"
        if path.exists():
            stored = json.loads(path.read_text())
            if stored.get("fingerprint") == fingerprint and usable(stored["value"]):
                print(f"{name}: reusing {path}", flush=True)
                return stored["value"]
        value = compute()
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps({"fingerprint": fingerprint, "value": value}))
        partial.replace(path)  # atomic: a crash never leaves a half-written piece
        return value


def coef0_check(policy, pool, output: Path, seed: int, budget) -> dict:
    """First-batch advantages of GRPO, process coef 0 and process coef 1 from the same seed and rows."""
    from experiments.toy_arithmetic.methods import first_batch_advantages

    batches = {
        m: first_batch_advantages(m, policy, pool, str(output / f"check_{m}"), seed, budget)
        for m in ("grpo", "process_coef0", "process")
    }

    def max_diff(a, b):
        if len(a) != len(b) or any(len(ra) != len(rb) for ra, rb in zip(a, b, strict=True)):
            return float("inf")  # different completions: no token-by-token comparison
        return max((abs(x - y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True)), default=0.0)

    same = all(batches[m]["completion_ids"] == batches["grpo"]["completion_ids"] for m in batches)
    return {
        "same_completions": same,
        "max_abs_diff_coef0_vs_grpo": max_diff(batches["process_coef0"]["advantages"], batches["grpo"]["advantages"]),
        "max_abs_diff_coef1_vs_grpo": max_diff(batches["process"]["advantages"], batches["grpo"]["advantages"]),
        "num_completions": len(batches["grpo"]["advantages"]),
    }


def es_grid_score(run: dict) -> float:
    """The ES grid's criterion, fixed before any run: the mean training reward (mean member reward on the training
    prompts) over the second half of the iterations of seed 0. Never a held-out number."""
    rewards = [m["es/reward_mean"] for m in run["metrics"] if "es/reward_mean" in m]
    return statistics.mean(rewards[len(rewards) // 2 :])


def split_arms(args: argparse.Namespace, jobs: int) -> list[tuple[list[str], list[str]]]:
    """(methods, ablations) for each of at most ``jobs`` launchers, balanced by the runs each does (an ES run counts
    3/4 of a GRPO-family one, as measured; ES's grid stays with its seeds). Every launcher gets at least one method."""
    costs = {method: float(len(args.seeds)) for method in args.methods}
    if "es" in costs:
        costs["es"] = 0.75 * (len(args.es_grid) + len(args.seeds) - 1)
    groups = [{"methods": [], "ablations": [], "runs": 0.0} for _ in range(min(jobs, len(costs)))]
    arms = [("methods", method, cost) for method, cost in sorted(costs.items(), key=lambda item: -item[1])]
    if args.ablation_seeds:
        arms += [("ablations", ablation, float(len(args.ablation_seeds))) for ablation in args.ablations]
    for kind, name, cost in arms:  # largest first, each to the launcher with the fewest runs so far
        group = min(groups, key=lambda group: group["runs"])
        group[kind].append(name)
        group["runs"] += cost
    return [(group["methods"], group["ablations"]) for group in groups]


def run_side_by_side(argv: list[str], output: Path, groups: list[tuple[list[str], list[str]]]) -> None:
    """Run one worker launcher per group of methods and wait for all; a failed one stops the run (its finished
    pieces stay on disk for the rerun)."""
    workers = []
    for methods, ablations in groups:
        command = [sys.executable, "-m", "experiments.toy_arithmetic.launch", *argv, "--jobs", "1", "--worker"]
        command += ["--output", str(output.resolve()), "--methods", *methods, "--ablations", *ablations]
        print(f"worker launcher: --methods {' '.join(methods)} --ablations {' '.join(ablations)}", flush=True)
        workers.append((methods + ablations, subprocess.Popen(command, cwd=REPO_ROOT)))
    failed = [names for names, worker in workers if worker.wait() != 0]
    if failed:
        raise SystemExit(f"the worker launcher for {failed[0]} failed (its output is above); rerun the same command")


def main(argv=None) -> dict:
    args = parse_args(argv)
    for name, value in (
        ("HF_HUB_OFFLINE", "1"),
        ("TRANSFORMERS_OFFLINE", "1"),
        ("HF_DATASETS_OFFLINE", "1"),
        ("WANDB_MODE", "offline"),
        ("TOKENIZERS_PARALLELISM", "false"),
    ):
        os.environ.setdefault(name, value)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from experiments.toy_arithmetic.evaluation import calibrate, evaluate_policy, pick_checkpoint
    from experiments.toy_arithmetic.methods import Budget, run_method
    from experiments.toy_arithmetic.oracle import ArithmeticProcessOracle
    from experiments.toy_arithmetic.policy import build_policy, warm_start
    from experiments.toy_arithmetic.report import summarize, write_report
    from experiments.toy_arithmetic.task import make_splits

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    output: Path = args.output
    output.mkdir(parents=True, exist_ok=True)
    sizes = {
        "sft": args.sft_problems,
        "pool": args.pool_problems,
        "calibration": args.calibration_problems,
        "eval_hard": args.eval_problems,
        "eval_easy": args.easy_problems,
    }
    splits = make_splits(
        args.task_seed, args.sft_operations, args.rl_operations, args.easy_operations, sizes, args.max_operand
    )
    budget = Budget(
        args.num_generations,
        args.prompts_per_step,
        args.budget,
        args.max_completion_length,
        args.learning_rate,
        args.es_population,
        args.es_prompts,
        args.eval_samples,
    )
    finished = FinishedPieces(output, args)
    oracle = ArithmeticProcessOracle()
    timings: dict[str, float] = {}

    def timed(name: str, compute):
        def run():
            clock = time.perf_counter()
            value = compute()
            return {"value": value, "seconds": time.perf_counter() - clock}

        return run

    # The warm start: SFT with a checkpoint every --sft-save-every steps, in a directory named by its sizes so a
    # killed run resumes from its own last checkpoint and never from another size's.
    sft_dir = output / f"warm_start_{finished.digest(WARM_START_FLAGS)}"

    def train_warm_start() -> list[str]:
        base = build_policy(output / "base", args.hidden_size, args.num_layers)
        return warm_start(
            base,
            splits.sft,
            sft_dir,
            args.sft_steps,
            args.sft_batch_size,
            args.sft_learning_rate,
            args.seeds[0],
            args.sft_save_every,
        )

    def saved(piece: dict) -> bool:  # a record whose checkpoints were deleted since is trained again
        return all((Path(path) / "config.json").exists() for path in piece["value"])

    warm = finished.get("warm_start", timed("warm_start", train_warm_start), WARM_START_FLAGS, usable=saved)
    timings["warm_start"] = warm["seconds"]

    def load(path: str):
        return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)

    calibration = {}
    for path in warm["value"]:
        name = Path(path).name
        calibration[name] = finished.get(
            f"calibration_{name}",
            lambda path=path: calibrate(
                *load(path),
                splits.calibration,
                args.num_generations,
                args.max_completion_length,
                oracle,
            ),
            SPLIT_FLAGS,
        )
    pick = pick_checkpoint(calibration)
    policy = str(sft_dir / pick["picked"])
    print(f"warm start: calibration {json.dumps(calibration)}; picked {pick}", flush=True)
    start = finished.get(
        "start_eval",
        lambda: evaluate_policy(
            *load(policy),
            splits.eval_hard,
            splits.eval_easy,
            args.eval_samples,
            args.max_completion_length,
            oracle,
        ),
        SPLIT_FLAGS,
        extra=pick["picked"],
    )
    print(f"start: { ({k: v for k, v in start.items() if k != 'sampled_faithful_counts'}) }", flush=True)

    results = {
        "config": {
            **{k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "budget_detail": asdict(budget),
        },
        "warm_start": {"calibration": calibration, **pick, "policy": policy},
        "start_eval": start,
        "timings": timings,
        "runs": [],
        "es_grid": [],
    }

    def write_results(partial: bool) -> Path:
        """results.json with every run finished so far (``partial`` until the last), so a crash loses none."""
        results["partial"] = partial
        results["summary"] = summarize(results)
        results["timings"]["elapsed"] = time.perf_counter() - started
        path = output / "results.json"
        path.write_text(json.dumps(results, indent=1))
        return path

    check = finished.get(
        "coef0_check", timed("coef0", lambda: coef0_check(policy, splits.pool, output / "check", 0, budget))
    )
    results["coef0_check"], timings["coef0_check"] = check["value"], check["seconds"]
    print(f"coefficient-0 check: {results['coef0_check']}", flush=True)

    if args.jobs > 1 and not args.worker:
        argv = sys.argv[1:] if argv is None else list(argv)
        run_side_by_side(argv, output, split_arms(args, args.jobs))

    def run(method: str, seed: int, es: dict | None = None) -> dict:
        suffix = f"_s{es['sigma']}_a{es['learning_rate']}" if es else ""
        name = f"{method}{suffix}_seed{seed}"
        return finished.get(
            name,
            lambda: run_method(
                method,
                policy,
                splits.pool,
                splits.eval_easy,
                splits.eval_hard,
                str(output / name),
                seed,
                budget,
                es,
            ),
            extra=pick["picked"],
        )

    es_chosen = None
    if "es" in args.methods:
        clock = time.perf_counter()
        for sigma, alpha in args.es_grid:
            grid_run = run("es", args.seeds[0], {"sigma": sigma, "learning_rate": alpha})
            results["es_grid"].append({"sigma": sigma, "learning_rate": alpha, "train_reward": es_grid_score(grid_run)})
        best = max(results["es_grid"], key=lambda point: point["train_reward"])
        es_chosen = {"sigma": best["sigma"], "learning_rate": best["learning_rate"]}
        results["es_chosen"] = es_chosen
        timings["es_grid"] = time.perf_counter() - clock
        print(f"ES grid: {results['es_grid']}; chosen {es_chosen}", flush=True)

    arms = [(m, s) for m in args.methods for s in args.seeds] + [
        (m, s) for m in args.ablations for s in args.ablation_seeds
    ]
    for method, seed in arms:
        finished_run = run(method, seed, es_chosen if method == "es" else None)
        results["runs"].append(finished_run)
        if not args.worker:
            write_results(partial=True)
        end = finished_run["eval"][-1]
        print(
            f"{method} seed {seed}: faithful {end['sampled_faithful']:.3f}, greedy {end['greedy_pass']:.3f}, "
            f"easy {end['easy_greedy_pass']:.3f} in {finished_run['wall_seconds']:.0f} s",
            flush=True,
        )
    timings["total"] = time.perf_counter() - started
    if args.worker:
        return results
    path = write_results(partial=False)
    for written in write_report(path):
        print(written)
    return results


if __name__ == "__main__":
    main()
