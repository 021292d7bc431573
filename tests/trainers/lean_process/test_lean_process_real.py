"""One LeanProcessGRPOTrainer step against a real Lean REPL (core Lean, no Mathlib needed).

Runs when `TRL_VERIGATE_LEAN_REPL` names the REPL (and `TRL_VERIGATE_LEAN_PROJECT` the project), as
tests/lean_server/service/test_real_lean.py does; skipped otherwise:

    TRL_VERIGATE_LEAN_REPL=/path/to/repl/.lake/build/bin/repl TRL_VERIGATE_LEAN_PROJECT=/path/to/project \
        .venv/bin/python -m pytest -q tests/trainers/lean_process/test_lean_process_real.py

A group of two fixed completions (TRL's rollout_func): one proof Lean accepts, one whose second tactic fails. The
(B, T) advantages are checked against the paper's rules computed by hand from Lean's verdict.
"""

import os
import shutil
import statistics
from pathlib import Path

import pytest
import torch
from datasets import Dataset
from transformers import AutoTokenizer

from trl_verigate.lean_server import LeanServer, LeanServerConfig
from trl_verigate.lean_server.cli.options import resolve_project_dir, resolve_repl_command
from trl_verigate.trainers import LeanProcessConfig, LeanProcessGRPOTrainer

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

PROJECT_DIR = resolve_project_dir(None)
REPL_COMMAND = resolve_repl_command(None, PROJECT_DIR)
_missing = None
if REPL_COMMAND is None:
    _missing = "no Lean REPL configured or found; set TRL_VERIGATE_LEAN_REPL (setup: docs/lean_setup.md)"
elif shutil.which(REPL_COMMAND[0]) is None and not Path(REPL_COMMAND[0]).is_file():
    _missing = f"REPL command {REPL_COMMAND[0]!r} not found; set TRL_VERIGATE_LEAN_REPL"

pytestmark = [
    pytest.mark.lean,
    pytest.mark.slow,
    pytest.mark.skipif(_missing is not None, reason=_missing or ""),
    pytest.mark.timeout(1800),
]

D1, D2 = -0.05, -0.1
STATEMENT = "theorem real_steps (a b : Nat) (h₁ : a = 2) (h₂ : b = a + 1) : b = 3 := by"
# Completion shape (a): the proof body continuing the statement, up to the closing fence.
PASSING = "\n  subst h₁\n  subst h₂\n  rfl\n```"
FAILING = "\n  subst h₁\n  exact (rfl : 1 = 2)\n  rfl\n```"  # tactic 1 fails: phi = [d1, d2, d2]
TACTICS = {PASSING: ["subst h₁", "subst h₂", "rfl"], FAILING: ["subst h₁", "exact (rfl : 1 = 2)", "rfl"]}
PHI = {PASSING: [1.0, 1.0, 1.0], FAILING: [D1, D2, D2]}
G_OF = {PASSING: 1.0, FAILING: 0.0}


def rollout(prompts, trainer):
    tokenizer = trainer.processing_class
    texts = [[PASSING, FAILING][row % 2] for row in range(len(prompts))]
    return {
        "prompt_ids": [tokenizer(prompt, add_special_tokens=False)["input_ids"] for prompt in prompts],
        "completion_ids": [
            tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for t in texts
        ],
        "logprobs": None,
    }


def test_one_step_against_real_lean_gives_the_papers_advantages(tiny_models, tmp_path):
    config = LeanServerConfig(
        repl_command=REPL_COMMAND,
        project_dir=str(PROJECT_DIR),
        header="",
        workers=2,
        timeout=60.0,
        startup_timeout=900.0,
    )
    args = LeanProcessConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=64,
        beta=0.0,
        report_to="none",
        use_cpu=True,
        seed=0,
        save_strategy="no",
        max_steps=1,
        prover_timeout=60.0,
    )
    dataset = Dataset.from_dict({"prompt": [f"```lean4\n{STATEMENT}"], "formal_statement": [STATEMENT], "header": [""]})
    with LeanServer(config) as server:
        trainer = LeanProcessGRPOTrainer(
            model=tiny_models["policy"], args=args, train_dataset=dataset, rollout_func=rollout, verifier=server
        )
        trainer.model.train()
        output = trainer._generate_and_score_completions([dataset[0], dataset[0]])
    assert trainer._metrics["train"]["lean/pass_rate"][-1] == 0.5
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["policy"])
    g = [G_OF[PASSING], G_OF[FAILING]]
    mean, std = statistics.mean(g), statistics.stdev(g)
    for row, completion in enumerate([PASSING, FAILING]):
        encoding = tokenizer(completion, add_special_tokens=False, return_offsets_mapping=True)
        expected = torch.zeros(output["advantages"].shape[1])
        expected[: len(encoding["input_ids"]) + 1] = (G_OF[completion] - mean) / (std + 1e-4)
        position = 0
        for tactic, score in zip(TACTICS[completion], PHI[completion], strict=True):
            start = completion.index(tactic, position)
            position = start + len(tactic)
            first = next(i for i, (_, end) in enumerate(encoding["offset_mapping"]) if end > start)
            expected[first] += score - mean
        assert torch.allclose(output["advantages"][row], expected, atol=1e-5), row
