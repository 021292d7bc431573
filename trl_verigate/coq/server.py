"""`CoqServer`: verify Coq proofs in-process with a pool of isolated coqidetop workers.

The batch API, the pool, the fair scheduling of prechecks and the timeouts are `prover_pool.service`'s; here is
what makes it Coq: the precheck (`coq.precheck`), the judge (`coq.judge`) of coqidetop's account, and the coqchk
recheck of each batch's passes (`coq.recheck`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from trl_verigate.coq.config import CoqProofRequest, CoqServerConfig
from trl_verigate.coq.judge import judge
from trl_verigate.coq.precheck import Prepared, prepare, tactics_for
from trl_verigate.coq.process import CoqProcess
from trl_verigate.coq.recheck import Candidate, CheckerFailure, CoqRechecker, header_axioms
from trl_verigate.prover_pool.results import VerificationResult
from trl_verigate.prover_pool.service import PooledVerifier

__all__ = ["CoqServer"]

logger = logging.getLogger(__name__)
UNGUARDED_AXIOMS_WARNING = (
    "CoqServerConfig.print_assumptions={print_assumptions!r} with recheck='none': {unchecked}, and the header "
    "{header!r} {loads}; a proof that uses one {outcome}. Set print_assumptions='always' or recheck='coqchk'."
)
# What escapes under each print_assumptions that leaves passes unchecked when nothing rechecks them.
_UNCHECKED = {
    "never": ("nothing checks a pass's axioms", "passes"),
    "sample": (
        "only the sampled passes' axioms are checked (print_assumptions_fraction={fraction})",
        "passes whenever it is not sampled",
    ),
}


class CoqServer(PooledVerifier):
    """Sound, isolated, pooled Coq verification with tactic-level feedback.

    Usage::

        with CoqServer(CoqServerConfig(workers=2)) as server:
            results = server.verify([CoqProofRequest("Theorem t : forall n : nat, n + 0 = n.", "intros n. lia.")])

    `verify(requests, timeout=None, progress=None, caller=None)` returns one `VerificationResult` per request, in
    order: "passed"/"failed" from the judge, "rejected" by the precheck (Coq never ran), "timeout", "crashed"
    (coqidetop died or broke the protocol; it is replaced), "error" (a worker could not start, the trusted statement
    does not elaborate, or the recheck's checker failed). With `recheck="coqchk"` every pass of the call is
    rechecked; one it refuses becomes "failed" with a reason starting "recheck: ".
    """

    worker_factory = CoqProcess
    progress_desc = "Coq verify"

    def __init__(self, config: CoqServerConfig | None = None):
        super().__init__(config if config is not None else CoqServerConfig())
        self._tactics = tactics_for(self.config)
        self._rechecker = CoqRechecker(self.config)
        self.counters = {"passes": 0, "interrupted": 0}

    def on_start(self) -> None:
        warning = self.unguarded_axioms_warning()
        if warning is not None:
            logger.warning(warning)

    def unguarded_axioms_warning(self) -> str | None:
        """The warning for a configuration where an axiom the header's libraries hold could pass unchecked, or None.
        Only `print_assumptions` "never" or "sample" with `recheck="none"` runs coqc and coqchk on the header to
        find out."""
        config = self.config
        if config.print_assumptions not in _UNCHECKED or config.recheck != "none":
            return None
        try:
            axioms = asyncio.run_coroutine_threadsafe(header_axioms(config, config.header), self._loop).result()
        except CheckerFailure as error:
            loads = f"may load axioms (coqc and coqchk could not list them: {error})"
        else:
            if not axioms:
                return None
            loads = f"loads the axioms {', '.join(axioms)}"
        unchecked, outcome = _UNCHECKED[config.print_assumptions]
        return UNGUARDED_AXIOMS_WARNING.format(
            print_assumptions=config.print_assumptions,
            unchecked=unchecked.format(fraction=config.print_assumptions_fraction),
            header=config.header,
            loads=loads,
            outcome=outcome,
        )

    def prewarm_header(self) -> str:
        return self.config.header

    def request_bytes(self, request: CoqProofRequest) -> int:
        # Any string is measured, lone surrogates included ("surrogatepass"): the precheck refuses those per request.
        parts = (request.statement, request.proof, request.header or "")
        return sum(len(part.encode("utf-8", "surrogatepass")) for part in parts if isinstance(part, str))

    def check_requests(self, requests: Sequence[CoqProofRequest]) -> list[CoqProofRequest]:
        """The requests as a list; TypeError only for an item that is no CoqProofRequest at all (a caller's bug).
        What a request holds, however malformed, is judged on its own (`coq.precheck.prepare`)."""
        if isinstance(requests, (str, CoqProofRequest)):
            raise TypeError("CoqServer.verify takes a list of CoqProofRequest, not a single request")
        requests = list(requests)
        for index, request in enumerate(requests):
            if not isinstance(request, CoqProofRequest):
                raise TypeError(
                    f"CoqServer.verify request {index} must be a CoqProofRequest(statement: str, proof: str), "
                    f"got {request!r:.120}"
                )
        return requests

    def prepare(self, request: CoqProofRequest) -> Prepared | VerificationResult:
        return prepare(request, self.config, self._tactics)

    def judged(self, prepared: Prepared, response: dict, time_s: float, with_response: bool):
        # The response always travels on: the recheck compares with the statement's own `Check`.
        return judge(prepared, response, self.config, time_s), response

    async def after_batch(self, requests: list, triples: list) -> list[VerificationResult]:
        results = [result for result, _, _ in triples]
        self.counters["passes"] += sum(result.passed for result in results)
        self.counters["interrupted"] += sum(bool(response and response.get("timeout")) for _, response, _ in triples)
        if self.config.recheck == "none":
            return results
        selected = [index for index, (result, _, prepared) in enumerate(triples) if result.passed and prepared]
        candidates = [Candidate(triples[i][2], results[i], triples[i][1]["reference"]["check"]) for i in selected]
        if candidates:
            for index, final in zip(selected, await self._rechecker.recheck(candidates), strict=True):
                results[index] = final
        return results

    def stats(self) -> dict:
        """Pool counters, the recheck's counters and seconds, passes and interrupted (timed-out proofs whose worker
        answered SIGINT and stayed), and live worker pids."""
        return {
            **super().stats(),
            **self._rechecker.counters,
            "recheck_seconds": self._rechecker.seconds,
            **self.counters,
        }

    def metrics(self) -> dict[str, float]:
        """Cumulative metrics since this server was made, for a trainer to log per step (the difference between
        two calls): `coq/rechecked` (passes sent to coqc + coqchk), `coq/recheck_overturned` (of those, the ones
        refused), `coq/recheck_checker_failures` (failed closed), `coq/recheck_seconds` and `coq/passes` (passes
        coqidetop gave)."""
        return {**self._rechecker.metrics(), "coq/passes": self.counters["passes"]}
