"""Overhead of the Lean verification service on top of the REPL's own work.

The stand-in REPL (`tests/fake_repl.py --latency L`) answers every proof after exactly L seconds, so
with W workers the ideal throughput is W / L proofs/s and any extra time is ours: framing, the pool,
the verdict, and for the HTTP mode JSON over loopback plus the client. For each mode this prints the
measured proofs/s next to the ideal, and the overhead per proof = wall * W / n - L, in ms and as % of
L. Target: overhead <= 10% of L at L = 50 ms. Prints PASS/FAIL against it and always exits 0.

    python bench/lean_server_overhead.py --latency 0.05 --workers 4 --proofs 400
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from trl_verigate.lean_server import LeanClient, LeanServer, LeanServerConfig, ProofRequest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # `tests` is a package
from tests.launch import wait_for_port_file  # noqa: E402

FAKE_REPL = REPO / "tests" / "fake_repl.py"
HEADER = "import Mathlib"
TARGET_OVERHEAD = 0.10


def proofs(n: int, tag: str) -> list[ProofRequest]:
    return [ProofRequest(statement=f"theorem bench_{tag}_{i} : {i} + 0 = {i} := by", proof="  simp") for i in range(n)]


def repl_argv(latency: float) -> list[str]:
    return [sys.executable, str(FAKE_REPL), "--no-transcripts", "--latency", str(latency)]


def report(mode: str, wall: float, n: int, workers: int, latency: float) -> bool:
    overhead = wall * workers / n - latency
    ok = overhead <= TARGET_OVERHEAD * latency
    print(
        f"{mode:<10} {n / wall:>9.1f} {workers / latency:>9.1f} {n / wall / (workers / latency):>7.1%}"
        f" {overhead * 1000:>11.2f} {overhead / latency:>9.1%}  {'PASS' if ok else 'FAIL'}"
    )
    return ok


def bench_in_process(config: LeanServerConfig, n: int) -> float:
    with LeanServer(config) as server:
        # Warm-up: every worker started and its header loaded, so the timed run measures steady state.
        server.verify(proofs(config.workers * 2, "warm"), progress=False)
        started = time.perf_counter()
        results = server.verify(proofs(n, "run"), progress=False)
        wall = time.perf_counter() - started
    failed = [r for r in results if not r.passed]
    if failed:
        raise SystemExit(f"in-process run: {len(failed)} proofs did not pass, e.g. {failed[0]}")
    return wall


def wait_healthy(url: str, workers: int, process: subprocess.Popen, deadline_s: float = 60.0) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"trl-verigate lean-server exited with status {process.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=2).json().get("alive") == workers:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"trl-verigate lean-server at {url} did not get {workers} workers ready in {deadline_s:g} s")


def bench_http(config: LeanServerConfig, n: int, port: int, scratch: Path) -> float:
    header_file = scratch / "header.lean"
    header_file.write_text(config.header)
    port_file = scratch / "port"
    command = [
        sys.executable, "-m", "trl_verigate.cli", "lean-server",
        "--port", str(port), "--port-file", str(port_file), "--workers", str(config.workers),
        "--repl-command", shlex.join(config.repl_command), "--project-dir", config.project_dir,
        "--header-file", str(header_file), "--timeout", str(config.timeout),
    ]  # fmt: skip
    # The server's log goes to a file, not a pipe nobody reads while it runs: printed if it fails.
    server_log = scratch / "lean-server.log"
    with server_log.open("wb") as log:
        server = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=log)
    try:
        # The port the server bound (with --port 0, the OS's pick), so no other process can have taken it.
        url = f"http://127.0.0.1:{wait_for_port_file(port_file, server, timeout_s=60.0)}"
        wait_healthy(url, config.workers, server)
        # A real client sends batches of up to 64: the default of LeanClient.
        client = LeanClient(urls=[url])
        client.verify(proofs(config.workers * 2, "warm"), progress=False)
        started = time.perf_counter()
        results = client.verify(proofs(n, "run"), progress=False)
        wall = time.perf_counter() - started
    except RuntimeError as error:
        raise SystemExit(f"{error}; its log:\n{server_log.read_text()[-4000:]}") from error
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
    failed = [r for r in results if not r.passed]
    if failed:
        raise SystemExit(f"HTTP run: {len(failed)} proofs did not pass, e.g. {failed[0]}")
    return wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the stand-in takes per proof (L)")
    parser.add_argument("--workers", type=int, default=4, help="REPL processes (W)")
    parser.add_argument("--proofs", type=int, default=400, help="proofs per timed run (n)")
    parser.add_argument(
        "--port", type=int, default=0, help="loopback port for the HTTP mode (default: 0, a free one the OS picks)"
    )
    args = parser.parse_args(argv)
    if args.latency <= 0 or args.workers < 1 or args.proofs < 1:
        parser.error("--latency must be > 0, --workers and --proofs >= 1")

    with tempfile.TemporaryDirectory(prefix="lean-bench-") as scratch:
        config = LeanServerConfig(
            repl_command=repl_argv(args.latency),
            project_dir=scratch,
            header=HEADER,
            workers=args.workers,
            timeout=max(10.0, 20 * args.latency),
            startup_timeout=60.0,
        )
        print(
            f"stand-in REPL latency L={args.latency * 1000:g} ms, W={args.workers} workers, n={args.proofs} proofs; "
            f"target: overhead <= {TARGET_OVERHEAD:.0%} of L"
        )
        print(f"{'mode':<10} {'proofs/s':>9} {'ideal':>9} {'of ideal':>8} {'overhead ms':>11} {'% of L':>9}")
        report("in-process", bench_in_process(config, args.proofs), args.proofs, args.workers, args.latency)
        report(
            "HTTP", bench_http(config, args.proofs, args.port, Path(scratch)), args.proofs, args.workers, args.latency
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
