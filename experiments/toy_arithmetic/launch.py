"""The whole comparison: warm start, starting point, coefficient-0 check, ES sweep, every method × seed, report.

    python -m experiments.toy_arithmetic.launch [--quick] [--output DIR] [--seeds 0 1 2] [...]

Writes DIR/results.json, DIR/results.md (table) and DIR/pass_rate.png, DIR/zero_std_vs_gate.png. ``--quick`` is a
small preset meant to finish in about 10 minutes on 2 idle CPU cores; any size flag overrides the preset.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict
from pathlib import Path

from experiments.toy_arithmetic.task import MAX_OPERAND

PRESETS = {
    # Sizes of the full run, chosen to fit about an hour on the shared 2-core machine (measured: docs/experiments.md).
    "full": {
        "hidden_size": 128, "num_layers": 4, "sft_problems": 3000, "sft_steps": 1200, "sft_batch_size": 32,
        "train_problems": 256, "eval_problems": 64, "num_generations": 8, "prompts_per_step": 4, "budget": 3072,
        "max_completion_length": 80, "seeds": [0, 1, 2], "eval_every": 512, "start_groups": 64,
        "es_sweep": [[4, 1e-3], [4, 3e-3], [8, 1e-3], [8, 3e-3]],
    },
    "quick": {
        "hidden_size": 128, "num_layers": 4, "sft_problems": 600, "sft_steps": 200, "sft_batch_size": 32,
        "train_problems": 64, "eval_problems": 16, "num_generations": 4, "prompts_per_step": 2, "budget": 32,
        "max_completion_length": 80, "seeds": [0, 1, 2], "eval_every": 16, "start_groups": 8,
        "es_sweep": [[2, 1e-3], [2, 1e-2]],
    },
}  # fmt: skip


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="GRPO vs VeriGate vs process-verified GRPO vs ES on toy arithmetic.")
    parser.add_argument("--quick", action="store_true", help="the small preset (about 10 minutes on 2 CPU cores)")
    parser.add_argument("--output", type=Path, default=Path("outputs/experiments/toy_arithmetic"))
    parser.add_argument("--methods", nargs="+", default=["grpo", "verigate", "process", "process_coef0", "es"])
    parser.add_argument("--task-seed", type=int, default=1234, help="seed of the problem sets")
    parser.add_argument("--easy", type=int, nargs="+", default=[1, 2, 3], help="operations per warm-start problem")
    parser.add_argument("--hard", type=int, nargs="+", default=[4], help="operations per RL training problem")
    parser.add_argument(
        "--max-operand", type=int, default=MAX_OPERAND, help="operands are 1..N, every intermediate result in [0, 3N]"
    )
    parser.add_argument("--learning-rate", type=float, default=1e-4, help="GRPO-like methods")
    parser.add_argument("--es-learning-rate", type=float, default=5e-4)
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
        if name == "es_sweep":
            parser.add_argument(flag, type=str, default=None, help="ES sweep as 'P:sigma,P:sigma', e.g. 4:1e-3,8:1e-3")
        elif isinstance(value, list):
            parser.add_argument(flag, type=int, nargs="+", default=None)
        else:
            parser.add_argument(flag, type=type(value), default=None)
    args = parser.parse_args(argv)
    preset = PRESETS["quick" if args.quick else "full"]
    for name, value in preset.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if isinstance(args.es_sweep, str):
        try:
            args.es_sweep = [[int(p), float(s)] for p, s in (item.split(":") for item in args.es_sweep.split(","))]
        except ValueError as error:
            parser.error(f"--es-sweep {args.es_sweep!r}: write population:sigma pairs like 4:1e-3,8:1e-3 ({error})")
    unknown = set(args.methods) - {"grpo", "verigate", "process", "process_coef0", "es"}
    if unknown:
        parser.error(f"--methods: unknown {sorted(unknown)}; choose from grpo verigate process process_coef0 es")
    if args.budget < args.prompts_per_step * args.num_generations:
        parser.error(f"--budget {args.budget} is below one GRPO step ({args.prompts_per_step * args.num_generations})")
    if "es" in args.methods:
        for population, _ in args.es_sweep:
            if (
                population < 2
                or population % 2
                or args.budget < population * args.prompts_per_step * args.num_generations
            ):
                parser.error(
                    f"--es-sweep population {population}: needs an even P >= 2 (antithetic pairs) with --budget >= "
                    f"P x prompts_per_step x num_generations = {population * args.prompts_per_step * args.num_generations}"
                )
    for name in ("num_generations", "prompts_per_step", "eval_problems", "train_problems", "sft_steps"):
        if getattr(args, name) < (2 if name == "num_generations" else 1):
            parser.error(f"--{name.replace('_', '-')} {getattr(args, name)} is too small (GRPO needs >= 2 generations)")
    if args.max_operand < 2:
        parser.error(f"--max-operand {args.max_operand} must be at least 2")
    if not args.seeds:
        parser.error("--seeds: give at least one seed")
    if "process_coef0" in args.methods and "grpo" not in args.methods:
        parser.error("--methods: process_coef0 is checked against grpo; include grpo too")
    return args


# Flags that do not change any finished piece's result: a rerun with other values reuses what is on disk.
NOT_IN_FINGERPRINT = {"output", "methods", "seeds", "threads", "quick"}
# The only flags the warm start depends on (it is trained with the first seed), and those the starting point adds:
# changing the RL budget or the ES sweep keeps both.
WARM_START_FLAGS = (
    "task_seed",
    "easy",
    "max_operand",
    "hidden_size",
    "num_layers",
    "sft_problems",
    "sft_steps",
    "sft_batch_size",
    "sft_learning_rate",
)
# Bumped when `starting_point` measures something new, so a stored starting point without it is measured again.
STARTING_POINT_VERSION = 2
STARTING_POINT_FLAGS = (
    *WARM_START_FLAGS,
    "hard",
    "train_problems",
    "start_groups",
    "num_generations",
    "max_completion_length",
)


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


def coef0_check(policy, train, output: Path, seed: int, budget) -> dict:
    """First-batch advantages of GRPO, process coef 0 and process coef 1 from the same seed and rows."""
    from experiments.toy_arithmetic.methods import first_batch_advantages

    batches = {
        m: first_batch_advantages(m, policy, train, str(output / f"check_{m}"), seed, budget)
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

    from experiments.toy_arithmetic.methods import Budget, run_method
    from experiments.toy_arithmetic.oracle import ArithmeticProcessOracle
    from experiments.toy_arithmetic.policy import build_policy, pass_rate, starting_point, warm_start
    from experiments.toy_arithmetic.report import summarize, write_report
    from experiments.toy_arithmetic.task import make_splits
    from trl_verigate.rewards.math import MathAccuracyReward

    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    output: Path = args.output
    output.mkdir(parents=True, exist_ok=True)
    splits = make_splits(
        args.task_seed,
        args.easy,
        args.hard,
        args.sft_problems,
        args.train_problems,
        args.eval_problems,
        args.max_operand,
    )
    budget = Budget(
        args.num_generations,
        args.prompts_per_step,
        args.budget,
        args.max_completion_length,
        args.learning_rate,
        args.es_learning_rate,
        args.eval_every,
    )
    timings = {}

    finished = FinishedPieces(output, args)

    def train_warm_start() -> dict:
        clock = time.perf_counter()
        base = build_policy(output / "base", args.hidden_size, args.num_layers)
        path = warm_start(
            base,
            splits.sft,
            output / "warm_start",
            args.sft_steps,
            args.sft_batch_size,
            args.sft_learning_rate,
            args.seeds[0],
        )
        return {"policy": path, "seconds": time.perf_counter() - clock}

    def model_saved(warm: dict) -> bool:  # a record whose model was deleted since is trained again
        return (Path(warm["policy"]) / "config.json").exists()

    warm = finished.get("warm_start", train_warm_start, WARM_START_FLAGS, args.seeds[0], usable=model_saved)
    policy = warm["policy"]
    timings["warm_start"] = warm["seconds"]
    model, tokenizer = AutoModelForCausalLM.from_pretrained(policy), AutoTokenizer.from_pretrained(policy)
    accuracy = MathAccuracyReward()
    warm_eval = {
        "easy": pass_rate(model, tokenizer, splits.eval_easy, args.max_completion_length, accuracy),
        "hard": pass_rate(model, tokenizer, splits.eval_hard, args.max_completion_length, accuracy),
    }
    start = finished.get(
        "starting_point",
        lambda: starting_point(
            policy,
            splits.train[: args.start_groups],
            args.num_generations,
            args.max_completion_length,
            1.0,
            args.seeds[0],
            ArithmeticProcessOracle(),
        ),
        STARTING_POINT_FLAGS,
        [args.seeds[0], STARTING_POINT_VERSION],
    )
    print(f"warm start: held-out {warm_eval}; on hard training prompts {start}", flush=True)

    results = {
        "config": {
            **{k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "budget_detail": asdict(budget),
        },
        "warm_start_eval": warm_eval,
        "starting_point": start,
        "timings": timings,
        "runs": [],
        "es_sweep": [],
    }
    if "process_coef0" in args.methods:
        clock = time.perf_counter()
        results["coef0_check"] = finished.get(
            "coef0_check", lambda: coef0_check(policy, splits.train, output / "check", args.seeds[0], budget)
        )
        timings["coef0_check"] = time.perf_counter() - clock
        print(f"coefficient-0 check: {results['coef0_check']}", flush=True)

    def write_results(partial: bool) -> Path:
        """results.json with every run finished so far (``partial`` until the last), so a crash loses none."""
        results["partial"] = partial
        results["summary"] = summarize(results)
        path = output / "results.json"
        path.write_text(json.dumps(results, indent=1))
        return path

    es_chosen = None
    if "es" in args.methods:
        clock = time.perf_counter()
        for population, sigma in args.es_sweep:
            es = {"population_size": population, "sigma": sigma}
            name = f"es_sweep_P{population}_s{sigma}"
            run = finished.get(
                name,
                lambda es=es, name=name: run_method(
                    "es",
                    policy,
                    splits.train,
                    splits.eval_easy,
                    splits.eval_hard,
                    str(output / name),
                    args.seeds[0],
                    budget,
                    es,
                ),
            )
            # Chosen on the training reward, never on the held-out sets.
            rewards = [m["es/reward_mean"] for m in run["metrics"] if "es/reward_mean" in m]
            results["es_sweep"].append(
                {
                    **es,
                    "train_reward_mean": sum(rewards) / len(rewards),
                    "final_eval": run["eval"][-1],
                    "wall_seconds": run["wall_seconds"],
                }
            )
        es_chosen = max(results["es_sweep"], key=lambda r: r["train_reward_mean"])
        es_chosen = {"population_size": es_chosen["population_size"], "sigma": es_chosen["sigma"]}
        results["es_chosen"] = es_chosen
        timings["es_sweep"] = time.perf_counter() - clock
        print(f"ES sweep: {results['es_sweep']}; chosen {es_chosen}", flush=True)

    for method in args.methods:
        for seed in args.seeds:
            name = f"{method}_seed{seed}"
            chosen = es_chosen if method == "es" else None
            run = finished.get(
                f"{name}_P{chosen['population_size']}_s{chosen['sigma']}" if chosen else name,
                lambda method=method, seed=seed, name=name, chosen=chosen: run_method(
                    method,
                    policy,
                    splits.train,
                    splits.eval_easy,
                    splits.eval_hard,
                    str(output / name),
                    seed,
                    budget,
                    chosen,
                ),
            )
            results["runs"].append(run)
            write_results(partial=True)
            print(f"{method} seed {seed}: {run['eval'][-1]} in {run['wall_seconds']:.0f} s", flush=True)
    timings["total"] = time.perf_counter() - started
    path = write_results(partial=False)
    for written in write_report(path):
        print(written)
    return results


if __name__ == "__main__":
    main()
