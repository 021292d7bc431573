"""`CoqProcessConfig`: [`ProcessVerifiedConfig`] with Coq as the prover."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl_verigate.trainers.process_verified import ProcessVerifiedConfig


@dataclass
class CoqProcessConfig(ProcessVerifiedConfig):
    r"""
    Configuration class for the [`CoqProcessGRPOTrainer`].

    Every [`ProcessVerifiedConfig`] parameter except `prover`, which is fixed to `"coq"`: Coq (`coqidetop` from `coq_command` or PATH, its passes rechecked by coqc and coqchk) verifies. The
    Coq settings are `coq_command` and `prover_project_dir`; each Coq sentence is a tactic.
    """

    prover: str = field(default="coq", init=False, metadata={"help": "Fixed: Coq verifies."})
