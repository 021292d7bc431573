from trl_verigate.trainers.lean_process.lean_process_config import LeanProcessConfig
from trl_verigate.trainers.lean_process.lean_process_trainer import LeanProcessGRPOTrainer

__all__ = ["LeanProcessConfig", "LeanProcessGRPOTrainer"]
