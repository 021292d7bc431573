"""One prover process, isolated: its start, its stderr, and its hard kill. What it says on stdout, and whether that
is its real answer, is the prover's own protocol (`lean_server.repl.process`, `coq.process`).

Isolation: the process runs in its own session (so one `killpg` reaches `lake env`, the REPL and anything they
spawn), under RLIMIT_AS, with a private scratch HOME/TMPDIR that is deleted on close and an environment reduced to
PATH, locale and the prover's toolchain variables; with `sandbox` "bwrap" (or "auto" where bubblewrap works)
inside the bubblewrap sandbox that `sandbox` describes (own PID and network namespace, read-only toolchain and
project).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from trl_verigate.prover_pool import procfs, sandbox

STDERR_TAIL_BYTES = 16 << 10
STDOUT_BUFFER_BYTES = 64 << 20
INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
# A SIGKILLed process is gone at once unless stuck in the kernel; past this the kill is reported as done anyway.
KILL_WAIT_S = 5.0
POLL_S = (0.0002, 0.01)  # first and longest pause between looks at a process's state

# Sets the limits in the child and execs the prover. A wrapper rather than `preexec_fn`: the pool's event loop runs
# beside trainer threads, and Python code between fork and exec can deadlock there. PR_SET_PDEATHSIG (1) kills the
# process (or bubblewrap) if the thread that started it dies without closing it. PR_SET_CHILD_SUBREAPER (36) makes
# orphans of its children its own children, so a double-forked child stays in its process tree, where the framing
# checks see it and the kill reaches it.
_LAUNCHER = """
import os, resource, sys
limit = int(sys.argv[1])
if limit > 0:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    import ctypes, signal
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, int(signal.SIGKILL))
    libc.prctl(36, 1)
except Exception:
    pass
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as error:
    sys.stderr.write(f"cannot execute {sys.argv[2]!r}: {error}\\n")
    sys.exit(127)
"""


class WorkerError(Exception):
    """The prover could not answer a request; `status` is the verdict the request gets."""

    status = "crashed"

    def __init__(self, reason: str, time_s: float = 0.0):
        super().__init__(reason)
        self.time_s = time_s


class WorkerStartError(WorkerError):
    """The prover did not start or did not load the header: a setup problem, not the proof's fault."""

    status = "error"


class WorkerTimeout(WorkerError):
    status = "timeout"


class WorkerCrashed(WorkerError):
    """The prover exited early, or wrote garbage or a truncated response."""

    status = "crashed"


class WorkerCompromised(WorkerError):
    """The prover's output broke its protocol's framing rules: it was killed, no answer is trusted.

    `request_sent` is False when the breach showed before the request was written: the request itself is innocent.
    """

    status = "error"

    def __init__(self, reason: str, time_s: float = 0.0, request_sent: bool = True):
        super().__init__(reason, time_s)
        self.request_sent = request_sent


def resolve_executable(program: str, cwd: str, env: dict[str, str]) -> str | None:
    if os.sep in program:
        path = Path(cwd) / program
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(program, path=env.get("PATH", ""))


class WorkerProcess:
    """A sandboxed, memory-limited process with a private scratch directory; subclasses speak its protocol.

    `settings` holds `memory_limit_mb`, `sandbox` and `project_dir` (a `LeanServerConfig` or `CoqServerConfig`).
    Class attributes name the prover's toolchain variables (`ENV_PREFIXES`) and its settings in messages.
    """

    ENV_PREFIXES: tuple[str, ...] = ()
    SETTINGS_NAME = "config"
    # How messages name the process ("the REPL", "coqidetop") and the protocol errors its reader raises.
    PROGRAM = "the prover"
    # What a missing program's message tells the user to set or install.
    NOT_FOUND_FIX = "set the command that names it"
    PROTOCOL_ERRORS: tuple[type[Exception], ...] = ()

    def __init__(self, settings):
        self.settings = settings
        self.uses = 0
        self.sandboxed = False
        self._process: asyncio.subprocess.Process | None = None
        self._scratch: Path | None = None
        self._stderr_tail: collections.deque[bytes] = collections.deque()
        self._stderr_size = 0
        self._stderr_task: asyncio.Task | None = None
        self._stdout_task: asyncio.Task | None = None
        self.startup_s: float | None = None
        self._dead = False

    @property
    def pid(self) -> int | None:
        """The launcher's pid: bubblewrap's outside the sandbox, else the process's own (the launcher execs it)."""
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and not self._dead and self._process.returncode is None

    async def spawn(self, argv: list[str]) -> None:
        """Start `argv` isolated (see the module docstring), with stdin, stdout and stderr piped; WorkerStartError
        when it cannot start."""
        settings = self.settings
        cwd = settings.project_dir or os.getcwd()
        if not Path(cwd).is_dir():
            raise WorkerStartError(
                f"{self.SETTINGS_NAME}.project_dir {cwd!r} is not a directory: set it to the project the prover runs in"
            )
        try:
            bwrap = sandbox.choose(settings.sandbox, f"{self.SETTINGS_NAME}.sandbox")
        except sandbox.SandboxUnavailable as error:
            raise WorkerStartError(str(error)) from None
        self._scratch = Path(tempfile.mkdtemp(prefix="prover-"))
        (self._scratch / "tmp").mkdir()
        argv = self.prepare_scratch(self._scratch, argv)
        env = self.scratch_env(self._scratch)
        found = resolve_executable(argv[0], cwd, env)
        if found is None:
            self.remove_scratch()
            raise WorkerStartError(self.not_found_message(argv[0], env, cwd))
        if bwrap is not None:
            read_only = sandbox.read_only_paths(argv, os.path.abspath(found), cwd, env, self.ENV_PREFIXES)
            argv = sandbox.bwrap_argv(bwrap, argv, read_only=read_only, writable=str(self._scratch), cwd=cwd, env=env)
            self.sandboxed = True
        limit_bytes = (settings.memory_limit_mb or 0) << 20
        creating = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                "-S",
                "-c",
                _LAUNCHER,
                str(limit_bytes),
                *argv,
                cwd=cwd,
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                limit=STDOUT_BUFFER_BYTES,
            )
        )
        try:
            self._process = await asyncio.shield(creating)
        except OSError as error:
            self.remove_scratch()
            raise WorkerStartError(f"cannot start {argv!r}: {error}") from None
        except asyncio.CancelledError:
            # Cancelled while it connects the pipes, `create_subprocess_exec` can wait forever
            # (python/cpython#103847, fixed in 3.14), and the pool cancels starts when it replaces a worker or
            # closes. So the creation always finishes, and the process it made is kept for `close` to kill.
            while not creating.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(creating)
            if not creating.cancelled() and creating.exception() is None:
                self._process = creating.result()
            raise
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())

    async def answer_or_kill(self, work, started: float):
        """Await `work` (one request's exchange); when the process breaks its protocol or its framing, closes its
        input, or the request is cancelled, kill it and raise the WorkerError the request gets. Timeouts are the
        caller's."""
        try:
            return await work
        except self.PROTOCOL_ERRORS as error:
            await self._kill()
            raise WorkerCrashed(
                f"{self.PROGRAM} output {error.kind}: {error.detail} ({self.describe_exit()})",
                time.monotonic() - started,
            ) from None
        except WorkerCompromised as error:
            await self._kill()
            raise WorkerCompromised(
                f"{self.PROGRAM} is compromised: {error}; it was killed and its answer discarded",
                time.monotonic() - started,
                error.request_sent,
            ) from None
        except (BrokenPipeError, ConnectionResetError):
            await self._kill()
            raise WorkerCrashed(
                f"{self.PROGRAM} closed its input ({self.describe_exit()})", time.monotonic() - started
            ) from None
        except asyncio.CancelledError:
            # The process may still be working on the abandoned request: its next answer would be stale.
            await asyncio.shield(self._kill())
            raise

    def prepare_scratch(self, scratch: Path, argv: list[str]) -> list[str]:
        """The argv to run, once the scratch directory exists; a subclass may write the files it reads there first
        (a one-shot compiler's input)."""
        return argv

    def not_found_message(self, program: str, env: dict[str, str], cwd: str) -> str:
        return f"executable {program!r} not found (PATH={env.get('PATH', '')!r}, cwd={cwd!r}): {self.NOT_FOUND_FIX}"

    async def start_and_load(self, argv: list[str], loading, timeout_fix: str, setup_fix: str):
        """Spawn `argv`, read its stdout (`_read_stdout`), and await `loading()` (the header load) within the
        settings' `startup_timeout`; returns what it returns. Past the timeout, or when the process breaks its
        protocol or closes its input, the process is stopped and WorkerStartError says what to do: raise the
        timeout or `timeout_fix`, or `setup_fix`."""
        await self.spawn(argv)
        self._stdout_task = asyncio.ensure_future(self._read_stdout())
        started = time.monotonic()
        limit = self.settings.startup_timeout
        try:
            answer = await asyncio.wait_for(loading(), limit)
        except asyncio.TimeoutError:
            await self.close()
            raise WorkerStartError(
                f"{self.PROGRAM} did not load the header within startup_timeout={limit:g} s: raise "
                f"{self.SETTINGS_NAME}.startup_timeout or {timeout_fix}"
            ) from None
        except WorkerStartError:
            await self.close()
            raise
        except (*self.PROTOCOL_ERRORS, WorkerCompromised, BrokenPipeError, ConnectionResetError) as error:
            await self._kill()
            detail = self.describe_exit()
            await self.close()
            if isinstance(error, self.PROTOCOL_ERRORS):
                problem = f"{error.kind}: {error.detail}"
            elif isinstance(error, WorkerCompromised):
                problem = str(error)
            else:
                problem = "it closed its input"
            raise WorkerStartError(
                f"{self.PROGRAM} failed while loading the header ({problem}; {detail}): {setup_fix}"
            ) from None
        self.startup_s = time.monotonic() - started
        return answer

    async def _read_stdout(self) -> None:
        """Read the process's answers for as long as it runs (the prover's protocol)."""
        raise NotImplementedError

    def scratch_env(self, scratch: Path) -> dict[str, str]:
        """The environment the process gets: PATH, locale, the toolchain variables, and the scratch HOME/TMPDIR."""
        env = {k: v for k, v in os.environ.items() if k in INHERITED_ENV or k.startswith(self.ENV_PREFIXES)}
        env["HOME"] = str(scratch)
        env["TMPDIR"] = str(scratch / "tmp")
        return env

    def stderr_tail(self) -> str:
        return b"".join(self._stderr_tail).decode("utf-8", errors="replace").strip()

    def describe_exit(self) -> str:
        code = self._process.returncode if self._process is not None else None
        if code is None:
            status = "still running"
        elif code < 0:
            status = f"killed by {signal.Signals(-code).name}"
        else:
            status = f"exit status {code}"
        tail = self.stderr_tail()
        return f"{status}; stderr: {tail[-2000:]}" if tail else f"{status}; no stderr"

    async def _drain_stderr(self) -> None:
        # Keeps reading so a chatty process never blocks on a full stderr pipe; only the tail is kept.
        while True:
            chunk = await self._process.stderr.read(4096)
            if not chunk:
                return
            self._stderr_tail.append(chunk)
            self._stderr_size += len(chunk)
            while self._stderr_size > STDERR_TAIL_BYTES and len(self._stderr_tail) > 1:
                self._stderr_size -= len(self._stderr_tail.popleft())

    def kill_now(self) -> None:
        """SIGKILL the process group and every descendant, without awaiting them (for interpreter exit paths)."""
        self._dead = True
        if self._process is not None:
            # Descendants first seen, then killed: one that left the session (setsid) is out of the group's reach.
            # The group is stopped before it is seen, so that a child cloned as the kill lands (bubblewrap making
            # its namespace's first process, which leaves the group at once) is either in the tree or never made.
            tree = set()
            if self._process.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._process.pid, signal.SIGSTOP)
                tree = procfs.process_tree(self._process.pid)
            # The whole group, even when the leader already exited: `lake env` may leave the REPL behind.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)
            for pid in tree:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)

    def reader_tasks(self) -> list[asyncio.Task]:
        """The tasks reading the process's pipes, for `_kill` to wait on."""
        return [task for task in (self._stderr_task, self._stdout_task) if task is not None]

    async def _kill(self) -> None:
        self.kill_now()
        if self._process is None:
            return
        # Not `wait()`: it also waits until every holder of the pipes has closed them, which a descendant that
        # escaped the kill (possible only without the sandbox) can put off for as long as it lives.
        deadline = time.monotonic() + KILL_WAIT_S
        pause = POLL_S[0]
        while self._process.returncode is None and time.monotonic() < deadline:
            await asyncio.sleep(pause)
            pause = min(pause * 2, POLL_S[1])
        # The group is dead, so the pipes reach EOF; bounded anyway against such a descendant. A pipe nobody reads
        # (a start cancelled before its readers began) is read to its EOF here: asyncio closes the transport only
        # once every pipe has, and one still open when its event loop closes is collected with an error.
        for task in self.reader_tasks():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), 1.0)
        for stream in self._unread_streams():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stream.read(), 1.0)

    def _unread_streams(self) -> list[asyncio.StreamReader]:
        readers = ((self._process.stdout, self._stdout_task), (self._process.stderr, self._stderr_task))
        return [stream for stream, task in readers if stream is not None and task is None]

    async def close(self) -> None:
        """Kill the process group and delete the scratch directory; idempotent."""
        await self._kill()
        for task in self.reader_tasks():
            if not task.done():
                task.cancel()
        if self._process is not None and self._process.stdin is not None:
            self._process.stdin.close()
        self.remove_scratch()

    def remove_scratch(self) -> None:
        """Delete the private HOME/TMPDIR; call it once the process is killed."""
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
