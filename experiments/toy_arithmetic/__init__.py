"""Toy multi-step arithmetic: GRPO, VeriGate, process-verified GRPO and ES from one warm start (issue 10).

Modules: `task` (seeded prompts and verified solutions), `oracle` (the arithmetic backend of the process oracle),
`policy` (tiny policy, SFT warm start, evaluation), `methods` (one training run per method), `launch` (the whole
comparison, `python -m experiments.toy_arithmetic.launch`), `report` (plots and the markdown table).
"""
