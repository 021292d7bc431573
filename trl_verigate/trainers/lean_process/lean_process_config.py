"""`LeanProcessConfig`: `ProcessVerifiedConfig` with Lean as the prover."""

from __future__ import annotations

from dataclasses import dataclass, field

from trl_verigate.trainers.process_verified import ProcessVerifiedConfig


@dataclass
class LeanProcessConfig(ProcessVerifiedConfig):
    r"""
    Configuration class for the `LeanProcessGRPOTrainer`.

    Every `ProcessVerifiedConfig` parameter except `prover`, which is fixed to `"lean"`: Lean 4 verifies, through
    `lean_server`. Of the prover parameters, these are Lean's (`coq_command` is unused):

    Parameters:
        lean_repl_command (`list[str]` or `None`, *optional*, defaults to `None`):
            Argv of one Lean REPL; starts a local `LeanServer` pool in `prover_project_dir`.
        lean_server_urls (`list[str]` or `None`, *optional*, defaults to `None`):
            Base URLs of remote `trl-verigate lean-server`s (or kimina-lean-server), instead of a local pool.
        completion_format (`str`, *optional*, defaults to `"auto"`):
            Where a completion's proof is: `"proof_body"`, `"fenced_block"` or `"auto"`.
        tactic_granularity (`str`, *optional*, defaults to `"outermost"`):
            Tactics credited: the top-level sequence (`"outermost"`, the paper) or nested ones too (`"all"`).
    """

    prover: str = field(default="lean", init=False, metadata={"help": "Fixed: Lean verifies."})
