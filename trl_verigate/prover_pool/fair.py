"""`FairScheduler`: CPU-bound jobs (prechecks, the judging of answers) on a few threads, shared fairly by owners.

Each owner (a hashable key: `PooledVerifier` uses the owner's identity, so all of one client's `verify` calls and
HTTP requests share one queue) gets a queue. A thread that frees up takes the next job of the owner with the fewest
jobs running, the longest-waiting such owner first, so one owner's large batch delays another owner's job by at
most the time the jobs already running take to free one thread: one precheck.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import threading
from collections import deque
from collections.abc import Callable, Hashable


class FairScheduler:
    def __init__(self, threads: int, name: str):
        self._condition = threading.Condition()
        self._queues: dict[Hashable, deque] = {}
        self._running: dict[Hashable, int] = {}
        self._arrival: dict[Hashable, int] = {}  # when each queue last became non-empty
        self._clock = itertools.count()
        self._closed = False
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{k}", daemon=True) for k in range(threads)]
        for thread in self._threads:
            thread.start()

    def queued(self, caller: Hashable) -> int:
        """How many of `caller`'s jobs wait for a thread."""
        with self._condition:
            return len(self._queues.get(caller, ()))

    def submit(self, caller: Hashable, function: Callable, *args) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()
        with self._condition:
            if self._closed:
                raise RuntimeError("the scheduler is shut down")
            queue = self._queues.setdefault(caller, deque())
            if not queue:
                self._arrival[caller] = next(self._clock)
            queue.append((future, function, args))
            self._condition.notify()
        return future

    def _next(self):
        """The job to run next and its caller (under the lock), or None when every queue is empty."""
        waiting = [caller for caller, queue in self._queues.items() if queue]
        if not waiting:
            return None
        caller = min(waiting, key=lambda c: (self._running.get(c, 0), self._arrival[c]))
        queue = self._queues[caller]
        job = queue.popleft()
        if queue:
            self._arrival[caller] = next(self._clock)  # it goes behind the callers that waited meanwhile
        else:
            del self._queues[caller]
        self._running[caller] = self._running.get(caller, 0) + 1
        return caller, job

    def _work(self) -> None:
        while True:
            with self._condition:
                picked = self._next()
                while picked is None:
                    if self._closed:
                        return
                    self._condition.wait()
                    picked = self._next()
            caller, (future, function, args) = picked
            try:
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(function(*args))
                    except BaseException as error:  # noqa: BLE001 - handed to the caller
                        future.set_exception(error)
            finally:
                with self._condition:
                    self._running[caller] -= 1
                    if not self._running[caller]:
                        del self._running[caller]

    def shutdown(self) -> None:
        """Stop taking jobs; queued jobs are cancelled, running ones finish in their threads (nobody waits)."""
        with self._condition:
            self._closed = True
            for queue in self._queues.values():
                for future, _, _ in queue:
                    future.cancel()
            self._queues.clear()
            self._condition.notify_all()
