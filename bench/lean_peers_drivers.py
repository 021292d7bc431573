"""Drivers that put the same jobs through lean_server and its peers, for bench/lean_peers.py.

Every driver runs its REPLs from the same stand-in (tests/fake_repl.py) with the same flags, and answers a list of
`Job`s with one `Outcome` per job, in order, each stamped with when the caller held it. The peers start the REPL as
`lake env <repl>`: a `lake` shim on their PATH drops `env` and runs the stand-in, so nothing is downloaded or built.

- `LeanServerDriver`: `LeanServer` in this process (`averify`, one call per chunk of 64, like a trainer's batch).
- `LeanServerHttpDriver`: `trl-verigate lean-server` instances behind one `LeanClient` (one `averify` per chunk).
- `KiminaDriver`: kimina-lean-server (PyPI kimina-ast-server), POST /api/check with 64 snippets per POST; its users'
  pass rule: no message of severity error.
- `LeanInteractDriver`: LeanInteract's `LeanServerPool`, the header run once as a session-cached command and each
  proof in its env, one proof per call on W threads (its `run_batch`); pass rule: `lean_code_is_valid(allow_sorry=
  False)`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from trl_verigate.lean_server import LeanClient, LeanServer, LeanServerConfig
from trl_verigate.lean_server.core.types import Request

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # `tests` is a package
from tests import fake_repl  # noqa: E402 - the stand-in's own helpers (repl_command, write_script)
from tests.launch import free_port, stop_processes  # noqa: E402

CHUNK = 64
ECHO = re.compile(r"^echo: (\S+)$")
STARTUP_S = 120.0


@dataclass(frozen=True)
class Job:
    """One proof as every peer gets it: `request` for lean_server, `code` (a complete file) for the peers."""

    name: str
    request: Request
    code: str


@dataclass
class Outcome:
    status: str  # passed | failed | timeout | crashed | error | lost (no answer reached the caller)
    echoes: list[str] = field(default_factory=list)  # names the stand-in echoed in the answer (--echo-names)
    done_s: float = 0.0  # seconds from submitting the batch until the caller held this answer
    detail: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"


def echoes_of(texts) -> list[str]:
    return [match.group(1) for text in texts if (match := ECHO.match(text or ""))]


def split_imports(code: str) -> tuple[str, str]:
    """The leading `import` lines (blank lines dropped) and the rest: what the peers run once per REPL vs per proof."""
    lines = code.split("\n")
    at = 0
    while at < len(lines) and (not lines[at].strip() or lines[at].lstrip().startswith("import ")):
        at += 1
    return "\n".join(line.strip() for line in lines[:at] if line.strip()), "\n".join(lines[at:])


class StandIn:
    """The stand-in REPL with one set of flags, as an argv (lean_server) and as `lake env <repl>` (the peers)."""

    def __init__(self, folder: Path, flags: list[str]):
        self.folder = Path(folder)
        self.flags = list(flags)
        self.bin = self.folder / "bin"
        self.repl_dir = self.folder / "repl"
        self.repl = self.repl_dir / ".lake" / "build" / "bin" / "repl"
        self.project = self.folder / "project"
        for path in (self.bin, self.repl.parent, self.project):
            path.mkdir(parents=True, exist_ok=True)
        # `lake env PROGRAM ARGS...` runs PROGRAM ARGS in the project's environment; here, just PROGRAM ARGS.
        write_executable(
            self.bin / "lake", '#!/bin/sh\nif [ "$1" = env ]; then shift; exec "$@"; fi\necho "lake shim 5.0.0"\n'
        )
        # The folder in every stand-in's argv tells its processes from other drivers' (`pids_running`).
        self.flags += ["--transcripts", str(self.folder / "unused-transcripts")]
        argv = [sys.executable, str(Path(fake_repl.__file__).resolve()), "--no-transcripts", *self.flags]
        write_executable(self.repl, f'#!/bin/sh\nexec {shlex.join(argv)} "$@"\n')
        # LeanInteract reads the Lean version from the REPL's toolchain file.
        (self.repl_dir / "lean-toolchain").write_text("leanprover/lean4:v4.19.0\n")

    def argv(self) -> list[str]:
        """lean_server's repl_command; `--log` goes through fake_repl's socket, which works inside the sandbox."""
        return fake_repl.repl_command("--no-transcripts", *self.flags)

    def env(self) -> dict[str, str]:
        return {**os.environ, "PATH": f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"}


def write_executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def pids_running(marker: str) -> list[int]:
    """Pids of stand-in processes whose argv contains `marker` (a path unique to one driver's stand-in)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as cmdline:
                argv = cmdline.read().split(b"\0")
        except OSError:
            continue
        if any(marker.encode() in arg for arg in argv) and any(arg.endswith(b"fake_repl.py") for arg in argv):
            found.append(int(name))
    return found


def kill_stand_ins(marker: str) -> None:
    """SIGKILL what a peer left of its REPLs (they run in sessions of their own)."""
    for pid in pids_running(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Driver:
    name = ""
    granularity = ""  # what one answer to the caller covers
    chunk = CHUNK  # proofs per call (per POST) for the drivers that batch

    async def run(self, jobs: list[Job], timeout: float) -> list[Outcome]:
        raise NotImplementedError

    def recycled(self) -> int | None:
        """REPLs retired so far for reaching their use limit; None where the peer has no such limit here (kimina's
        max_repl_uses and LeanInteract's restarts, by memory only, are left at their defaults)."""
        return None

    def close(self) -> None:
        pass


def _stamped(outcomes: list[Outcome], started: float) -> list[Outcome]:
    now = time.perf_counter() - started
    for outcome in outcomes:
        outcome.done_s = now
    return outcomes


def _from_result(result) -> Outcome:
    return Outcome(status=result.status, echoes=echoes_of(m.text for m in result.messages), detail=result.reason or "")


class LeanServerDriver(Driver):
    granularity = f"one averify() of {CHUNK}"

    def __init__(self, stand_in: StandIn, workers: int, header: str, label: str = "lean_server", **overrides):
        self.name = label
        config = LeanServerConfig(
            repl_command=stand_in.argv(),
            project_dir=str(stand_in.project),
            header=header,
            workers=workers,
            startup_timeout=STARTUP_S,
            **overrides,
        )
        self.server = LeanServer(config).start()

    async def run(self, jobs: list[Job], timeout: float) -> list[Outcome]:
        started = time.perf_counter()

        async def chunk(part: list[Job]) -> list[Outcome]:
            results = await self.server.averify([job.request for job in part], timeout=timeout, progress=False)
            return _stamped([_from_result(result) for result in results], started)

        parts = await asyncio.gather(*(chunk(jobs[at : at + self.chunk]) for at in range(0, len(jobs), self.chunk)))
        return [outcome for part in parts for outcome in part]

    def recycled(self) -> int:
        return self.server.stats()["recycled"]

    def close(self) -> None:
        self.server.close()


class LeanServerHttpDriver(Driver):
    """`trl-verigate lean-server` processes (W REPLs each) behind one `LeanClient`."""

    granularity = f"one POST of {CHUNK}"

    def __init__(self, stand_in: StandIn, workers: int, header: str, instances: int = 1, scratch: Path | None = None):
        self.name = "lean_server HTTP"
        scratch = Path(scratch or stand_in.folder)
        header_file = scratch / "header.lean"
        header_file.write_text(header)
        self.processes: list[subprocess.Popen] = []
        try:
            self.urls = [self._start(stand_in, workers, header_file, scratch, number) for number in range(instances)]
            for url in self.urls:
                wait_until(lambda url=url: _health(url).get("alive") == workers, f"{url} with {workers} REPLs")
        except BaseException:
            stop_processes(self.processes)
            raise
        self.client = LeanClient(urls=self.urls)

    def _start(self, stand_in: StandIn, workers: int, header_file: Path, scratch: Path, number: int) -> str:
        """Start one `trl-verigate lean-server` on a port the OS picks; its URL once it accepts connections."""
        port_file = scratch / f"lean-server-{number}.port"
        log = scratch / f"lean-server-{number}.log"
        command = [
            sys.executable, "-m", "trl_verigate.cli", "lean-server", "--port", "0", "--port-file", str(port_file),
            "--workers", str(workers), "--repl-command", shlex.join(stand_in.argv()),
            "--project-dir", str(stand_in.project), "--header-file", str(header_file),
            "--startup-timeout", str(STARTUP_S),
        ]  # fmt: skip
        with open(log, "wb") as stderr:
            process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr)
        self.processes.append(process)

        def ready() -> bool:
            if process.poll() is not None:
                raise SystemExit(f"trl-verigate lean-server exited with status {process.returncode}; see {log}")
            return port_file.exists()

        wait_until(ready, f"trl-verigate lean-server (log: {log})")
        return f"http://127.0.0.1:{int(port_file.read_text().strip())}"

    async def run(self, jobs: list[Job], timeout: float, client: LeanClient | None = None) -> list[Outcome]:
        """`jobs` through `client` (default: one client over every instance)."""
        client = client or self.client
        started = time.perf_counter()

        async def chunk(part: list[Job]) -> list[Outcome]:
            results = await client.averify([job.request for job in part], timeout=timeout, progress=False)
            return _stamped([_from_result(result) for result in results], started)

        parts = await asyncio.gather(*(chunk(jobs[at : at + self.chunk]) for at in range(0, len(jobs), self.chunk)))
        return [outcome for part in parts for outcome in part]

    def close(self) -> None:
        stop_processes(self.processes)


def _health(url: str) -> dict:
    try:
        return httpx.get(f"{url}/health", timeout=2).json()
    except (httpx.HTTPError, ValueError):
        return {}


def wait_until(ready, what: str, deadline_s: float = STARTUP_S) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.1)
    raise SystemExit(f"bench/lean_peers.py: {what} not ready after {deadline_s:g} s")


def kimina_passed(response: dict) -> bool:
    """The rule kimina's users apply: no message of severity error."""
    return not any(m.get("severity") == "error" for m in response.get("messages") or [])


class KiminaDriver(Driver):
    """kimina-lean-server 2.x: `python -m server` with its settings in LEAN_SERVER_* variables."""

    name = "kimina-lean-server"
    granularity = f"one POST of {CHUNK}"

    def __init__(self, stand_in: StandIn, workers: int, header: str, memory_mb: int):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        imports, _ = split_imports(header)
        env = {
            **stand_in.env(),
            "LEAN_SERVER_HOST": "127.0.0.1",
            "LEAN_SERVER_PORT": str(self.port),
            "LEAN_SERVER_REPL_PATH": str(stand_in.repl),
            "LEAN_SERVER_PROJECT_DIR": str(stand_in.project),
            "LEAN_SERVER_MAX_REPLS": str(workers),
            "LEAN_SERVER_MAX_REPL_MEM": f"{memory_mb}M",
            # Its REPLs for the default header are started and loaded before the first request, as lean_server's.
            "LEAN_SERVER_INIT_REPLS": json.dumps({imports: workers}),
            # Its fastest setting: "dev" renders every snippet to the console whatever the level (about 10% slower
            # here); "prod" logs through loguru, and at WARNING not per snippet.
            "LEAN_SERVER_ENVIRONMENT": "prod",
            "LEAN_SERVER_LOG_LEVEL": "WARNING",
            # The AST export tool is not used by /api/check; without it the path check would refuse to start.
            "LEAN_SERVER_SKIP_VALIDATION": "1",
            "PYTHONPATH": str(kimina_shims(stand_in.folder)),
        }
        log = stand_in.folder / "kimina.log"
        with open(log, "wb") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "server"],
                cwd=stand_in.project,
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

        def ready() -> bool:
            if self.process.poll() is not None:
                raise SystemExit(f"kimina-lean-server exited with status {self.process.returncode}; see {log}")
            return _health(self.url).get("status") == "ok"

        wait_until(ready, "kimina-lean-server")
        self.marker = str(stand_in.folder)

    async def run(self, jobs: list[Job], timeout: float) -> list[Outcome]:
        started = time.perf_counter()

        async def post(part: list[Job]) -> list[Outcome]:
            payload = {
                "snippets": [{"id": job.name, "code": job.code} for job in part],
                "timeout": timeout,
                "reuse": True,
            }
            try:
                answer = await http.post(f"{self.url}/api/check", json=payload)
            except httpx.HTTPError as error:
                return _stamped([Outcome("lost", detail=repr(error)) for _ in part], started)
            if answer.status_code != 200:
                detail = f"HTTP {answer.status_code} for the whole POST of {len(part)}: {answer.text[:200]}"
                return _stamped([Outcome("lost", detail=detail) for _ in part], started)
            by_id = {item["id"]: item for item in answer.json()["results"]}
            return _stamped([_kimina_outcome(by_id.get(job.name)) for job in part], started)

        async with httpx.AsyncClient(timeout=None, limits=httpx.Limits(max_connections=None)) as http:
            parts = await asyncio.gather(*(post(jobs[at : at + self.chunk]) for at in range(0, len(jobs), self.chunk)))
        return [outcome for part in parts for outcome in part]

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
        kill_stand_ins(self.marker)


def kimina_shims(folder: Path) -> Path:
    """A folder for kimina's PYTHONPATH that lets kimina-ast-server 2.0.4 start here, offline, on Python 3.11.

    - `prisma`: kimina imports its Prisma database client at start, and generating that client downloads engine
      binaries. With no LEAN_SERVER_DATABASE_URL it never connects, so an empty client class is all it needs.
    - `sitecustomize`: kimina-ast-client takes `TypedDict` from `typing` whenever `typing.NotRequired` exists
      (Python >= 3.11), and pydantic refuses `typing.TypedDict` before Python 3.12; the `typing_extensions` one,
      which kimina-ast-client itself falls back to, is accepted. It also drops the `logger=` keyword kimina passes
      to `FastAPI()`, which FastAPI accepted (and ignored) before it stopped taking unknown keywords.
    """
    shims = folder / "kimina-shims"
    (shims / "prisma").mkdir(parents=True, exist_ok=True)
    (shims / "prisma" / "__init__.py").write_text(
        '"""No database: kimina only constructs the client when LEAN_SERVER_DATABASE_URL is unset."""\n\n\n'
        "class Prisma:\n    pass\n"
    )
    (shims / "sitecustomize.py").write_text(
        "import typing\n\nimport fastapi\nimport typing_extensions\n\n"
        "typing.TypedDict = typing_extensions.TypedDict\n"
        "_init = fastapi.FastAPI.__init__\n\n\n"
        "def _init_without_logger(self, *args, logger=None, **kwargs):\n"
        "    _init(self, *args, **kwargs)\n\n\n"
        "fastapi.FastAPI.__init__ = _init_without_logger\n"
    )
    return shims


def _kimina_outcome(item: dict | None) -> Outcome:
    if item is None:
        return Outcome("lost", detail="no result for this id")
    if item.get("error"):
        status = "timeout" if "timed out" in item["error"] else "error"
        return Outcome(status, detail=item["error"])
    response = item.get("response") or {}
    if "env" not in response:
        return Outcome("error", detail=json.dumps(response)[:200])
    texts = [m.get("data") for m in response.get("messages") or []]
    return Outcome("passed" if kimina_passed(response) else "failed", echoes=echoes_of(texts))


class LeanInteractDriver(Driver):
    name = "LeanInteract"
    granularity = "one proof"

    def __init__(self, stand_in: StandIn, workers: int, header: str, memory_mb: int):
        from lean_interact import LeanREPLConfig
        from lean_interact.interface import Command
        from lean_interact.pool import LeanServerPool

        self.Command = Command
        self.workers = workers
        self.marker = str(stand_in.folder)
        config = LeanREPLConfig(
            local_repl_path=str(stand_in.repl_dir),
            build_repl=False,
            lake_path=str(stand_in.bin / "lake"),
            memory_hard_limit_mb=memory_mb,
        )
        # max_total_memory: its default restarts every REPL when the whole machine is 80% full; this machine is shared.
        self.pool = LeanServerPool(config, num_workers=workers, max_total_memory=1.0)
        self.header_envs: dict[str, int] = {}
        self.header_env(split_imports(header)[0])

    def header_env(self, imports: str) -> int | None:
        """The session-cached env of `imports`, run once; its workers replay it when they lack it."""
        if not imports:
            return None
        if imports not in self.header_envs:
            response = self.pool.run(self.Command(cmd=imports), timeout=STARTUP_S)
            self.header_envs[imports] = response.env
        return self.header_envs[imports]

    def run_one(self, job: Job, timeout: float) -> Outcome:
        imports, body = split_imports(job.code)
        try:
            response = self.pool.run(self.Command(cmd=body, env=self.header_env(imports)), timeout=timeout)
        except TimeoutError as error:
            return Outcome("timeout", detail=str(error)[:200])
        except Exception as error:  # noqa: BLE001 - whatever the peer raises is its answer to this proof
            return Outcome("crashed", detail=f"{type(error).__name__}: {str(error)[:200]}")
        if not hasattr(response, "lean_code_is_valid"):
            return Outcome("error", detail=str(response)[:200])
        passed = response.lean_code_is_valid(allow_sorry=False)
        return Outcome("passed" if passed else "failed", echoes=echoes_of(m.data for m in response.messages))

    async def run(self, jobs: list[Job], timeout: float) -> list[Outcome]:
        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(self.workers) as threads:
            futures = [asyncio.wrap_future(threads.submit(self._stamped_one, job, timeout, started)) for job in jobs]
            return list(await asyncio.gather(*futures))

    def _stamped_one(self, job: Job, timeout: float, started: float) -> Outcome:
        outcome = self.run_one(job, timeout)
        outcome.done_s = time.perf_counter() - started
        return outcome

    def close(self) -> None:
        self.pool.close()
        kill_stand_ins(self.marker)
