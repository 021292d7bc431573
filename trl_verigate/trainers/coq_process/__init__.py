from trl_verigate.trainers.coq_process.coq_process_config import CoqProcessConfig
from trl_verigate.trainers.coq_process.coq_process_trainer import CoqProcessGRPOTrainer

__all__ = ["CoqProcessConfig", "CoqProcessGRPOTrainer"]
