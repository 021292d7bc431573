from trl_verigate.trainers.es.es_config import ESConfig
from trl_verigate.trainers.es.es_trainer import ESTrainer

__all__ = ["ESConfig", "ESTrainer"]
