"""Scoring by a proof assistant: each completion's proof verified by a pooled verifier (`LeanServer`, `LeanClient`,
`CoqServer`), concurrently, one row per attempt as soon as it is judged. `lean_scoring` and `coq_scoring` say how a
completion and its problem's row become a request.

A verification fault (timeout, crashed worker, an unreachable server, the verifier raising) is that attempt's status
and a failure; it never stops the run.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable

from trl_verigate.evaluate.problems import Problem


class ProofScorer:
    """Verify attempts in ``concurrency`` threads; ``on_row(row)`` is called (under a lock) as each is judged.

    Subclasses implement `request`: the proof read from a completion and the verifier's request for it (or the reason
    there is none).

    Args:
        verifier: a started verifier with the batch ``verify(requests, timeout=..., progress=...)``.
        timeout: seconds per proof.
        concurrency: proofs in flight at once (the pool's workers, or what the servers take).
    """

    timeout_flag = "--timeout"

    def __init__(self, verifier, timeout: float, concurrency: int = 4):
        if not timeout > 0:
            raise ValueError(f"{self.timeout_flag} must be > 0 seconds, got {timeout}")
        self.verifier = verifier
        self.timeout = timeout
        self._executor = concurrent.futures.ThreadPoolExecutor(concurrency, thread_name_prefix="eval-proofs")
        self._futures: list[concurrent.futures.Future] = []
        self._lock = threading.Lock()

    def request(self, problem: Problem, completion: str) -> tuple[str | None, object | None, str | None]:
        """(the proof text read from ``completion``, the verifier's request for it, why there is none)."""
        raise NotImplementedError(f"{type(self).__name__} must implement request")

    def submit(self, problem: Problem, attempt: int, completion: str, on_row: Callable[[dict], None]) -> None:
        def run() -> None:
            row = self.score(problem, attempt, completion)
            with self._lock:
                on_row(row)

        self._futures.append(self._executor.submit(run))

    def drain(self) -> None:
        """Wait for every submitted attempt; re-raise what an ``on_row`` raised (writing a row failed)."""
        futures, self._futures = self._futures, []
        for future in futures:
            future.result()

    def score(self, problem: Problem, attempt: int, completion: str) -> dict:
        proof, request, reason = self.request(problem, completion)
        record = {"problem_id": problem.id, "attempt": attempt, "completion": completion, "proof": proof}
        if request is None:
            failure = {"status": "failed", "correct": False, "first_error_tactic": None, "time_s": 0.0}
            return {**record, **failure, "reason": reason}
        started = time.perf_counter()
        try:
            (result,) = self.verifier.verify([request], timeout=self.timeout, progress=False)
        except Exception as error:  # noqa: BLE001 - a fault of the verifier is this attempt's status, not the run's
            fault = {"status": "error", "correct": False, "first_error_tactic": None}
            reason = f"verification failed: {type(error).__name__}: {error}"[:500]
            return {**record, **fault, "time_s": time.perf_counter() - started, "reason": reason}
        return {
            **record,
            "status": result.status,
            "correct": result.status == "passed",
            "first_error_tactic": result.first_error_tactic,
            "time_s": result.time_s or time.perf_counter() - started,
            "reason": result.reason,
            # A pass the recheck confirmed, or overturned into a failure (the summary counts those).
            "rechecked": result.rechecked,
        }

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
