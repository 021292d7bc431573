"""`trl-verigate evaluate`: pass@k of Lean and Coq provers, accuracy/maj@k/pass@k on math, from the command line or
during training (`PassAtKCallback`).

Modules, one job each: `metrics` (pass@k, maj@k, bootstrap intervals: pure functions), `problems` (datasets and
formats), `generation` (HF and vLLM backends), `proof_scoring` (a prover's verdicts, concurrently) with
`lean_scoring` and `coq_scoring`, and `math_scoring` (one row per attempt), `outputs`
(samples.jsonl, resume, summary, table), `plot`, `runner` (one evaluation), `callback`, `command` (the CLI).
Names resolve lazily, so importing the package loads neither torch nor transformers.
"""

from importlib import import_module

_EXPORTS = {
    "pass_at_k": "trl_verigate.evaluate.metrics",
    "majority_index": "trl_verigate.evaluate.metrics",
    "bootstrap_ci": "trl_verigate.evaluate.metrics",
    "pass_at_k_metrics": "trl_verigate.evaluate.metrics",
    "maj_at_k_metrics": "trl_verigate.evaluate.metrics",
    "Evaluation": "trl_verigate.evaluate.runner",
    "evaluate": "trl_verigate.evaluate.runner",
    "compute_metrics": "trl_verigate.evaluate.runner",
    "HFBackend": "trl_verigate.evaluate.generation",
    "VLLMBackend": "trl_verigate.evaluate.generation",
    "SamplingConfig": "trl_verigate.evaluate.generation",
    "LeanScorer": "trl_verigate.evaluate.lean_scoring",
    "CoqScorer": "trl_verigate.evaluate.coq_scoring",
    "MathScorer": "trl_verigate.evaluate.math_scoring",
    "lean_problems": "trl_verigate.evaluate.problems",
    "coq_problems": "trl_verigate.evaluate.problems",
    "math_problems": "trl_verigate.evaluate.problems",
    "load_rows": "trl_verigate.evaluate.problems",
    "PassAtKArguments": "trl_verigate.evaluate.callback",
    "PassAtKCallback": "trl_verigate.evaluate.callback",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'trl_verigate.evaluate' has no attribute {name!r}")
