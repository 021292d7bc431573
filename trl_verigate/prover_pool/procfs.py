"""What /proc tells about processes: parents, process trees, and what a thread is doing.

The framing checks (`lean_server.repl.process`) read it to see whether the REPL's stdin thread is back in read(0), how many
bytes it read, and whether a process joined the REPL's tree. Linux only; callers fall back when a file is missing.
"""

from __future__ import annotations

import os
import platform

# After an answer the REPL must be back reading its stdin: its main thread blocked in read(0, ...), seen
# in /proc/<pid>/task/<tid>/syscall. An honest REPL gets there microseconds after writing its answer; one
# whose answer was forged mid-command is still working and writes its real answer first.
READ_SYSCALL = {"x86_64": 0, "amd64": 0, "aarch64": 63, "arm64": 63}.get(platform.machine().lower())


def live_pids() -> set[int]:
    return {int(name) for name in os.listdir("/proc") if name.isdigit()}


def parent_pid(pid: int) -> int | None:
    """The parent pid of a live, non-zombie process, else None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses; the fields after its last ")" are plain.
    fields = data[data.rfind(b")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 and fields[0] != b"Z" else None


def process_tree(root: int) -> set[int]:
    """`root` and every live descendant of it, from the parent pids in /proc (one pass over it)."""
    children: dict[int, list[int]] = {}
    for pid in live_pids():
        parent = parent_pid(pid)
        if parent is not None:
            children.setdefault(parent, []).append(pid)
    tree, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, ()))
    return tree


class ProcessWatch:
    """Notices processes that join a process tree after a baseline, reading /proc/<pid>/stat only of new pids.

    A full pass over /proc costs ~10 us per process on the machine, on the event loop, per request; this costs
    one listing plus the processes started since the last look. A process that gets the pid of one that died
    since the last look (the allocator wrapped around in between) goes unnoticed; the other framing checks
    still stop what it could do to an answer.
    """

    def __init__(self, root: int):
        self.seen = live_pids()
        self.tree = process_tree(root) & self.seen
        self.baseline = frozenset(self.tree)

    def joined(self) -> set[int]:
        """The processes that joined the tree since the baseline and are still alive."""
        live = live_pids()
        fresh = {pid: parent_pid(pid) for pid in live - self.seen}
        self.seen = live
        self.tree &= live
        grew = True
        while grew:  # a fresh child of a fresh member joins too
            grew = False
            for pid, parent in fresh.items():
                if pid not in self.tree and parent in self.tree:
                    self.tree.add(pid)
                    grew = True
        return self.tree - self.baseline


def syscall_state(task: tuple[int, int]) -> str | None:
    """ "reading" when the thread is blocked in read() on fd 0, "busy" otherwise, None when it no longer exists."""
    pid, tid = task
    try:
        with open(f"/proc/{pid}/task/{tid}/syscall", "rb") as syscall:
            fields = syscall.read().split()
    except OSError:
        return None
    # A blocked thread shows "NR arg0 arg1 ...": read's number and fd 0; a running one shows "running".
    reading = len(fields) > 1 and fields[0] == str(READ_SYSCALL).encode() and int(fields[1], 16) == 0
    return "reading" if reading else "busy"


def bytes_read(task: tuple[int, int]) -> int | None:
    """The bytes the thread has read through read() and its kind (rchar), or None when it no longer exists."""
    pid, tid = task
    try:
        with open(f"/proc/{pid}/task/{tid}/io", "rb") as io:
            for line in io:
                if line.startswith(b"rchar:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None
