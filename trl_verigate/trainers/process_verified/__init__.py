from trl_verigate.trainers.process_verified.process_verified_config import ProcessVerifiedConfig
from trl_verigate.trainers.process_verified.process_verified_trainer import ProcessVerifiedGRPOTrainer
from trl_verigate.trainers.process_verified.provers import PROVERS, Prover, VerifierUnavailable

__all__ = ["PROVERS", "ProcessVerifiedConfig", "ProcessVerifiedGRPOTrainer", "Prover", "VerifierUnavailable"]
