"""`LeanServer`: verify Lean proofs in-process with a pool of isolated REPL workers.

The batch API, the pool, the fair scheduling of prechecks and the timeouts are `prover_pool.service`'s; here are
what makes it Lean: the precheck (`precheck.prepare`), the judge (`verdict.judge`) of the REPL's answer, the
answers in submitted-source coordinates (`verify_with_responses`), and the recheck tier, where passes are confirmed
outside the REPL by a checker (`lean_server.recheck`).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Sequence

from trl_verigate.lean_server.core import LeanServerConfig, Request, VerificationResult
from trl_verigate.lean_server.precheck import Prepared, TrustedHeader, policy_for, prepare
from trl_verigate.lean_server.recheck import Rechecker, effective_recheck
from trl_verigate.lean_server.repl import ReplProcess
from trl_verigate.lean_server.service.wire import checked_requests, request_bytes, request_problem
from trl_verigate.lean_server.verdict import is_axioms_answer, judge, repl_position
from trl_verigate.prover_pool.owner import Owner
from trl_verigate.prover_pool.service import PooledVerifier

__all__ = ["LeanServer", "submitted_response"]

logger = logging.getLogger(__name__)

# A verdict and Lean's own answer to the request, in submitted-source coordinates; None when Lean never answered.
ResultWithResponse = tuple[VerificationResult, dict | None]

REPL_VERDICT_ALONE_WARNING = (
    "LeanServer: the recheck is off: {reason}. A `passed` verdict is then the REPL's alone, which code run by a "
    "proof inside the REPL can forge (README, soundness)."
)


class LeanServer(PooledVerifier):
    """Sound, isolated, pooled Lean verification.

    Usage::

        with LeanServer(LeanServerConfig(repl_command=[...], project_dir=...)) as server:
            results = server.verify([ProofRequest(statement, proof), "import Mathlib\\ntheorem ..."])

    `verify` returns exactly one `VerificationResult` per request, in request order, whatever happens to the REPL
    workers: "passed"/"failed" from the verdict, "rejected" by the precheck (Lean never runs), "timeout", "crashed"
    (the REPL died, wrote garbage or a truncated answer; it is replaced), "error" (the REPL could not be started or
    answered with an error object, or the recheck checker failed). With the recheck on (see
    `LeanServerConfig.recheck`), passes go to the checker: one it refuses becomes "failed" with a reason starting
    "recheck: ". `metrics()` counts what it found.
    """

    worker_factory = ReplProcess
    progress_desc = "Lean verify"

    def __init__(self, config: LeanServerConfig | None = None):
        super().__init__(config if config is not None else LeanServerConfig())
        self.recheck_mode, self.recheck_off_reason = effective_recheck(self.config)
        self._rechecker = Rechecker(self.config, self.recheck_mode)
        self._policy = policy_for(self.config)
        self._passes = 0

    # ------------------------------------------------------------ the service's hooks

    def prewarm_header(self) -> str:
        # The REPL loads the header's imports; its other lines travel with every command.
        return TrustedHeader.parse(self.config.header).imports

    def on_start(self) -> None:
        if self.recheck_off_reason is not None:
            logger.warning(REPL_VERDICT_ALONE_WARNING.format(reason=self.recheck_off_reason))

    def request_bytes(self, request: Request) -> int:
        return request_bytes(request)

    def check_requests(self, requests: Sequence[Request]) -> list[Request]:
        return checked_requests(requests)

    def prepare(self, request: Request):
        problem = request_problem(request)
        if problem is not None:
            return VerificationResult(status="rejected", reason=problem)
        return prepare(request, self.config.header, self._policy)

    def judged(self, prepared: Prepared, response: dict, time_s: float, with_response: bool):
        result = judge(prepared, response, self.config, time_s)
        return result, submitted_response(prepared, response) if with_response else None

    async def after_batch(self, requests: list, triples: list) -> list[VerificationResult]:
        results = [result for result, _, _ in triples]
        self._passes += sum(result.passed for result in results)
        # All of this call's passes the audit selects in one checker run: they share one import of the header's modules.
        passes = [
            index for index, (result, _, prepared) in enumerate(triples) if result.passed and prepared is not None
        ]
        if passes:
            candidates = [(requests[i], triples[i][2], results[i]) for i in passes]
            for index, final in zip(passes, await self._rechecker.audit_batch(candidates), strict=True):
                results[index] = final
        return results

    # ------------------------------------------------------------ Lean's own API

    def verify_with_responses(
        self,
        requests: Sequence[Request],
        timeout: float | None = None,
        progress: bool | None = None,
        caller: str | Owner | None = None,
    ) -> list[ResultWithResponse]:
        """`verify`, each verdict paired with the Lean REPL's own response to its request.

        The response is what a client of the bare REPL (or kimina-lean-server) would get for the submitted source,
        so tools that read it themselves (kimina's SDK reads `sorries`) judge it as they would there. It is the
        REPL's JSON object with exactly two changes, both undoing how we run the request (the header's preamble,
        its statement and proof as one command in the imports' env, followed by `#print axioms`):

        - every `pos`/`endPos` in `messages` and `sorries` is moved from the command's coordinates to the submitted
          source's, the coordinates of `VerificationResult.messages`: lines shift for the header (kimina-lean-server
          does the same), an `example` renamed for `#print axioms` gets its own columns back, and a position Lean
          put on our appended command (e.g. "unexpected token" after an unclosed bracket) moves to the end of the
          proof;
        - the info message answering our `#print axioms` is dropped (the verdict has it as `axioms`), and with it
          the `messages` key when that was its only entry, as the REPL leaves out an empty list.

        Everything else (`env`, each sorry's `goal` and `proofState`, message order and text, other keys) is as
        Lean sent it. The response is None when Lean never answered: rejected by the precheck, timeout, crash.
        """
        self._check_not_on_loop("verify_with_responses()")
        return self._submit(requests, timeout, progress, with_responses=True, caller=caller).result()

    async def averify_with_responses(
        self,
        requests: Sequence[Request],
        timeout: float | None = None,
        progress: bool | None = None,
        caller: str | Owner | None = None,
    ) -> list[ResultWithResponse]:
        """`verify_with_responses` for the caller's event loop: awaits without blocking it."""
        return await asyncio.wrap_future(self._submit(requests, timeout, progress, with_responses=True, caller=caller))

    def stats(self) -> dict:
        """Pool counters (processes started, start failures, recycled, timeouts, crashes, compromised: workers the
        framing checks caught answering out of turn, see `repl.process`), recheck counters (rechecked,
        recheck_overturned, recheck_checker_failures, recheck_seconds, recheck_escalated) and live REPL pids."""
        stats = super().stats()
        recheck = {
            **self._rechecker.counters,
            "recheck_seconds": self._rechecker.seconds,
            "recheck_escalated": self._rechecker.audit.escalated,
        }
        return {**stats, **recheck}

    def metrics(self) -> dict[str, float]:
        """Cumulative recheck metrics since this server was made, for a trainer to log per step (the difference
        between two calls): `lean/rechecked` (passes sent to the checker), `lean/recheck_overturned` (of those, the
        ones it refused: a policy learning to fool the REPL shows here), `lean/recheck_checker_failures` (failed
        closed because the checker broke its contract), `lean/recheck_seconds` (wall time in the checker),
        `lean/recheck_escalated` (1 once an overturn turned on rechecking every pass; `recheck.audit`) and
        `lean/repl_passes` (the passes the REPL gave)."""
        return {**self._rechecker.metrics(), "lean/repl_passes": self._passes}


def submitted_response(prepared: Prepared, response: dict) -> dict:
    """A copy of the REPL's `response` to `prepared.code` as if the submitted source itself had been run.

    See `LeanServer.verify_with_responses` for the two changes and why; `response` is left untouched.
    """
    response = copy.deepcopy(response)
    messages = response.get("messages")
    if isinstance(messages, list):
        # The judge's own test, so exactly the message it read the axioms from disappears.
        kept = [m for m in messages if not is_axioms_answer(prepared, m)]
        response["messages"] = [_with_submitted_positions(prepared, message) for message in kept]
        if not kept and messages:
            # The REPL leaves out an empty `messages` list, e.g. `{"env": 3}` for a clean proof.
            del response["messages"]
    sorries = response.get("sorries")
    if isinstance(sorries, list):
        response["sorries"] = [_with_submitted_positions(prepared, sorry) for sorry in sorries]
    return response


def _with_submitted_positions(prepared: Prepared, item):
    if not isinstance(item, dict):
        return item
    for key in ("pos", "endPos"):
        position = item.get(key)
        start = repl_position(position)
        if start is None:
            continue
        # The judge's own mapping, so these positions agree with VerificationResult.messages.
        mapped = prepared.submitted_position(prepared.offset_of(*start))
        item[key] = {**position, "line": mapped.line, "column": mapped.column}
    return item
