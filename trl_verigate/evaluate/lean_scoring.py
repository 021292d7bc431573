"""Lean scoring: each completion's proof (the two completion shapes of `lean_proofs`, as the Lean process trainer
reads them) verified by a `LeanServer` or `LeanClient`, concurrently, one row per attempt as soon as it is judged.

A verification fault (timeout, crashed REPL, an unreachable server, the verifier raising) is that attempt's status
and a failure; it never stops the run.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable

from trl_verigate.evaluate.problems import Problem
from trl_verigate.lean_server import MINIF2F_HEADER
from trl_verigate.lean_server.service.verifier import Verifier
from trl_verigate.rewards.lean_proofs import COMPLETION_FORMATS, extract_row_proof


class LeanScorer:
    """Verify attempts in ``concurrency`` threads; ``on_row(row)`` is called (under a lock) as each is judged.

    Args:
        verifier: a started `LeanServer` or a `LeanClient`.
        timeout: seconds per proof.
        completion_format: "auto", "proof_body" or "fenced_block" (see `lean_proofs`).
        statement_field: the row's trusted statement column.
        header_field: the row's trusted header column.
        concurrency: proofs in flight at once (the pool's workers, or what the servers take).
    """

    def __init__(
        self,
        verifier: Verifier,
        timeout: float,
        completion_format: str = "auto",
        statement_field: str = "formal_statement",
        header_field: str = "header",
        concurrency: int = 4,
    ):
        if not isinstance(verifier, Verifier):
            raise TypeError(f"verifier must be a LeanServer or LeanClient, got {type(verifier).__name__}")
        if completion_format not in COMPLETION_FORMATS:
            raise ValueError(f"--completion-format must be one of {COMPLETION_FORMATS}, got {completion_format!r}")
        if not timeout > 0:
            raise ValueError(f"--lean-timeout must be > 0 seconds, got {timeout}")
        self.verifier = verifier
        self.timeout = timeout
        self.completion_format = completion_format
        self.statement_field = statement_field
        self.header_field = header_field
        self.default_header = getattr(getattr(verifier, "config", None), "header", MINIF2F_HEADER)
        self._executor = concurrent.futures.ThreadPoolExecutor(concurrency, thread_name_prefix="eval-lean")
        self._futures: list[concurrent.futures.Future] = []
        self._lock = threading.Lock()

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
        extracted = extract_row_proof(
            completion,
            problem.row,
            self.statement_field,
            self.header_field,
            self.default_header,
            self.completion_format,
        )
        record = {"problem_id": problem.id, "attempt": attempt, "completion": completion, "proof": extracted.proof}
        if extracted.request is None:
            failure = {"status": "failed", "correct": False, "first_error_tactic": None, "time_s": 0.0}
            return {**record, **failure, "reason": extracted.reason}
        started = time.perf_counter()
        try:
            (result,) = self.verifier.verify([extracted.request], timeout=self.timeout, progress=False)
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
        }

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)
