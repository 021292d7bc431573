"""`LeanProcessConfig`: [`ProcessVerifiedConfig`] with Lean as the prover."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl_verigate.trainers.process_verified import ProcessVerifiedConfig


@dataclass
class LeanProcessConfig(ProcessVerifiedConfig):
    r"""
    Configuration class for the [`LeanProcessGRPOTrainer`].

    Every [`ProcessVerifiedConfig`] parameter except `prover`, which is fixed to `"lean"`: Lean 4 (`lean_server`: a local pool from `lean_repl_command`, or `lean_server_urls`) verifies. The
    Lean settings are `lean_repl_command` or `lean_server_urls`, `prover_project_dir`, `completion_format` and `tactic_granularity`.
    """

    prover: str = field(default="lean", init=False, metadata={"help": "Fixed: Lean verifies."})
