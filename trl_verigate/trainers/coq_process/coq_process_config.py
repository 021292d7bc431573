"""`CoqProcessConfig`: `ProcessVerifiedConfig` with Coq as the prover."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl_verigate.trainers.process_verified import ProcessVerifiedConfig


@dataclass
class CoqProcessConfig(ProcessVerifiedConfig):
    r"""
    Configuration class for the `CoqProcessGRPOTrainer`.

    Every `ProcessVerifiedConfig` parameter except `prover`, which is fixed to `"coq"`: Coq verifies, through a local
    `CoqServer` pool whose passes coqc and coqchk recheck. Each Coq sentence is a tactic. Of the prover parameters,
    this one is Coq's alone (`lean_repl_command` and `lean_server_urls` are refused):

    Parameters:
        coq_command (`list[str]` or `None`, *optional*, defaults to `None`):
            Argv of coqidetop with its options, run in `prover_project_dir`; `None`: `coqidetop.opt` or `coqidetop`
            from PATH.
    """

    prover: str = field(default="coq", init=False, metadata={"help": "Fixed: Coq verifies."})
