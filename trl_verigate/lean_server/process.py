"""One Lean REPL process: isolated start, header load, commands under a timeout, hard kill.

Isolation: the REPL runs in its own session (so one `killpg` reaches `lake env`, the REPL and
anything they spawn), under RLIMIT_AS, with a private scratch HOME/TMPDIR that is deleted on
close and an environment reduced to PATH, locale and the Lean/Lake/elan variables.
"""

from __future__ import annotations

import asyncio
import collections
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from trl_verigate.lean_server.protocol import ProtocolError, encode_request, read_response
from trl_verigate.lean_server.types import LeanServerConfig

STDERR_TAIL_BYTES = 16 << 10
STDOUT_BUFFER_BYTES = 64 << 20
INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
INHERITED_ENV_PREFIXES = ("LEAN", "LAKE", "ELAN")

# Sets the limits in the child and execs the REPL. A wrapper rather than `preexec_fn`: the pool's
# event loop runs beside trainer threads, and Python code between fork and exec can deadlock there.
# PR_SET_PDEATHSIG kills the REPL if the thread that started it dies without closing it.
_LAUNCHER = """
import os, resource, sys
limit = int(sys.argv[1])
if limit > 0:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    import ctypes, signal
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))
except Exception:
    pass
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as error:
    sys.stderr.write(f"cannot execute {sys.argv[2]!r}: {error}\\n")
    sys.exit(127)
"""


class ReplError(Exception):
    """The REPL could not answer a request; `status` is the verdict the request gets."""

    status = "crashed"

    def __init__(self, reason: str, time_s: float = 0.0):
        super().__init__(reason)
        self.time_s = time_s


class ReplStartError(ReplError):
    """The REPL did not start or did not load the header: a setup problem, not the proof's fault."""

    status = "error"


class ReplTimeout(ReplError):
    status = "timeout"


class ReplCrashed(ReplError):
    """The REPL exited early, or wrote garbage or a truncated response."""

    status = "crashed"


def _scratch_env(scratch: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in INHERITED_ENV or k.startswith(INHERITED_ENV_PREFIXES)}
    # elan finds its toolchains under $HOME/.elan; the private HOME must not hide them.
    real_elan = Path(os.environ.get("HOME", "~")).expanduser() / ".elan"
    if "ELAN_HOME" not in env and real_elan.is_dir():
        env["ELAN_HOME"] = str(real_elan)
    env["HOME"] = str(scratch)
    env["TMPDIR"] = str(scratch / "tmp")
    return env


def _resolve_executable(program: str, cwd: str, env: dict[str, str]) -> str | None:
    if os.sep in program:
        path = Path(cwd) / program
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(program, path=env.get("PATH", ""))


class ReplProcess:
    """A REPL process with a loaded header; not safe for concurrent `run` calls (the pool serialises them)."""

    def __init__(self, config: LeanServerConfig):
        self.config = config
        self.header: str | None = None
        self.header_env: int | None = None
        self.uses = 0
        self.pid: int | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._scratch: Path | None = None
        self._stderr_tail: collections.deque[bytes] = collections.deque()
        self._stderr_size = 0
        self._stderr_task: asyncio.Task | None = None
        self._dead = False
        self.startup_s: float | None = None

    @property
    def alive(self) -> bool:
        return self._process is not None and not self._dead and self._process.returncode is None

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

    async def start(self, header: str) -> None:
        """Spawn the REPL and load `header` in a fresh env; ReplStartError on any failure."""
        config = self.config
        cwd = config.project_dir or os.getcwd()
        if not Path(cwd).is_dir():
            raise ReplStartError(
                f"LeanServerConfig.project_dir {cwd!r} is not a directory: set it to the Lean project "
                "(with Mathlib built) the REPL runs in"
            )
        self._scratch = Path(tempfile.mkdtemp(prefix="lean-repl-"))
        (self._scratch / "tmp").mkdir()
        env = _scratch_env(self._scratch)
        program = config.repl_command[0]
        if _resolve_executable(program, cwd, env) is None:
            self.remove_scratch()
            raise ReplStartError(
                f"REPL executable {program!r} not found (PATH={env.get('PATH', '')!r}, cwd={cwd!r}): set "
                "LeanServerConfig.repl_command to the REPL's argv, e.g. "
                "['lake', 'env', '/path/to/repl/.lake/build/bin/repl'], with project_dir the Lean project; "
                "`trl-verigate lean-doctor` checks the setup"
            )
        limit_bytes = (config.memory_limit_mb or 0) << 20
        try:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                "-S",
                "-c",
                _LAUNCHER,
                str(limit_bytes),
                *config.repl_command,
                cwd=cwd,
                env=env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                limit=STDOUT_BUFFER_BYTES,
            )
        except OSError as error:
            self.remove_scratch()
            raise ReplStartError(f"cannot start the REPL {config.repl_command!r}: {error}") from None
        self.pid = self._process.pid
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())
        started = time.monotonic()
        try:
            response = await asyncio.wait_for(self._exchange({"cmd": header}), config.startup_timeout)
        except asyncio.TimeoutError:
            await self.close()
            raise ReplStartError(
                f"the REPL did not load the header within startup_timeout={config.startup_timeout:g} s: "
                "raise LeanServerConfig.startup_timeout (importing Mathlib takes minutes on a cold cache) "
                "or check that the project's oleans are built (`lake build` in project_dir)"
            ) from None
        except (ProtocolError, BrokenPipeError, ConnectionResetError) as error:
            await self._kill()
            detail = self.describe_exit()
            await self.close()
            problem = f"{error.kind}: {error.detail}" if isinstance(error, ProtocolError) else "it closed its input"
            raise ReplStartError(
                f"the REPL failed while loading the header ({problem}; {detail}): "
                "check LeanServerConfig.repl_command and project_dir (`trl-verigate lean-doctor`)"
            ) from None
        errors = [m.get("data", "") for m in response.get("messages", []) if m.get("severity") == "error"]
        if not isinstance(response.get("env"), int) or errors:
            await self.close()
            problem = "; ".join(errors) or response.get("message") or f"unexpected response {response!r}"
            raise ReplStartError(
                f"the REPL rejected the header {header[:200]!r}: {problem}; fix the header's imports/options "
                "or build the missing modules in project_dir"
            )
        self.header = header
        self.header_env = response["env"]
        self.startup_s = time.monotonic() - started

    async def run(self, request: dict, timeout: float) -> dict:
        """Send one request and return the REPL's response.

        ReplTimeout after `timeout` seconds (the process group is killed), ReplCrashed on early
        exit, garbage or truncated output (the process is killed). Either way the process is dead.
        """
        if not self.alive:
            raise ReplCrashed(f"the REPL is not running ({self.describe_exit()})")
        self.uses += 1
        started = time.monotonic()
        try:
            return await asyncio.wait_for(self._exchange(request), timeout)
        except asyncio.TimeoutError:
            await self._kill()
            raise ReplTimeout(
                f"no answer within {timeout:g} s; the REPL was killed", time.monotonic() - started
            ) from None
        except ProtocolError as error:
            await self._kill()
            raise ReplCrashed(
                f"REPL output {error.kind}: {error.detail} ({self.describe_exit()})", time.monotonic() - started
            ) from None
        except (BrokenPipeError, ConnectionResetError):
            await self._kill()
            raise ReplCrashed(
                f"the REPL closed its input ({self.describe_exit()})", time.monotonic() - started
            ) from None
        except asyncio.CancelledError:
            # The REPL may still be working on the abandoned request: its next answer would be stale.
            await asyncio.shield(self._kill())
            raise

    async def _exchange(self, request: dict) -> dict:
        self._process.stdin.write(encode_request(request))
        await self._process.stdin.drain()
        return await read_response(self._process.stdout)

    async def _drain_stderr(self) -> None:
        # Keeps reading so a chatty REPL never blocks on a full stderr pipe; only the tail is kept.
        while True:
            chunk = await self._process.stderr.read(4096)
            if not chunk:
                return
            self._stderr_tail.append(chunk)
            self._stderr_size += len(chunk)
            while self._stderr_size > STDERR_TAIL_BYTES and len(self._stderr_tail) > 1:
                self._stderr_size -= len(self._stderr_tail.popleft())

    def kill_now(self) -> None:
        """SIGKILL the process group without awaiting it (for interpreter exit paths)."""
        self._dead = True
        if self._process is not None:
            # The whole group, even when the leader already exited: `lake env` may leave the REPL behind.
            try:
                os.killpg(self._process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    async def _kill(self) -> None:
        self.kill_now()
        if self._process is not None:
            await self._process.wait()
            if self._stderr_task is not None:
                # The group is dead, so stderr reaches EOF; bounded anyway against a leaked descendant.
                try:
                    await asyncio.wait_for(asyncio.shield(self._stderr_task), 1.0)
                except asyncio.TimeoutError:
                    pass

    async def close(self) -> None:
        """Kill the process group and delete the scratch directory; idempotent."""
        await self._kill()
        if self._stderr_task is not None and not self._stderr_task.done():
            self._stderr_task.cancel()
        if self._process is not None and self._process.stdin is not None:
            self._process.stdin.close()
        self.remove_scratch()

    def remove_scratch(self) -> None:
        """Delete the private HOME/TMPDIR; call it once the process is killed."""
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None
