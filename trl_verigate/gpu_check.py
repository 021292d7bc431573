"""`make gpu-check`: the GPU paths of trl-verigate on one GPU in at most 10 minutes, offline; a PASS/FAIL/SKIP table.

    python -m trl_verigate.gpu_check [--model PATH | HUB_ID] [--only CHECK ...] [--models-dir DIR]

The first thing to run on a new cluster (docs/gpu.md says what each check guards). It needs the package and what
it imports (torch, transformers, trl, peft, accelerate), nothing from the repository and no network:

- the policy is `--model` (a local folder; a hub id is downloaded only when given here), else a random model of
  Qwen2.5-0.5B's shape built locally (`trl_verigate.tiny.build_midsize_policy`), which also times ES against one
  generate call whatever `--model` is; the PRMs are the tiny ones (`build_tiny_models`), built under --models-dir;
- a check whose optional package is missing (vllm, deepspeed) is a SKIP naming it; FAIL is for wrong results,
  crashes and time-outs.

Each check runs in its own process (`python -m trl_verigate.gpu_check_tasks TASK`; zero3_prm under
`accelerate launch --use_deepspeed --zero_stage 3`), so no vLLM engine or process group outlives it, with a share
of the 10-minute budget. Without a CUDA GPU it says so and exits 0; exit 1 when a row fails.

`--device cpu` rehearses every check that can run on the CPU with the tiny models (tests/test_gpu_check.py);
`--fake-vllm` adds the vLLM ones against the stand-in of tests/fake_vllm.py (a repository checkout only).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUDGET_SECONDS = 600
# Seconds each check may take at most (the last ones get what is left of the budget), in the order they run.
CHECK_SECONDS = {
    "noise": 45,
    "prm_dtypes": 45,
    "peft_drift": 45,
    "ddp_dtype_step": 45,
    "trainer_steps": 120,
    "es_cost": 60,
    "zero3_prm": 60,
    "es_vllm": 150,
    "evaluate_vllm": 120,
    "verigate_vllm": 150,
}
# The optional package a check needs (a SKIP naming it when missing).
NEEDS_PACKAGE = {"zero3_prm": "deepspeed", "es_vllm": "vllm", "evaluate_vllm": "vllm", "verigate_vllm": "vllm"}
DEFAULT_MODELS_DIR = Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "trl_verigate" / "gpu_check"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def fetch_model(model: str) -> str | None:
    """None when `model` is a folder or a hub id now in the local cache; else why it is neither."""
    if Path(model).expanduser().is_dir():
        return None
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(model, allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja"])
    except Exception as error:  # offline, unknown id, no permission: one line, then the other checks run
        return f"cannot get --model {model} ({type(error).__name__}: {error}); pass --model /path/to/a/local/model"
    return None


def build_models(args) -> tuple[str, str]:
    """(tiny models folder, the 0.5B-shaped policy): built under --models-dir unless there; tiny on the CPU."""
    from trl_verigate.tiny import build_midsize_policy, build_tiny_models

    tiny = build_tiny_models(args.models_dir / "tiny")
    midsize = tiny["policy"] if args.device == "cpu" else build_midsize_policy(args.models_dir)
    return str(args.models_dir / "tiny"), midsize


def missing_package(name: str, args) -> str | None:
    """Why check `name` cannot run here (its optional package is not installed), or None."""
    package = NEEDS_PACKAGE.get(name)
    if package is None or (package == "vllm" and args.fake_vllm) or importlib.util.find_spec(package) is not None:
        return None
    extra = "pip install -e '.[vllm]'" if package == "vllm" else "pip install deepspeed"
    return f"{package} is not installed ({extra})"


def check_command(name: str, args, result_file: Path) -> list[str]:
    options = ["--json", str(result_file), "--model", args.model, "--midsize", args.midsize, "--tiny", args.tiny]
    options += ["--device", args.device, "--max-tokens", str(args.max_tokens)]
    options += ["--fake-vllm"] if args.fake_vllm else []
    task = ["-m", "trl_verigate.gpu_check_tasks", name, *options]
    if name != "zero3_prm":
        return [sys.executable, *task]
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--use_deepspeed", "--zero_stage", "3"]
    launch += ["--zero3_init_flag", "true", "--num_processes", "1", "--main_process_port", str(free_port())]
    launch += ["--mixed_precision", "no" if args.device == "cpu" else "bf16"]
    return [*launch, *task]


def run_check(name: str, args, seconds: float, folder: Path) -> tuple[list[dict], float]:
    result_file = folder / f"{name}.json"
    # A check starts its own processes (or none): a launcher's variables of this process would make it join a group.
    launcher = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    env = {key: value for key, value in os.environ.items() if key not in launcher}
    env.update(TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if args.device == "cpu":
        env.update(DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="")
    started = time.perf_counter()
    try:
        result = subprocess.run(
            check_command(name, args, result_file), env=env, capture_output=True, text=True, timeout=seconds
        )
    except subprocess.TimeoutExpired:
        return [{"check": name, "status": "FAIL", "figures": f"timed out after {seconds:.0f}s"}], seconds
    elapsed = time.perf_counter() - started
    if result.returncode != 0 or not result_file.is_file():
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        cause = next(
            (line for line in reversed(lines) if "Error" in line or "error" in line), lines[-1] if lines else ""
        )
        (folder / f"{name}.log").write_text(result.stdout + result.stderr)
        figures = f"exit {result.returncode}: {cause.strip()[:300]} (log: {folder / (name + '.log')})"
        return [{"check": name, "status": "FAIL", "figures": figures}], elapsed
    return json.loads(result_file.read_text())["rows"], elapsed


def format_table(results: list[tuple[dict, float]]) -> str:
    width = max(len(r["check"]) for r, _ in results)
    lines = [f"{'check':<{width}}  status  seconds  figures", "-" * (width + 27)]
    for r, seconds in results:
        lines.append(f"{r['check']:<{width}}  {r['status']:<6}  {seconds:7.1f}  {r['figures']}")
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m trl_verigate.gpu_check",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", help="policy: a local folder, or a hub id (downloaded); default: built locally")
    parser.add_argument("--only", nargs="+", choices=tuple(CHECK_SECONDS), help="run these checks only")
    parser.add_argument("--models-dir", type=Path, default=DEFAULT_MODELS_DIR, help="where local models are built")
    parser.add_argument("--max-tokens", type=int, default=128, help="completion length of the generating checks")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: rehearsal (tests)")
    parser.add_argument("--fake-vllm", action="store_true", help="with --device cpu: tests/fake_vllm.py for vLLM")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.device == "cuda" and not cuda_available():
        print(
            "gpu-check: no CUDA GPU on this machine (torch.cuda.is_available() is False), so nothing was run. "
            "Run `make gpu-check` on a GPU node (MODEL=/path/to/model for a local policy)."
        )
        return 0
    checks = args.only or list(CHECK_SECONDS)
    print(f"gpu-check: models under {args.models_dir} (built once, offline)", flush=True)
    args.tiny, args.midsize = build_models(args)
    model_problem = fetch_model(args.model) if args.model else None
    args.model = args.model or args.midsize
    logs = Path(tempfile.mkdtemp(prefix="gpu_check_"))  # each check's JSON, and the output of a failed one
    # A CPU rehearsal checks code paths, not speed, on whatever CPU is free: three times the time.
    scale = 3 if args.device == "cpu" else 1
    deadline = time.perf_counter() + BUDGET_SECONDS * scale
    results: list[tuple[dict, float]] = []
    for name in checks:
        left = deadline - time.perf_counter()
        missing = missing_package(name, args)
        if missing:
            results.append(({"check": name, "status": "SKIP", "figures": missing}, 0.0))
        elif model_problem and name not in ("noise", "prm_dtypes", "es_cost", "zero3_prm"):
            results.append(({"check": name, "status": "FAIL", "figures": model_problem}, 0.0))
        elif left < 10:
            results.append(({"check": name, "status": "FAIL", "figures": "not run: the 10-minute budget ran out"}, 0.0))
        else:
            limit = min(CHECK_SECONDS[name] * scale, left)
            print(f"gpu-check: {name} (up to {limit:.0f}s)", flush=True)
            rows, seconds = run_check(name, args, limit, logs)
            results.extend((r, seconds / len(rows)) for r in rows)
    print(format_table(results))
    if args.json:
        args.json.write_text(json.dumps([{**r, "seconds": seconds} for r, seconds in results], indent=1))
    failed = [r["check"] for r, _ in results if r["status"] == "FAIL"]
    skipped = sum(r["status"] == "SKIP" for r, _ in results)
    print(
        f"gpu-check: {len(results) - len(failed) - skipped} of {len(results)} rows PASS, {skipped} SKIP"
        + (f"; FAIL: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
