from trl_verigate.trainers.verigate_grpo import VeriGateConfig, VeriGateGRPOTrainer

__all__ = ["VeriGateConfig", "VeriGateGRPOTrainer"]
