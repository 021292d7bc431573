"""A pool of prover processes keyed by header and owner, for one asyncio event loop.

- Every process belongs to one `Owner` (an identity and a label, see `owner`): it serves only that owner's
  requests and is killed, never handed over, when another owner needs its slot. A process that a proof compromised
  without a trace (its own answers forged) therefore never answers for another caller. Below, a "header" is the pair
  (header, owner) a process was started for.
- Each identity holds at most `max_workers_per_owner` processes (None: `workers`). A request may evict another
  identity's warm process (one that has served it) only when that identity holds more than its quota, or, with no
  quota configured, when the request's own identity holds no process at all (so no identity starves). New owners,
  however many labels a client invents, so never evict another identity's warm processes while it is within its
  quota; with a quota, size `workers` to at least the quota times the identities served, or newcomers wait.

- At most `config.workers` processes serve requests (plus `spare_workers` spares loading ahead, below); a request
  needs one idle process whose header is its own; when none is idle, a free slot gets a new process, else the least
  recently used idle process of another header is evicted. A batch therefore spreads over all slots.
- Requests wait in arrival order, but one whose header already has a process evicts another header's idle
  process only when nobody waits for that process and its own wait would be longer than a header load: its
  header's waiting requests times the mean proof time per own process, against how long its header last took
  to load; or when that header, after giving up the process, keeps one and would still drain its queue a load
  sooner than the request's header now (so a header with one process and a long queue is not left behind one with
  three until that one's queue runs dry).
  Otherwise it waits for its own processes. So interleaved headers settle on processes of each instead of
  re-importing (a Mathlib import takes seconds, a proof often less), while a header with no process at all still
  gets one at once.
- A process is retired after `max_uses_per_worker` commands (every command adds an env, so memory
  only grows). Its replacement starts ahead, as a spare, and takes over as soon as it has loaded the header, so a
  retirement costs no idle time. At most `spare_workers` spares live at once, so the pool holds at most
  `workers + spare_workers` processes (plus ones being killed): slots near their limit take turns at the spare, so a
  slot asks for one when it has `workers / spare_workers` header loads' worth of commands left (load time over the
  mean proof time; at most half its uses), and its turn comes before its limit. A process is also retired after a
  timeout, after a crash and when its output breaks the framing rules
  (`worker.WorkerCompromised`, counted as "compromised"; a request that found its worker already
  compromised by an earlier one runs again on the replacement). Its slot immediately starts a
  replacement in the background, so the restart overlaps whatever the caller does next.
- A failed start fails only the request that waited for it. After two consecutive failed starts
  for a header, requests for it fail fast with the same reason for a growing back-off (2 s to
  60 s), so a misconfigured worker cannot stall a batch for `startup_timeout` per request.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from trl_verigate.prover_pool.owner import Owner
from trl_verigate.prover_pool.worker import WorkerCompromised, WorkerError, WorkerStartError

MAX_START_BACKOFF_S = 60.0


# A slot's key: the header its process loaded, and the owner it serves.
Key = tuple[str, Owner]


@dataclass(eq=False)
class _Slot:
    header: Key
    process: object | None = None
    # A (re)start in progress; its result becomes `process` when a request claims the slot.
    pending: asyncio.Task | None = None
    busy: bool = False
    # Whether its owner's requests have run on it (a warm process of that owner, which quotas protect).
    served: bool = False
    # The replacement started ahead of the process's retirement (a spare).
    successor: asyncio.Task | None = None
    last_used: float = field(default_factory=time.monotonic)

    @property
    def has_process(self) -> bool:
        return self.pending is not None or (self.process is not None and self.process.alive)

    @property
    def serves(self) -> bool:
        """Has a process, or is busy: a busy slot's request is starting its process (`_ready`), or will start a
        fresh one after a crash, so its header has a process to wait for."""
        return self.busy or self.has_process


@dataclass
class _StartFailures:
    count: int = 0
    reason: str = ""
    retry_at: float = 0.0


class WorkerPool:
    """Runs commands in the header's env of pooled prover processes. Create and use it on one event loop.

    `config` holds `workers`, `spare_workers` and `max_uses_per_worker`; `worker_factory(config)` makes an unstarted
    worker with `start(header)`, `run_code(code, timeout)`, `uses`, `alive`, `pid`, `close()`, `kill_now()` and
    `remove_scratch()` (`lean_server.repl.process.ReplProcess`, `coq.process.CoqProcess`).
    """

    def __init__(self, config, worker_factory: Callable):
        self.config = config
        self._worker_factory = worker_factory
        self._slots: list[_Slot] = []
        # Per header, the requests waiting for a slot: (arrival number, future the slot is handed to).
        self._waiting: dict[Key, deque[tuple[int, asyncio.Future]]] = {}
        self._arrivals = itertools.count()
        # For the eviction rule: mean seconds of a proof (moving average) and each header's last load time.
        self._proof_seconds: float | None = None
        self._load_seconds: dict[Key, float] = {}
        self._processes: set = set()
        self._cleanups: set[asyncio.Task] = set()
        self._start_failures: dict[Key, _StartFailures] = {}
        self._closed = False
        self.counters = {
            "started": 0,
            "start_failures": 0,
            "recycled": 0,
            "timeouts": 0,
            "crashes": 0,
            "compromised": 0,
        }

    def prewarm(self, header: str, owner: str | Owner | None = None) -> None:
        """Start processes for `header` and `owner` (None: this process) in the free slots its quota allows, in the
        background."""
        self._check_open()
        key = (header, Owner.of(owner))
        while len(self._slots) < self.config.workers and self._held(key[1].identity) < self._quota:
            slot = _Slot(key)
            self._slots.append(slot)
            slot.pending = self._start_in_background(key)

    async def run(self, header: str, code: str, timeout: float, owner: str | Owner | None = None) -> tuple[dict, float]:
        """The response of one of `owner`'s processes for `header` to `code` run in the header's env, and the
        seconds it took.

        The time and the timeout cover only the worker's work, not waiting for a free process.

        Raises WorkerTimeout, WorkerCrashed, WorkerCompromised or WorkerStartError (subclasses of WorkerError, each with the
        `status` its request gets); the pool stays usable either way.
        """
        self._check_open()
        slot = await self._acquire((header, Owner.of(owner)))
        try:
            try:
                return await self._run_in(slot, code, timeout)
            except WorkerCompromised as error:
                if error.request_sent:
                    raise
            # The worker was compromised by an earlier request before this one was written: this one is
            # innocent, so it runs on the replacement.
            return await self._run_in(slot, code, timeout)
        finally:
            self._release(slot)

    async def _acquire(self, header: Key) -> _Slot:
        """Wait for this request's turn and a slot (`_claim`), in arrival order among those who can take one."""
        waiter = asyncio.get_running_loop().create_future()
        queue = self._waiting.setdefault(header, deque())
        entry = (next(self._arrivals), waiter)
        queue.append(entry)
        self._dispatch()
        try:
            return await waiter
        except asyncio.CancelledError:
            if entry in queue:
                queue.remove(entry)
            if waiter.done() and not waiter.cancelled():
                self._release(waiter.result())  # handed a slot just as it was cancelled
            raise

    def _release(self, slot: _Slot) -> None:
        slot.busy = False
        slot.last_used = time.monotonic()
        self._dispatch()

    def _dispatch(self) -> None:
        """Hand idle slots to waiting requests: the earliest waiter first among the headers that can take one."""
        while True:
            heads = []
            for header, queue in list(self._waiting.items()):
                while queue and queue[0][1].done():  # cancelled while waiting
                    queue.popleft()
                if queue:
                    heads.append((queue[0][0], header))
                else:  # file requests bring their own headers: keep no queue per header ever seen
                    del self._waiting[header]
            for _, header in sorted(heads):
                slot = self._claim(header)
                if slot is not None:
                    self._waiting[header].popleft()[1].set_result(slot)
                    break
            else:
                return

    async def _run_in(self, slot: _Slot, code: str, timeout: float) -> tuple[dict, float]:
        process = await self._ready(slot)
        started = time.monotonic()
        try:
            response = await process.run_code(code, timeout)
        except WorkerError as error:
            if isinstance(error, WorkerCompromised):
                self.counters["compromised"] += 1
            else:
                self.counters["timeouts" if error.status == "timeout" else "crashes"] += 1
            self._replace(slot)
            raise
        except asyncio.CancelledError:
            self._replace(slot)
            raise
        seconds = time.monotonic() - started
        slot.served = True
        self._proof_seconds = seconds if self._proof_seconds is None else 0.9 * self._proof_seconds + 0.1 * seconds
        if process.uses >= self.config.max_uses_per_worker or self._spare_loaded(slot):
            self.counters["recycled"] += 1
            self._replace(slot)
        elif slot.successor is None and process.uses >= self.config.max_uses_per_worker - self._spare_lead(slot.header):
            if sum(s.successor is not None for s in self._slots) < self.config.spare_workers:
                slot.successor = self._start_in_background(slot.header)
        return response, seconds

    def _spare_loaded(self, slot: _Slot) -> bool:
        """Whether the slot's spare is ready to take over; a spare that failed to start is dropped (the failure is
        counted, and backs off, in `_start`) and the current process serves on."""
        spare = slot.successor
        if spare is None or not spare.done():
            return False
        if spare.cancelled() or spare.exception() is not None:
            slot.successor = None
            return False
        return True

    def _spare_lead(self, header: Key) -> int:
        """How many commands before its limit a process asks for a spare: one header load's worth (the load time
        over the mean proof time) per slot that may be ahead of it in the turn for a spare, at most half its uses."""
        if self._proof_seconds is None or header not in self._load_seconds:
            commands_per_load = 1
        else:
            commands_per_load = int(self._load_seconds[header] / max(self._proof_seconds, 1e-6)) + 1
        turns = -(-self.config.workers // max(self.config.spare_workers, 1))
        return min(self.config.max_uses_per_worker // 2, commands_per_load * turns)

    def live_pids(self) -> list[int]:
        return sorted(p.pid for p in self._processes if p.alive and p.pid is not None)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the worker pool is closed; start a new server")

    def _claim(self, header: Key) -> _Slot | None:
        """Pick and mark busy a slot for a request of `header`, or None when it should wait; synchronous, so no other
        request interleaves."""
        idle = [s for s in self._slots if not s.busy]
        own = [s for s in idle if s.header == header]
        # Ready processes first, then ones starting, then empty slots of this header.
        own.sort(key=lambda s: (not (s.process is not None and s.process.alive), s.pending is None))
        identity = header[1].identity
        if own and own[0].has_process:
            slot = own[0]
        elif len(self._slots) < self.config.workers and self._held(identity) < self._quota:
            slot = _Slot(header)
            self._slots.append(slot)
        elif own:
            slot = own[0]
        else:
            # Evict the cheapest idle slot (empty, then least recently used) this identity may take (`_may_take`): any
            # such when this header has no process to wait for, else one whose header can give it up
            # (`_can_give_up_a_process`), and only when waiting would take longer than a load.
            idle = [s for s in idle if self._may_take(s, identity)]
            own_processes = self._serving(header)
            if own_processes == 0:
                candidates = idle
            elif self._waiting_outlasts_a_load(header, own_processes):
                candidates = [s for s in idle if self._can_give_up_a_process(s.header, header, own_processes)]
            else:
                candidates = []
            if not candidates:
                return None
            slot = min(candidates, key=lambda s: (s.has_process, s.last_used))
            self._discard(slot)
            evicted, slot.header, slot.served = slot.header, header, False
            if all(s.header != evicted for s in self._slots):
                self._load_seconds.pop(evicted, None)
        slot.busy = True
        return slot

    @property
    def _quota(self) -> int:
        quota = self.config.max_workers_per_owner
        return self.config.workers if quota is None else quota

    def _held(self, identity: str) -> int:
        """The slots of `identity`'s processes, loaded or loading, and its busy ones."""
        return sum(s.header[1].identity == identity and s.serves for s in self._slots)

    def _may_take(self, slot: _Slot, identity: str) -> bool:
        """Whether a request of `identity` may evict `slot`: one of its own identity's, one that has served nobody
        yet (prewarmed), or another identity's warm one when that identity is over its quota. Without a configured
        quota, an identity that holds no process at all may also take another's (the least recently used idle one:
        no identity starves); fresh labels of an identity that holds a process never touch another's."""
        holder = slot.header[1].identity
        if holder == identity:
            return True
        held = self._held(identity)
        if held >= self._quota:
            return False
        if not slot.served or self._held(holder) > self._quota:
            return True
        return held == 0 and self.config.max_workers_per_owner is None

    def _can_give_up_a_process(self, donor: Key, header: Key, own_processes: int) -> bool:
        """Whether `donor` may lose an idle process to `header`: nobody waits for it, or it keeps another and, one
        process fewer, would still drain its queue a header load sooner than `header` drains its own now. A header
        with one busy process and a long queue so gets a second one while another with three still has waiters,
        and the move is never undone at once (the donor's backlog after it is below the taker's before)."""
        donor_waiting = len(self._waiting.get(donor, ()))
        if not donor_waiting:
            return True
        donor_processes = self._serving(donor)
        if donor_processes < 2 or self._proof_seconds is None:
            return False
        donor_after = self._drain_seconds(donor, donor_processes - 1)
        return donor_after + self._load_seconds.get(header, 0.0) < self._drain_seconds(header, own_processes)

    def _waiting_outlasts_a_load(self, header: Key, own_processes: int) -> bool:
        if self._proof_seconds is None or header not in self._load_seconds:
            return True  # nothing measured yet
        return self._drain_seconds(header, own_processes) > self._load_seconds[header]

    def _serving(self, header: Key) -> int:
        """The processes of `header`, loaded or loading."""
        return sum(s.header == header and s.serves for s in self._slots)

    def _drain_seconds(self, header: Key, processes: int) -> float:
        """Seconds `processes` workers of `header` take to run the requests waiting for it (at the measured proof time)."""
        return len(self._waiting.get(header, ())) * self._proof_seconds / processes

    async def _ready(self, slot: _Slot):
        if slot.pending is not None:
            pending = slot.pending
            try:
                slot.process = await pending
            finally:
                if slot.pending is pending:
                    slot.pending = None
        if slot.process is None or not slot.process.alive:
            if slot.process is not None:
                self._discard(slot)
            slot.process = await self._start(slot.header)
        return slot.process

    async def _start(self, header: Key):
        failures = self._start_failures.get(header)
        now = time.monotonic()
        if failures is not None and failures.count >= 2 and now < failures.retry_at:
            raise WorkerStartError(f"{failures.reason} (not retried for another {failures.retry_at - now:.0f} s)")
        process = self._worker_factory(self.config)
        self._processes.add(process)
        loading = time.monotonic()
        try:
            await process.start(header[0])
        except WorkerStartError as error:
            self._processes.discard(process)
            self.counters["start_failures"] += 1
            failures = self._start_failures.setdefault(header, _StartFailures())
            failures.count += 1
            failures.reason = str(error)
            failures.retry_at = time.monotonic() + min(MAX_START_BACKOFF_S, 2.0**failures.count)
            raise
        except BaseException:
            self._processes.discard(process)
            await asyncio.shield(process.close())
            raise
        self._start_failures.pop(header, None)
        self._load_seconds[header] = time.monotonic() - loading
        self.counters["started"] += 1
        return process

    def _start_in_background(self, header: Key) -> asyncio.Task:
        task = asyncio.ensure_future(self._start(header))
        # A failed background start is reported to the request that claims the slot; if none
        # does, retrieving the exception here keeps asyncio from logging it as lost.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        return task

    def _replace(self, slot: _Slot) -> None:
        """Retire the slot's process; its spare takes over, else a fresh one starts for the same header in the
        background."""
        if self._closed:
            self._discard(slot)
            return
        successor, slot.successor = slot.successor, None
        self._discard(slot)
        failures = self._start_failures.get(slot.header)
        if successor is not None:
            slot.pending = successor
        elif not (failures is not None and failures.count >= 2):
            slot.pending = self._start_in_background(slot.header)

    def _discard(self, slot: _Slot) -> None:
        """Kill the slot's process, its start in progress and its spare, in the background."""
        for pending, process in ((slot.pending, slot.process), (slot.successor, None)):
            if pending is None and process is None:
                continue
            cleanup = asyncio.ensure_future(self._dispose(pending, process))
            self._cleanups.add(cleanup)
            cleanup.add_done_callback(self._cleanups.discard)
        slot.pending = slot.process = slot.successor = None

    async def _dispose(self, pending: asyncio.Task | None, process) -> None:
        if pending is not None:
            pending.cancel()
            try:
                started = await pending
            except (asyncio.CancelledError, WorkerError):
                started = None
            if started is not None:
                process = process or started
                if started is not process:
                    await self._close_process(started)
        if process is not None:
            await self._close_process(process)

    async def _close_process(self, process) -> None:
        await process.close()
        self._processes.discard(process)

    async def close(self) -> None:
        """Kill every process group and wait until all are gone; idempotent."""
        self._closed = True
        for queue in self._waiting.values():
            for _, waiter in queue:
                if not waiter.done():
                    waiter.set_exception(RuntimeError("the worker pool was closed while this request waited"))
        self._waiting.clear()
        for slot in self._slots:
            self._discard(slot)
        for process in list(self._processes):
            process.kill_now()
        if self._cleanups:
            await asyncio.gather(*list(self._cleanups), return_exceptions=True)
        for process in list(self._processes):
            await self._close_process(process)

    def kill_now(self) -> None:
        """SIGKILL every process group and delete its scratch directory, synchronously: the last resort at exit."""
        self._closed = True
        for process in list(self._processes):
            process.kill_now()
            process.remove_scratch()
