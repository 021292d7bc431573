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
# "bwrap": every REPL in a bubblewrap sandbox (fails to start without it); "auto": bwrap when it works here,
# otherwise none, said once in the log; "none": only the session, RLIMIT_AS and scratch HOME.
Sandbox = Literal["auto", "bwrap", "none"]
SANDBOXES: tuple[str, ...] = get_args(Sandbox)
# Which REPL passes a separate checker confirms (see `lean_server.recheck`): none, every pass, or a seeded sample.
Recheck = Literal["none", "passed", "sample"]
RECHECKS: tuple[str, ...] = get_args(Recheck)


def _absolute_if_relative_path(program: str) -> str:
    # A bare name ("lake") is looked up on PATH; a relative path ("./repl", "bin/repl") is the caller's.
    program = os.path.expanduser(program)
    if os.sep in program and not os.path.isabs(program):
        return os.path.abspath(program)
    return program


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
    sandbox: Sandbox = "auto"
    # None: "passed" when `recheck_command` is set, else "none" (the REPL verdict alone).
    recheck: Recheck | None = None
    recheck_command: list[str] | None = None
    recheck_fraction: float = 0.1
    recheck_seed: int = 0
    recheck_timeout: float = 600.0
    # Sizes in UTF-8 bytes: one request (statement + proof + header, or the file), and one verify() batch.
    max_request_bytes: int = 1 << 20
    max_batch_bytes: int = 64 << 20

    def __post_init__(self):
        if isinstance(self.repl_command, str):
            raise ValueError(
                "LeanServerConfig.repl_command must be a list of argv strings, "
                f"e.g. {self.repl_command.split()!r}, not one string"
            )
        if not self.repl_command:
            raise ValueError("LeanServerConfig.repl_command is empty: give the REPL's argv")
        self.repl_command = list(self.repl_command)
        # Paths are read as a shell would: from the caller's directory, not from project_dir (the REPL's cwd).
        self.repl_command[0] = _absolute_if_relative_path(self.repl_command[0])
        if self.project_dir is not None:
            self.project_dir = os.path.abspath(os.path.expanduser(self.project_dir))
        if self.recheck_command is not None:
            if isinstance(self.recheck_command, str) or not self.recheck_command:
                raise ValueError(
                    "LeanServerConfig.recheck_command must be a non-empty list of argv strings, e.g. "
                    "['trl-verigate', 'lean-recheck', '--backend', 'replay', '--project-dir', '/path/to/project']"
                )
            self.recheck_command = list(self.recheck_command)
            self.recheck_command[0] = _absolute_if_relative_path(self.recheck_command[0])
        if self.recheck is None:
            self.recheck = "passed" if self.recheck_command else "none"
        if self.recheck not in RECHECKS:
            raise ValueError(f"LeanServerConfig.recheck must be one of {RECHECKS}, got {self.recheck!r}")
        if self.recheck != "none" and not self.recheck_command:
            raise ValueError(
                f"LeanServerConfig.recheck={self.recheck!r} needs recheck_command (the checker's argv, e.g. "
                "['trl-verigate', 'lean-recheck', '--backend', 'replay', ...]); set recheck='none' to trust the REPL alone"
            )
        if not 0.0 < self.recheck_fraction <= 1.0:
            raise ValueError(f"LeanServerConfig.recheck_fraction must be in (0, 1], got {self.recheck_fraction}")
        if self.recheck_timeout <= 0:
            raise ValueError(f"LeanServerConfig.recheck_timeout must be > 0 seconds, got {self.recheck_timeout}")
        if self.sandbox not in SANDBOXES:
            raise ValueError(f"LeanServerConfig.sandbox must be one of {SANDBOXES}, got {self.sandbox!r}")
        for name in ("max_request_bytes", "max_batch_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"LeanServerConfig.{name} must be a positive number of bytes, got {value!r}")
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


@dataclass(frozen=True)
class FileRequest:
    """An untrusted complete Lean file, optionally held to a trusted statement and header.

    With `statement` (the dataset's theorem statement, ending in `:= by`) the file's main theorem must state
    exactly it (compared token by token, comments and whitespace ignored); with `header` the file's header must be
    that header. A plain `str` request is a `FileRequest` with neither: the file is then its own claim.
    """

    file: str
    statement: str | None = None
    header: str | None = None


Request = Union[ProofRequest, FileRequest, str]


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
