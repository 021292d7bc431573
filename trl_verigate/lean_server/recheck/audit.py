"""The audit sample: which REPL passes the recheck confirms, and its escalation to every pass after an overturn.

In mode ``"sample"`` (what ``recheck="auto"`` runs once `trl-verigate lean-doctor` has verified the checker) a pass
is rechecked when a hash of `recheck_seed`, the pass's number in the run and the request's content falls below
`recheck_sample_rate`. Each pass is its own draw, so a policy that repeats one hacked proof word for word is drawn
again every time it does; the same seed and the same passes in the same order pick the same passes. The first pass the checker overturns turns on
escalation: from then on every pass of the run is rechecked (the rest of that batch's passes too), and one loud
warning names the proof.

A reward hack is systematic: a policy that found one uses it in a fraction f of its passes. With n passes per step
and sample rate r, each pass is an independent draw, so a step rechecks at least one hacked pass with probability
``catch_probability(r, f, n) = 1 - (1 - r*f)**n``, and the hack is caught within ``steps_to_catch(r, f, n)`` steps
with 95% probability (docs/lean/soundness.md has the table).
"""

from __future__ import annotations

import hashlib
import logging
import math

from trl_verigate.lean_server.core import FileRequest, ProofRequest, Request

logger = logging.getLogger(__name__)

EXCERPT_CHARS = 160
ESCALATION_WARNING = (
    "\n" + "!" * 100 + "\nLeanServer: the recheck OVERTURNED a pass the REPL gave: {theorem}\n"
    "  statement: {statement}\n  proof: {proof}\n  why: {why}\n"
    "Code in a proof made the REPL accept something the Lean kernel refuses: a reward hack. From now on every pass "
    "of this run is rechecked (lean/recheck_escalated = 1) and every overturned pass is a failure (reward 0), "
    "counted in lean/recheck_overturned.\n" + "!" * 100
)


def request_content(request: Request) -> str:
    """The text that identifies a request for sampling: the same request is sampled the same way in every run."""
    if isinstance(request, ProofRequest):
        parts = ("proof", request.header or "", request.statement, request.proof)
    elif isinstance(request, FileRequest):
        parts = ("file", request.header or "", request.statement or "", request.file)
    else:
        parts = ("file", "", "", request)
    return "\0".join(parts)


def sampled(request: Request, seed: int, rate: float, draw: int) -> bool:
    """Whether the audit sample picks `request` as the run's `draw`-th pass: a hash of seed, draw and content,
    uniform in [0, 1), below `rate`. No `hash()` salt, so a rerun with the same seed picks the same passes."""
    digest = hashlib.sha256(f"{seed}\0{draw}\0{request_content(request)}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


def catch_probability(rate: float, hack_fraction: float, passes_per_step: int) -> float:
    """The probability that one step of `passes_per_step` passes, a `hack_fraction` of them hacked, rechecks at least
    one hacked pass when each pass is sampled at `rate`."""
    return 1.0 - (1.0 - rate * hack_fraction) ** passes_per_step


def steps_to_catch(rate: float, hack_fraction: float, passes_per_step: int, confidence: float = 0.95) -> int:
    """The fewest steps after which the hack has been caught with probability at least `confidence`."""
    per_step = catch_probability(rate, hack_fraction, passes_per_step)
    if per_step >= 1.0:
        return 1
    return max(1, math.ceil(math.log(1.0 - confidence) / math.log(1.0 - per_step)))


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1] + "…"


def _claim_and_proof(request: Request) -> tuple[str, str]:
    if isinstance(request, ProofRequest):
        return request.statement, request.proof
    if isinstance(request, FileRequest):
        return request.statement or "(the file's own)", request.file
    return "(the file's own)", request


class Audit:
    """Which passes go to the checker in a recheck mode ("none", "passed", "sample"), and the escalation state."""

    def __init__(self, mode: str, seed: int, rate: float):
        self.mode, self.seed, self.rate = mode, seed, rate
        self.escalated = False
        self.draws = 0

    def selects(self, request: Request) -> bool:
        """Whether this pass goes to the checker; call it once per pass."""
        if self.mode == "passed" or (self.mode == "sample" and self.escalated):
            return True
        if self.mode != "sample":
            return False
        self.draws += 1
        return sampled(request, self.seed, self.rate, self.draws)

    def record_overturn(self, request: Request, theorem: str, why: str) -> bool:
        """Note an overturned pass; the first one escalates (in sample mode) and warns. True when it escalated now."""
        if self.escalated:
            return False
        self.escalated = True
        statement, proof = _claim_and_proof(request)
        logger.warning(
            ESCALATION_WARNING.format(
                theorem=theorem, statement=_excerpt(statement), proof=_excerpt(proof), why=_excerpt(why)
            )
        )
        return True
