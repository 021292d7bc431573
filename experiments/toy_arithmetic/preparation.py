"""Everything before the RL runs: the warm start and its checkpoint pick, the screening of the hard prompts, the
start evaluation, the pre-run check, and a cache of all of it that a rerun reuses.

- **RL pool**: the pool's prompts with at most ``--pool-max-faithful`` faithful completions of
  ``--pool-screen-samples`` from the warm start (design 3: 0-1 of 4), in their order.
- **Hard set**: the first ``--hard-size`` hard candidates with at most ``--hard-max-faithful`` faithful of
  ``--eval-samples`` (design 3: 96 prompts with at most 1 of 16); when fewer qualify, the ones with the fewest,
  recorded as ``rule_met`` False. Screening samples under its own seed, so the start evaluation of the hard set is
  not the sample that picked it.
- **Cache** (``--save-warm-start DIR``, ``--warm-start-cache DIR``): the picked checkpoint's model and tokenizer
  files and ``warm_start.json`` (every result above, with the flags that produced them). A launcher given the cache
  skips the SFT, the calibration and the screening, and refuses a cache made under other flags.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

# The flags the warm start depends on: changing the RL sizes keeps it.
WARM_START_FLAGS = ("task_seed", "sft_seed", "sft_operations", "max_operand", "hidden_size", "num_layers", "sft_problems",
                    "sft_steps", "sft_batch_size", "sft_learning_rate", "sft_save_every")  # fmt: skip
# What the calibration and the start evaluation add (the split sizes move every later set).
SPLIT_FLAGS = (*WARM_START_FLAGS, "rl_operations", "easy_operations", "pool_problems", "calibration_problems",
               "eval_problems", "easy_problems", "hard_candidates", "max_completion_length", "num_generations",
               "eval_samples")  # fmt: skip
# What the screening and the pre-run check add: every flag the cache depends on.
CACHE_FLAGS = (*SPLIT_FLAGS, "pool_screen_samples", "pool_max_faithful", "hard_size", "hard_max_faithful",
               "prerun_prompts")  # fmt: skip
CACHE_FILE = "warm_start.json"
POLICY_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")  # fmt: skip


def _load(path: str):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)


def train_and_pick(args, splits, finished, output: Path) -> dict:
    """The warm start's checkpoints, their calibration and the rule's pick (each a resumable piece)."""
    from experiments.toy_arithmetic.evaluation import calibrate, pick_checkpoint
    from experiments.toy_arithmetic.oracle import ArithmeticProcessOracle
    from experiments.toy_arithmetic.policy import build_policy, warm_start

    sft_dir = output / f"warm_start_{finished.digest(WARM_START_FLAGS)}"

    def train() -> list[str]:
        base = build_policy(output / "base", args.hidden_size, args.num_layers)
        return warm_start(base, splits.sft, sft_dir, args.sft_steps, args.sft_batch_size, args.sft_learning_rate,
                          args.sft_seed, args.sft_save_every)  # fmt: skip

    def saved(value) -> bool:  # a record whose checkpoints were deleted since is trained again
        return all((Path(path) / "config.json").exists() for path in value)

    checkpoints = finished.get("warm_start", train, WARM_START_FLAGS, usable=saved)
    oracle = ArithmeticProcessOracle()
    calibration = {
        Path(path).name: finished.get(
            f"calibration_{Path(path).name}",
            lambda path=path: calibrate(
                *_load(path), splits.calibration, args.num_generations, args.max_completion_length, oracle
            ),  # fmt: skip
            SPLIT_FLAGS,
        )
        for path in checkpoints
    }
    pick = pick_checkpoint(calibration)
    return {"calibration": calibration, **pick, "policy": str(sft_dir / pick["picked"])}


def screen_and_check(args, splits, finished, warm: dict) -> dict:
    """The screening of the RL pool and the hard candidates, the start evaluation and the pre-run check."""
    from experiments.toy_arithmetic.evaluation import evaluate_policy, keep_hard, screen
    from experiments.toy_arithmetic.oracle import ArithmeticProcessOracle
    from experiments.toy_arithmetic.prerun import prerun_check

    oracle, policy = ArithmeticProcessOracle(), warm["policy"]

    def screening() -> dict:
        model, tokenizer = _load(policy)
        pool = screen(model, tokenizer, splits.pool, args.pool_screen_samples, args.max_completion_length, oracle)
        hard = screen(model, tokenizer, splits.hard_candidates, args.eval_samples, args.max_completion_length, oracle)
        return {
            "pool_counts": pool,
            "pool": keep_hard(pool, args.pool_max_faithful),
            "hard_counts": hard,
            "hard": keep_hard(hard, args.hard_max_faithful, args.hard_size),
        }

    screened = finished.get("screening", screening, CACHE_FLAGS, extra=warm["picked"])
    sets = chosen_sets(splits, screened)
    start = finished.get(
        "start_eval",
        lambda: evaluate_policy(
            *_load(policy),
            sets["held_out"],
            sets["eval_easy"],
            args.eval_samples,
            args.max_completion_length,
            oracle,
            sets["hard"],
        ),  # fmt: skip
        CACHE_FLAGS,
        extra=warm["picked"],
    )
    check = finished.get(
        "prerun_check",
        lambda: prerun_check(
            *_load(policy), sets["pool"][: args.prerun_prompts], args.num_generations, args.max_completion_length
        ),  # fmt: skip
        CACHE_FLAGS,
        extra=warm["picked"],
    )
    return {"screening": screened, "start_eval": start, "prerun_check": check}


def chosen_sets(splits, screened: dict) -> dict:
    """The problem sets the runs use: the screened pool and hard set, the held-out and easy sets as drawn."""
    return {
        "pool": [splits.pool[i] for i in screened["pool"]["indices"]],
        "hard": [splits.hard_candidates[i] for i in screened["hard"]["indices"]],
        "held_out": splits.held_out,
        "eval_easy": splits.eval_easy,
    }


def save_cache(directory: Path, flags: dict, warm: dict, prepared: dict) -> None:
    """Write the picked checkpoint's model and tokenizer files and everything prepared to ``directory``."""
    policy = directory / "policy"
    policy.mkdir(parents=True, exist_ok=True)
    for name in POLICY_FILES:
        if (Path(warm["policy"]) / name).exists():
            shutil.copy2(Path(warm["policy"]) / name, policy / name)
    record = {"flags": flags, "warm_start": {**warm, "policy": "policy"}, **prepared}
    (directory / CACHE_FILE).write_text(json.dumps(record, indent=1))


def load_cache(directory: Path, flags: dict) -> tuple[dict, dict]:
    """(warm start record, prepared pieces) from a cache, its policy path made absolute; SystemExit with a
    one-line message when the cache is missing or was made under other flags."""
    path = directory / CACHE_FILE
    if not path.exists():
        raise SystemExit(f"--warm-start-cache {directory}: no {CACHE_FILE} there; make one with --save-warm-start")
    record = json.loads(path.read_text())
    differing = sorted(key for key in CACHE_FLAGS if record["flags"].get(key) != flags.get(key))
    if differing:
        shown = ", ".join(f"--{key.replace('_', '-')} {record['flags'].get(key)}" for key in differing)
        raise SystemExit(f"--warm-start-cache {directory} was made with {shown}: pass those flags or drop the cache")
    warm = {**record["warm_start"], "policy": str((directory / "policy").resolve())}
    return warm, {key: record[key] for key in ("screening", "start_eval", "prerun_check")}
