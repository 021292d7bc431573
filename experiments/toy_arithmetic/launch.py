"""The whole experiment (design 3, docs/experiments/design3.md): the warm start and everything prepared on it
(`preparation`), the coefficient-0 check, the d1/d2 and ES grids on the first seed, every method x seed, and the
report with the decisions (`analysis`).

    python -m experiments.toy_arithmetic.launch [--quick] [--output DIR] [--seeds 0 1 2 3 4 5] [...]

Writes DIR/results.json, DIR/results.md (tables and decisions) and DIR/*.png. ``--quick`` is a small preset, a smoke
test of the plumbing that decides nothing; any size flag overrides the preset. Rerun one seed of one method from a
cached warm start (``--save-warm-start DIR`` makes the cache):

    python -m experiments.toy_arithmetic.launch --warm-start-cache DIR --methods grpo --seeds 3 --output OUT
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

from experiments.toy_arithmetic.preparation import CACHE_FLAGS
from experiments.toy_arithmetic.task import MAX_OPERAND

PRESETS = {
    # Design 3's sizes (docs/experiments/design3.md).
    "full": {
        "hidden_size": 128, "num_layers": 4, "sft_problems": 3000, "sft_steps": 1200, "sft_batch_size": 32,
        "sft_save_every": 150, "pool_problems": 3072, "calibration_problems": 64, "eval_problems": 96,
        "easy_problems": 64, "hard_candidates": 768, "hard_size": 96, "hard_max_faithful": 1,
        "pool_screen_samples": 4, "pool_max_faithful": 1, "prerun_prompts": 32, "num_generations": 8,
        "prompts_per_step": 4, "budget": 5120, "max_completion_length": 56, "seeds": [0, 1, 2, 3, 4, 5],
        "eval_samples": 16, "es_population": 8, "es_prompts": 16,
        "es_grid": [[1e-2, 2e-3], [1e-2, 1e-2], [3e-2, 2e-3], [3e-2, 1e-2]],
        "process_grid": [[-0.05, -0.1], [0.0, -0.5]],
    },
    # A smoke test of the plumbing, sized to end within 10 minutes on 2 quiet cores: one seed, a small model.
    "quick": {
        "hidden_size": 64, "num_layers": 2, "sft_problems": 256, "sft_steps": 40, "sft_batch_size": 16,
        "sft_save_every": 20, "pool_problems": 48, "calibration_problems": 8, "eval_problems": 8,
        "easy_problems": 8, "hard_candidates": 16, "hard_size": 4, "hard_max_faithful": 1,
        "pool_screen_samples": 2, "pool_max_faithful": 1, "prerun_prompts": 4, "num_generations": 4,
        "prompts_per_step": 2, "budget": 32, "max_completion_length": 48, "seeds": [0], "eval_samples": 4,
        "es_population": 2, "es_prompts": 4, "es_grid": [[1e-2, 2e-3]], "process_grid": [[-0.05, -0.1], [0.0, -0.5]],
    },
}  # fmt: skip
REPO_ROOT = Path(__file__).resolve().parents[2]
MAIN_METHODS = ["grpo", "verigate", "process", "process_noprop", "es", "prm_outcome"]
GRIDS = {"es_grid": ("sigma", "learning_rate"), "process_grid": ("d1", "d2")}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="GRPO vs VeriGate vs process-verified GRPO vs ES on toy arithmetic.")
    parser.add_argument("--quick", action="store_true", help="the small preset: a smoke test that decides nothing")
    parser.add_argument("--output", type=Path, default=Path("outputs/experiments/toy_arithmetic"))
    parser.add_argument("--methods", nargs="+", default=MAIN_METHODS, help=f"of {MAIN_METHODS}")
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="launchers that run the methods side by side once the warm start is done (default: min(2, CPUs)); "
        "each is one process with --threads threads",
    )
    # A launcher started by --jobs: it runs its methods' pieces and leaves results.json and the report to its parent.
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--warm-start-cache", type=Path, default=None,
                        help="a cache written by --save-warm-start: skip the SFT, calibration and screening")  # fmt: skip
    parser.add_argument("--save-warm-start", type=Path, default=None, help="write the warm-start cache here")
    parser.add_argument("--task-seed", type=int, default=1234, help="seed of the problem sets")
    parser.add_argument("--sft-seed", type=int, default=0, help="seed of the warm start's SFT")
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
        if name in GRIDS:
            first, second = GRIDS[name]
            parser.add_argument(
                flag, type=str, default=None, help=f"grid as {flag}={first}:{second},... ('=' before a minus sign)"
            )
        elif isinstance(value, list):
            parser.add_argument(flag, type=int, nargs="+", default=None)
        else:
            parser.add_argument(flag, type=type(value), default=None)
    args = parser.parse_args(argv)
    preset = PRESETS["quick" if args.quick else "full"]
    for name, value in preset.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for name in GRIDS:
        text = getattr(args, name)
        if isinstance(text, str):
            try:
                setattr(args, name, [[float(a), float(b)] for a, b in (item.split(":") for item in text.split(","))])
            except ValueError as error:
                flag = "--" + name.replace("_", "-")
                parser.error(f"{flag} {text!r}: write pairs like 1e-2:2e-3,3e-2:1e-2 ({error})")
    check_sizes(parser, args)
    return args


def check_sizes(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """One-line errors, before anything loads, for sizes the run cannot honour."""
    unknown = set(args.methods) - set(MAIN_METHODS)
    if unknown:
        parser.error(f"--methods: unknown {sorted(unknown)}; choose from {' '.join(MAIN_METHODS)}")
    if args.num_generations < 2:
        parser.error(f"--num-generations {args.num_generations} is too small (GRPO needs >= 2 generations)")
    for name in ("prompts_per_step", "eval_problems", "easy_problems", "calibration_problems", "sft_steps",
                 "sft_save_every", "eval_samples", "es_prompts", "hard_size", "pool_screen_samples",
                 "prerun_prompts"):  # fmt: skip
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
    if args.hard_candidates < args.hard_size:
        parser.error(f"--hard-candidates {args.hard_candidates} is below --hard-size {args.hard_size}")
    if "es" in args.methods:
        es_step = args.es_population * args.es_prompts
        if args.es_population < 2 or args.es_population % 2 or args.budget < es_step:
            parser.error(
                f"--es-population {args.es_population}: needs an even P >= 2 (antithetic pairs) with --budget >= "
                f"P x --es-prompts = {es_step}"
            )
        if any(sigma <= 0 or alpha <= 0 for sigma, alpha in args.es_grid):
            parser.error(f"--es-grid {args.es_grid}: sigma and alpha must be positive")
    if any(d1 == d2 for d1, d2 in args.process_grid):
        parser.error(f"--process-grid {args.process_grid}: d1 must differ from d2, or no line is told apart")
    if args.max_operand < 2:
        parser.error(f"--max-operand {args.max_operand} must be at least 2")
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs} must be at least 1")


# Flags that do not change any finished piece's result: a rerun with other values reuses what is on disk.
NOT_IN_FINGERPRINT = {"output", "methods", "seeds", "threads", "quick", "jobs", "worker", "warm_start_cache",
                      "save_warm_start"}  # fmt: skip


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


def training_reward_score(run: dict) -> float:
    """The grids' criterion, fixed before any run: the mean training reward over the second half of the steps of
    the first seed (ES: the mean member reward; the process trainers: the mean outcome reward). Never a held-out
    number."""
    key = "es/reward_mean" if run["method"] == "es" else "reward"
    rewards = [m[key] for m in run["metrics"] if key in m]
    return statistics.mean(rewards[len(rewards) // 2 :])


# Methods that run together in one launcher: the one whose grid picks a setting, and the one that uses that setting.
BUNDLES = (("process", "process_noprop"),)


def split_arms(args: argparse.Namespace, jobs: int) -> list[list[str]]:
    """The methods of each of at most ``jobs`` launchers, balanced by the runs each does (an ES run counts 3/4 of a
    GRPO-family one, as measured; a grid stays with its seeds, and process_noprop with process, whose grid sets
    its d1/d2). Every launcher gets at least one method."""
    seeds = len(args.seeds)
    costs = {method: float(seeds) for method in args.methods}
    if "es" in costs:
        costs["es"] = 0.75 * (len(args.es_grid) + seeds - 1)
    if "process" in costs:
        costs["process"] = float(len(args.process_grid) + seeds - 1)
    units = [[m for m in bundle if m in costs] for bundle in BUNDLES]
    units = [unit for unit in units if unit] + [[m] for m in costs if not any(m in b for b in BUNDLES)]
    units.sort(key=lambda unit: -sum(costs[m] for m in unit))
    groups = [{"methods": [], "runs": 0.0} for _ in range(min(jobs, len(units)))]
    for unit in units:  # largest first, each to the launcher with the fewest runs so far
        group = min(groups, key=lambda group: group["runs"])
        group["methods"] += unit
        group["runs"] += sum(costs[m] for m in unit)
    return [group["methods"] for group in groups]


def run_grids(args: argparse.Namespace, run, results: dict) -> None:
    """Run each grid of the chosen methods on the first seed and record its scores and the point it picks (by
    `training_reward_score`) in ``results["grids"]`` and ``results["chosen"]``."""
    for grid, method, users in (("es_grid", "es", ("es",)), ("process_grid", "process", BUNDLES[0])):
        if not set(users) & set(args.methods):
            continue
        keys = GRIDS[grid]
        scored = []
        for first, second in getattr(args, grid):
            setting = dict(zip(keys, (first, second), strict=True))
            scored.append({**setting, "train_reward": training_reward_score(run(method, args.seeds[0], setting))})
        results["grids"][method] = scored
        best = max(scored, key=lambda point: point["train_reward"])
        results["chosen"][method] = {key: best[key] for key in keys}
        print(f"{grid}: {scored}; chosen {results['chosen'][method]}", flush=True)


def run_side_by_side(argv: list[str], output: Path, groups: list[list[str]]) -> None:
    """Run one worker launcher per group of methods and wait for all; a failed one stops the run (its finished
    pieces stay on disk for the rerun)."""
    workers = []
    for methods in groups:
        command = [sys.executable, "-m", "experiments.toy_arithmetic.launch", *argv, "--jobs", "1", "--worker"]
        command += ["--output", str(output.resolve()), "--methods", *methods]
        print(f"worker launcher: --methods {' '.join(methods)}", flush=True)
        workers.append((methods, subprocess.Popen(command, cwd=REPO_ROOT)))
    failed = [names for names, worker in workers if worker.wait() != 0]
    if failed:
        raise SystemExit(f"the worker launcher for {failed[0]} failed (its output is above); rerun the same command")


def prepare(args, splits, finished, output: Path) -> tuple[dict, dict]:
    """The warm start record and the prepared pieces: from ``--warm-start-cache``, or made here (and cached when
    ``--save-warm-start`` names a directory)."""
    from experiments.toy_arithmetic.preparation import load_cache, save_cache, screen_and_check, train_and_pick

    flags = {key: finished.fingerprint[key] for key in CACHE_FLAGS}
    if args.warm_start_cache is not None:
        return load_cache(args.warm_start_cache, flags)
    warm = train_and_pick(args, splits, finished, output)
    prepared = screen_and_check(args, splits, finished, warm)
    if args.save_warm_start is not None and not args.worker:
        save_cache(args.save_warm_start, flags, warm, prepared)
        print(f"warm-start cache written to {args.save_warm_start}", flush=True)
    return warm, prepared


def _offline() -> None:
    for name, value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("HF_DATASETS_OFFLINE", "1"),
                        ("WANDB_MODE", "offline"), ("TOKENIZERS_PARALLELISM", "false")):  # fmt: skip
        os.environ.setdefault(name, value)


def main(argv=None) -> dict:
    args = parse_args(argv)
    _offline()
    from experiments.toy_arithmetic.analysis import QUICK_NOTICE

    if args.quick and not args.worker:
        print(QUICK_NOTICE, flush=True)
    import torch

    from experiments.toy_arithmetic.methods import Budget, run_method
    from experiments.toy_arithmetic.preparation import chosen_sets
    from experiments.toy_arithmetic.provenance import process_provenance, stamped
    from experiments.toy_arithmetic.report import summarize, write_report
    from experiments.toy_arithmetic.task import make_splits

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    output: Path = args.output
    output.mkdir(parents=True, exist_ok=True)
    sizes = {"sft": args.sft_problems, "pool": args.pool_problems, "calibration": args.calibration_problems,
             "held_out": args.eval_problems, "eval_easy": args.easy_problems, "hard_candidates": args.hard_candidates}  # fmt: skip
    splits = make_splits(
        args.task_seed, args.sft_operations, args.rl_operations, args.easy_operations, sizes, args.max_operand
    )
    budget = Budget(args.num_generations, args.prompts_per_step, args.budget, args.max_completion_length,
                    args.learning_rate, args.es_population, args.es_prompts, args.eval_samples)  # fmt: skip
    finished = FinishedPieces(output, args)
    warm, prepared = prepare(args, splits, finished, output)
    sets = chosen_sets(splits, prepared["screening"])
    policy = warm["policy"]
    print(f"warm start: picked {warm['picked']} (rule met: {warm['rule_met']}); RL pool {len(sets['pool'])} of "
          f"{len(splits.pool)}; hard set {len(sets['hard'])}; pre-run check {prepared['prerun_check']}", flush=True)  # fmt: skip
    results = {
        "config": {
            **{k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "budget_detail": asdict(budget),
        },
        "warm_start": warm,
        **prepared,
        "provenance": process_provenance(),
        "runs": [],
        "grids": {},
        "chosen": {},
    }

    def write_results(partial: bool) -> Path:
        """results.json with every run finished so far (``partial`` until the last), so a crash loses none."""
        results["partial"] = partial
        results["summary"] = summarize(results)
        results["elapsed_seconds"] = time.perf_counter() - started
        results["run_code_hashes"] = sorted({run["code_hash"] for run in results["runs"]})
        path = output / "results.json"
        path.write_text(json.dumps(results, indent=1))
        return path

    results["coef0_check"] = finished.get(
        "coef0_check", lambda: coef0_check(policy, sets["pool"], output / "check", 0, budget), extra=warm["picked"]
    )
    print(f"coefficient-0 check: {results['coef0_check']}", flush=True)

    if args.jobs > 1 and not args.worker:
        argv = sys.argv[1:] if argv is None else list(argv)
        run_side_by_side(argv, output, split_arms(args, args.jobs))

    def run(method: str, seed: int, setting: dict | None = None) -> dict:
        suffix = "".join(f"_{key}{value:g}" for key, value in (setting or {}).items())
        name = f"{method}{suffix}_seed{seed}"
        compute = stamped(lambda: run_method(method, policy, sets, str(output / name), seed, budget, setting))
        return finished.get(name, compute, extra=warm["picked"])

    run_grids(args, run, results)

    for method in args.methods:
        for seed in args.seeds:
            setting = results["chosen"].get("process" if method in BUNDLES[0] else method)
            finished_run = run(method, seed, setting)
            results["runs"].append(finished_run)
            if not args.worker:
                write_results(partial=True)
            end = finished_run["eval"][-1]
            print(f"{method} seed {seed}: faithful {end['sampled_faithful']:.3f}, hard "
                  f"{end.get('hard_sampled_faithful', float('nan')):.3f}, greedy {end['greedy_pass']:.3f} in "
                  f"{finished_run['wall_seconds']:.0f} s", flush=True)  # fmt: skip
    if args.worker:
        return results
    path = write_results(partial=False)
    for written in write_report(path):
        print(written)
    if args.quick:
        print(QUICK_NOTICE, flush=True)
    return results


if __name__ == "__main__":
    main()
