"""`CoqProcessGRPOTrainer`: process-verified GRPO with Coq as the prover."""

from __future__ import annotations

from trl_verigate.trainers.coq_process.coq_process_config import CoqProcessConfig
from trl_verigate.trainers.process_verified import ProcessVerifiedGRPOTrainer


class CoqProcessGRPOTrainer(ProcessVerifiedGRPOTrainer):
    """`ProcessVerifiedGRPOTrainer` with Coq as the prover (the same method on Coq).

    ``args`` is a `CoqProcessConfig` and ``verifier=``, if given, a Coq one; its proof reward is ``coq_proof`` and
    its metrics are under ``coq/``.
    """

    _name = "CoqProcessGRPO"
    config_class = CoqProcessConfig
