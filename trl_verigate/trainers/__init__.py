"""The trainers, one folder each as in TRL: `<name>_config.py` holds the config, `<name>_trainer.py` the trainer.

`process_grpo` is the token-level advantage layer that `verigate` and `process_verified` share; `lean_process` and
`coq_process` are `process_verified` with the prover fixed; `es` is evolution strategies on TRL's generation path
(imported from `trl_verigate.trainers.es`, not here, since ES needs none of the GRPO trainers).
"""

from trl_verigate.trainers.coq_process import CoqProcessConfig, CoqProcessGRPOTrainer
from trl_verigate.trainers.lean_process import LeanProcessConfig, LeanProcessGRPOTrainer
from trl_verigate.trainers.process_grpo import ProcessGRPOTrainer, ScoredBatch
from trl_verigate.trainers.process_verified import ProcessVerifiedConfig, ProcessVerifiedGRPOTrainer
from trl_verigate.trainers.verigate import VeriGateConfig, VeriGateGRPOTrainer

__all__ = [
    "CoqProcessConfig",
    "CoqProcessGRPOTrainer",
    "LeanProcessConfig",
    "LeanProcessGRPOTrainer",
    "ProcessGRPOTrainer",
    "ProcessVerifiedConfig",
    "ProcessVerifiedGRPOTrainer",
    "ScoredBatch",
    "VeriGateConfig",
    "VeriGateGRPOTrainer",
]
