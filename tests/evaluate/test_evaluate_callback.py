"""`PassAtKCallback` inside a short VeriGate training run on CPU: it evaluates on its steps and logs `eval/pass@k`
through the trainer's loggers, without touching the training run's random stream; recipes configure it with
`PassAtKArguments`."""

import json
import os

import pytest
import torch
from datasets import Dataset
from transformers import HfArgumentParser, TrainerCallback

from tests.launch import TESTS_DIR
from trl_verigate.evaluate import PassAtKArguments, PassAtKCallback
from trl_verigate.evaluate.generation import SamplingConfig
from trl_verigate.evaluate.problems import math_problems
from trl_verigate.evaluate.runner import Evaluation
from trl_verigate.rewards.prm import SymbolicStepScorer
from trl_verigate.trainers import VeriGateConfig, VeriGateGRPOTrainer

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

PROBLEMS = [
    {"problem": "What is 2 + 3?", "answer": "5"},
    {"problem": "What is 4 * 4?", "answer": "16"},
    {"problem": "What is 9 - 7?", "answer": "2"},
]


class ParityScorer:
    """An attempt is correct when its completion has an even number of characters; keeps every row it scored."""

    def __init__(self):
        self.rows = []

    def submit(self, problem, attempt, completion, on_row):
        row = {"problem_id": problem.id, "attempt": attempt, "correct": len(completion) % 2 == 0, "status": "x"}
        self.rows.append(row)
        on_row(row)

    def drain(self):
        pass

    def close(self):
        pass


class LogRecorder(TrainerCallback):
    def __init__(self):
        self.logs = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        self.logs.append((state.global_step, dict(logs or {})))


def make_trainer(tiny_models, tmp_path, max_steps=2):
    args = VeriGateConfig(
        output_dir=str(tmp_path / "run"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        learning_rate=1e-5,
        beta=0.0,
        report_to="none",
        use_cpu=True,
        seed=0,
        save_strategy="no",
        logging_steps=1,
        max_steps=max_steps,
        prm_type="symbolic",
    )
    prompts = [[{"role": "user", "content": row["problem"]}] for row in PROBLEMS]
    return VeriGateGRPOTrainer(
        model=tiny_models["policy"],
        reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        process_reward_model=SymbolicStepScorer(),
    )


@pytest.mark.slow
def test_callback_logs_pass_at_1_during_a_verigate_run(tiny_models, tmp_path):
    trainer = make_trainer(tiny_models, tmp_path)
    scorer = ParityScorer()
    evaluation = Evaluation("math", math_problems(PROBLEMS), scorer, n=2, ks=[1, 2])
    callback = PassAtKCallback(trainer, evaluation, SamplingConfig(max_new_tokens=6), eval_steps=1, batch_size=4)
    recorder = LogRecorder()
    trainer.add_callback(callback)
    trainer.add_callback(recorder)
    trainer.train()

    evaluated = [(step, logs) for step, logs in recorder.logs if "eval/pass@1" in logs]
    assert [step for step, _ in evaluated] == [1, 2]
    # Each evaluation scored every problem twice; pass@1 is the mean fraction correct, pass@2 the fraction of
    # problems with a correct attempt, computed here from the scorer's own rows.
    for round_index, (_, logs) in enumerate(evaluated):
        rows = scorer.rows[round_index * 6 : (round_index + 1) * 6]
        assert sorted((r["problem_id"], r["attempt"]) for r in rows) == [(p, a) for p in "012" for a in range(2)]
        by_problem = {p: [r["correct"] for r in rows if r["problem_id"] == p] for p in "012"}
        assert logs["eval/pass@1"] == pytest.approx(sum(sum(c) / 2 for c in by_problem.values()) / 3)
        assert logs["eval/pass@2"] == pytest.approx(sum(any(c) for c in by_problem.values()) / 3)
    # The evaluation row is its own: the training rows still carry the step's loss and VeriGate metrics.
    training_rows = [logs for _, logs in recorder.logs if "loss" in logs]
    assert len(training_rows) == 2 and all("verigate/gate_rate" in logs for logs in training_rows)
    assert all("loss" not in logs for _, logs in evaluated)
    assert [entry["step"] for entry in trainer.state.log_history if "eval/pass@1" in entry] == [1, 2]


def test_an_evaluation_leaves_the_training_rng_alone(tiny_models, tmp_path):
    trainer = make_trainer(tiny_models, tmp_path)
    evaluation = Evaluation("math", math_problems(PROBLEMS[:1]), ParityScorer(), n=2, ks=[1])
    callback = PassAtKCallback(trainer, evaluation, SamplingConfig(max_new_tokens=4), eval_steps=5)
    trainer.model.train()
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = callback.run()
    assert torch.equal(torch.get_rng_state(), state)
    assert first == callback.run()  # seeded by the step: the same policy at the same step samples the same
    assert trainer.model.training  # back in training mode after sampling in eval mode


def test_recipe_arguments_build_the_callback(tiny_models, tmp_path):
    data = tmp_path / "math500.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in PROBLEMS))
    (arguments,) = HfArgumentParser(PassAtKArguments).parse_dict(
        {
            "pass_at_k_dataset": str(data),
            "pass_at_k_n": 2,
            "pass_at_k_k": "1,2",
            "pass_at_k_steps": 3,
            "pass_at_k_max_new_tokens": 4,
            "pass_at_k_limit": 2,
        }  # fmt: skip
    )
    trainer = make_trainer(tiny_models, tmp_path)
    callback = PassAtKCallback.from_arguments(trainer, arguments)
    assert callback.eval_steps == 3 and callback.evaluation.ks == [1, 2]
    assert [problem.gold for problem in callback.evaluation.problem_set.problems] == ["5", "16"]
    metrics = callback.run()
    assert set(metrics) == {"accuracy", "pass@1", "pass@2", "maj@1", "maj@2"}
    with pytest.raises(ValueError, match="pass_at_k_k: k=4 is larger than pass_at_k_n=2"):
        PassAtKCallback.from_arguments(trainer, PassAtKArguments(pass_at_k_dataset=str(data), pass_at_k_n=2,
                                                                 pass_at_k_k="4"))  # fmt: skip
    with pytest.raises(ValueError, match="pass_at_k_steps"):
        PassAtKCallback(trainer, callback.evaluation, SamplingConfig())  # the trainer has no eval_steps either
    trainer.args.eval_steps = 2.0  # how TrainingArguments holds `eval_steps: 2` from a YAML
    assert PassAtKCallback(trainer, callback.evaluation, SamplingConfig()).eval_steps == 2


def test_a_fractional_eval_steps_becomes_steps_when_training_begins(tiny_models, tmp_path):
    trainer = make_trainer(tiny_models, tmp_path, max_steps=8)
    evaluation = Evaluation("math", math_problems(PROBLEMS[:1]), ParityScorer(), n=1, ks=[1])
    trainer.args.eval_steps = 0.25  # TrainingArguments: a quarter of the run, 8 steps -> every 2
    callback = PassAtKCallback(trainer, evaluation, SamplingConfig(max_new_tokens=4))
    trainer.state.compute_steps(trainer.args, 8)  # what Trainer.train does before on_train_begin
    callback.on_train_begin(trainer.args, trainer.state, trainer.control)
    assert callback.eval_steps == 2
    # An explicit step count must be whole: a fraction there is refused, naming the field.
    with pytest.raises(ValueError, match="pass_at_k_steps: the evaluation needs a whole number of steps >= 1, got 0.5"):
        PassAtKCallback(trainer, evaluation, SamplingConfig(), eval_steps=0.5)


def test_lean_arguments_use_the_prompt_and_proof_settings_the_policy_trains_with(tiny_models, tmp_path):
    from trl_verigate.lean_server import LeanClient
    from trl_verigate.rewards.lean_proofs import format_prompt

    rows = [{"name": "t", "split": "test", "informal_prefix": "", "theorem": "theorem t : 1 = 1 := by\n",
             "goal": "⊢ 1 = 1", "header": "import Mathlib\n", "hdr": "import Mathlib\nopen Nat\n"}]  # fmt: skip
    data = tmp_path / "lean.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    trainer = make_trainer(tiny_models, tmp_path)
    # The Lean trainer's config fields (ProcessVerifiedConfig), as a Kimina-style conversational run sets them.
    trainer.args.statement_field, trainer.args.header_field = "theorem", "hdr"
    trainer.args.completion_format, trainer.args.prover_timeout = "fenced_block", 7.0
    arguments = PassAtKArguments(pass_at_k_dataset=str(data), pass_at_k_task="lean", pass_at_k_n=1, pass_at_k_steps=1)
    template = "Prove:\n{theorem}"
    callback = PassAtKCallback.from_arguments(
        trainer, arguments, verifier=LeanClient(["http://127.0.0.1:9"]), prompt_template=template, conversational=True
    )
    (problem,) = callback.evaluation.problem_set.problems
    assert problem.prompt == format_prompt(rows[0], template, conversational=True)
    assert problem.prompt == [{"role": "user", "content": "Prove:\ntheorem t : 1 = 1 := by\n"}]
    scorer = callback.evaluation.scorer
    assert (scorer.statement_field, scorer.header_field) == ("theorem", "hdr")
    assert (scorer.completion_format, scorer.timeout) == ("fenced_block", 7.0)
    scorer.close()


def test_equal_shares_pad_the_short_blocks_with_attempts_that_are_not_counted():
    from trl_verigate.evaluate.callback import equal_share

    shares = [equal_share(5, 2, rank, n=2) for rank in range(2)]
    assert shares[0] == [(0, [0, 1]), (1, [0, 1]), (2, [0, 1])]
    assert shares[1] == [(3, [0, 1]), (4, [0, 1]), (3, [2, 3])]  # padding: attempts >= n, dropped by compute_metrics
    assert equal_share(1, 3, 2, n=1) == [(0, [1])]  # a process without problems still generates once


@pytest.mark.slow
def test_processes_of_an_fsdp2_policy_make_the_same_generate_calls(tiny_models, tmp_path):
    """3 problems on 2 processes with FSDP2: unequal shares would leave one process in a forward pass that waits for
    the other forever (the launch times out); equal shares finish with the same metrics on both."""
    import subprocess
    import sys

    from tests.launch import free_port

    script = TESTS_DIR / "scripts" / "pass_at_k_fsdp2.py"
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
               "--master_port", str(free_port()), str(script), tiny_models["policy"], str(tmp_path)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    try:
        result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail("the processes hung: one made a generate call the other did not")
    assert result.returncode == 0, result.stderr[-4000:]
    records = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]
    assert records[0]["calls"] == records[1]["calls"] == [2, 2]  # 2 problems' 2 attempts each, 2 per call
    assert records[0]["metrics"] == records[1]["metrics"]
    assert set(records[0]["metrics"]) == {"accuracy", "pass@1", "pass@2", "maj@1", "maj@2"}
