"""The processes `trl-verigate lean-recheck` starts (lake, lean, bubblewrap, comparator): none outlives the checker.

The server kills the checker's process group at `recheck_timeout` (`contract.run_checker`), so every tool runs in
that group, not in a session of its own: the same kill reaches it, a `lake env lean`'s lean included. A sandboxed
compile's bubblewrap is in the group too, and its ``--die-with-parent`` takes the PID namespace, and everything
in it, down with it. On the checker's own timeouts (``--compile-timeout``, ``--replay-timeout``) a tool's whole
process tree is killed, not just the process it started, so no grandchild keeps running (or holds the output
pipe open). `backends.run` kills the trees of the tools it started before it returns (safe inside another
program); as its own process (`backends.command`, the CLI) the checker also kills every process still
below it on SIGTERM, SIGINT or exit, and as a child subreaper it has adopted the orphans of its tools, so a
double-forked descendant is found too. What this cannot
stop: a tool that leaves the process group (``setsid``) and is then orphaned when the checker is SIGKILLed.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trl_verigate.prover_pool import procfs

PR_SET_CHILD_SUBREAPER = 36
# After a tree is killed its pipes close at once; a descendant that escaped the tree could hold them open.
DRAIN_AFTER_KILL_S = 5.0
# Set by SIGTERM/SIGINT: compiles still queued in the thread pool start no tool.
_stopping = threading.Event()
# The tools running now (several threads start them), so `kill_started_tools` can end them and only them.
_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()


class Stopping(Exception):
    """The checker is exiting on a signal: no new tool starts."""


@dataclass(frozen=True)
class ToolRun:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool


def become_subreaper() -> None:
    """Make orphaned descendants this process's children (Linux), so `kill_descendants` still finds them."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1)
    except (OSError, AttributeError):
        pass  # not Linux: the process group alone covers the tools


def _send(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tree(root: int) -> None:
    """SIGKILL `root` and all its descendants. Each member found is stopped first (a stopped process cannot fork),
    until a pass over /proc finds no new one, so no child started meanwhile is missed."""
    stopped: set[int] = set()
    while fresh := procfs.process_tree(root) - stopped:
        for pid in fresh:
            _send(pid, signal.SIGSTOP)
        stopped |= fresh
    for pid in stopped:
        _send(pid, signal.SIGKILL)


def kill_started_tools() -> None:
    """Kill the process tree of every tool `run_tool` started that is still running."""
    with _running_lock:
        running = list(_running)
    for process in running:
        kill_tree(process.pid)


def kill_descendants() -> None:
    """Kill every process below this one (its tools and the orphans it adopted)."""
    me = os.getpid()
    for pid in procfs.live_pids():
        if procfs.parent_pid(pid) == me:
            kill_tree(pid)


def run_tool(
    argv: Sequence[str], *, cwd: str | os.PathLike, timeout: float, env: Mapping[str, str] | None = None
) -> ToolRun:
    """Run `argv` to completion or `timeout` (then its whole tree is killed); OSError when it cannot start."""
    if _stopping.is_set():
        raise Stopping("lean-recheck is exiting on a signal")
    # No start_new_session: the tool stays in the checker's process group, where the server's kill reaches it.
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
    )
    with _running_lock:
        _running.add(process)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
        return ToolRun(process.returncode, stdout, stderr, timed_out=False)
    except subprocess.TimeoutExpired:
        kill_tree(process.pid)
        try:
            stdout, stderr = process.communicate(timeout=DRAIN_AFTER_KILL_S)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = "", ""
        process.wait()
        return ToolRun(process.returncode, stdout or "", stderr or "", timed_out=True)
    except BaseException:
        kill_tree(process.pid)
        process.wait()
        raise
    finally:
        with _running_lock:
            _running.discard(process)


def _on_signal(signum, frame) -> None:
    _stopping.set()
    kill_descendants()
    raise SystemExit(128 + signum)


def install_signal_handlers() -> dict[int, object]:
    """SIGTERM and SIGINT kill every descendant, then exit 128 + the signal; the previous handlers, to restore.
    Only the main thread may set handlers: from another thread this does nothing (the process group still holds)."""
    previous = {}
    if threading.current_thread() is not threading.main_thread():
        return previous
    for signum in (signal.SIGTERM, signal.SIGINT):
        previous[signum] = signal.signal(signum, _on_signal)
    return previous


def restore_signal_handlers(previous: dict[int, object]) -> None:
    for signum, handler in previous.items():
        signal.signal(signum, handler)
