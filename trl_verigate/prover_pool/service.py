"""`PooledVerifier`: the batch API over a pool of prover workers, the part `LeanServer` and `CoqServer` share.

`verify(requests)` returns exactly one `VerificationResult` per request, in request order, whatever happens to the
workers. Each request is prepared (the precheck: what is sent to the prover, or a refusal), run on a worker of the
pool (`pool.WorkerPool`) under the per-request timeout, and its answer judged. The pool lives on an asyncio loop in a
background thread, so `verify` works from any thread and `averify` from the caller's own loop. Prechecks and
judging run on a `FairScheduler`'s threads, one queue per owner identity (however many `verify` calls or labels it
uses), so neither a slow precheck nor a flood of messages stalls the loop, and one owner's large batch delays
another's small one by at most one precheck.

A subclass names its worker class (`worker_factory`) and implements the hooks marked below.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import sys
import threading
import time
import weakref
from collections.abc import Sequence

from trl_verigate.prover_pool.fair import FairScheduler
from trl_verigate.prover_pool.owner import Owner
from trl_verigate.prover_pool.pool import WorkerPool
from trl_verigate.prover_pool.results import VerificationResult
from trl_verigate.prover_pool.worker import WorkerError

logger = logging.getLogger(__name__)

# Below this many requests a progress bar is noise; above it, a silent wait looks like a hang.
PROGRESS_MIN_REQUESTS = 64
CLOSE_TIMEOUT_S = 30.0
# A precheck that leaves the prover less than this of the per-proof timeout is a timeout: it could not answer.
MIN_WORKER_SECONDS = 0.01
# Threads for the precheck and for judging answers; both hold the GIL, so more would not check faster, only keep
# more hostile ones alive.
PRECHECK_THREADS = 4


def progress_bar(progress: bool | None, total: int, desc: str):
    """A tqdm bar over `total` proofs, or None. True always shows one, False never; None shows one for at least
    `PROGRESS_MIN_REQUESTS` requests when stderr is a terminal (a log file would fill with redraws)."""
    show = progress if progress is not None else total >= PROGRESS_MIN_REQUESTS and sys.stderr.isatty()
    if not show:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="proof")


def _stop_abandoned(pool: WorkerPool, loop: asyncio.AbstractEventLoop) -> None:
    # Runs when a started server is garbage-collected or the interpreter exits without close(): the workers live in
    # their own sessions, so nothing else would ever kill them.
    pool.kill_now()
    if not loop.is_closed():
        loop.call_soon_threadsafe(loop.stop)


class PooledVerifier:
    """See the module docstring. `config` holds the pool's settings (`workers`, `spare_workers`, `max_uses_per_worker`)
    and `timeout`, `max_request_bytes`, `max_batch_bytes`."""

    worker_factory: type
    progress_desc = "verify"

    def __init__(self, config):
        self.config = config
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pool: WorkerPool | None = None
        self._finalizer: weakref.finalize | None = None
        self._lock = threading.Lock()
        self._scheduler: FairScheduler | None = None

    # ------------------------------------------------------------ hooks

    def prewarm_header(self) -> str:
        """The header every worker loads at start."""
        raise NotImplementedError

    def request_bytes(self, request) -> int:
        raise NotImplementedError

    def check_requests(self, requests: Sequence) -> list:
        """The requests as a list, or TypeError naming a bad one (in the caller's thread, before anything runs)."""
        raise NotImplementedError

    def prepare(self, request):
        """What the worker runs for `request` (an object with `header` and `code`), or a `VerificationResult`
        refusing it. Runs on a scheduler thread."""
        raise NotImplementedError

    def judged(self, prepared, response: dict, time_s: float, with_response: bool):
        """(the verdict on the worker's `response`, the response to hand back when `with_response` or None). Runs
        on a scheduler thread."""
        raise NotImplementedError

    async def after_batch(self, requests: list, triples: list) -> list[VerificationResult]:
        """The final results of a batch, from its (result, response, prepared) triples; e.g. a recheck of passes."""
        return [result for result, _, _ in triples]

    def on_start(self) -> None:
        """Called once the workers are starting (e.g. to log a warning about the configuration)."""

    # ------------------------------------------------------------ lifecycle

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def started(self) -> bool:
        return self._pool is not None

    def start(self):
        """Start the event-loop thread and, in the background, one worker per slot for `prewarm_header()`."""
        with self._lock:
            if self._pool is not None:
                return self
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name=f"{self.progress_desc}-loop", daemon=True)
            thread.start()
            pool = WorkerPool(self.config, type(self).worker_factory)

            async def prewarm() -> None:
                pool.prewarm(self.prewarm_header())

            asyncio.run_coroutine_threadsafe(prewarm(), loop).result()
            self._scheduler = FairScheduler(PRECHECK_THREADS, f"{self.progress_desc}-precheck")
            self._loop, self._thread, self._pool = loop, thread, pool
            self._finalizer = weakref.finalize(self, _stop_abandoned, pool, loop)
            self.on_start()
        return self

    def close(self) -> None:
        """Kill every worker's process group, delete their scratch directories and stop the loop thread."""
        with self._lock:
            if self._pool is None:
                return
            self._check_not_on_loop("close()")
            loop, thread, pool = self._loop, self._thread, self._pool
            self._loop = self._thread = self._pool = None
            try:
                asyncio.run_coroutine_threadsafe(pool.close(), loop).result(CLOSE_TIMEOUT_S)
            except concurrent.futures.TimeoutError:
                pool.kill_now()
            finally:
                loop.call_soon_threadsafe(loop.stop)
                thread.join()
                loop.close()
                self._finalizer.detach()
                # A precheck still running belongs to a request that already timed out: nobody waits for it.
                self._scheduler.shutdown()
                self._scheduler = None

    def _require_started(self) -> WorkerPool:
        pool = self._pool
        if pool is None:
            name = type(self).__name__
            raise RuntimeError(f"{name} is not started: use `with {name}(config) as server:` or call start()")
        return pool

    def _check_not_on_loop(self, what: str) -> None:
        if self._thread is not None and threading.current_thread() is self._thread:
            raise RuntimeError(
                f"{type(self).__name__}.{what} was called on the server's own event-loop thread; await averify()"
            )

    # ------------------------------------------------------------ the batch API

    def verify(
        self,
        requests: Sequence,
        timeout: float | None = None,
        progress: bool | None = None,
        caller: str | Owner | None = None,
    ) -> list[VerificationResult]:
        """Verify `requests`, blocking; one result per request, in order.

        `timeout` (seconds per proof, default `config.timeout`) counts the precheck and the worker's work, not the
        wait for a free worker. A request over `config.max_request_bytes` is "rejected" unrun; a batch over
        `config.max_batch_bytes` raises ValueError before anything runs. `progress`: True shows a tqdm bar, False
        never, None for batches of at least 64 requests when stderr is a terminal. `caller`: who asks, an
        identity string or an `Owner` (the workers that run this batch serve no other owner, its prechecks queue
        with the identity's others; default: this process).
        """
        self._check_not_on_loop("verify()")
        future = self._submit(requests, timeout, progress, with_responses=False, caller=caller)
        return [result for result, _ in future.result()]

    async def averify(
        self,
        requests: Sequence,
        timeout: float | None = None,
        progress: bool | None = None,
        caller: str | Owner | None = None,
    ) -> list[VerificationResult]:
        """`verify` for the caller's event loop: awaits without blocking it."""
        pairs = await asyncio.wrap_future(
            self._submit(requests, timeout, progress, with_responses=False, caller=caller)
        )
        return [result for result, _ in pairs]

    def stats(self) -> dict:
        """Pool counters (processes started, start failures, recycled, timeouts, crashes, compromised) and live
        worker pids."""
        pool = self._require_started()
        return {**pool.counters, "live_pids": pool.live_pids()}

    def _submit(
        self,
        requests: Sequence,
        timeout: float | None,
        progress: bool | None,
        with_responses: bool,
        caller: str | Owner | None,
    ) -> concurrent.futures.Future:
        requests = self.check_requests(requests)
        batch_bytes = sum(self.request_bytes(request) for request in requests)
        if batch_bytes > self.config.max_batch_bytes:
            raise ValueError(
                f"verify() batch is {batch_bytes} bytes, over {type(self.config).__name__}.max_batch_bytes="
                f"{self.config.max_batch_bytes}: split it into smaller batches or raise max_batch_bytes"
            )
        if timeout is None:
            timeout = self.config.timeout
        elif not timeout > 0:
            raise ValueError(f"verify(timeout=...) must be > 0 seconds (or None for config.timeout), got {timeout}")
        pool = self._require_started()
        bar = progress_bar(progress, len(requests), self.progress_desc)
        batch = _Batch(Owner.of(caller), timeout, with_responses, bar)
        future = asyncio.run_coroutine_threadsafe(self._verify_all(pool, requests, batch), self._loop)
        if bar is not None:
            # `_verify_all` closes it before the results are delivered; this covers a batch cancelled before it ran.
            future.add_done_callback(lambda _: bar.close())
        return future

    async def _verify_all(self, pool: WorkerPool, requests: list, batch: _Batch) -> list[tuple]:
        # Prechecks run at once in threads, but requests enter the pool in request order: turn i is set once request
        # i has entered the pool or will not.
        turns = [asyncio.Event() for _ in requests]

        async def one(index: int) -> tuple:
            previous = turns[index - 1] if index else None
            triple = await self._verify_one(pool, requests[index], batch, previous, turns[index])
            if batch.bar is not None:
                batch.bar.update(1)
            return triple

        try:
            triples = list(await asyncio.gather(*(one(index) for index in range(len(requests)))))
        finally:
            # Before the caller gets the results, so the bar's last redraw cannot land after verify() returns.
            if batch.bar is not None:
                batch.bar.close()
        results = await self.after_batch(requests, triples)
        return [(result, response) for result, (_, response, _) in zip(results, triples, strict=True)]

    async def _verify_one(
        self, pool: WorkerPool, request, batch: _Batch, previous_turn: asyncio.Event | None, my_turn: asyncio.Event
    ) -> tuple:
        """(the verdict, the worker's response when asked for, what the worker ran or None).

        It enters the pool after `previous_turn` (the request before it) and then sets `my_turn`. A slow precheck
        delays only when later requests of its batch start, never their timers, which start in the pool.
        """
        started = time.monotonic()
        timeout = batch.timeout
        try:
            size = self.request_bytes(request)
            if size > self.config.max_request_bytes:
                reason = (
                    f"request too large: {size} bytes, over {type(self.config).__name__}.max_request_bytes="
                    f"{self.config.max_request_bytes}; the prover did not run"
                )
                return VerificationResult(status="rejected", reason=reason), None, None
            prepared, precheck_s = await self._in_thread(batch, timeout, self.prepare, request)
            if isinstance(prepared, VerificationResult):
                return prepared, None, None
            if previous_turn is not None:
                await previous_turn.wait()
            # Set before pool.run, which queues this request before it first yields: the next one queues after it.
            my_turn.set()
            try:
                # The timeout covers the precheck too: the worker gets what is left of it.
                response, time_s = await pool.run(prepared.header, prepared.code, timeout - precheck_s, batch.owner)
            except WorkerError as error:
                reason = str(error)
                if error.status == "timeout":
                    reason += (
                        f" (the per-proof timeout is {timeout:g} s, of which the precheck took {precheck_s:.3f} s)"
                    )
                result = VerificationResult(status=error.status, reason=reason, time_s=precheck_s + error.time_s)
                return result, None, None
            # On a scheduler thread: reading an answer takes time proportional to its size, which a proof controls.
            work = self._scheduler.submit(
                batch.owner.identity, self.judged, prepared, response, precheck_s + time_s, batch.with_responses
            )
            result, submitted = await asyncio.wrap_future(work)
            return result, submitted, prepared
        except Exception as error:  # noqa: BLE001 - one bad request must not take down the batch
            result = VerificationResult(
                status="error",
                reason=f"internal error while verifying this request: {error!r}",
                time_s=time.monotonic() - started,
            )
            return result, None, None
        finally:
            if not my_turn.is_set():
                _pass_turn(previous_turn, my_turn)

    async def _in_thread(self, batch: _Batch, timeout: float, function, request) -> tuple[object, float]:
        """`function(request)` on a scheduler thread and its seconds, timed from when it starts (the wait for a
        thread is not the request's); a "timeout" result past `timeout`, or when it leaves the worker less than
        `MIN_WORKER_SECONDS` of it."""
        loop = asyncio.get_running_loop()
        began = asyncio.Event()

        def timed():
            loop.call_soon_threadsafe(began.set)
            return function(request)

        work = asyncio.wrap_future(self._scheduler.submit(batch.owner.identity, timed))
        waiting = asyncio.ensure_future(began.wait())
        await asyncio.wait([waiting, work], return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        started = time.monotonic()
        try:
            prepared = await asyncio.wait_for(asyncio.shield(work), timeout)
        except asyncio.TimeoutError:
            prepared = None
        elapsed = time.monotonic() - started
        if prepared is None or (
            not isinstance(prepared, VerificationResult) and timeout - elapsed < MIN_WORKER_SECONDS
        ):
            reason = f"the precheck took {elapsed:.1f} s of the {timeout:g} s timeout; the prover did not run"
            return VerificationResult(status="timeout", reason=reason, time_s=elapsed), elapsed
        return prepared, elapsed


class _Batch:
    """One `verify` call: the owner its workers serve (its prechecks queue under the owner's identity, whatever the
    number of calls or labels), its timeout and its progress bar."""

    def __init__(self, owner: Owner, timeout: float, with_responses: bool, bar):
        self.owner, self.timeout, self.with_responses, self.bar = owner, timeout, with_responses, bar


_TURN_HANDOVERS: set[asyncio.Future] = set()


def _pass_turn(previous_turn: asyncio.Event | None, my_turn: asyncio.Event) -> None:
    # A request that never enters the pool hands its turn on as soon as the one before it has had its own.
    if previous_turn is None or previous_turn.is_set():
        my_turn.set()
        return

    async def after_previous() -> None:
        await previous_turn.wait()
        my_turn.set()

    # The loop holds tasks weakly: keep this one until it has run.
    task = asyncio.ensure_future(after_previous())
    _TURN_HANDOVERS.add(task)
    task.add_done_callback(_TURN_HANDOVERS.discard)
