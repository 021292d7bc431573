"""trl-verigate: verifier-gated process rewards and Lean verification for Hugging Face TRL.

Names are resolved lazily so that `import trl_verigate` stays cheap (no TRL or torch import
until a trainer or tensor function is used).
"""

from importlib import import_module

__version__ = "0.1.0"

_EXPORTS = {
    "gated_groups": "trl_verigate.advantages",
    "future_cumulated_rewards": "trl_verigate.advantages",
    "group_normalized_step_advantages": "trl_verigate.advantages",
    "deepseekmath_step_advantages": "trl_verigate.advantages",
    "step_advantages_to_tokens": "trl_verigate.advantages",
    "process_step_advantages": "trl_verigate.advantages",
    "tactic_scores": "trl_verigate.advantages",
    "tactic_process_advantages": "trl_verigate.advantages",
    "tactic_advantages_to_tokens": "trl_verigate.advantages",
    "StepSpan": "trl_verigate.steps",
    "split_steps": "trl_verigate.steps",
    "token_char_offsets": "trl_verigate.steps",
    "token_step_ids": "trl_verigate.steps",
    "completion_step_token_ids": "trl_verigate.steps",
    "decode_with_offsets": "trl_verigate.steps",
    "span_token_ranges": "trl_verigate.steps",
    "StepScorer": "trl_verigate.rewards.prm",
    "QwenMathPRM": "trl_verigate.rewards.prm",
    "MathShepherdPRM": "trl_verigate.rewards.prm",
    "TokenClassificationPRM": "trl_verigate.rewards.prm",
    "SymbolicStepScorer": "trl_verigate.rewards.prm",
    "build_step_scorer": "trl_verigate.rewards.prm",
    "as_step_scorer": "trl_verigate.rewards.prm",
    "accuracy_reward": "trl_verigate.rewards.math",
    "MathAccuracyReward": "trl_verigate.rewards.math",
    "extract_gold_answer": "trl_verigate.rewards.math",
    "extract_predicted_answer": "trl_verigate.rewards.math",
    "VeriGateConfig": "trl_verigate.trainers.verigate",
    "VeriGateGRPOTrainer": "trl_verigate.trainers.verigate",
    "ProcessGRPOTrainer": "trl_verigate.trainers.process_grpo",
    "ProcessVerifiedConfig": "trl_verigate.trainers.process_verified",
    "ProcessVerifiedGRPOTrainer": "trl_verigate.trainers.process_verified",
    "LeanProcessConfig": "trl_verigate.trainers.lean_process",
    "LeanProcessGRPOTrainer": "trl_verigate.trainers.lean_process",
    "CoqProcessConfig": "trl_verigate.trainers.coq_process",
    "CoqProcessGRPOTrainer": "trl_verigate.trainers.coq_process",
    "CoqProofReward": "trl_verigate.rewards.coq",
    "CoqProcessOracle": "trl_verigate.rewards.coq",
    "CoqServer": "trl_verigate.coq",
    "CoqServerConfig": "trl_verigate.coq",
    "CoqProofRequest": "trl_verigate.coq",
    "LeanProofReward": "trl_verigate.rewards.lean",
    "LeanProcessOracle": "trl_verigate.rewards.lean",
    "ProcessOracle": "trl_verigate.rewards.process",
    "ProofReward": "trl_verigate.rewards.process",
    "ProcessVerdict": "trl_verigate.rewards.process",
    "Verifier": "trl_verigate.lean_server.service.verifier",
    "FileRequest": "trl_verigate.lean_server",
    "LeanServer": "trl_verigate.lean_server",
    "LeanServerConfig": "trl_verigate.lean_server",
    "LeanClient": "trl_verigate.lean_server",
    "ProofRequest": "trl_verigate.lean_server",
    "VerificationResult": "trl_verigate.lean_server",
    "Tactic": "trl_verigate.lean_server",
    "ESConfig": "trl_verigate.trainers.es",
    "ESTrainer": "trl_verigate.trainers.es",
    "es_noise": "trl_verigate.es.noise",
    "population_seeds": "trl_verigate.es.population",
    "shape_fitness": "trl_verigate.es.population",
    "es_update": "trl_verigate.es.update",
    "PassAtKCallback": "trl_verigate.evaluate.callback",
    "PassAtKArguments": "trl_verigate.evaluate.callback",
    "pass_at_k": "trl_verigate.evaluate.metrics",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'trl_verigate' has no attribute {name!r}")
