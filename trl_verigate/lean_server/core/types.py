"""Public data types of the Lean verification service.

These are the contract between the REPL process, the pool, the verdict, the
HTTP service and its client: every module speaks in these types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union, get_args

from trl_verigate.prover_pool import settings
from trl_verigate.prover_pool.results import STATUSES, Message, Position, Status, Tactic, VerificationResult

__all__ = [
    "GRANULARITIES",
    "MINIF2F_HEADER",
    "RECHECKS",
    "SANDBOXES",
    "STATUSES",
    "FileRequest",
    "LeanServerConfig",
    "Message",
    "Position",
    "ProofRequest",
    "Request",
    "Status",
    "Tactic",
    "VerificationResult",
]

MINIF2F_HEADER = (
    "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"
)

# "outermost": the top-level tactic sequence; "all": nested tactics too (see `tactics.split_tactics`).
Granularity = Literal["outermost", "all"]
GRANULARITIES: tuple[str, ...] = get_args(Granularity)
# "bwrap": every REPL in a bubblewrap sandbox (fails to start without it); "auto": bwrap when it works here,
# otherwise none, said once in the log; "none": only the session, RLIMIT_AS and scratch HOME.
Sandbox = Literal["auto", "bwrap", "none"]
SANDBOXES: tuple[str, ...] = get_args(Sandbox)
# Which REPL passes a separate checker confirms (`lean_server.recheck`): "auto" (every pass, when a checker is set
# and `trl-verigate lean-doctor` has verified it; else none, said once at start), none, every pass, or a sample.
Recheck = Literal["auto", "none", "passed", "sample"]
RECHECKS: tuple[str, ...] = get_args(Recheck)


OWNER = "LeanServerConfig"
REPL_EXAMPLE = "['lake', 'env', '/path/to/repl/.lake/build/bin/repl']"


@dataclass
class LeanServerConfig:
    """How to start and police the Lean REPL workers.

    `repl_command` is the argv of one REPL process, e.g.
    `["lake", "env", "/path/to/repl/.lake/build/bin/repl"]`, run with `project_dir` as cwd.
    """

    repl_command: list[str] = field(default_factory=lambda: ["lake", "env", "repl"])
    project_dir: str | None = None
    header: str = MINIF2F_HEADER
    workers: int = field(default_factory=settings.default_workers)
    timeout: float = 15.0
    memory_limit_mb: int | None = 8192
    max_uses_per_repl: int = 200
    # Replacement REPLs that may start (and load their header) before the REPL they replace retires, so a
    # retirement costs no idle time: at most workers + spare_repls processes at once. 0: each replacement starts
    # only when its predecessor retires.
    spare_repls: int = 1
    startup_timeout: float = 300.0
    allow_native_decide: bool = False
    # The largest `maxHeartbeats` (and `synthInstance.maxHeartbeats`) a proof or a file header may set; a file
    # header's larger value, or 0 ("no limit"), runs at this bound.
    max_heartbeats: int = 1_000_000
    # Tactics and namespaces (for `open`) added to the precheck's allow-lists (lean_server/precheck/allowlists/).
    extra_tactics: tuple[str, ...] = ()
    extra_namespaces: tuple[str, ...] = ()
    axiom_whitelist: tuple[str, ...] = ("propext", "Classical.choice", "Quot.sound")
    tactic_granularity: Granularity = "outermost"
    sandbox: Sandbox = "auto"
    recheck: Recheck = "auto"
    recheck_command: list[str] | None = None
    recheck_fraction: float = 0.1
    recheck_seed: int = 0
    recheck_timeout: float = 600.0
    # Sizes in UTF-8 bytes: one request (statement + proof + header, or the file), and one verify() batch.
    max_request_bytes: int = 64 << 10
    max_batch_bytes: int = 64 << 20

    def __post_init__(self):
        # Paths are read as a shell would: from the caller's directory, not from project_dir (the REPL's cwd).
        self.repl_command = settings.check_argv(OWNER, "repl_command", self.repl_command, REPL_EXAMPLE)
        self.project_dir = settings.check_project_dir(OWNER, self.project_dir)
        if not isinstance(self.header, str):
            raise TypeError(
                f"LeanServerConfig.header must be a str (the imports and options every proof runs under, e.g. "
                f"MINIF2F_HEADER), got {type(self.header).__name__}"
            )
        if self.recheck_command is not None:
            self.recheck_command = settings.check_argv(OWNER, "recheck_command", self.recheck_command, REPL_EXAMPLE)
        settings.check_choice(OWNER, "recheck", self.recheck, RECHECKS)
        if self.recheck in ("passed", "sample") and not self.recheck_command:
            raise ValueError(
                f"LeanServerConfig.recheck={self.recheck!r} needs recheck_command (the checker's argv, e.g. "
                "['trl-verigate', 'lean-recheck', '--backend', 'replay', ...]); set recheck='none' to trust the REPL alone"
            )
        settings.check_choice(OWNER, "sandbox", self.sandbox, SANDBOXES)
        settings.check_choice(OWNER, "tactic_granularity", self.tactic_granularity, GRANULARITIES)
        for name, unit in (("timeout", "seconds"), ("startup_timeout", "seconds"), ("recheck_timeout", "seconds")):
            settings.check_positive_number(OWNER, name, getattr(self, name), unit)
        settings.check_fraction(OWNER, "recheck_fraction", self.recheck_fraction)
        for name, unit in (
            ("workers", "REPL processes"),
            ("max_uses_per_repl", "proofs"),
            ("max_request_bytes", "bytes"),
            ("max_batch_bytes", "bytes"),
            ("max_heartbeats", "heartbeats"),
        ):
            settings.check_positive_int(OWNER, name, getattr(self, name), unit)
        settings.check_spare_repls(OWNER, self.spare_repls)
        if self.memory_limit_mb is not None:
            settings.check_positive_int(OWNER, "memory_limit_mb", self.memory_limit_mb, "MiB (or None for no limit)")
        if isinstance(self.recheck_seed, bool) or not isinstance(self.recheck_seed, int):
            raise TypeError(f"LeanServerConfig.recheck_seed must be an int, got {self.recheck_seed!r}")
        for name in ("allow_native_decide",):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"LeanServerConfig.{name} must be True or False, got {getattr(self, name)!r}")
        # A missing whitelisted axiom would fail every proof that uses it.
        self.axiom_whitelist = settings.check_names(
            OWNER,
            "axiom_whitelist",
            self.axiom_whitelist,
            "axiom names",
            "['propext', 'Classical.choice', 'Quot.sound']",
        )
        for name, example in (("extra_tactics", "['my_tactic']"), ("extra_namespaces", "['Finset']")):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(w, str) and w and " " not in w for w in value):
                raise TypeError(f"LeanServerConfig.{name} must be a list of names, e.g. {example}, got {value!r}")
            setattr(self, name, tuple(value))


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
