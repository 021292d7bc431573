"""`LeanProcessGRPOTrainer`: process-verified GRPO with Lean as the prover."""

from __future__ import annotations

from trl_verigate.trainers.lean_process.lean_process_config import LeanProcessConfig
from trl_verigate.trainers.process_verified import ProcessVerifiedGRPOTrainer


class LeanProcessGRPOTrainer(ProcessVerifiedGRPOTrainer):
    """`ProcessVerifiedGRPOTrainer` with Lean as the prover (the paper's setting, Kim & Yun, ICLR 2026).

    ``args`` is a `LeanProcessConfig` and ``verifier=``, if given, a Lean one; its proof reward is ``lean_proof`` and
    its metrics are under ``lean/``.
    """

    _name = "LeanProcessGRPO"
    config_class = LeanProcessConfig
