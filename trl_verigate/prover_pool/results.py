"""What a checker answers for each request: one `VerificationResult`, the same shape for every prover, so the
process advantages and the trainers read a Lean and a Coq verdict alike."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal, get_args

Status = Literal["passed", "failed", "timeout", "crashed", "rejected", "error"]
STATUSES: tuple[str, ...] = get_args(Status)


@dataclass(frozen=True)
class Position:
    line: int  # 1-based
    column: int  # 0-based


@dataclass(frozen=True)
class Message:
    """A prover message, positioned relative to the submitted source (the header is not counted).

    For a `ProofRequest` the submitted source is `statement + "\\n" + proof`; for a `str`
    request it is the file as given. `end` is exclusive and may be None.
    """

    severity: str
    line: int
    column: int
    end: Position | None
    text: str


@dataclass(frozen=True)
class Tactic:
    """One tactic (a Coq sentence) of the proof: its text and its [start, end) character offsets into the proof body."""

    text: str
    start: int
    end: int


@dataclass
class VerificationResult:
    status: Status
    # Always `status == "passed"`; left out, it is set from the status.
    passed: bool | None = None
    messages: list[Message] = field(default_factory=list)
    tactics: list[Tactic] = field(default_factory=list)
    # Tactics with index < first_error_tactic are locally valid; len(tactics) means no tactic failed (passed, or only
    # "unsolved goals" before the body: incomplete); 0 for timeout, crash, rejection, an early error, or a failure no
    # error locates (sorryAx or an axiom outside the whitelist, no or several `#print axioms` answers, an unpositioned
    # sorry warning, the theorem missing at our `#print`, over MAX_MESSAGES, a recheck that overturned the pass):
    # then no tactic is known good.
    first_error_tactic: int = 0
    axioms: list[str] = field(default_factory=list)
    time_s: float = 0.0
    reason: str | None = None
    # A worker pass that an independent checker confirmed (still "passed") or overturned ("failed"/"error").
    rechecked: bool = False
    # The goals open before the first failing tactic (or left at the end of an incomplete proof), as the prover
    # prints them; empty when the prover does not report them (the Lean REPL) or nothing failed.
    goals: list[str] = field(default_factory=list)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"VerificationResult.status must be one of {STATUSES}, got {self.status!r}")
        if self.passed is None:
            self.passed = self.status == "passed"
        elif self.passed != (self.status == "passed"):
            raise ValueError(
                f"VerificationResult.passed={self.passed!r} contradicts status={self.status!r}: passed is True exactly "
                "when status is 'passed' (leave passed out to have it set from the status)"
            )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> VerificationResult:
        messages = [
            Message(
                severity=m["severity"],
                line=m["line"],
                column=m["column"],
                end=Position(**m["end"]) if m.get("end") else None,
                text=m["text"],
            )
            for m in data.get("messages", [])
        ]
        tactics = [Tactic(**t) for t in data.get("tactics", [])]
        return cls(
            status=data["status"],
            passed=data.get("passed"),
            messages=messages,
            tactics=tactics,
            first_error_tactic=int(data.get("first_error_tactic", 0)),
            axioms=list(data.get("axioms", [])),
            time_s=float(data.get("time_s", 0.0)),
            reason=data.get("reason"),
            rechecked=bool(data.get("rechecked", False)),
            goals=[str(goal) for goal in data.get("goals", [])],
        )
