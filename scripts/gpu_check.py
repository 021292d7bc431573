"""`make gpu-check`: the GPU paths of trl-verigate on one GPU, in at most 10 minutes; a PASS/FAIL table with figures.

    python scripts/gpu_check.py [--model Qwen/Qwen2.5-0.5B-Instruct | /path/to/model] [--only CHECK ...]

The first thing to run on a new cluster (docs/gpu.md says what each check guards). Each check runs in its own
process (scripts/gpu_check_tasks.py; zero3_prm under `accelerate launch` with recipes/accelerate/zero3.yaml), so no vLLM
engine or process group outlives its check, with a share of the 10-minute budget. The policy checks need the model:
a local folder, or a hub id that can be downloaded (it is fetched once, before the checks). Without a CUDA GPU the
script says so and exits 0; exit 1 when a check fails or times out.

`--device cpu --fake-vllm --model .tiny/policy` rehearses every check on the CPU against the vLLM stand-in of
tests/fake_vllm.py (tests/test_gpu_check.py): the script's own code paths, not the GPU's.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TASKS_SCRIPT = REPO_ROOT / "scripts" / "gpu_check_tasks.py"
BUDGET_SECONDS = 600
# Seconds each check may take at most (the last ones get what is left of the budget).
CHECK_SECONDS = {
    "noise": 60,
    "zero3_prm": 90,
    "ddp_dtype_step": 90,
    "es_vllm": 180,
    "evaluate_vllm": 150,
    "verigate_vllm": 210,
}
NEEDS_MODEL = ("ddp_dtype_step", "es_vllm", "evaluate_vllm", "verigate_vllm")


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


def ensure_tiny(tiny: Path) -> None:
    """The tiny PRM the VeriGate and ZeRO-3 checks score with (built locally, no download)."""
    if not (tiny / "prm_qwen_math" / "config.json").is_file():
        from trl_verigate.tiny import build_tiny_models

        build_tiny_models(tiny)


def check_command(name: str, args, result_file: Path) -> list[str]:
    options = ["--json", str(result_file), "--model", args.model, "--tiny", str(args.tiny), "--device", args.device]
    options += ["--max-tokens", str(args.max_tokens)] + (["--fake-vllm"] if args.fake_vllm else [])
    if name != "zero3_prm":
        return [sys.executable, str(TASKS_SCRIPT), name, *options]
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file"]
    launch += [str(REPO_ROOT / "recipes" / "accelerate" / "zero3.yaml"), "--num_processes", "1"]
    launch += ["--mixed_precision", "no" if args.device == "cpu" else "bf16", "--main_process_port", str(free_port())]
    return [*launch, str(TASKS_SCRIPT), name, *options]


def run_check(name: str, args, seconds: float, folder: Path) -> tuple[list[dict], float]:
    result_file = folder / f"{name}.json"
    # A check starts its own processes (or none): a launcher's variables of this process would make it join a group.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    }
    env["TOKENIZERS_PARALLELISM"] = "false"
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="Qwen/Qwen2.5-0.5B-Instruct", help="policy: local folder or hub id")
    parser.add_argument("--only", nargs="+", choices=tuple(CHECK_SECONDS), help="run these checks only")
    parser.add_argument("--tiny", type=Path, default=REPO_ROOT / ".tiny", help="tiny models folder (built if absent)")
    parser.add_argument("--max-tokens", type=int, default=128, help="completion length of the generating checks")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: rehearsal (tests)")
    parser.add_argument("--fake-vllm", action="store_true", help="with --device cpu: tests/fake_vllm.py for vLLM")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not cuda_available():
        print(
            "gpu-check: no CUDA GPU on this machine (torch.cuda.is_available() is False), so nothing was run. "
            "Run `make gpu-check` on a GPU node (MODEL=/path/to/model for a local policy)."
        )
        return 0
    checks = args.only or list(CHECK_SECONDS)
    model_problem = fetch_model(args.model) if any(name in NEEDS_MODEL for name in checks) else None
    ensure_tiny(args.tiny)
    logs = Path(tempfile.mkdtemp(prefix="gpu_check_"))  # each check's JSON, and the output of a failed one
    deadline = time.perf_counter() + BUDGET_SECONDS
    results: list[tuple[dict, float]] = []
    for name in checks:
        left = deadline - time.perf_counter()
        if name in NEEDS_MODEL and model_problem:
            results.append(({"check": name, "status": "FAIL", "figures": model_problem}, 0.0))
        elif left < 10:
            results.append(({"check": name, "status": "FAIL", "figures": "not run: the 10-minute budget ran out"}, 0.0))
        else:
            print(f"gpu-check: {name} (up to {min(CHECK_SECONDS[name], left):.0f}s)", flush=True)
            rows, seconds = run_check(name, args, min(CHECK_SECONDS[name], left), logs)
            results.extend((r, seconds / len(rows)) for r in rows)
    print(format_table(results))
    if args.json:
        args.json.write_text(json.dumps([{**r, "seconds": seconds} for r, seconds in results], indent=1))
    failed = [r["check"] for r, _ in results if r["status"] == "FAIL"]
    print(
        f"gpu-check: {len(results) - len(failed)} of {len(results)} rows PASS or SKIP"
        + (f"; FAIL: {', '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
