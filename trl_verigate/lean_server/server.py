"""`LeanServer`: verify Lean proofs in-process with a pool of isolated REPL workers.

The pool lives on an asyncio loop in a background thread, so `verify` works from any thread and
`averify` from the caller's own event loop: a trainer can overlap verification with generation.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import sys
import threading
import time
import weakref
from collections.abc import Sequence

from trl_verigate.lean_server import tactics as tactic_split
from trl_verigate.lean_server import verdict
from trl_verigate.lean_server.pool import ReplPool
from trl_verigate.lean_server.process import ReplError
from trl_verigate.lean_server.types import LeanServerConfig, ProofRequest, Request, VerificationResult

# A verdict and Lean's own answer to the request, in submitted-source coordinates; None when Lean never answered.
ResultWithResponse = tuple[VerificationResult, dict | None]

# Below this many requests a progress bar is noise; above it, a silent wait looks like a hang.
PROGRESS_MIN_REQUESTS = 64
CLOSE_TIMEOUT_S = 30.0


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
    answer; it is replaced), "error" (the REPL could not be started or answered with an error object).
    """

    def __init__(self, config: LeanServerConfig | None = None):
        self.config = config if config is not None else LeanServerConfig()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pool: ReplPool | None = None
        self._finalizer: weakref.finalize | None = None
        self._lock = threading.Lock()

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

            asyncio.run_coroutine_threadsafe(prewarm(), loop).result()
            self._loop, self._thread, self._pool = loop, thread, pool
            self._finalizer = weakref.finalize(self, _stop_abandoned, pool, loop)
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

    def verify(
        self,
        requests: Sequence[Request],
        timeout: float | None = None,
        progress: bool | None = None,
    ) -> list[VerificationResult]:
        """Verify `requests` (ProofRequest or complete-file str), blocking; one result per request, in order.

        `timeout` (seconds per proof, default `config.timeout`) counts the REPL's work only, not the
        wait for a free worker. `progress`: True shows a tqdm bar, False never; None shows one for
        batches of at least 64 requests when stderr is a terminal.
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
        """Pool counters (processes started, start failures, recycled, timeouts, crashes) and live REPL pids."""
        pool = self._require_started()
        return {**pool.counters, "live_pids": pool.live_pids()}

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
        async def one(request: Request) -> ResultWithResponse:
            pair = await self._verify_one(pool, request, timeout, with_responses)
            if bar is not None:
                bar.update(1)
            return pair

        try:
            return list(await asyncio.gather(*(one(r) for r in requests)))
        finally:
            # Before the caller gets the results, so the bar's last redraw cannot land after verify() returns.
            if bar is not None:
                bar.close()

    async def _verify_one(
        self, pool: ReplPool, request: Request, timeout: float, with_response: bool
    ) -> ResultWithResponse:
        started = time.monotonic()
        try:
            prepared = verdict.prepare(request, self.config.header, self.config.allow_native_decide)
            if isinstance(prepared, VerificationResult):
                return prepared, None
            try:
                response, time_s = await pool.run(prepared.header, prepared.code, timeout)
            except ReplError as error:
                return VerificationResult(status=error.status, reason=str(error), time_s=error.time_s), None
            result = verdict.judge(prepared, response, self.config, time_s)
            return result, submitted_response(prepared, response) if with_response else None
        except Exception as error:  # noqa: BLE001 - one bad request must not take down the batch
            result = VerificationResult(
                status="error",
                reason=f"internal error while verifying this request: {error!r}",
                time_s=time.monotonic() - started,
            )
            return result, None


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
        mapped = verdict.submitted_position(prepared, tactic_split.offset_of(prepared.code, *start))
        item[key] = {**position, "line": mapped.line, "column": mapped.column}
    return item


def _checked_requests(requests: Sequence[Request]) -> list[Request]:
    if isinstance(requests, (str, ProofRequest)):
        raise TypeError("verify() takes a list of requests; wrap a single request in a list: [request]")
    checked = list(requests)
    for index, request in enumerate(checked):
        if not isinstance(request, (ProofRequest, str)):
            raise TypeError(
                f"requests[{index}] is a {type(request).__name__}; each request must be a ProofRequest "
                "(statement, proof) or a str holding a complete Lean file"
            )
    return checked
