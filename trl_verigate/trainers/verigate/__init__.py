from trl_verigate.trainers.verigate.verigate_config import VeriGateConfig
from trl_verigate.trainers.verigate.verigate_trainer import VeriGateGRPOTrainer

__all__ = ["VeriGateConfig", "VeriGateGRPOTrainer"]
