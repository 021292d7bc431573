"""Helpers for tests that launch servers or training processes: loopback ports, an offline environment, configs."""

import contextlib
import importlib
import json
import os
import shlex
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn
import yaml

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
RECIPES_DIR = REPO_ROOT / "recipes"
TINY_CONFIG = RECIPES_DIR / "tiny" / "verigate_math.yaml"
TINY_DATA = RECIPES_DIR / "tiny" / "math_tiny.jsonl"
RECIPE = RECIPES_DIR / "verigate_math.py"
# What a VeriGate run logs every step, and only in steps where the PRM ran. The random tiny policy almost never answers
# right, so that is nearly every step, but an occasional lucky `\boxed` answer (the tiny data's gold is boxed, so no
# last-number fallback) can open a step's groups.
ALWAYS_LOGGED = (
    "verigate/gate_rate",
    "verigate/frac_zero_std_outcome",
    "verigate/prm_completions_scored",
    "verigate/prm_seconds",
    "verigate/reward_failures",
)
LOGGED_WHEN_PRM_RAN = ("verigate/prm_step_score_mean", "verigate/steps_per_completion")


def load_recipe(name: str):
    """The module of `recipes/<name>.py`, imported by its own name with recipes/ on sys.path, as the recipes import
    each other and `recipe_tools` when run as scripts."""
    if str(RECIPES_DIR) not in sys.path:
        sys.path.insert(0, str(RECIPES_DIR))
    return importlib.import_module(name)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it).

    Another process may take it before the caller binds it: only for launchers that cannot report the port they
    bound (torch's rendezvous). A `trl-verigate lean-server` reports its own: `lean_server_processes`. A server that
    must be down: `refused_url`.
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def refused_url() -> Iterator[str]:
    """The URL of a loopback port that refuses connections for as long as the context lasts.

    The port is bound and never listened on: Linux answers a connect with a reset, and no other process can start
    listening there meanwhile (a port that was merely free a moment ago may get a server that answers).
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@contextlib.contextmanager
def serving(app) -> Iterator[str]:
    """Run the ASGI `app` on a loopback port in a thread; yields its base URL."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


@dataclass
class LeanServerProcess:
    url: str  # set once the server has reported its port
    process: subprocess.Popen
    port_file: Path
    stdout: Path
    stderr: Path


@contextlib.contextmanager
def lean_server_processes(run_dir: Path, count: int = 1, *flags: str) -> Iterator[list[LeanServerProcess]]:
    """`count` `trl-verigate lean-server --port 0` processes, each with one stand-in REPL worker, all started before
    any is waited for; each one's URL from the port it reports.

    The port comes from `--port-file`, written by the server once it accepts connections, so the URL is the
    server's own and no guessed free port can be taken by another process first. stdout (the `listening on` line,
    then uvicorn's access log) and stderr go to files, never to an unread pipe that could fill. `flags` are added
    to every command line (a later `--port` overrides the 0). The servers are stopped with SIGTERM at exit.
    """
    from tests.fake_repl import repl_command

    servers, processes = [], []
    try:
        for index in range(count):
            server_dir = Path(run_dir) / f"lean-server-{index}"
            server_dir.mkdir(parents=True)
            port_file, stdout, stderr = (server_dir / name for name in ("port", "stdout.txt", "stderr.txt"))
            command = [
                sys.executable, "-m", "trl_verigate.cli", "lean-server", "--port", "0", "--port-file", str(port_file),
                "--workers", "1", "--repl-command", shlex.join(repl_command("--no-transcripts")),
                "--project-dir", str(server_dir), *flags,
            ]  # fmt: skip
            with stdout.open("wb") as out, stderr.open("wb") as err:
                processes.append(subprocess.Popen(command, cwd=REPO_ROOT, stdout=out, stderr=err))
            servers.append(LeanServerProcess("", processes[-1], port_file, stdout, stderr))
        for server in servers:
            try:
                # A cold start on a loaded 2-core machine (imports, then the REPL's header) takes seconds, not 90.
                port = wait_for_port_file(server.port_file, server.process, timeout_s=90.0)
            except RuntimeError as error:
                raise AssertionError(f"{error}; its stderr:\n{server.stderr.read_text()[-4000:]}") from error
            server.url = f"http://127.0.0.1:{port}"
        yield servers
    finally:
        stop_processes(processes)


def stop_processes(processes: list[subprocess.Popen], grace_s: float = 30.0) -> None:
    """SIGTERM every process still running, then wait for each, killing one that outlives `grace_s`."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def offline_env(run_dir: Path, **extra: str) -> dict:
    """This process's environment for a child run: no hub access, a private datasets cache, one thread per op."""
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_DATASETS_CACHE=str(Path(run_dir) / "datasets_cache"),
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS="1",
    )
    env.update(extra)
    return env


# The shipped tiny YAML of each recipe (recipes/tiny/).
TINY_YAMLS = {
    "verigate_math": TINY_CONFIG,
    "lean_process_grpo": RECIPES_DIR / "tiny" / "lean_process_grpo.yaml",
    "coq_process_grpo": RECIPES_DIR / "tiny" / "coq_process_grpo.yaml",
    "es": RECIPES_DIR / "tiny" / "es.yaml",
}


def write_tiny_recipe_config(tiny_models: dict, run_dir: Path, recipe: str = "verigate_math", **overrides) -> Path:
    """The recipe's shipped tiny YAML with the test's tiny models (a fresh clone has no `.tiny/`), its dataset by
    absolute path and its output under `run_dir`, plus `overrides` (None drops a key); returns the YAML's path."""
    config = yaml.safe_load(TINY_YAMLS[recipe].read_text())
    config["model_name_or_path"] = tiny_models["policy"]
    if "prm_model_name_or_path" in config:
        config["prm_model_name_or_path"] = tiny_models["prm_qwen_math"]
    config["dataset_name"] = str(REPO_ROOT / config["dataset_name"])
    config["output_dir"] = str(Path(run_dir) / "output")
    config.update(overrides)
    path = Path(run_dir) / f"{recipe}.yaml"
    path.write_text(yaml.safe_dump({key: value for key, value in config.items() if value is not None}))
    return path


def wandb_offline_history(wandb_dir: Path) -> list[list[dict]]:
    """History rows of every offline run under `wandb_dir`, decoded from the runs' `.wandb` files.

    wandb >= 0.20 writes no summary file offline and ships no Python reader for its run files, which are LevelDB-style
    logs (32 KiB blocks of records with a 7-byte header: crc32, length, type) of `wandb_internal_pb2.Record` protos.
    """
    from wandb.proto import wandb_internal_pb2

    block_size, header_size, full, last = 32768, 7, 1, 4
    runs = []
    for run_file in sorted(wandb_dir.glob("wandb/offline-run-*/run-*.wandb")):
        data = run_file.read_bytes()
        assert data[:4] == b":W&B", f"{run_file} is not a wandb run file"
        position, fragments, history = header_size, b"", []
        while position + header_size <= len(data):
            if block_size - position % block_size < header_size:  # a block's tail too short for a header is padding
                position += block_size - position % block_size
                continue
            _, length, kind = struct.unpack("<IHB", data[position : position + header_size])
            if length == 0 and kind == 0:
                break
            position += header_size
            fragments += data[position : position + length]
            position += length
            if kind in (full, last):
                record = wandb_internal_pb2.Record()
                record.ParseFromString(fragments)
                fragments = b""
                if record.WhichOneof("record_type") == "history":
                    # wandb-core writes "/"-separated names as `nested_key` parts, others as `key`.
                    history.append(
                        {
                            item.key or "/".join(item.nested_key): json.loads(item.value_json)
                            for item in record.history.item
                        }
                    )
        runs.append(history)
    return runs


def mlflow_metric_histories(tracking_uri: str) -> list[dict[str, list]]:
    """Per run: metric key -> [(step, value)], through MLflow's own client."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    runs = client.search_runs(experiment_ids=experiments)
    return [
        {
            key: sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
            for key in run.data.metrics
        }
        for run in runs
    ]


def launch_recipe(recipe: Path, launcher: list[str], config: Path, run_dir: Path, project: str, timeout: float) -> None:
    """Run `recipe --config config` under `launcher` offline, logging to wandb (offline) and mlflow (sqlite) in
    `run_dir` under the project/experiment name `project`; fails with the tail of its output."""
    env = offline_env(
        run_dir,
        WANDB_MODE="offline",
        WANDB_DIR=str(run_dir),
        WANDB_PROJECT=project,
        WANDB_SILENT="true",
        MLFLOW_TRACKING_URI=f"sqlite:///{run_dir / 'mlflow.db'}",
        MLFLOW_EXPERIMENT_NAME=project,
    )
    command = [*launcher, str(recipe), "--config", str(config)]
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"


def assert_mlflow_matches_wandb(
    run_dir: Path, wandb_rows: list[dict], metrics, every_row: bool = True
) -> dict[str, list]:
    """The run's one mlflow run (sqlite store in `run_dir`) holds each metric at the same steps with the same values
    as the offline wandb rows: both trackers receive the same log dict. `every_row`: each wandb row must hold each
    metric (False: compare the rows that hold it, for metrics logged only on some steps). Returns the mlflow run's
    metric histories."""
    import pytest

    mlflow_runs = mlflow_metric_histories(f"sqlite:///{run_dir / 'mlflow.db'}")
    assert len(mlflow_runs) == 1, f"expected one mlflow run (rank 0 only), found {len(mlflow_runs)}"
    # MLflowCallback keeps "/" (it only replaces characters outside [0-9A-Za-z_-. :/]) and adds no prefix.
    for metric in metrics:
        history = mlflow_runs[0].get(metric)
        assert history is not None, f"{metric} missing from mlflow metrics {sorted(mlflow_runs[0])}"
        rows = wandb_rows if every_row else [row for row in wandb_rows if f"train/{metric}" in row]
        wandb_history = [(row["train/global_step"], row[f"train/{metric}"]) for row in rows]
        assert [step for step, _ in history] == [step for step, _ in wandb_history]
        assert [value for _, value in history] == pytest.approx([value for _, value in wandb_history])
    return mlflow_runs[0]


def rollout_of_texts(tokenizer, prompts: list[str], texts: list[str]) -> dict:
    """What a TRL `rollout_func` returns for completions the test chooses: the prompts' and `texts`' token ids (no
    special tokens), each completion ended by EOS, and no sampling log-probs."""
    return {
        "prompt_ids": [tokenizer(prompt, add_special_tokens=False)["input_ids"] for prompt in prompts],
        "completion_ids": [
            tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for text in texts
        ],
        "logprobs": None,
    }


def wait_for_port_file(port_file: str | os.PathLike, process: subprocess.Popen, timeout_s: float) -> int:
    """The port a `trl-verigate lean-server --port-file PORT_FILE` child reports once it accepts connections.

    PORT_FILE must be a path no earlier server left behind (e.g. in a fresh temporary directory): a file already
    there is taken for the report. Raises RuntimeError when the child exits first (with its
    exit status: 3 is uvicorn's failure to bind) or when `timeout_s` passes without a report.
    """
    port_file = Path(port_file)
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"trl-verigate lean-server exited with status {process.returncode} before listening")
        with contextlib.suppress(FileNotFoundError):  # not written yet
            return int(port_file.read_text())
        if time.monotonic() > deadline:
            raise RuntimeError(f"trl-verigate lean-server reported no port in {port_file} within {timeout_s:g} s")
        time.sleep(0.05)
