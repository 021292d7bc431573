from trl_verigate.trainers.process_grpo import ProcessGRPOTrainer, ScoredBatch
from trl_verigate.trainers.process_verified_grpo import (
    LeanProcessConfig,
    LeanProcessGRPOTrainer,
    ProcessVerifiedConfig,
    ProcessVerifiedGRPOTrainer,
)
from trl_verigate.trainers.verigate_grpo import VeriGateConfig, VeriGateGRPOTrainer

__all__ = [
    "LeanProcessConfig",
    "LeanProcessGRPOTrainer",
    "ProcessGRPOTrainer",
    "ProcessVerifiedConfig",
    "ProcessVerifiedGRPOTrainer",
    "ScoredBatch",
    "VeriGateConfig",
    "VeriGateGRPOTrainer",
]
