"""`LeanServer`: verify Lean proofs in-process with a pool of isolated REPL workers.

The pool lives on an asyncio loop in a background thread, so `verify` works from any thread and
`averify` from the caller's own event loop: a trainer can overlap verification with generation.
The precheck (`verdict.prepare`) and the judgement of Lean's answer (`verdict.judge`, `submitted_response`) run
in a thread pool, so neither a slow precheck nor a flood of messages can stall the loop and the other workers'
timers; REPL passes can be confirmed outside the REPL by a checker (`lean_server.recheck`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import logging
import sys
import threading
import time
import weakref
from collections.abc import Sequence

from trl_verigate.lean_server import verdict
from trl_verigate.lean_server.recheck.contract import Rechecker
from trl_verigate.lean_server.repl.process import ReplError
from trl_verigate.lean_server.types import FileRequest, LeanServerConfig, ProofRequest, Request, VerificationResult
from trl_verigate.prover_pool.pool import ReplPool

logger = logging.getLogger(__name__)

# A verdict and Lean's own answer to the request, in submitted-source coordinates; None when Lean never answered.
ResultWithResponse = tuple[VerificationResult, dict | None]

# Below this many requests a progress bar is noise; above it, a silent wait looks like a hang.
PROGRESS_MIN_REQUESTS = 64
CLOSE_TIMEOUT_S = 30.0
# A precheck that leaves the REPL less than this of the per-proof timeout is a timeout: Lean could not answer.
MIN_REPL_SECONDS = 0.01
# Threads for the precheck and for judging Lean's answers; both hold the GIL, so more would not check faster, only
# keep more hostile ones alive.
PRECHECK_THREADS = 4
REPL_VERDICT_ALONE_WARNING = (
    "LeanServer: recheck is 'none', so a `passed` verdict is the REPL's alone, and code run by a proof inside the "
    "REPL can forge it. Set LeanServerConfig.recheck_command to a checker, e.g. ['trl-verigate', 'lean-recheck', "
    "'--backend', 'replay', '--project-dir', '/path/to/project'] (CLI: --recheck-command), to confirm passes with "
    "the Lean kernel outside the REPL; `trl-verigate lean-doctor` lists the backends it finds."
)


def progress_bar(progress: bool | None, total: int, desc: str):
    """A tqdm bar over `total` proofs, or None: the `progress` rule of `LeanServer.verify` and `LeanClient.verify`.

    True always shows one, False never; None shows one for at least `PROGRESS_MIN_REQUESTS` requests when stderr is
    a terminal (a log file would fill with redraws).
    """
    show = progress if progress is not None else total >= PROGRESS_MIN_REQUESTS and sys.stderr.isatty()
    if not show:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="proof")


def _stop_abandoned(pool: ReplPool, loop: asyncio.AbstractEventLoop) -> None:
    # Runs when a started server is garbage-collected or the interpreter exits without close():
    # the REPLs live in their own sessions, so nothing else would ever kill them.
    pool.kill_now()
    if not loop.is_closed():
        loop.call_soon_threadsafe(loop.stop)


class LeanServer:
    """Sound, isolated, pooled Lean verification.

    Usage::

        with LeanServer(LeanServerConfig(repl_command=[...], project_dir=...)) as server:
            results = server.verify([ProofRequest(statement, proof), "import Mathlib\\ntheorem ..."])

    `verify` returns exactly one `VerificationResult` per request, in request order, whatever
    happens to the REPL workers: "passed"/"failed" from the verdict, "rejected" by the
    precheck (Lean never runs), "timeout", "crashed" (the REPL died, wrote garbage or a truncated
    answer; it is replaced), "error" (the REPL could not be started or answered with an error object, or the
    recheck checker failed). With `config.recheck` set, passes go to the checker (see `lean_server.recheck`): one it
    refuses becomes "failed" with a reason starting "recheck: ". `metrics()` counts what it found.
    """

    def __init__(self, config: LeanServerConfig | None = None):
        self.config = config if config is not None else LeanServerConfig()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pool: ReplPool | None = None
        self._finalizer: weakref.finalize | None = None
        self._lock = threading.Lock()
        self._precheck_threads: concurrent.futures.ThreadPoolExecutor | None = None
        self._precheck_slots: asyncio.Semaphore | None = None
        self._rechecker = Rechecker(self.config)

    def __enter__(self) -> LeanServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def started(self) -> bool:
        return self._pool is not None

    def start(self) -> LeanServer:
        """Start the event-loop thread and, in the background, one REPL per worker for `config.header`."""
        with self._lock:
            if self._pool is not None:
                return self
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="lean-server-loop", daemon=True)
            thread.start()
            pool = ReplPool(self.config)

            async def prewarm() -> None:
                pool.prewarm(self.config.header)
                # Made on the loop, where it is used.
                self._precheck_slots = asyncio.Semaphore(PRECHECK_THREADS)

            asyncio.run_coroutine_threadsafe(prewarm(), loop).result()
            self._precheck_threads = concurrent.futures.ThreadPoolExecutor(PRECHECK_THREADS, "lean-precheck")
            self._loop, self._thread, self._pool = loop, thread, pool
            self._finalizer = weakref.finalize(self, _stop_abandoned, pool, loop)
            if self.config.recheck == "none":
                logger.warning(REPL_VERDICT_ALONE_WARNING)
        return self

    def close(self) -> None:
        """Kill every REPL process group, delete their scratch directories and stop the loop thread."""
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
                self._precheck_threads.shutdown(wait=False, cancel_futures=True)
                self._precheck_threads = None

    def verify(
        self,
        requests: Sequence[Request],
        timeout: float | None = None,
        progress: bool | None = None,
    ) -> list[VerificationResult]:
        """Verify `requests` (ProofRequest, FileRequest or complete-file str), blocking; one result per request,
        in order.

        `timeout` (seconds per proof, default `config.timeout`) counts the precheck and the REPL's work, not the
        wait for a free worker, nor the recheck (`config.recheck_timeout` bounds that). A request over
        `config.max_request_bytes` is "rejected" unrun; a batch over `config.max_batch_bytes` raises ValueError
        before anything runs. `progress`: True shows a tqdm bar, False never; None shows one for batches of at
        least 64 requests when stderr is a terminal.
        """
        self._check_not_on_loop("verify()")
        return [result for result, _ in self._submit(requests, timeout, progress, with_responses=False).result()]

    async def averify(
        self,
        requests: Sequence[Request],
        timeout: float | None = None,
        progress: bool | None = None,
    ) -> list[VerificationResult]:
        """`verify` for the caller's event loop: awaits without blocking it."""
        pairs = await asyncio.wrap_future(self._submit(requests, timeout, progress, with_responses=False))
        return [result for result, _ in pairs]

    def verify_with_responses(
        self,
        requests: Sequence[Request],
        timeout: float | None = None,
        progress: bool | None = None,
    ) -> list[ResultWithResponse]:
        """`verify`, each verdict paired with the Lean REPL's own response to its request.

        The response is what a client of the bare REPL (or kimina-lean-server) would get for the
        submitted source, so tools that read it themselves (kimina's SDK reads `sorries`) judge it as
        they would there. It is the REPL's JSON object with exactly two changes, both undoing how we
        run the request (its statement and proof as one command in the header's env, followed by
        `#print axioms`):

        - every `pos`/`endPos` in `messages` and `sorries` is moved from the command's coordinates to
          the submitted source's, the coordinates of `VerificationResult.messages`: lines shift down by
          the header's line count for a file (kimina-lean-server does the same), an `example` renamed
          for `#print axioms` gets its own columns back, and a position Lean put on our appended command
          (e.g. "unexpected token" after an unclosed bracket) moves to the end of the proof;
        - the info message answering our `#print axioms` is dropped (the verdict has it as `axioms`),
          and with it the `messages` key when that was its only entry, as the REPL leaves out an empty
          list (a clean proof gets `{"env": N}`).

        Everything else (`env`, each sorry's `goal` and `proofState`, message order and text, other
        keys) is as Lean sent it. The response is None when Lean never answered: rejected by the
        precheck, timeout, crash, failed start.
        """
        self._check_not_on_loop("verify_with_responses()")
        return self._submit(requests, timeout, progress, with_responses=True).result()

    async def averify_with_responses(
        self,
        requests: Sequence[Request],
        timeout: float | None = None,
        progress: bool | None = None,
    ) -> list[ResultWithResponse]:
        """`verify_with_responses` for the caller's event loop: awaits without blocking it."""
        return await asyncio.wrap_future(self._submit(requests, timeout, progress, with_responses=True))

    def stats(self) -> dict:
        """Pool counters (processes started, start failures, recycled, timeouts, crashes, compromised: workers the
        framing checks caught answering out of turn, see `process`), recheck counters
        (rechecked, recheck_overturned, recheck_checker_failures, recheck_seconds) and live REPL pids."""
        pool = self._require_started()
        recheck = {**self._rechecker.counters, "recheck_seconds": self._rechecker.seconds}
        return {**pool.counters, **recheck, "live_pids": pool.live_pids()}

    def metrics(self) -> dict[str, float]:
        """Cumulative recheck metrics since this server was made, for a trainer to log per step (the difference
        between two calls): `lean/rechecked` (passes sent to the checker), `lean/recheck_overturned` (of those, the
        ones it refused: a policy learning to fool the REPL shows here), `lean/recheck_checker_failures` (failed
        closed because the checker broke its contract) and `lean/recheck_seconds` (wall time in the checker)."""
        return self._rechecker.metrics()

    def _require_started(self) -> ReplPool:
        pool = self._pool
        if pool is None:
            raise RuntimeError("LeanServer is not started: use `with LeanServer(config) as server:` or call start()")
        return pool

    def _check_not_on_loop(self, what: str) -> None:
        if self._thread is not None and threading.current_thread() is self._thread:
            raise RuntimeError(f"LeanServer.{what} was called on the server's own event-loop thread; await averify()")

    def _submit(
        self, requests: Sequence[Request], timeout: float | None, progress: bool | None, with_responses: bool
    ) -> concurrent.futures.Future:
        requests = _checked_requests(requests)
        batch_bytes = sum(request_bytes(request) for request in requests)
        if batch_bytes > self.config.max_batch_bytes:
            raise ValueError(
                f"verify() batch is {batch_bytes} bytes, over LeanServerConfig.max_batch_bytes={self.config.max_batch_bytes}: "
                "split it into smaller batches or raise max_batch_bytes"
            )
        if timeout is None:
            timeout = self.config.timeout
        elif not timeout > 0:
            raise ValueError(f"verify(timeout=...) must be > 0 seconds (or None for config.timeout), got {timeout}")
        pool = self._require_started()
        bar = progress_bar(progress, len(requests), "Lean verify")
        future = asyncio.run_coroutine_threadsafe(
            self._verify_all(pool, requests, timeout, bar, with_responses), self._loop
        )
        if bar is not None:
            # `_verify_all` closes it before the results are delivered; this covers a batch cancelled before it ran.
            future.add_done_callback(lambda _: bar.close())
        return future

    async def _verify_all(
        self, pool: ReplPool, requests: list[Request], timeout: float, bar, with_responses: bool
    ) -> list[ResultWithResponse]:
        # Prechecks run at once in threads, but requests enter the pool in request order, as they did when the
        # precheck ran on the loop: turn i is set once request i has entered the pool or will not.
        turns = [asyncio.Event() for _ in requests]

        async def one(index: int) -> tuple[VerificationResult, dict | None, verdict.Prepared | None]:
            previous = turns[index - 1] if index else None
            triple = await self._verify_one(pool, requests[index], timeout, with_responses, previous, turns[index])
            if bar is not None:
                bar.update(1)
            return triple

        try:
            triples = list(await asyncio.gather(*(one(index) for index in range(len(requests)))))
        finally:
            # Before the caller gets the results, so the bar's last redraw cannot land after verify() returns.
            if bar is not None:
                bar.close()
        results = [result for result, _, _ in triples]
        # All of this call's selected passes in one checker run: they share one import of the header's modules.
        selected = [
            index
            for index, (result, _, prepared) in enumerate(triples)
            if result.passed and prepared is not None and self._rechecker.selects(requests[index])
        ]
        if selected:
            candidates = [(requests[i], triples[i][2], results[i]) for i in selected]
            for index, final in zip(selected, await self._rechecker.recheck(candidates), strict=True):
                results[index] = final
        return [(result, response) for result, (_, response, _) in zip(results, triples, strict=True)]

    async def _verify_one(
        self,
        pool: ReplPool,
        request: Request,
        timeout: float,
        with_response: bool,
        previous_turn: asyncio.Event | None,
        my_turn: asyncio.Event,
    ) -> tuple[VerificationResult, dict | None, verdict.Prepared | None]:
        """The verdict, the REPL's response (when asked for) and what the REPL ran (None when it ran nothing).

        It enters the pool after `previous_turn` (the request before it) and then sets `my_turn`. A slow precheck
        delays only when later requests of its batch start, never their timers, which start in the pool.
        """
        started = time.monotonic()
        try:
            size = request_bytes(request)
            if size > self.config.max_request_bytes:
                reason = (
                    f"request too large: {size} bytes, over LeanServerConfig.max_request_bytes="
                    f"{self.config.max_request_bytes}; Lean did not run"
                )
                return VerificationResult(status="rejected", reason=reason), None, None
            prepared, precheck_s = await self._prepare(request, timeout)
            if isinstance(prepared, VerificationResult):
                return prepared, None, None
            if previous_turn is not None:
                await previous_turn.wait()
            # Set before pool.run, which queues this request before it first yields: the next one queues after it.
            my_turn.set()
            try:
                # The timeout covers the precheck too: the REPL gets what is left of it.
                response, time_s = await pool.run(prepared.header, prepared.code, timeout - precheck_s)
            except ReplError as error:
                reason = str(error)
                if error.status == "timeout":
                    reason += (
                        f" (the per-proof timeout is {timeout:g} s, of which the precheck took {precheck_s:.3f} s)"
                    )
                result = VerificationResult(status=error.status, reason=reason, time_s=precheck_s + error.time_s)
                return result, None, None
            # Off the loop, in the precheck threads: reading Lean's answer takes time proportional to its size
            # (messages, and for tactic_granularity "all" a new split of the proof), which a proof controls.
            result, submitted = await asyncio.get_running_loop().run_in_executor(
                self._precheck_threads, _judged, prepared, response, self.config, precheck_s + time_s, with_response
            )
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

    async def _prepare(self, request: Request, timeout: float) -> tuple[verdict.Prepared | VerificationResult, float]:
        """`verdict.prepare` in a precheck thread and its seconds, timed from when it starts; a "timeout" result
        past `timeout`, or when it leaves the REPL less than `MIN_REPL_SECONDS` of it.

        A slot is held until the thread really finishes (a timed-out precheck cannot be interrupted), so the
        waits of later requests count a busy thread, not their own precheck.
        """
        loop = asyncio.get_running_loop()
        slots = self._precheck_slots
        await slots.acquire()
        started = time.monotonic()
        work = self._precheck_threads.submit(
            verdict.prepare, request, self.config.header, self.config.allow_native_decide
        )

        def release(_) -> None:
            try:
                loop.call_soon_threadsafe(slots.release)
            except RuntimeError:  # the server closed while this precheck ran
                pass

        work.add_done_callback(release)
        try:
            prepared = await asyncio.wait_for(asyncio.wrap_future(work), timeout)
        except asyncio.TimeoutError:
            prepared = None
        elapsed = time.monotonic() - started
        if prepared is None or (not isinstance(prepared, VerificationResult) and timeout - elapsed < MIN_REPL_SECONDS):
            reason = f"the precheck took {elapsed:.1f} s of the {timeout:g} s timeout; Lean did not run"
            return VerificationResult(status="timeout", reason=reason, time_s=elapsed), elapsed
        return prepared, elapsed


def _judged(
    prepared: verdict.Prepared, response: dict, config: LeanServerConfig, time_s: float, with_response: bool
) -> tuple[VerificationResult, dict | None]:
    """The verdict on `response` and, when asked for, the response in submitted-source coordinates."""
    result = verdict.judge(prepared, response, config, time_s)
    return result, submitted_response(prepared, response) if with_response else None


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


def submitted_response(prepared: verdict.Prepared, response: dict) -> dict:
    """A copy of the REPL's `response` to `prepared.code` as if the submitted source itself had been run.

    See `LeanServer.verify_with_responses` for the two changes and why; `response` is left untouched.
    """
    response = copy.deepcopy(response)
    messages = response.get("messages")
    if isinstance(messages, list):
        # The judge's own test, so exactly the message it read the axioms from disappears.
        kept = [m for m in messages if not verdict.is_axioms_answer(prepared, m)]
        response["messages"] = [_with_submitted_positions(prepared, message) for message in kept]
        if not kept and messages:
            # The REPL leaves out an empty `messages` list, e.g. `{"env": 3}` for a clean proof.
            del response["messages"]
    sorries = response.get("sorries")
    if isinstance(sorries, list):
        response["sorries"] = [_with_submitted_positions(prepared, sorry) for sorry in sorries]
    return response


def _with_submitted_positions(prepared: verdict.Prepared, item):
    if not isinstance(item, dict):
        return item
    for key in ("pos", "endPos"):
        position = item.get(key)
        start = verdict.repl_position(position)
        if start is None:
            continue
        # The judge's own mapping, so these positions agree with VerificationResult.messages.
        mapped = prepared.submitted_position(prepared.offset_of(*start))
        item[key] = {**position, "line": mapped.line, "column": mapped.column}
    return item


def request_bytes(request: Request) -> int:
    """A request's size as `max_request_bytes` counts it: the UTF-8 bytes of all its text fields."""
    if isinstance(request, ProofRequest):
        parts = (request.statement, request.proof, request.header or "")
    elif isinstance(request, FileRequest):
        parts = (request.file, request.statement or "", request.header or "")
    else:
        parts = (request,)
    return sum(len(part.encode("utf-8", "surrogatepass")) for part in parts)


def _checked_requests(requests: Sequence[Request]) -> list[Request]:
    if isinstance(requests, (str, ProofRequest, FileRequest)):
        raise TypeError("verify() takes a list of requests; wrap a single request in a list: [request]")
    checked = list(requests)
    for index, request in enumerate(checked):
        if not isinstance(request, (ProofRequest, FileRequest, str)):
            raise TypeError(
                f"requests[{index}] is a {type(request).__name__}; each request must be a ProofRequest "
                "(statement, proof), a FileRequest (file, optional trusted statement/header) or a str holding a "
                "complete Lean file"
            )
    return checked
