"""Toy multi-step arithmetic: GRPO, VeriGate, process-verified GRPO and ES from one warm start (design 3,
docs/experiments/design3.md).

Modules: `task` (seeded prompts and verified solutions), `oracle` (the checkers, the process oracle, the rewards and
VeriGate's noisy PRM), `policy` (tiny policy, SFT warm start, generation), `evaluation` (held-out metrics, the
checkpoint rule, the screening of hard prompts), `prerun` (the pre-run check), `preparation` (everything before the
RL runs, and its cache), `methods` (one training run per method), `provenance` (what a run records about its code),
`launch` (the whole experiment, `python -m experiments.toy_arithmetic.launch`), `analysis` (the decision rules),
`power` (their power), `report` (tables and plots), `credit_check` (advantages of a hand-made batch).
"""
