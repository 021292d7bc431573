"""What every recipe shares: its command-line parser, its entry point (bad input is one line and exit status 2,
before any model loads), the checks of the dataset, the policy, the prover commands and the policy's dtype, and the
end-of-run summary (a table of the trainer's metrics per step, where the model, the logs and the checkpoints went,
a plot with one panel per quantity, and a one-line reading of what moved)."""

from __future__ import annotations

import difflib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from transformers import TrainerCallback
from trl import TrlParser

from trl_verigate.cli_parser import OneLineErrors, exit_with_usage_error, one_line
from trl_verigate.master_weights import keeps_fp32_master, load_dtype
from trl_verigate.prover_pool.checks import program_problem
from trl_verigate.trainers.process_verified import VerifierUnavailable

LOCAL_DATA_SUFFIXES = (".json", ".jsonl")
# What bad input raises while a recipe parses and prepares: a config's ValueError/TypeError, a missing file's
# FileNotFoundError, an unreachable hub's ConnectionError (an OSError).
INPUT_ERRORS = (ValueError, TypeError, OSError)
# Seconds a rank other than 0 waits before printing its input error (see `run_recipe`).
OTHER_RANKS_WAIT_S = 5.0
# Keys of a recipe YAML that are no field: TRL reads `env` as environment variables to set.
CONFIG_ONLY_KEYS = ("env",)


class RecipeParser(OneLineErrors, TrlParser):
    """TRL's parser (YAML `--config`, then command-line overrides) without argparse's prefix matching, and with the
    YAML's keys checked.

    argparse reads an unambiguous prefix of a flag as the flag (``allow_abbrev``), so a misspelled ``--prm_typ symbolic``
    would silently set ``prm_type``. Here an unknown flag is refused, naming the closest known one; so is an unknown
    YAML key (TRL would raise "Unknown arguments from config file" with no suggestion). argparse's own errors (a
    value of the wrong type, a choice that is not one) are one line, not the usage of every flag.
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
        if "--config" in args:
            at = args.index("--config")
            if at + 1 >= len(args):
                raise ValueError("--config needs the path of a recipe YAML, e.g. --config recipes/verigate_math.yaml")
            self.check_config_keys(args[at + 1])
        return super().parse_args_and_config(args, **kwargs)

    def check_config_keys(self, path: str) -> None:
        """Refuse a YAML that is missing, not a mapping, or has a key no field of the recipe takes."""
        if not os.path.isfile(path):
            raise FileNotFoundError(f"--config {path}: no such file; give the path of a recipe YAML")
        try:
            with open(path, encoding="utf-8") as file:
                config = yaml.safe_load(file)
        except yaml.YAMLError as error:
            raise ValueError(f"--config {path}: not valid YAML ({one_line(error)})") from error
        if not isinstance(config, dict):
            raise ValueError(f"--config {path}: must hold a YAML mapping of field: value, got {type(config).__name__}")
        fields = sorted({action.dest for action in self._actions if action.dest != "help"})
        for key in config:
            if key in CONFIG_ONLY_KEYS or key in fields:
                continue
            close = difflib.get_close_matches(str(key), fields, n=1)
            hint = f"did you mean `{close[0]}`?" if close else "`--help` lists every field"
            raise ValueError(f"--config {path}: unknown key `{key}`; {hint}")


def run_recipe(parse_args: Callable, prepare: Callable, train: Callable, argv: Sequence[str] | None = None) -> None:
    """A recipe's entry point: parse, ``prepare`` (every check and the datasets, before any model loads), train.

    Bad input raised while parsing or preparing (`INPUT_ERRORS`), or a verifier that fails its liveness proof when
    training starts (`VerifierUnavailable`), ends the process with one line naming the field and the fix, and exit
    status 2. An error once training has begun keeps its traceback: that is a fault to debug, not
    an input to fix.

    Under ``accelerate launch`` a child's non-zero exit makes accelerate raise its own CalledProcessError traceback
    (exit status 1); ``accelerate launch --quiet`` exits 1 without it, so the recipe's line is the last one printed.
    A multi-process launch (torch.distributed.run) always adds its own failure report after the line.
    """
    interrupt = Interrupt()
    try:
        interrupt.install()
        try:
            args = parse_args(None if argv is None else list(argv))
            prepared = prepare(*args)
        except INPUT_ERRORS as error:
            if int(os.environ.get("RANK", "0")) != 0:
                # Every rank reads the same input, so rank 0 fails alike: waiting lets it print the line once and
                # the launcher stop the others. A failure of this rank alone is still printed, after the wait.
                time.sleep(OTHER_RANKS_WAIT_S)
            exit_with_usage_error(os.path.basename(sys.argv[0]), str(error))
        try:
            train(*args, prepared=prepared)
        except VerifierUnavailable as error:
            # Raised before the policy loads, by the trainer's or the recipe's liveness proof: a setup to fix.
            exit_with_usage_error(os.path.basename(sys.argv[0]), str(error))
    except KeyboardInterrupt:
        interrupt.ignore_more()
        close_progress_bars()
        print(interrupted_line(TRAINING_PROGRESS), file=sys.stderr, flush=True)
        raise SystemExit(128 + interrupt.signum) from None
    finally:
        interrupt.restore()


class Interrupt:
    """SIGINT and SIGTERM both end a recipe as a Ctrl-C does. `accelerate launch` answers Ctrl-C by sending its
    child SIGTERM right after the terminal's SIGINT, and cluster schedulers stop jobs with SIGTERM; either way the
    run should say where it stopped. The first signal ignores any further ones, so a second one arriving while the
    provers close adds no traceback.

    Under accelerate's single-process launcher a Ctrl-C waits for that SIGTERM (at most `LAUNCHER_GRACE_S`) before
    the recipe stops: the launcher copies the child's stderr, and a chunk it has read when its own KeyboardInterrupt
    lands is never written, so a line printed at once is lost about one time in five on a loaded machine. By the
    time the launcher sends SIGTERM it copies stderr in a thread that writes all it reads."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)
    LAUNCHER_GRACE_S = 2.0

    def __init__(self):
        self.signum = signal.SIGINT
        self.received = False
        self.previous = {}

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self.previous = {signum: signal.signal(signum, self.handle) for signum in self.SIGNALS}

    def handle(self, signum, frame) -> None:
        if not self.received:
            self.signum, self.received = signum, True
            if signum == signal.SIGINT and under_accelerate_launcher():
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                signal.signal(signal.SIGALRM, self.handle)
                signal.setitimer(signal.ITIMER_REAL, self.LAUNCHER_GRACE_S)
                return
        self.ignore_more()
        raise KeyboardInterrupt

    def restore(self) -> None:
        """Give back the handlers `install` replaced, as `run_recipe` may be one call in a longer process (the
        tests'); after a signal they stay ignored while the process ends."""
        if self.received:
            self.ignore_more()  # also cancels a grace timer still running if training ended within it
        else:
            for signum, handler in self.previous.items():
                signal.signal(signum, handler)

    def ignore_more(self) -> None:
        if threading.current_thread() is threading.main_thread():
            signal.setitimer(signal.ITIMER_REAL, 0)
            for signum in (*self.SIGNALS, signal.SIGALRM):
                signal.signal(signum, signal.SIG_IGN)


def under_accelerate_launcher() -> bool:
    """Whether accelerate's single-process launcher started this process: it alone sets ACCELERATE_USE_CPU (its
    multi-process launcher is torch.distributed.run, which does not copy its workers' stderr)."""
    return "ACCELERATE_USE_CPU" in os.environ


def close_progress_bars() -> None:
    """Close the progress bars an interrupt left open: tqdm redraws each when it is collected at exit, which would
    put a bar after the interrupt's line."""
    from tqdm import tqdm

    for bar in list(tqdm._instances):  # tqdm's registry of open bars
        bar.close()


class TrainingProgress(TrainerCallback):
    """Where training stands, for the line a Ctrl-C prints: the last finished optimizer step (None until training
    begins) and the run's output folder."""

    def __init__(self):
        self.step: int | None = None
        self.output_dir: str | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.step, self.output_dir = state.global_step, args.output_dir

    def on_step_end(self, args, state, control, **kwargs):
        self.step = state.global_step


# The one a recipe's `train` adds to its trainer (`track_progress`) and `run_recipe` reads after a Ctrl-C.
TRAINING_PROGRESS = TrainingProgress()


def track_progress(trainer) -> None:
    """Let `run_recipe` report the step and the last checkpoint if training is interrupted."""
    trainer.add_callback(TRAINING_PROGRESS)


def last_complete_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest `checkpoint-N` folder holding trainer_state.json, which Transformers writes after the weights and
    the optimizer: a folder without it was cut off while saving."""
    complete = [path for path in checkpoint_dirs(output_dir) if (path / "trainer_state.json").is_file()]
    return complete[-1] if complete else None


def interrupted_line(progress: TrainingProgress) -> str:
    """What a Ctrl-C prints: the step reached and how to resume, or that loading was interrupted."""
    if progress.step is None or progress.output_dir is None:
        return "interrupted while loading; nothing was trained"
    checkpoint = last_complete_checkpoint(progress.output_dir)
    if checkpoint is None:
        return f"interrupted at step {progress.step}; last complete checkpoint: none (see save_strategy, save_steps)"
    return (
        f"interrupted at step {progress.step}; last complete checkpoint: {checkpoint}; resume with "
        f"`--resume_from_checkpoint {checkpoint}`"
    )


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


def load_local_json(path: str, field: str, split: str = "train"):
    """The rows of a local .json/.jsonl file as a `datasets` split named ``split`` (a `DatasetDict` of that one
    split); a file without rows is refused naming ``field`` (`datasets` itself raises a bare StopIteration)."""
    from datasets import load_dataset
    from datasets.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    problem = f"`{field}` is {path}, a file with no rows; give a .json/.jsonl file with one row per example"
    if not has_content(path):
        raise ValueError(problem)
    bars_were_disabled = are_progress_bars_disabled()
    disable_progress_bars()  # a failed load's bar would end on stderr before the line
    try:
        files = load_dataset("json", data_files={split: path})
    except StopIteration as error:
        raise ValueError(problem) from error
    except ValueError as error:  # `[]`: "Instruction "train" corresponds to no data!"
        raise ValueError(f"{problem} ({one_line(error)})") from error
    finally:
        if not bars_were_disabled:
            enable_progress_bars()
    if len(files[split]) == 0:
        raise ValueError(problem)
    return files


def has_content(path: str, chunk_size: int = 1 << 16) -> bool:
    """Whether the file holds anything but whitespace (read until the first such character)."""
    with open(path, "rb") as file:
        while chunk := file.read(chunk_size):
            if chunk.strip():
                return True
    return False


def check_model_name(value: str, field: str = "model_name_or_path", revision: str | None = None) -> None:
    """Refuse a model that is neither a local checkpoint folder nor a hub id whose config.json can be fetched (or is
    cached, offline), before anything loads: otherwise the policy's load fails after the datasets are prepared,
    with a traceback."""
    path = Path(value).expanduser()
    if path.is_dir():
        if not any((path / name).is_file() for name in ("config.json", "adapter_config.json")):
            raise ValueError(f"`{field}` is {value}, a folder without config.json; give a model checkpoint folder")
        return
    if path.exists() or looks_like_a_local_path(value):
        raise FileNotFoundError(
            f"`{field}` is {value}, a local path, but there is no such model folder (relative paths are read from the "
            f"working directory, {os.getcwd()}); give a checkpoint folder or a hub model id"
        )
    from transformers.utils import cached_file

    try:
        cached_file(value, "config.json", revision=revision)
    except (OSError, ValueError) as error:
        reason = one_line(str(error).splitlines()[0] if str(error) else type(error).__name__)
        raise ValueError(
            f"`{field}` is {value}: neither a local folder nor a model the hub serves to this machine ({reason}); "
            "give a local checkpoint folder, or a hub id that is reachable (offline: one already in the HF cache)"
        ) from error


def check_command(value: list[str] | None, field: str, example: str) -> None:
    """Refuse a prover command (a REPL's or coqidetop's argv) whose program cannot be run, before anything loads: a
    run would otherwise train with every proof an `error` status."""
    problem = program_problem(list(value)) if value else None
    if problem is not None:
        raise ValueError(f"`{field}` {problem}; give an argv whose program exists and is executable, e.g. {example}")


def check_policy_dtype(training_args, model_args) -> None:
    """Refuse bf16/fp16 policy weights that train with no fp32 master copy; before anything loads.

    The dtype is the one the policy will load in, from the kwargs `set_model_init_kwargs` builds (`--dtype` under
    explicit `model_init_kwargs`, which win) read as transformers reads them: `dtype` unless None, else its older
    alias `torch_dtype`; `auto` is the checkpoint's own (`trl_verigate.master_weights.load_dtype`). DeepSpeed ZeRO
    and FSDP keep an fp32 master themselves, and PEFT trains fp32 adapters over a frozen base, so those pass.
    """
    if model_args.use_peft or keeps_fp32_master(training_args):
        return
    explicit = getattr(training_args, "model_init_kwargs", None) or {}
    dtype, setting = load_dtype(model_args.model_name_or_path, {"dtype": model_args.dtype, **explicit})
    if explicit.get("dtype") is None and model_args.dtype is not None:
        setting = f"dtype={str(model_args.dtype).removeprefix('torch.')}"  # --dtype decides
    if dtype not in ("bfloat16", "float16"):
        return
    raise ValueError(
        f"{setting} without DeepSpeed or FSDP trains {dtype} weights with no fp32 master copy (most "
        f"AdamW updates at learning_rate {training_args.learning_rate:g} round away); set --dtype float32 (and "
        "model_init_kwargs dtype: float32 where set; bf16: true still computes in bf16) or launch with "
        "recipes/accelerate/zero2.yaml, which keeps an fp32 master"
    )


# ---------------------------------------------------------------- end-of-run summary

SUMMARY_MAX_STEPS = 8  # columns of the table; a longer run shows evenly spaced steps, the last one included
FRACTION_LIMITS = (-0.05, 1.05)


@dataclass(frozen=True)
class Panel:
    """One axes of the plot: the metrics it draws, its y label, and its y limits (None: fitted to the data)."""

    ylabel: str
    metrics: tuple[str, ...]
    ylim: tuple[float, float] | None = FRACTION_LIMITS
    caption: str = ""


@dataclass(frozen=True)
class RunSummary:
    """What a trainer's end-of-run summary shows: its metrics (those starting with ``prefix``, plus the trainer-wide
    ``also`` ones such as the mean reward and grad_norm), the plot's panels, title and x label, and the files it
    writes (``<stem>.json``, ``<stem>.png``)."""

    name: str
    prefix: str
    panels: tuple[Panel, ...]
    title: str
    xlabel: str
    stem: str
    also: tuple[str, ...] = ("reward", "reward_std", "grad_norm")

    @property
    def plotted(self) -> tuple[str, ...]:
        return tuple(name for panel in self.panels for name in panel.metrics)

    @property
    def caption(self) -> str:
        """The panels' captions in order, as the summary's line about the plot names them."""
        return ", ".join(panel.caption for panel in self.panels)


VERIGATE_SUMMARY = RunSummary(
    "VeriGate",
    "verigate/",
    (
        Panel("fraction of groups gated", ("verigate/gate_rate",), caption="gate rate"),
        Panel("mean accuracy reward", ("reward",), caption="reward"),
        Panel("mean PRM step score\n(gated groups)", ("verigate/prm_step_score_mean",), None, "PRM step score"),
    ),
    "VeriGate GRPO: gated groups, reward and PRM score per step",
    "optimizer step",
    "verigate_metrics",
)
ES_SUMMARY = RunSummary(
    "ES",
    "es/",
    (
        Panel(
            "population reward", ("es/reward_mean", "es/reward_max"), caption="the population's mean and best reward"
        ),
        Panel("L2 norm of the update", ("es/update_norm",), None, "the update's norm"),
    ),
    "Evolution strategies: population reward and update per iteration",
    "ES iteration (one population, one update)",
    "es_metrics",
    also=(),
)


def process_summary(prover: str) -> RunSummary:
    """The summary of process-verified GRPO on ``prover`` ("lean" or "coq"): its ``<prover>/`` metrics."""
    verdicts = (f"{prover}/pass_rate", f"{prover}/status/rejected", f"{prover}/status/failed")
    return RunSummary(
        f"{prover.capitalize()} process",
        f"{prover}/",
        (
            Panel("fraction of completions", verdicts, caption="pass rate and verdicts"),
            Panel(
                "first error / tactics\n(failed proofs)",
                (f"{prover}/first_error_relative",),
                caption="where the first error falls",
            ),
        ),
        f"Process-verified GRPO on {prover.capitalize()}: verdicts per step",
        "optimizer step",
        f"{prover}_metrics",
    )


def metric_rows(log_history: list[dict], prefix: str) -> list[dict]:
    """The logged rows (one per logging step) that hold metrics starting with ``prefix``, with their step."""
    return [row for row in log_history if "step" in row and any(key.startswith(prefix) for key in row)]


def _shown_steps(rows: list[dict]) -> list[dict]:
    if len(rows) <= SUMMARY_MAX_STEPS:
        return rows
    last = len(rows) - 1
    return [rows[round(index * last / (SUMMARY_MAX_STEPS - 1))] for index in range(SUMMARY_MAX_STEPS)]


def metrics_table(log_history: list[dict], prefix: str = "verigate/", also: tuple[str, ...] = ("reward",)) -> str:
    """The ``prefix`` metrics and the ``also`` ones logged, one row per metric and one column per logged step."""
    rows = _shown_steps(metric_rows(log_history, prefix))
    if not rows:
        return f"No {prefix}* metrics were logged."
    names = sorted({key for row in rows for key in row if key.startswith(prefix)})
    names = [name for name in also if any(name in row for row in rows)] + names
    width = max(len(name) for name in names)
    lines = [f"{'step':<{width}} " + " ".join(f"{row['step']:>9}" for row in rows)]
    for name in names:
        cells = [f"{row[name]:>9.4g}" if isinstance(row.get(name), (int, float)) else f"{'-':>9}" for row in rows]
        lines.append(f"{name:<{width}} " + " ".join(cells))
    return "\n".join(lines)


def _values(rows: list[dict], name: str) -> list[tuple[int, float]]:
    return [(row["step"], row[name]) for row in rows if isinstance(row.get(name), (int, float))]


def reading(log_history: list[dict], summary: RunSummary) -> str:
    """One line on what moved: each plotted metric (and each ``also`` one logged) that took different values, with
    its range over the logged steps; those that stayed put, with their value; plotted ones never logged."""
    rows = metric_rows(log_history, summary.prefix)
    moved, flat, missing = [], [], []
    for name in dict.fromkeys((*summary.also, *summary.plotted)):
        values = [value for _, value in _values(rows, name)]
        if not values:
            if name in summary.plotted:
                missing.append(name)
        elif max(values) > min(values):
            moved.append(f"{name} {min(values):.3g}..{max(values):.3g}")
        else:
            flat.append(f"{name} {values[0]:.3g}")
    parts = [f"moved: {'; '.join(moved) if moved else 'nothing'}"]
    if flat:
        parts.append(f"flat: {'; '.join(flat)}")
    if missing:
        parts.append(f"never logged: {', '.join(missing)}")
    return f"Reading ({len(rows)} steps): " + " | ".join(parts)


# Lines that lie on top of each other (two metrics at 0) stay told apart by their style and marker.
LINE_STYLES = (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"))


def _draw_panel(axes, rows: list[dict], panel: Panel) -> None:
    import matplotlib.ticker

    for index, name in enumerate(panel.metrics):
        points = _values(rows, name)
        if points:
            steps, values = zip(*points, strict=True)
            style, marker = LINE_STYLES[index % len(LINE_STYLES)]
            axes.plot(steps, values, linestyle=style, marker=marker, markersize=7 - index, label=name)
    if not axes.get_lines():
        axes.text(0.5, 0.5, "not logged in this run", ha="center", va="center", transform=axes.transAxes)
    axes.set_ylabel(panel.ylabel)
    axes.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    if panel.ylim is not None:
        axes.set_ylim(*panel.ylim)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)
    axes.grid(alpha=0.3)


def metrics_figure(log_history: list[dict], summary: RunSummary = VERIGATE_SUMMARY):
    """The matplotlib figure of the summary's panels, stacked over one shared step axis: titled, axes labelled, each
    legend beside its axes (never over a line)."""
    import matplotlib.pyplot as plt

    rows = metric_rows(log_history, summary.prefix)
    figure, all_axes = plt.subplots(len(summary.panels), 1, sharex=True, figsize=(8, 2.4 * len(summary.panels)))
    for axes, panel in zip(all_axes, summary.panels, strict=True):
        _draw_panel(axes, rows, panel)
    all_axes[0].set_title(summary.title)
    all_axes[-1].set_xlabel(summary.xlabel)
    return figure


def plot_metrics(log_history: list[dict], path: Path, summary: RunSummary = VERIGATE_SUMMARY) -> bool:
    """`metrics_figure` as a PNG at ``path``; False (nothing written) without matplotlib, which is not a dependency of
    trl-verigate."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")  # files only: no display on a cluster node
    import matplotlib.pyplot as plt

    figure = metrics_figure(log_history, summary)
    figure.savefig(path, dpi=100, bbox_inches="tight")  # "tight" keeps the legends beside the axes in the image
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


def checkpoint_dirs(output_dir: str | Path) -> list[Path]:
    """The run's `checkpoint-N` folders, in step order."""
    found = [path for path in Path(output_dir).glob("checkpoint-*") if path.name.split("-")[-1].isdigit()]
    return sorted(found, key=lambda path: int(path.name.split("-")[-1]))


def summarize_run(
    log_history: list[dict],
    output_dir: str,
    report_to: list[str] | str | None,
    print_fn: Callable[[str], None] = print,
    summary: RunSummary = VERIGATE_SUMMARY,
    state_file: str | None = None,
) -> None:
    """Print the metrics table and where everything went (the model, the metrics, the checkpoints, ``state_file``
    such as es_state.json, the trackers, the plot), then the reading of what moved; write the metrics (JSON) and the
    plot into ``output_dir``."""
    report_to = [report_to] if isinstance(report_to, str) else list(report_to or [])
    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    metrics_file = output / f"{summary.stem}.json"
    metrics_file.write_text(json.dumps(metric_rows(log_history, summary.prefix), indent=1) + "\n")
    print_fn(f"\n{summary.name} metrics per step:\n" + metrics_table(log_history, summary.prefix, summary.also))
    print_fn(f"Model: {output.resolve()}")
    print_fn(f"Metrics per step: {metrics_file.resolve()}")
    checkpoints = checkpoint_dirs(output)
    if checkpoints:
        print_fn(f"Checkpoints ({len(checkpoints)}): " + ", ".join(str(path.resolve()) for path in checkpoints))
    else:
        print_fn("Checkpoints: none (save_strategy: no)")
    if state_file is not None:
        states = [path / state_file for path in (output, *checkpoints) if (path / state_file).is_file()]
        print_fn(f"{state_file}: " + (", ".join(str(path.resolve()) for path in states) or "none written"))
    trackers = tracker_locations([tracker for tracker in report_to if tracker != "none"])
    print_fn("Trackers: " + ("; ".join(trackers) if trackers else "none (report_to: none)"))
    plot = output / f"{summary.stem}.png"
    if plot_metrics(log_history, plot, summary):
        print_fn(f"Plot of {summary.caption} per {summary.xlabel.split(' (')[0]}: {plot.resolve()}")
    else:
        print_fn("No plot: matplotlib is not installed (pip install matplotlib).")
    print_fn(reading(log_history, summary))


def add_pass_at_k_callback(trainer, arguments, verifier=None, **prompt) -> None:
    """Evaluate pass@k during training when the recipe's `pass_at_k_dataset` is set (`PassAtKArguments`); `prompt`
    (prompt_template, conversational) makes evaluation prompts the training prompts."""
    if arguments.pass_at_k_dataset:
        from trl_verigate import PassAtKCallback

        trainer.add_callback(PassAtKCallback.from_arguments(trainer, arguments, verifier=verifier, **prompt))
