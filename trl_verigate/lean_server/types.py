"""Public data types of the Lean verification service.

These are the contract between the REPL process, the pool, the verdict, the
HTTP service and its client: every module speaks in these types.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Literal, Union, get_args

MINIF2F_HEADER = (
    "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"
)

Status = Literal["passed", "failed", "timeout", "crashed", "rejected", "error"]
STATUSES: tuple[str, ...] = get_args(Status)
# "outermost": the top-level tactic sequence; "all": nested tactics too (see `tactics.split_tactics`).
Granularity = Literal["outermost", "all"]
GRANULARITIES: tuple[str, ...] = get_args(Granularity)


def _default_workers() -> int:
    return max(1, (os.cpu_count() or 2) - 1)


@dataclass
class LeanServerConfig:
    """How to start and police the Lean REPL workers.

    `repl_command` is the argv of one REPL process, e.g.
    `["lake", "env", "/path/to/repl/.lake/build/bin/repl"]`, run with `project_dir` as cwd.
    """

    repl_command: list[str] = field(default_factory=lambda: ["lake", "env", "repl"])
    project_dir: str | None = None
    header: str = MINIF2F_HEADER
    workers: int = field(default_factory=_default_workers)
    timeout: float = 15.0
    memory_limit_mb: int | None = 8192
    max_uses_per_repl: int = 200
    startup_timeout: float = 300.0
    allow_native_decide: bool = False
    axiom_whitelist: tuple[str, ...] = ("propext", "Classical.choice", "Quot.sound")
    tactic_granularity: Granularity = "outermost"

    def __post_init__(self):
        if isinstance(self.repl_command, str):
            raise ValueError(
                "LeanServerConfig.repl_command must be a list of argv strings, "
                f"e.g. {self.repl_command.split()!r}, not one string"
            )
        if not self.repl_command:
            raise ValueError("LeanServerConfig.repl_command is empty: give the REPL's argv")
        if self.workers < 1:
            raise ValueError(f"LeanServerConfig.workers must be >= 1, got {self.workers}")
        if self.timeout <= 0:
            raise ValueError(f"LeanServerConfig.timeout must be > 0 seconds, got {self.timeout}")
        if self.max_uses_per_repl < 1:
            raise ValueError(f"LeanServerConfig.max_uses_per_repl must be >= 1, got {self.max_uses_per_repl}")
        if self.tactic_granularity not in GRANULARITIES:
            raise ValueError(
                f"LeanServerConfig.tactic_granularity must be one of {GRANULARITIES}, got {self.tactic_granularity!r}"
            )
        self.axiom_whitelist = tuple(self.axiom_whitelist)


@dataclass(frozen=True)
class ProofRequest:
    """A trusted theorem statement (ending in `:= by`) and an untrusted proof body.

    `header` overrides the server's default header (imports and options) for this request.
    """

    statement: str
    proof: str
    header: str | None = None


Request = Union[ProofRequest, str]


@dataclass(frozen=True)
class Position:
    line: int  # 1-based
    column: int  # 0-based


@dataclass(frozen=True)
class Message:
    """A Lean message, positioned relative to the submitted source (the header is not counted).

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
    """One tactic of the proof: its text and its [start, end) character offsets into the proof body."""

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
    # Tactics with index < first_error_tactic are locally valid; len(tactics) means no tactic failed
    # but the proof is incomplete (or it passed); 0 for timeout, crash, rejection or an early error.
    first_error_tactic: int = 0
    axioms: list[str] = field(default_factory=list)
    time_s: float = 0.0
    reason: str | None = None

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
        )
