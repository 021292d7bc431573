from trl_verigate.trainers.lean_process_grpo import LeanProcessConfig, LeanProcessGRPOTrainer
from trl_verigate.trainers.process_grpo import ProcessGRPOTrainer, ScoredBatch
from trl_verigate.trainers.verigate_grpo import VeriGateConfig, VeriGateGRPOTrainer

__all__ = [
    "LeanProcessConfig",
    "LeanProcessGRPOTrainer",
    "ProcessGRPOTrainer",
    "ScoredBatch",
    "VeriGateConfig",
    "VeriGateGRPOTrainer",
]
