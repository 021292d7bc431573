"""What a process trainer asks of a prover, whichever it is: a `ProcessVerdict` per completion from a process oracle,
and the outcome reward `ProofReward` (TRL's reward-function signature) that runs the oracle in the background.

A process oracle answers, for each completion of a batch, the verdict a process trainer needs: passed or not, the
tactic spans as character offsets in the completion, the first failing tactic, the tactics that carry an error, and
the status. `rewards.lean.LeanProcessOracle` and `rewards.coq.CoqProcessOracle` are the prover backends; any other
object with the same `verify` method (a symbolic checker of arithmetic steps, say) plugs into `ProofReward` and
`ProcessVerifiedGRPOTrainer` unchanged.

`ProofReward` verifies in a background thread: `start` begins as soon as the completions are decoded (the trainer
calls it), and the reward is only awaited when TRL asks for it, so verification overlaps TRL's other per-batch work.
It keeps the last batch's verdicts for the trainer, so nothing is verified twice.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

# Statuses where verification itself failed (not the proof): counted in `failures`.
FAILURE_STATUSES = ("timeout", "crashed", "error")


@dataclass(frozen=True)
class ProcessVerdict:
    """One completion's verdict, in the completion's own character coordinates.

    ``spans[j]`` is tactic j's [start, end) in the completion text. Tactics with index < ``first_error`` are locally
    valid; ``first_error == len(spans)`` means no tactic failed (passed, or incomplete). ``error_tactics`` are the
    indices of the tactics an error message starts in. A verdict other than passed/failed has ``first_error == 0``
    and every tactic in ``error_tactics``.
    """

    status: str
    spans: tuple[tuple[int, int], ...] = ()
    first_error: int = 0
    error_tactics: tuple[int, ...] = ()
    reason: str | None = None
    # A REPL pass an independent checker confirmed or overturned (`VerificationResult.rechecked`).
    rechecked: bool = False

    @property
    def passed(self) -> bool:
        return self.status == "passed"


@runtime_checkable
class ProcessOracle(Protocol):
    """Verdicts for a batch: ``rows`` are the dataset rows of the completions (one dict per completion)."""

    def verify(
        self, prompts: Sequence, rows: Sequence[dict[str, Any]], completions: Sequence
    ) -> list[ProcessVerdict]: ...


@dataclass
class _Verification:
    completions: list
    future: concurrent.futures.Future
    started: float
    finished: float | None = None
    waited: float = 0.0
    verdicts: list[ProcessVerdict] = field(default_factory=list)


@dataclass(eq=False)
class PendingVerification:
    """A batch under background verification (the handle `start` returns): its prompts and completions, verified in
    one or more chunks."""

    prompts: list = field(default_factory=list)
    chunks: list[_Verification] = field(default_factory=list)

    @property
    def completions(self) -> list:
        return [completion for chunk in self.chunks for completion in chunk.completions]


class ProofReward:
    """A prover's outcome reward g: 1.0 exactly when the proof passed, else 0.0 (TRL reward-function signature; async,
    so TRL awaits it after its synchronous reward functions). `name` is the name TRL logs it under.

    Every verification failure (timeout, crash, garbage from the REPL, an unreachable server, the oracle raising)
    gives 0.0 and is counted in ``failures``; training goes on. ``last_verdicts`` holds the last batch's
    `ProcessVerdict`s and ``last_timing`` its (verify_seconds, waited_seconds): the wall time of verification and the
    part of it the caller spent waiting for the reward.
    """

    def __init__(self, oracle: ProcessOracle, name: str = "proof"):
        self.__name__ = name
        if not callable(getattr(oracle, "verify", None)):
            raise TypeError(f"oracle must have verify(prompts, rows, completions), got {type(oracle).__name__}")
        self.oracle = oracle
        self.failures = 0
        self.last_verdicts: list[ProcessVerdict] | None = None
        self.last_timing: tuple[float, float] = (0.0, 0.0)
        # Several threads: the chunks of one batch verify concurrently on the pool.
        self._executor = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix=f"{name}-verify")
        # Batches under verification, oldest first; a batch is one or more chunks.
        self._pending: list[PendingVerification] = []
        # The batch the next call collects, named by the trainer (`collect_next`).
        self._next: PendingVerification | None = None

    def start(self, prompts: Sequence, completions: Sequence, rows: Sequence[dict[str, Any]]) -> PendingVerification:
        """Begin verifying a batch in the background and return its handle. The call after `collect_next(handle)`
        collects it; without a handle, the next call with the same prompts and completions does. Batches started one
        after the other (pipelined generation) are matched oldest first."""
        pending = PendingVerification(list(prompts), [self._submit(prompts, completions, rows)])
        self._pending.append(pending)
        return pending

    def start_chunk(self, prompts: Sequence, completions: Sequence, rows: Sequence[dict[str, Any]]) -> None:
        """Begin verifying the next rows of a batch generated in chunks (after `clear_pending` at its start); the
        next call whose prompts and completions are all chunks in order collects them."""
        if not self._pending:
            self._pending.append(PendingVerification())
        self._pending[-1].prompts.extend(prompts)
        self._pending[-1].chunks.append(self._submit(prompts, completions, rows))

    def collect_next(self, pending: PendingVerification | None) -> None:
        """The next call collects this batch's verdicts (when its completions are the ones called with): a trainer
        scoring a batch it started names it, so another batch with the same completions (an evaluation batch, a
        pipelined batch) can never answer for it."""
        self._next = pending

    def clear_pending(self) -> None:
        """Drop every batch under verification. A chunk not yet running is cancelled; one already running cannot be
        interrupted from here and finishes within the verifier's timeout (`prover_timeout` per proof), its verdicts
        discarded."""
        for pending in self._pending:
            for chunk in pending.chunks:
                chunk.future.cancel()
        self._pending = []
        self._next = None

    def is_pending(self, completions: Sequence) -> bool:
        """Whether background verification of exactly these completions is under way."""
        completions = list(completions)
        return any(pending.completions == completions for pending in self._pending)

    def _take_pending(self, prompts: Sequence, completions: Sequence) -> PendingVerification | None:
        """The batch this call collects: the one named by `collect_next`, else the oldest with these prompts and
        completions; removed from the pending batches."""
        named, self._next = self._next, None
        completions, prompts = list(completions), list(prompts)
        if named is not None:
            candidates = [pending for pending in self._pending if pending is named]
        else:
            candidates = [pending for pending in self._pending if pending.prompts == prompts]
        for pending in candidates:
            if pending.chunks and pending.completions == completions:
                self._pending.remove(pending)
                return pending
        return None

    def _submit(self, prompts, completions, rows) -> _Verification:
        verification = _Verification(list(completions), None, time.perf_counter())  # type: ignore[arg-type]

        def run() -> list[ProcessVerdict]:
            try:
                verdicts = self.oracle.verify(list(prompts), list(rows), list(completions))
                if len(verdicts) != len(completions):
                    raise RuntimeError(f"the oracle gave {len(verdicts)} verdicts for {len(completions)} completions")
            except Exception as error:  # noqa: BLE001 - any failure of verification is a failed, counted completion
                reason = f"verification failed: {type(error).__name__}: {error}"[:500]
                verdicts = [ProcessVerdict(status="error", reason=reason) for _ in completions]
            verification.finished = time.perf_counter()
            return verdicts

        verification.future = self._executor.submit(run)
        return verification

    async def __call__(self, prompts, completions, **kwargs) -> list[float]:
        pending = self._take_pending(prompts, completions)
        verifications = pending.chunks if pending is not None else []
        if not verifications:
            rows = _rows_from_columns(kwargs, len(completions))
            verifications = [self._submit(prompts, completions, rows)]
        waiting_since = time.perf_counter()
        verdicts = [
            verdict
            for chunk in await asyncio.gather(*(asyncio.wrap_future(v.future) for v in verifications))
            for verdict in chunk
        ]
        done = time.perf_counter()
        started = min(v.started for v in verifications)
        finished = max(v.finished or done for v in verifications)
        self.last_timing = (finished - started, max(0.0, min(done, finished) - waiting_since))
        self.failures += sum(verdict.status in FAILURE_STATUSES for verdict in verdicts)
        self.last_verdicts = verdicts
        return [1.0 if verdict.passed else 0.0 for verdict in verdicts]

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def _rows_from_columns(columns: dict[str, Any], num_rows: int) -> list[dict[str, Any]]:
    """Per-completion rows from TRL's reward kwargs (one list per dataset column; other kwargs are not columns)."""
    lists = {key: value for key, value in columns.items() if isinstance(value, list) and len(value) == num_rows}
    return [{key: value[index] for key, value in lists.items()} for index in range(num_rows)]
