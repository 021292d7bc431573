"""Public data types of the Lean verification service.

These are the contract between the REPL process, the pool, the verdict, the
HTTP service and its client: every module speaks in these types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union, get_args

from trl_verigate.prover_pool import settings
from trl_verigate.prover_pool.config import ProverPoolConfig
from trl_verigate.prover_pool.results import STATUSES, Message, Position, Status, Tactic, VerificationResult

__all__ = [
    "GRANULARITIES",
    "MINIF2F_HEADER",
    "RECHECKS",
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

# "outermost": the top-level tactic sequence; "all": nested tactics too (see `precheck.layout.split_tactics`).
Granularity = Literal["outermost", "all"]
GRANULARITIES: tuple[str, ...] = get_args(Granularity)
# Which REPL passes a separate checker confirms (`lean_server.recheck`): "auto" (a seeded sample that escalates to
# every pass after the first overturn, when a checker is set and `trl-verigate lean-doctor` has verified it; else
# none, said once at start), none, every pass, or the escalating sample with any checker.
Recheck = Literal["auto", "none", "passed", "sample"]
RECHECKS: tuple[str, ...] = get_args(Recheck)


OWNER = "LeanServerConfig"
REPL_EXAMPLE = "['lake', 'env', '/path/to/repl/.lake/build/bin/repl']"


@dataclass
class LeanServerConfig(ProverPoolConfig):
    """How to start and police the Lean REPL workers: the pool's settings (`ProverPoolConfig`) and Lean's own.

    `repl_command` is the argv of one REPL process, e.g.
    `["lake", "env", "/path/to/repl/.lake/build/bin/repl"]`, run with `project_dir` as cwd.
    """

    repl_command: list[str] = field(
        default_factory=lambda: ["lake", "env", "repl"], metadata={"help": "Argv of one REPL process."}
    )
    header: str = field(
        default=MINIF2F_HEADER, metadata={"help": "Imports and options every proof runs under (`MINIF2F_HEADER`)."}
    )
    allow_native_decide: bool = field(
        default=False,
        metadata={"help": "Allow `native_decide` (also needs `Lean.ofReduceBool` in `axiom_whitelist`)."},
    )
    # A file header's larger value, or 0 ("no limit"), runs at this bound.
    max_heartbeats: int = field(
        default=1_000_000,
        metadata={"help": "The largest `maxHeartbeats` (and `synthInstance.maxHeartbeats`) a proof or header may set."},
    )
    # The precheck's allow-lists live in lean_server/precheck/allowlists/.
    extra_tactics: tuple[str, ...] = field(
        default=(), metadata={"help": "Tactics added to the precheck's allow-list (CLI `--allow-tactic`)."}
    )
    extra_namespaces: tuple[str, ...] = field(
        default=(), metadata={"help": "Namespaces a proof may `open` (CLI `--allow-namespace`)."}
    )
    axiom_whitelist: tuple[str, ...] = field(
        default=("propext", "Classical.choice", "Quot.sound"), metadata={"help": "Axioms a pass may depend on."}
    )
    tactic_granularity: Granularity = field(
        default="outermost", metadata={"help": "Tactic spans: 'outermost', or 'all' (nested tactics too)."}
    )
    recheck: Recheck = field(
        default="auto",
        metadata={
            "help": "Which passes the checker confirms: 'auto' (the audit sample, once `lean-doctor` has verified "
            "`recheck_command`; else none), 'passed' (all), 'sample' (the audit sample with any checker), 'none'."
        },
    )
    recheck_command: list[str] | None = field(
        default=None, metadata={"help": "Argv of the checker that confirms REPL passes outside the REPL."}
    )
    # See docs/lean/soundness.md for how fast the sample catches a hack.
    recheck_sample_rate: float = field(
        default=0.05,
        metadata={
            "help": "Share of passes the audit sample rechecks ('auto', 'sample') until the first overturn, after "
            "which it rechecks every pass."
        },
    )
    recheck_seed: int = field(default=0, metadata={"help": "Seed of the audit sample."})
    recheck_timeout: float = field(default=600.0, metadata={"help": "Seconds for one checker run."})

    def __post_init__(self):
        super().__post_init__()
        # Paths are read as a shell would: from the caller's directory, not from project_dir (the REPL's cwd).
        self.repl_command = settings.check_argv(OWNER, "repl_command", self.repl_command, REPL_EXAMPLE)
        if not isinstance(self.header, str):
            raise TypeError(
                f"LeanServerConfig.header must be a str (the imports and options every proof runs under, e.g. "
                f"MINIF2F_HEADER), got {type(self.header).__name__}"
            )
        self._check_recheck()
        settings.check_choice(OWNER, "tactic_granularity", self.tactic_granularity, GRANULARITIES)
        settings.check_positive_int(OWNER, "max_heartbeats", self.max_heartbeats, "heartbeats")
        if not isinstance(self.allow_native_decide, bool):
            raise TypeError(
                f"LeanServerConfig.allow_native_decide must be True or False, got {self.allow_native_decide!r}"
            )
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

    def _check_recheck(self) -> None:
        if self.recheck_command is not None:
            self.recheck_command = settings.check_argv(OWNER, "recheck_command", self.recheck_command, REPL_EXAMPLE)
        settings.check_choice(OWNER, "recheck", self.recheck, RECHECKS)
        if self.recheck in ("passed", "sample") and not self.recheck_command:
            raise ValueError(
                f"LeanServerConfig.recheck={self.recheck!r} needs recheck_command (the checker's argv, e.g. "
                "['trl-verigate', 'lean-recheck', '--backend', 'replay', ...]); set recheck='none' to trust the REPL alone"
            )
        settings.check_positive_number(OWNER, "recheck_timeout", self.recheck_timeout, "seconds")
        settings.check_fraction(OWNER, "recheck_sample_rate", self.recheck_sample_rate)
        if isinstance(self.recheck_seed, bool) or not isinstance(self.recheck_seed, int):
            raise TypeError(f"LeanServerConfig.recheck_seed must be an int, got {self.recheck_seed!r}")


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
