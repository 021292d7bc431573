"""`CoqServerConfig`: how the Coq workers start and what a pass must satisfy; `CoqProofRequest`: one proof to check.

Every setting is checked when the config is made, with a one-line error naming the field and the fix.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from typing import Literal, get_args

from trl_verigate.coq.sentences import split_sentences
from trl_verigate.prover_pool import settings
from trl_verigate.prover_pool.config import ProverPoolConfig

OWNER = "CoqServerConfig"
DEFAULT_HEADER = "Require Import Arith Lia."
# coqidetop speaks the XML protocol on stdin/stdout with these; proofs are checked in order, in the process.
# `-native-compiler no`: `native_compute` and `<<:` fall back to the VM instead of compiling and running OCaml.
IDETOP_ARGS = ("-main-channel", "stdfds", "-async-proofs", "off", "-q", "-native-compiler", "no")
INSTALL_COMMAND = "apt-get install -y --no-install-recommends coq"

# "always": every pass runs `Print Assumptions` (about 0.3 s on a `lia` proof); "sample": a seeded
# print_assumptions_fraction of them; "never": none (the precheck and the coqchk recheck remain).
PrintAssumptions = Literal["always", "sample", "never"]
PRINT_ASSUMPTIONS: tuple[str, ...] = get_args(PrintAssumptions)
# "coqchk": each pass of a verify() call is compiled with coqc and checked by coqchk (`coq.recheck`).
Recheck = Literal["coqchk", "none"]
RECHECKS: tuple[str, ...] = get_args(Recheck)

# The sentences a trusted header may hold: loading libraries and opening scopes, nothing that declares anything.
_HEADER_SENTENCE = re.compile(
    r"(?:From\s+[\w.']+\s+)?Require\s+(?:Import|Export)\s+[\w.'\s]+\.|(?:Import|Export)\s+[\w.'\s]+\.|"
    r"Open\s+Scope\s+[\w.']+\.",
    re.ASCII,
)


def default_coqidetop_command() -> list[str]:
    """`coqidetop.opt` (the native build Debian ships) when on PATH, else `coqidetop`, with the protocol's args."""
    program = "coqidetop.opt" if shutil.which("coqidetop.opt") else "coqidetop"
    return [program, *IDETOP_ARGS]


def header_problem(header) -> str | None:
    """Why `header` is not a trusted header of Require/Import/Open Scope sentences, or None."""
    if not isinstance(header, str):
        return f"must be a str of sentences, got {type(header).__name__}"
    sentences = split_sentences(header)
    if not sentences:
        return "is empty: give at least one `Require Import ...` sentence"
    for sentence in sentences:
        text = sentence.text(header)
        if not sentence.terminated or _HEADER_SENTENCE.fullmatch(text) is None:
            return (
                f"may hold only `Require Import`, `Require Export`, `Import` and `Open Scope` sentences, "
                f"each ending in '.', got {text[:80]!r}"
            )
    return None


@dataclass
class CoqServerConfig(ProverPoolConfig):
    """How to start and police the coqidetop workers (`coq.server.CoqServer`): the pool's settings
    (`ProverPoolConfig`, here with Coq's defaults) and Coq's own."""

    timeout: float = field(default=10.0, metadata={"help": "Seconds per proof."})
    memory_limit_mb: int | None = field(default=2048, metadata={"help": "RLIMIT_AS per worker, MiB (None: none)."})
    max_uses_per_worker: int = field(default=500, metadata={"help": "Proofs a worker serves before it is replaced."})
    startup_timeout: float = field(default=60.0, metadata={"help": "Seconds for a worker to load the header."})
    coqidetop_command: list[str] = field(
        default_factory=default_coqidetop_command,
        metadata={"help": "Argv of one worker: coqidetop.opt (else coqidetop) with its protocol options."},
    )
    coqc_command: list[str] = field(default_factory=lambda: ["coqc"], metadata={"help": "The recheck's compiler."})
    coqchk_command: list[str] = field(
        default_factory=lambda: ["coqchk"], metadata={"help": "The recheck's kernel checker."}
    )
    # Trusted: loaded once per worker; every statement and proof runs after it.
    header: str = field(
        default=DEFAULT_HEADER,
        metadata={"help": "Trusted header; only `Require Import`/`Export`, `Import` and `Open Scope` sentences."},
    )
    print_assumptions: PrintAssumptions = field(
        default="always",
        metadata={"help": "'always': every pass runs `Print Assumptions`; 'sample': a seeded share; 'never'."},
    )
    print_assumptions_fraction: float = field(
        default=0.1, metadata={"help": "Share of passes sampled with print_assumptions='sample'."}
    )
    seed: int = field(default=0, metadata={"help": "Seed of that sample."})
    recheck: Recheck = field(
        default="coqchk",
        metadata={
            "help": "'coqchk': every pass of each verify() call is compiled by coqc and checked by coqchk; 'none'."
        },
    )
    # Each pass is rechecked on its own (coqc, then coqchk), at most recheck_workers at a time (None: `workers`),
    # each program run with these limits; a pass it cannot recheck within them fails ("recheck: ...").
    recheck_timeout: float = field(
        default=120.0, metadata={"help": "Seconds for one pass's recheck, coqc and coqchk together."}
    )
    recheck_memory_limit_mb: int | None = field(
        default=2048, metadata={"help": "RLIMIT_AS of each coqc and coqchk run, MiB (None: none)."}
    )
    recheck_workers: int | None = field(
        default=None, metadata={"help": "Passes rechecked at a time (None: as many as `workers`)."}
    )
    # The allow-list is coq/allowlists/tactics.txt.
    extra_tactics: tuple[str, ...] = field(
        default=(), metadata={"help": "Tactic names added to the precheck's allow-list (a header library's own)."}
    )
    axiom_whitelist: tuple[str, ...] = field(
        default=(),
        metadata={
            "help": "Axioms a pass may depend on: a plain name ('classic') matches by short name, a qualified one "
            "('Coq.Logic.Classical_Prop.classic') only the axiom of that full name."
        },
    )

    def __post_init__(self):
        super().__post_init__()
        example = repr(default_coqidetop_command())
        self.coqidetop_command = settings.check_argv(OWNER, "coqidetop_command", self.coqidetop_command, example)
        self.coqc_command = settings.check_argv(OWNER, "coqc_command", self.coqc_command, "['coqc']")
        self.coqchk_command = settings.check_argv(OWNER, "coqchk_command", self.coqchk_command, "['coqchk']")
        problem = header_problem(self.header)
        if problem is not None:
            raise ValueError(f"{OWNER}.header {problem}")
        settings.check_choice(OWNER, "print_assumptions", self.print_assumptions, PRINT_ASSUMPTIONS)
        settings.check_choice(OWNER, "recheck", self.recheck, RECHECKS)
        settings.check_positive_number(OWNER, "recheck_timeout", self.recheck_timeout, "seconds")
        settings.check_fraction(OWNER, "print_assumptions_fraction", self.print_assumptions_fraction)
        for name, unit in (
            ("recheck_memory_limit_mb", "MiB (or None for no limit)"),
            ("recheck_workers", "concurrent rechecks (or None for as many as workers)"),
        ):
            if getattr(self, name) is not None:
                settings.check_positive_int(OWNER, name, getattr(self, name), unit)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise TypeError(f"{OWNER}.seed must be an int, got {self.seed!r}")
        self.extra_tactics = settings.check_names(
            OWNER, "extra_tactics", self.extra_tactics, "tactic names", "['my_tac']"
        )
        self.axiom_whitelist = settings.check_names(
            OWNER, "axiom_whitelist", self.axiom_whitelist, "axiom names", "['classic']"
        )


@dataclass(frozen=True)
class CoqProofRequest:
    """A trusted statement from the dataset (one sentence, e.g. `Theorem t : forall n : nat, n + 0 = n.`) and an
    untrusted proof: tactic sentences, bullets and braces, optionally wrapped in `Proof.` ... `Qed.`/`Defined.`.

    `header` overrides the server's header (trusted, the same rules) for this request.
    """

    statement: str
    proof: str
    header: str | None = None
