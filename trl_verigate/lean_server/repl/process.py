"""One Lean REPL process: header load, commands under a timeout, and the framing checks on its answers. Its
isolation (session, RLIMIT_AS, scratch HOME, bubblewrap) is `prover_pool.worker`'s.

Framing integrity: an answer is taken as the REPL's answer to the request only if
- its `env` is the next env id this process should hand out (the header load gives the first,
  every answered command one more; error objects such as {"message": "Unknown environment."}
  carry no env and create none);
- the REPL's own stdin thread (found blocked in read(0) after the header load, through
  /proc/<pid>/task/<tid>/syscall) read at least the request's bytes (its rchar in .../io grew by
  them), so nobody else took the request, and is back in read(0) within READY_WAIT_S of the answer,
  so the REPL had finished its command when the answer arrived (a forgery written mid-command is
  followed by the real answer, which then shows up as extra bytes);
- no byte follows it on stdout, up to the next request;
- the REPL is still alive, and no process joined its process tree since the header load (a child
  left running could answer a later request first).
Where the stdin thread cannot be found (no such /proc files, an unknown architecture, a REPL that
polls), a fixed RESPONSE_GRACE_S after each answer replaces the two thread checks.
Otherwise the REPL is compromised: it is killed and its request gets "error" (WorkerCompromised);
when the breach shows before a request is written, that request is innocent and the pool runs it
on a fresh REPL.

What this tier cannot stop: code running inside the REPL can always forge its own answer with the
right env and no extra bytes: write it to stdout and keep the real one from ever reaching the pipe
(point fd 1 elsewhere before the REPL writes, or rewrite the REPL's memory through /proc/self/mem),
guessing or reading the env id. Only the recheck tier, which checks the proof outside any process
the submission ran in, catches that. This tier stops the forgeries that leave a trace (a wrong env,
a second answer, an exit, a request read by someone else, a process left behind). A worker compromised without a
trace answers only for its own caller: the pool never hands a REPL to another caller (`prover_pool.pool`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

from trl_verigate.lean_server.core import LeanServerConfig
from trl_verigate.lean_server.repl.protocol import ProtocolError, encode_request, read_response
from trl_verigate.prover_pool import procfs
from trl_verigate.prover_pool.worker import (
    POLL_S,
    WorkerCompromised,
    WorkerCrashed,
    WorkerError,
    WorkerProcess,
    WorkerStartError,
    WorkerTimeout,
)

__all__ = ["WorkerCompromised", "WorkerCrashed", "WorkerError", "ReplProcess", "WorkerStartError", "WorkerTimeout"]

# Generous: a real REPL may free a large answer before it reads again, and a false alarm costs a Mathlib reload.
READY_WAIT_S = 5.0
# Once the REPL reads again, its last bytes (if any) are in the pipe: the event loop's selector, the pipe
# transport and the stdout reader task each take one loop turn to see them.
SETTLE_LOOP_TURNS = 4
# Without a known stdin reader (no /proc syscall file, another architecture, a REPL that polls), a fixed
# wait after each answer catches only output right behind it.
RESPONSE_GRACE_S = 0.02
STDIN_READER_SEARCH_S = 0.5
STRAY_SAMPLE_BYTES = 200


class ReplProcess(WorkerProcess):
    """A REPL process with a loaded header; not safe for concurrent `run` calls (the pool serialises them)."""

    ENV_PREFIXES = ("LEAN", "LAKE", "ELAN")
    SETTINGS_NAME = "LeanServerConfig"
    PROGRAM = "the REPL"
    NOT_FOUND_FIX = (
        "set LeanServerConfig.repl_command to the REPL's argv, e.g. ['lake', 'env', "
        "'/path/to/repl/.lake/build/bin/repl'], with project_dir the Lean project; `trl-verigate lean-doctor` checks "
        "the setup"
    )
    PROTOCOL_ERRORS = (ProtocolError,)

    def __init__(self, config: LeanServerConfig):
        super().__init__(config)
        self.config = config
        self.header: str | None = None
        self.header_env: int | None = None
        # The request in flight waits on this; the stdout reader resolves it with the next framed answer.
        self._answer: asyncio.Future | None = None
        # Why the REPL's output can no longer be trusted (bytes nobody asked for, stdout closed), or None.
        self._breach: str | None = None
        self._next_env: int | None = None
        self._watch: procfs.ProcessWatch | None = None
        # The (pid, tid) blocked reading stdin between requests, found after the header load; None if not found.
        self._stdin_reader: tuple[int, int] | None = None

    def scratch_env(self, scratch: Path) -> dict[str, str]:
        env = super().scratch_env(scratch)
        # elan finds its toolchains under $HOME/.elan; the private HOME must not hide them.
        real_elan = Path(os.environ.get("HOME", "~")).expanduser() / ".elan"
        if "ELAN_HOME" not in env and real_elan.is_dir():
            env["ELAN_HOME"] = str(real_elan)
        return env

    async def start(self, header: str) -> None:
        """Spawn the REPL and load `header` in a fresh env; WorkerStartError on any failure."""
        response = await self.start_and_load(
            list(self.config.repl_command),
            lambda: self._exchange({"cmd": header}),
            "check that the project's oleans are built (`lake build` in project_dir; importing Mathlib takes "
            "minutes on a cold cache)",
            "check LeanServerConfig.repl_command and project_dir (`trl-verigate lean-doctor`)",
        )
        errors = [m.get("data", "") for m in response.get("messages", []) if m.get("severity") == "error"]
        if type(response.get("env")) is not int or errors:
            await self.close()
            problem = "; ".join(errors) or response.get("message") or f"unexpected response {response!r}"
            raise WorkerStartError(
                f"the REPL rejected the header {header[:200]!r}: {problem}; fix the header's imports/options "
                "or build the missing modules in project_dir"
            )
        self.header = header
        self.header_env = response["env"]
        self._next_env = response["env"] + 1
        self._watch = procfs.ProcessWatch(self.pid)
        self._stdin_reader = await self._find_stdin_reader()

    async def run_code(self, code: str, timeout: float) -> dict:
        """The REPL's response to `code` run in the header's env (`run` of `{"cmd": code, "env": header_env}`)."""
        return await self.run({"cmd": code, "env": self.header_env}, timeout)

    async def run(self, request: dict, timeout: float) -> dict:
        """Send one request and return the REPL's response.

        WorkerTimeout after `timeout` seconds (the process group is killed), WorkerCrashed on early
        exit, garbage or truncated output, WorkerCompromised when the answer breaks the framing rules
        (the process is killed). Either way the process is dead.
        """
        if not self.alive:
            raise WorkerCrashed(f"the REPL is not running ({self.describe_exit()})")
        self.uses += 1
        started = time.monotonic()
        try:
            return await self.answer_or_kill(asyncio.wait_for(self._exchange(request), timeout), started)
        except asyncio.TimeoutError:
            await self._kill()
            raise WorkerTimeout(
                f"no answer within {timeout:g} s; the REPL was killed", time.monotonic() - started
            ) from None

    async def _exchange(self, request: dict) -> dict:
        problem = self._idle_breach()
        if problem is not None:
            raise WorkerCompromised(problem, request_sent=False)
        data = encode_request(request)
        read_before = procfs.bytes_read(self._stdin_reader) if self._stdin_reader is not None else None
        answer = self._answer = asyncio.get_running_loop().create_future()
        self._process.stdin.write(data)
        await self._process.stdin.drain()
        response = await answer
        problem = await self._wait_until_reading() or self._answer_breach(response, read_before, len(data))
        if problem is not None:
            raise WorkerCompromised(problem)
        return response

    async def _wait_until_reading(self) -> str | None:
        """Wait until the REPL reads its stdin again (or the fixed grace without a known reader); why not, or None."""
        if self._stdin_reader is None:
            # After the header load no submitted code has run, and the reader is searched for next.
            if self._next_env is not None:
                await asyncio.sleep(RESPONSE_GRACE_S)
            return None
        deadline = time.monotonic() + READY_WAIT_S
        pause = POLL_S[0]
        while True:
            state = procfs.syscall_state(self._stdin_reader)
            if state is None or self._process.returncode is not None:
                return f"it exited right after answering ({self.describe_exit()})"
            if state == "reading":
                # Its last write is in the pipe; these loop turns hand any bytes after the answer to the reader.
                for _ in range(SETTLE_LOOP_TURNS):
                    await asyncio.sleep(0)
                return None
            if time.monotonic() > deadline:
                return (
                    f"it was still working {READY_WAIT_S:g} s after its answer arrived, so that answer was written "
                    "by someone else (a REPL answers after its command is done)"
                )
            await asyncio.sleep(pause)
            pause = min(pause * 2, POLL_S[1])

    async def _find_stdin_reader(self) -> tuple[int, int] | None:
        """The (pid, tid) of the REPL thread blocked reading stdin right after the header load, or None."""
        if procfs.READ_SYSCALL is None:
            return None
        deadline = time.monotonic() + STDIN_READER_SEARCH_S
        pause = POLL_S[0]
        while time.monotonic() < deadline:
            # The REPL answered the header, so it is in the tree the watch took as its baseline.
            for pid in sorted(self._watch.tree):
                try:
                    tids = os.listdir(f"/proc/{pid}/task")
                except OSError:
                    continue
                for tid in tids:
                    if procfs.syscall_state((pid, int(tid))) == "reading":
                        return pid, int(tid)
            await asyncio.sleep(pause)
            pause = min(pause * 2, POLL_S[1])
        return None

    def _idle_breach(self) -> str | None:
        """Why the REPL cannot be trusted with a new request, judged from what it did since its last answer."""
        if self._breach is not None:
            return self._breach
        if self._process.returncode is not None:
            return f"it exited while idle ({self.describe_exit()})"
        return None

    def _answer_breach(self, response: dict, read_before: int | None, request_bytes: int) -> str | None:
        """Why `response` is not this REPL's real answer to the request of `request_bytes` just sent, or None.

        `read_before`: what the REPL's stdin thread had read before the request was written (None: not known).
        """
        if read_before is not None:
            read_after = procfs.bytes_read(self._stdin_reader)
            if read_after is None or read_after - read_before < request_bytes:
                taken = "none" if read_after is None else read_after - read_before
                return (
                    f"its reading thread took {taken} of the request's {request_bytes} bytes, so someone else "
                    "read the request and answered it"
                )
        header_load = self._next_env is None
        if not header_load:
            env = response.get("env")
            if "env" in response:
                if type(env) is not int or env != self._next_env:
                    return f"its answer has env {env!r} where this REPL's next env is {self._next_env}"
                self._next_env += 1
            elif not isinstance(response.get("message"), str):
                return "its answer has neither an env nor an error message"
        if self._breach is not None:
            return self._breach
        if self._process.returncode is not None:
            return f"it exited right after answering ({self.describe_exit()})"
        # The header load (no submitted code ran yet) sets the first env and the process baseline instead.
        return None if header_load else self._new_processes()

    def _new_processes(self) -> str | None:
        added = self._watch.joined()
        if added:
            return f"{len(added)} process(es) it started are still running (pids {sorted(added)})"
        return None

    async def _read_stdout(self) -> None:
        """The only reader of the REPL's stdout: hands each framed answer to the request waiting for it.

        Any byte that arrives while no request waits (after an answer and before the next request) is a breach.
        """
        stdout = self._process.stdout
        while True:
            first = await stdout.read(1)
            answer = self._answer
            waiting = answer is not None and not answer.done()
            if not first:
                if waiting:
                    answer.set_exception(ProtocolError("eof", "output ended before a response"))
                elif self._breach is None:
                    self._breach = "it closed its stdout after answering"
                return
            if not waiting:
                await self._record_stray(first)
                continue
            try:
                response = await read_response(stdout, first=first)
            except ProtocolError as error:
                answer.set_exception(error)
                return
            if not answer.done():
                answer.set_result(response)

    async def _record_stray(self, first: bytes) -> None:
        if self._breach is not None:
            return
        self._breach = f"it wrote to stdout when no answer was due: {first!r}"
        # The first bytes make the reason readable; the breach itself is already recorded.
        with contextlib.suppress(asyncio.TimeoutError):
            more = await asyncio.wait_for(self._process.stdout.read(STRAY_SAMPLE_BYTES), RESPONSE_GRACE_S)
            self._breach = f"it wrote to stdout when no answer was due: {(first + more)[:STRAY_SAMPLE_BYTES]!r}"
