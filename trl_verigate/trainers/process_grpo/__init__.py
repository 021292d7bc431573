from trl_verigate.trainers.process_grpo.process_grpo_trainer import GeneratedBatch, ProcessGRPOTrainer, ScoredBatch

__all__ = ["GeneratedBatch", "ProcessGRPOTrainer", "ScoredBatch"]
