"""What every recipe shares: its command-line parser, the checks of a local dataset path and of the policy's dtype,
and the end-of-run summary (a table of the trainer's metrics per step, where the model and the logs went, and a
plot)."""

from __future__ import annotations

import difflib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from trl import TrlParser

LOCAL_DATA_SUFFIXES = (".json", ".jsonl")


class RecipeParser(TrlParser):
    """TRL's parser (YAML `--config`, then command-line overrides) without argparse's prefix matching.

    argparse reads an unambiguous prefix of a flag as the flag (``allow_abbrev``), so a misspelled ``--prm_typ symbolic``
    would silently set ``prm_type``. Here an unknown flag is refused, naming the closest known one.
    """

    def __init__(self, dataclass_types):
        super().__init__(dataclass_types, allow_abbrev=False)

    def parse_args_and_config(self, args=None, **kwargs):
        args = list(sys.argv[1:] if args is None else args)
        known = [option for option in self._option_string_actions if option.startswith("--")]
        for arg in args:
            flag = arg.split("=", 1)[0]
            if flag.startswith("--") and flag != "--config" and flag not in self._option_string_actions:
                close = difflib.get_close_matches(flag, known, n=1)
                hint = f"; did you mean {close[0]}?" if close else "; `--help` lists them all."
                raise ValueError(f"Unknown flag {flag} (flags must be spelled out in full){hint}")
        return super().parse_args_and_config(args, **kwargs)


def looks_like_a_local_path(name: str) -> bool:
    """A .json/.jsonl name, an explicit path (/, ./, ../, ~), or a name with a `/` whose prefix is a local directory
    (``data/train`` where ``data/`` exists); hub ids such as ``openai/gsm8k`` are none of these."""
    if name.endswith(LOCAL_DATA_SUFFIXES) or name.startswith(("/", "./", "../", "~")):
        return True
    return any(os.path.isdir(name[:index]) for index, char in enumerate(name) if char == "/" and index > 0)


def check_dataset_name(dataset_name: str | None) -> None:
    """Refuse a `dataset_name` that names a local path that does not exist, before anything loads.

    Otherwise `datasets` takes it for a hub id, and offline that ends in a ConnectionError that never says the file is
    missing.
    """
    if dataset_name is None:
        raise ValueError("`dataset_name` is not set: give a hub dataset id or a local .json/.jsonl file.")
    path = os.path.expanduser(dataset_name)
    if looks_like_a_local_path(dataset_name) and not os.path.exists(path):
        raise FileNotFoundError(
            f"`dataset_name` is {dataset_name}, a local path, but there is no such file (relative paths are read from "
            f"the working directory, {os.getcwd()}); give an existing .json/.jsonl file or a hub dataset id."
        )


LOW_PRECISION_DTYPES = ("bfloat16", "float16")


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "false").lower() == "true"


def _checkpoint_dtype(model_name_or_path: str) -> str | None:
    """The dtype a checkpoint's config.json records (what dtype `auto` loads), or None when it cannot be read here."""
    try:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(model_name_or_path)
    except (OSError, ValueError):
        return None
    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    return None if dtype is None else str(dtype).removeprefix("torch.")


def check_policy_dtype(training_args, model_args) -> None:
    """Refuse bf16/fp16 policy weights that train with no fp32 master copy; before anything loads.

    Under plain DDP (recipes/accelerate/ddp.yaml) or one process, the optimizer steps the weights in the dtype they
    were loaded in, and `bf16: true` only autocasts the compute: an AdamW step of lr 1e-6 rounds away in bf16 for
    most weights (1.9% of them changed in 10 steps, measured on CPU). DeepSpeed ZeRO and FSDP keep an fp32 master
    themselves, and PEFT trains fp32 adapters over a frozen base, so those are left alone.
    """
    dtype = str(model_args.dtype).removeprefix("torch.")
    if dtype == "auto":
        dtype = _checkpoint_dtype(model_args.model_name_or_path) or dtype
    if dtype not in LOW_PRECISION_DTYPES or model_args.use_peft:
        return
    if training_args.deepspeed or training_args.fsdp or _env_flag("ACCELERATE_USE_DEEPSPEED"):
        return
    if _env_flag("ACCELERATE_USE_FSDP"):
        return
    raise ValueError(
        f"dtype={model_args.dtype} without DeepSpeed or FSDP trains {dtype} weights with no fp32 master copy (most "
        f"AdamW updates at learning_rate {training_args.learning_rate:g} round away); set --dtype float32 (bf16: true "
        "still computes in bf16) or launch with recipes/accelerate/zero2.yaml, which keeps an fp32 master"
    )


# ---------------------------------------------------------------- end-of-run summary

SUMMARY_MAX_STEPS = 8  # columns of the table; a longer run shows evenly spaced steps, the last one included
PLOTTED = ("verigate/gate_rate", "reward", "verigate/prm_step_score_mean")


def metric_rows(log_history: list[dict], prefix: str) -> list[dict]:
    """The logged rows (one per logging step) that hold metrics starting with ``prefix``, with their step."""
    return [row for row in log_history if "step" in row and any(key.startswith(prefix) for key in row)]


def _shown_steps(rows: list[dict]) -> list[dict]:
    if len(rows) <= SUMMARY_MAX_STEPS:
        return rows
    last = len(rows) - 1
    return [rows[round(index * last / (SUMMARY_MAX_STEPS - 1))] for index in range(SUMMARY_MAX_STEPS)]


def metrics_table(log_history: list[dict], prefix: str = "verigate/") -> str:
    """The ``prefix`` metrics and the mean reward, one row per metric and one column per logged step."""
    rows = _shown_steps(metric_rows(log_history, prefix))
    if not rows:
        return f"No {prefix}* metrics were logged."
    names = sorted({key for row in rows for key in row if key.startswith(prefix)})
    if any("reward" in row for row in rows):
        names = ["reward", *names]
    width = max(len(name) for name in names)
    lines = [f"{'step':<{width}} " + " ".join(f"{row['step']:>9}" for row in rows)]
    for name in names:
        cells = [f"{row[name]:>9.4g}" if isinstance(row.get(name), (int, float)) else f"{'-':>9}" for row in rows]
        lines.append(f"{name:<{width}} " + " ".join(cells))
    return "\n".join(lines)


def plot_metrics(log_history: list[dict], path: Path, prefix: str = "verigate/") -> bool:
    """A PNG of gate rate, mean reward and mean PRM step score per step; False (nothing written) without matplotlib,
    which is not a dependency of trl-verigate."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")  # files only: no display on a cluster node
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    rows = metric_rows(log_history, prefix)
    figure, axes = plt.subplots(figsize=(6, 3.5))
    for name in PLOTTED:
        points = [(row["step"], row[name]) for row in rows if isinstance(row.get(name), (int, float))]
        if points:
            steps, values = zip(*points, strict=True)
            axes.plot(steps, values, marker="o", label=name)
    axes.set_xlabel("step")
    axes.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    axes.set_ylim(-0.05, 1.05)  # all three lie in [0, 1]
    axes.legend()
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return True


def tracker_locations(report_to: list[str]) -> list[str]:
    """Where the trackers named in ``report_to`` keep this run's logs."""
    places = []
    for tracker in report_to:
        if tracker == "wandb":
            mode = os.environ.get("WANDB_MODE", "online")
            places.append(f"wandb ({mode}): {Path(os.environ.get('WANDB_DIR', '.')).resolve() / 'wandb'}")
        elif tracker == "mlflow":
            places.append(f"mlflow: {os.environ.get('MLFLOW_TRACKING_URI', Path('mlruns').resolve())}")
        else:
            places.append(tracker)
    return places


def summarize_run(
    log_history: list[dict], output_dir: str, report_to: list[str] | str | None, print_fn: Callable[[str], None] = print
) -> None:
    """Print the metrics table and where everything went; write the metrics (JSON) and the plot into ``output_dir``."""
    report_to = [report_to] if isinstance(report_to, str) else list(report_to or [])
    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    metrics_file = output / "verigate_metrics.json"
    metrics_file.write_text(json.dumps(metric_rows(log_history, "verigate/"), indent=1) + "\n")
    print_fn("\nVeriGate metrics per step:\n" + metrics_table(log_history))
    print_fn(f"Model: {output.resolve()}")
    print_fn(f"Metrics per step: {metrics_file.resolve()}")
    trackers = tracker_locations([tracker for tracker in report_to if tracker != "none"])
    print_fn("Trackers: " + ("; ".join(trackers) if trackers else "none (report_to: none)"))
    plot = output / "verigate_metrics.png"
    if plot_metrics(log_history, plot):
        print_fn(f"Plot of gate rate and rewards per step: {plot.resolve()}")
    else:
        print_fn("No plot: matplotlib is not installed (pip install matplotlib).")


def add_pass_at_k_callback(trainer, arguments, verifier=None, **prompt) -> None:
    """Evaluate pass@k during training when the recipe's `pass_at_k_dataset` is set (`PassAtKArguments`); `prompt`
    (prompt_template, conversational) makes evaluation prompts the training prompts."""
    if arguments.pass_at_k_dataset:
        from trl_verigate import PassAtKCallback

        trainer.add_callback(PassAtKCallback.from_arguments(trainer, arguments, verifier=verifier, **prompt))
