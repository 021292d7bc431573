"""ProcessVerifiedGRPOTrainer with `pipelined_verification` (one step off-policy) against the default on-policy loop.

Completions come from a `rollout_func` that numbers its calls (each completion says which generation call made it)
and keeps a copy of the weights it generated with; the loss's inputs are recorded at every optimizer step. Checked
by hand and by an independent forward pass of a fresh copy of the tiny policy (not TRL's log-prob helper):

- pipelined, step 0 trains on the batch it generated (and waited for); every later step k trains exactly on the batch
  generated at step k - 1, with old log-probs equal to the generating weights' and not the current weights';
- a batch's verification is still under way when the next batch is generated (the oracle holds it until then);
- off (the default), step k trains on the batch it generated, with no old log-probs (TRL's on-policy default);
- a run resumed from a checkpoint refills the pipeline at its first step (the batch generated ahead is not saved);
- two batches in verification at once are collected oldest first, each verified once; a batch named by its handle
  is collected by it, and an evaluation during pipelined training collects its own verdicts even when its
  completions equal the pending training batch's;
- the first step's prompts are trained twice and the last step's never (as the help text says);
- num_tokens logged every two steps is the same, and the tokens of the batches trained, pipelined and on-policy;
- train() raising from a callback cancels the dropped batch's verification if it has not started;
- over 2 processes, every rank follows the same schedule (no hang, same batches per step);
- combinations the pipeline does not support are refused, naming the field and the fix, before any model loads
  (image columns also in a DatasetDict's splits and an IterableDataset's features).
"""

import asyncio
import concurrent.futures
import json
import os
import subprocess
import sys
import threading

import pytest
import torch
from datasets import Dataset, DatasetDict, IterableDataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

from tests.launch import TESTS_DIR, free_port, rollout_of_texts
from trl_verigate.rewards.lean import LeanProofReward
from trl_verigate.rewards.process import ProcessVerdict
from trl_verigate.trainers.process_verified import ProcessVerifiedConfig, ProcessVerifiedGRPOTrainer

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

G = 4
# Two prompts of the same token length, so TRL pads no prompt and a row's log-probs can be recomputed on its own.
PROMPTS = ["Prove: a + b = b + a", "Prove: a * b = b * a"]
# Completion k of a group; g = 1 exactly when it says "ok" (the oracle below).
TEMPLATES = ["call {call} ok by simp", "call {call} no", "call {call} ok by ring", "call {call} no no"]
G_OF = [1.0, 0.0, 1.0, 0.0]


class OkOracle:
    """passed exactly when the completion contains "ok" (no tactics, so advantages are A_out alone).

    The batch of generation call ``hold_call`` is held until ``release`` is set (at most 30 s, then recorded as not
    released): with pipelining, the next call's generation sets it while that batch is still verifying.
    """

    def __init__(self, hold_call=None):
        self.hold_call = hold_call
        self.release = threading.Event()
        self.released_in_time = None
        self.verified_calls = []

    def verify(self, prompts, rows, completions):
        call = int(completions[0].split()[1])
        self.verified_calls.append(call)
        if call == self.hold_call:
            self.released_in_time = self.release.wait(timeout=30)
        return [ProcessVerdict("passed" if "ok" in c else "failed") for c in completions]


class Recorder:
    """A rollout_func numbering its calls and keeping the weights of each, and a wrapper of `_compute_loss` keeping
    the inputs and weights of each micro-batch the loss receives."""

    def __init__(self, oracle):
        self.oracle = oracle
        self.calls = []  # (global_step, weights) per generation call, in order
        self.trained = []  # (global_step, inputs, weights) per micro-batch

    def rollout(self, prompts, trainer):
        call = len(self.calls) + 1
        if call == (self.oracle.hold_call or 0) + 1:
            self.oracle.release.set()
        self.calls.append((trainer.state.global_step, snapshot(trainer.model)))
        texts = [TEMPLATES[row % G].format(call=call) for row in range(len(prompts))]
        return rollout_of_texts(trainer.processing_class, prompts, texts)

    def wrap(self, trainer):
        compute = trainer._compute_loss

        def recorded(model, inputs):
            kept = {key: value.detach().clone() for key, value in inputs.items() if isinstance(value, torch.Tensor)}
            self.trained.append((trainer.state.global_step, kept, snapshot(trainer.model)))
            return compute(model, inputs)

        trainer._compute_loss = recorded


def snapshot(model) -> dict[str, torch.Tensor]:
    return {name: value.detach().clone() for name, value in model.state_dict().items()}


def train(
    tiny_models, tmp_path, pipelined, steps=3, gradient_accumulation_steps=1, hold_call=None, resume=None, **overrides
):
    trainer, recorder, oracle = build_trainer(
        tiny_models, tmp_path, pipelined, steps, gradient_accumulation_steps, hold_call, **overrides
    )
    trainer.train(resume_from_checkpoint=resume)
    return trainer, recorder, oracle


def build_trainer(
    tiny_models,
    tmp_path,
    pipelined,
    steps=3,
    gradient_accumulation_steps=1,
    hold_call=None,
    callbacks=None,
    **overrides,
):
    oracle = OkOracle(hold_call)
    recorder = Recorder(oracle)
    args = ProcessVerifiedConfig(
        output_dir=str(tmp_path / "out"),
        gradient_accumulation_steps=gradient_accumulation_steps,
        num_generations=G,
        max_completion_length=16,
        learning_rate=0.05,  # large, so that every update visibly moves the log-probs
        beta=0.0,
        report_to="none",
        use_cpu=True,
        bf16=False,  # float32 throughout, so the independent forward pass below agrees to float32 rounding
        seed=0,
        max_steps=steps,
        pipelined_verification=pipelined,
        **{
            "save_strategy": "no",
            "logging_steps": 1,
            "per_device_train_batch_size": 2 * G // gradient_accumulation_steps,
            **overrides,
        },
    )
    trainer = ProcessVerifiedGRPOTrainer(
        model=tiny_models["policy"],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS, "formal_statement": PROMPTS}),
        rollout_func=recorder.rollout,
        process_oracle=oracle,
        callbacks=callbacks,
    )
    recorder.wrap(trainer)
    return trainer, recorder, oracle


def trained_by_step(recorder) -> dict[int, list[dict]]:
    steps = {}
    for step, inputs, weights in recorder.trained:
        steps.setdefault(step, []).append((inputs, weights))
    return steps


def decoded_rows(tokenizer, inputs) -> list[str]:
    return tokenizer.batch_decode(inputs["completion_ids"], skip_special_tokens=True)


def policy_with(policy_path, weights):
    """A fresh copy of the tiny policy holding ``weights``."""
    model = AutoModelForCausalLM.from_pretrained(policy_path)
    model.load_state_dict(weights)
    return model.eval()


def independent_logps(model, prompt_ids, completion_ids) -> torch.Tensor:
    """log p(completion token t | prompt, completion[:t]), one unpadded sequence through the plain model."""
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logits = model(ids).logits[0].float()
    log_probs = torch.log_softmax(logits[len(prompt_ids) - 1 : -1], dim=-1)
    return log_probs.gather(1, torch.tensor(completion_ids).unsqueeze(1)).squeeze(1)


def assert_batch_of_call(tokenizer, inputs, call):
    """Every row is a completion of generation call ``call``; advantages are A_out of its group, by hand."""
    mean = sum(G_OF) / G
    std = (sum((g - mean) ** 2 for g in G_OF) / (G - 1)) ** 0.5
    for row, text in enumerate(decoded_rows(tokenizer, inputs)):
        assert text.startswith(f"call {call} "), (call, text)
        g = 1.0 if "ok" in text else 0.0
        length = int(inputs["completion_mask"][row].sum())
        expected = torch.zeros_like(inputs["advantages"][row])
        expected[:length] = (g - mean) / (std + 1e-4)
        assert torch.allclose(inputs["advantages"][row], expected, atol=1e-5), (call, row)


@pytest.mark.slow
@pytest.mark.parametrize("gradient_accumulation_steps", [1, 2])
def test_pipelined_trains_the_previous_steps_batch_with_its_generating_logps(
    tiny_models, tmp_path, gradient_accumulation_steps
):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["policy"])
    trainer, recorder, oracle = train(
        tiny_models, tmp_path, pipelined=True, gradient_accumulation_steps=gradient_accumulation_steps, hold_call=2
    )
    # Step 0 generates its own batch (call 1) and the next step's (call 2); step 1 generates call 3; the last step
    # generates nothing ahead.
    assert [step for step, _ in recorder.calls] == [0, 0, 1]
    by_step = trained_by_step(recorder)
    assert sorted(by_step) == [0, 1, 2]
    prompt_lengths = {len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in PROMPTS}
    assert len(prompt_lengths) == 1, "the prompts must tokenize to the same length (no prompt padding)"
    for step, micro_batches in by_step.items():
        assert len(micro_batches) == gradient_accumulation_steps
        call = step + 1  # step 0: its own batch, call 1; step k >= 1: the batch generated at step k - 1
        assert recorder.calls[call - 1][0] == max(step - 1, 0)
        rows_seen = []
        for inputs, current_weights in micro_batches:
            assert_batch_of_call(tokenizer, inputs, call)
            rows_seen += decoded_rows(tokenizer, inputs)
            if step == 0:
                assert "old_per_token_logps" not in inputs  # on-policy: TRL's default, ratio 1
                continue
            generating_model = policy_with(tiny_models["policy"], recorder.calls[call - 1][1])
            current_model = policy_with(tiny_models["policy"], current_weights)
            for row in range(inputs["completion_ids"].shape[0]):
                length = int(inputs["completion_mask"][row].sum())
                completion_ids = inputs["completion_ids"][row, :length].tolist()
                prompt_ids = inputs["prompt_ids"][row].tolist()
                old = inputs["old_per_token_logps"][row, :length]
                expected = independent_logps(generating_model, prompt_ids, completion_ids)
                assert torch.allclose(old, expected, atol=1e-5), (step, row, (old - expected).abs().max())
                # ... and not the weights being trained (one update later), which a wrong lag would give.
                current = independent_logps(current_model, prompt_ids, completion_ids)
                assert (old - current).abs().max() > 1e-3, (step, row)
        assert sorted(rows_seen) == sorted(TEMPLATES[k % G].format(call=call) for k in range(2 * G))
    # Call 2's verification was held until call 3 began generating, and the run went on: it overlapped step 1's
    # generation instead of being awaited before it.
    assert oracle.released_in_time is True
    assert sorted(oracle.verified_calls) == [1, 2, 3]  # each batch verified once
    staleness = [entry["pipeline/staleness"] for entry in trainer.state.log_history if "pipeline/staleness" in entry]
    assert staleness == [0.0, 1.0, 1.0]
    pass_rates = [entry["lean/pass_rate"] for entry in trainer.state.log_history if "lean/pass_rate" in entry]
    assert pass_rates == [0.5, 0.5, 0.5]


@pytest.mark.slow
def test_off_trains_each_step_on_its_own_batch_on_policy(tiny_models, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["policy"])
    trainer, recorder, oracle = train(tiny_models, tmp_path, pipelined=False)
    assert [step for step, _ in recorder.calls] == [0, 1, 2]
    for step, micro_batches in trained_by_step(recorder).items():
        for inputs, _ in micro_batches:
            assert_batch_of_call(tokenizer, inputs, step + 1)
            assert "old_per_token_logps" not in inputs
    assert not any("pipeline/staleness" in entry for entry in trainer.state.log_history)
    assert oracle.verified_calls == [1, 2, 3]


def test_pipelined_with_one_step_is_on_policy(tiny_models, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["policy"])
    _, recorder, _ = train(tiny_models, tmp_path, pipelined=True, steps=1)
    assert [step for step, _ in recorder.calls] == [0]  # nothing generated ahead for a step that will not come
    [(inputs, _)] = trained_by_step(recorder)[0]
    assert_batch_of_call(tokenizer, inputs, 1)
    assert "old_per_token_logps" not in inputs


@pytest.mark.slow
def test_pipelined_trains_the_first_steps_prompts_twice_and_never_the_last_steps(tiny_models, tmp_path):
    """What the help text of pipelined_verification states: one prompt per step, a different one each step; the
    batch trained at step k was generated from the prompt of step max(k - 1, 0)."""
    prompts = [f"Prove: fact {letter}" for letter in "ABC"]
    trainer, recorder, _ = build_trainer(
        tiny_models, tmp_path, pipelined=True, per_device_train_batch_size=G, shuffle_dataset=False
    )
    trainer.train_dataset = Dataset.from_dict({"prompt": prompts, "formal_statement": prompts})
    prompt_of_call = []
    generate = recorder.rollout

    def rollout(call_prompts, trainer):
        prompt_of_call.append(call_prompts[0])
        return generate(call_prompts, trainer)

    trainer.rollout_func = rollout
    trainer.train()
    tokenizer = trainer.processing_class
    trained = []
    for step, micro_batches in sorted(trained_by_step(recorder).items()):
        [(inputs, _)] = micro_batches
        call = int(decoded_rows(tokenizer, inputs)[0].split()[1])
        trained.append((step, prompt_of_call[call - 1]))
    # Steps 0, 1, 2 draw A, B, C: A trained at steps 0 and 1, B at step 2, C never.
    assert prompt_of_call == [prompts[0], prompts[0], prompts[1]]
    assert trained == [(0, prompts[0]), (1, prompts[0]), (2, prompts[1])]


@pytest.mark.slow
def test_resumed_run_refills_the_pipeline(tiny_models, tmp_path):
    """A checkpoint does not hold the batch generated ahead: the resumed run's first step generates its own batch,
    waits for it and trains on it on-policy, and generates the next step's, as at step 0."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["policy"])
    train(tiny_models, tmp_path, pipelined=True, steps=2, save_strategy="steps", save_steps=1)
    checkpoint = tmp_path / "out" / "checkpoint-1"
    assert checkpoint.is_dir()
    trainer, recorder, _ = train(tiny_models, tmp_path, pipelined=True, steps=3, resume=str(checkpoint))
    assert [step for step, _ in recorder.calls] == [1, 1]  # step 1 fills the pipeline, step 2 is the last
    by_step = trained_by_step(recorder)
    assert sorted(by_step) == [1, 2]
    [(first, _)] = by_step[1]
    assert_batch_of_call(tokenizer, first, 1)
    assert "old_per_token_logps" not in first
    [(second, _)] = by_step[2]
    assert_batch_of_call(tokenizer, second, 2)
    assert "old_per_token_logps" in second
    staleness = [entry["pipeline/staleness"] for entry in trainer.state.log_history if "pipeline/staleness" in entry]
    assert staleness[-2:] == [0.0, 1.0]


class GrowingRollout:
    """Call n's completions are n tokens " x" longer than the template; records each call's prompt + completion
    tokens (TRL's num_tokens counts both)."""

    def __init__(self):
        self.tokens_of_call = []

    def __call__(self, prompts, trainer):
        call = len(self.tokens_of_call) + 1
        texts = [TEMPLATES[row % G].format(call=0) + " x" * call for row in range(len(prompts))]
        rollout = rollout_of_texts(trainer.processing_class, prompts, texts)
        self.tokens_of_call.append(sum(map(len, rollout["prompt_ids"])) + sum(map(len, rollout["completion_ids"])))
        return rollout


@pytest.mark.slow
def test_num_tokens_logged_every_two_steps_counts_the_batches_trained(tiny_models, tmp_path):
    """TRL logs num_tokens, the running total of prompt + completion tokens generated, by assignment. With
    logging_steps=2, the log after step s (s = 2, 4) shows the tokens of the batches trained up to it, calls 1..s,
    pipelined as on-policy (step k trains call k + 1 in both)."""
    logged = {}
    for pipelined in (False, True):
        trainer, _, _ = build_trainer(tiny_models, tmp_path / str(pipelined), pipelined, steps=4, logging_steps=2)
        rollout = trainer.rollout_func = GrowingRollout()
        trainer.train()
        tokens = rollout.tokens_of_call
        assert len(tokens) == 4 and len(set(tokens)) == 4, tokens
        logged[pipelined] = [entry["num_tokens"] for entry in trainer.state.log_history if "num_tokens" in entry]
        assert logged[pipelined] == [sum(tokens[:2]), sum(tokens[:4])], pipelined
    assert logged[True] == logged[False]


class StopAfterFirstStep(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 1:
            raise RuntimeError("stopped by a callback")


@pytest.mark.slow
def test_verification_dropped_when_train_raises_does_not_start(tiny_models, tmp_path):
    """train() raising after step 0 drops the batch generated ahead (call 2): a verification not yet running is
    cancelled, so the oracle never sees it. The reward's pool is cut to one worker, kept busy from call 2's
    generation until after train() has raised, so call 2's verification is still queued when it is dropped."""
    trainer, recorder, oracle = build_trainer(tiny_models, tmp_path, pipelined=True, callbacks=[StopAfterFirstStep()])
    trainer.proof_reward._executor = concurrent.futures.ThreadPoolExecutor(1)
    worker_free = threading.Event()
    generate = recorder.rollout

    def rollout(prompts, trainer):
        if len(recorder.calls) == 1:  # call 2, generated ahead at step 0, after call 1's verification was queued
            trainer.proof_reward._executor.submit(worker_free.wait, 30)
        return generate(prompts, trainer)

    trainer.rollout_func = rollout
    with pytest.raises(RuntimeError, match="stopped by a callback"):
        trainer.train()
    assert [step for step, _ in recorder.calls] == [0, 0]
    worker_free.set()
    trainer.proof_reward._executor.shutdown(wait=True)
    assert oracle.verified_calls == [1]


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"num_iterations": 2}, "num_iterations=1"),
        ({"steps_per_generation": 2}, "steps_per_generation"),
        ({"generation_batch_size": 4 * G}, "steps_per_generation"),
        ({"generation_chunks": 2}, "generation_chunks=1"),
        ({"use_vllm": True}, "vllm_importance_sampling_correction=False"),
    ],
)
def test_unsupported_config_combinations_are_refused(tmp_path, overrides, named):
    base = {"output_dir": str(tmp_path), "use_cpu": True, "per_device_train_batch_size": 2 * G, "num_generations": G}
    with pytest.raises(ValueError, match=named) as error:
        ProcessVerifiedConfig(**base, **overrides, pipelined_verification=True)
    assert "pipelined_verification" in str(error.value)
    ProcessVerifiedConfig(**base, **overrides)  # fine without the pipeline


def test_vllm_without_importance_sampling_correction_is_accepted(tmp_path):
    config = ProcessVerifiedConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        use_vllm=True,
        vllm_importance_sampling_correction=False,
        pipelined_verification=True,
    )
    assert config.pipelined_verification


def add(a, b):
    """Adds.

    Args:
        a: a number.
        b: a number.
    """
    return a + b


IMAGE_DATASET = Dataset.from_dict({"prompt": ["x"], "image": [None]})


@pytest.mark.parametrize(
    ("trainer_kwargs", "named"),
    [
        ({"tools": [add]}, "tools="),
        ({"train_dataset": IMAGE_DATASET}, "image"),
        ({"train_dataset": DatasetDict(train=IMAGE_DATASET)}, "image"),
        ({"train_dataset": IMAGE_DATASET.to_iterable_dataset()}, "image"),  # its features are known
    ],
)
def test_unsupported_trainer_arguments_are_refused_before_the_model_loads(tmp_path, trainer_kwargs, named):
    args = ProcessVerifiedConfig(output_dir=str(tmp_path), use_cpu=True, pipelined_verification=True)
    # A model path that does not exist: loading it would raise OSError, so the ValueError comes first.
    with pytest.raises(ValueError, match=named) as error:
        ProcessVerifiedGRPOTrainer(
            model=str(tmp_path / "no-such-model"), args=args, process_oracle=OkOracle(), **trainer_kwargs
        )
    assert "pipelined_verification" in str(error.value)


def image_rows():
    yield {"prompt": "x", "image": None}


def test_an_iterable_dataset_without_features_is_not_refused(tmp_path):
    """Its columns cannot be known without reading it: it reaches the model load (which fails, no such model)."""
    args = ProcessVerifiedConfig(output_dir=str(tmp_path), use_cpu=True, pipelined_verification=True)
    dataset = IterableDataset.from_generator(image_rows)
    assert dataset.features is None
    with pytest.raises(OSError):
        ProcessVerifiedGRPOTrainer(
            model=str(tmp_path / "no-such-model"), args=args, process_oracle=OkOracle(), train_dataset=dataset
        )


class RowOracle:
    """passed exactly when the row says batch 1: two batches of identical completions answer differently."""

    def __init__(self):
        self.calls = 0

    def verify(self, prompts, rows, completions):
        self.calls += 1
        return [ProcessVerdict("passed" if row["batch"] == 1 else "failed") for row in rows]


def test_two_batches_in_flight_are_collected_oldest_first():
    oracle = RowOracle()
    reward = LeanProofReward(oracle)
    completions, prompts = ["same proof"] * 2, ["p"] * 2
    reward.start(prompts, completions, [{"batch": 1}] * 2)
    reward.start(prompts, completions, [{"batch": 2}] * 2)  # started before the first is collected
    assert asyncio.run(reward(prompts, completions)) == [1.0, 1.0]
    assert asyncio.run(reward(prompts, completions)) == [0.0, 0.0]
    assert oracle.calls == 2  # each collected from its own verification, none verified again
    assert not reward.is_pending(completions)


def test_a_batch_is_collected_by_its_handle_else_by_its_prompts_and_completions():
    oracle = RowOracle()
    reward = LeanProofReward(oracle)
    completions, prompts = ["same proof"] * 2, ["p"] * 2
    reward.start(prompts, completions, [{"batch": 1}] * 2)
    second = reward.start(prompts, completions, [{"batch": 2}] * 2)
    reward.collect_next(second)  # named: collected although an older batch has the same prompts and completions
    assert asyncio.run(reward(prompts, completions)) == [0.0, 0.0]
    # Other prompts, same completions: not the pending batch's verdicts; verified afresh from the reward's columns.
    assert asyncio.run(reward(["q"] * 2, completions, batch=[1, 1])) == [1.0, 1.0]
    assert oracle.calls == 3
    assert reward.is_pending(completions)  # the first batch, still waiting for its own call
    assert asyncio.run(reward(prompts, completions)) == [1.0, 1.0]
    assert oracle.calls == 3


@pytest.mark.slow
def test_two_processes_pipeline_in_step(tiny_models, tmp_path):
    script = TESTS_DIR / "scripts" / "lean_process_pipeline_two_process.py"
    port = free_port()
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1"]
    command += ["--master_port", str(port), str(script), tiny_models["policy"], str(tmp_path)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"2-process run failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    for rank in range(2):
        record = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert record["calls"] == [0, 0, 1], rank  # step 0 fills the pipeline, the last step generates nothing
        # Step k trains on call k + 1: its own batch at step 0, the previous step's after; old log-probs after step 0.
        assert record["trained"] == [[0, [1], False], [1, [2], True], [2, [3], True]], rank
        assert record["staleness"] == [0.0, 1.0, 1.0], rank


class SplitOracle:
    """passed exactly when the row is a training row and the completion says "ok": an evaluation batch whose
    completions equal a training batch's answers differently. Records the split of every batch it verifies."""

    def __init__(self):
        self.verified_splits = []

    def verify(self, prompts, rows, completions):
        self.verified_splits.append(rows[0]["split"])
        return [
            ProcessVerdict("passed" if row["split"] == "train" and "ok" in c else "failed")
            for row, c in zip(rows, completions, strict=True)
        ]


@pytest.mark.slow
@pytest.mark.parametrize("eval_prompts", [PROMPTS, ["Prove: a - b = b - a", "Prove: a / b = b / a"]])
def test_evaluation_never_collects_a_pipelined_training_batchs_verdicts(tiny_models, tmp_path, eval_prompts):
    """Evaluation during pipelined training generates the same completions as the training batch still verifying
    (same prompts or not): each batch is scored with its own verdicts."""

    def rollout(prompts, trainer):
        texts = [TEMPLATES[row % G].format(call=0) for row in range(len(prompts))]  # every call the same
        return rollout_of_texts(trainer.processing_class, prompts, texts)

    args = ProcessVerifiedConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2 * G,
        per_device_eval_batch_size=2 * G,
        num_generations=G,
        max_completion_length=16,
        beta=0.0,
        report_to="none",
        use_cpu=True,
        seed=0,
        save_strategy="no",
        logging_steps=1,
        max_steps=3,
        eval_strategy="steps",
        eval_steps=1,
        pipelined_verification=True,
    )
    oracle = SplitOracle()
    trainer = ProcessVerifiedGRPOTrainer(
        model=tiny_models["policy"],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS, "formal_statement": PROMPTS, "split": ["train"] * 2}),
        eval_dataset=Dataset.from_dict(
            {"prompt": eval_prompts, "formal_statement": eval_prompts, "split": ["eval"] * 2}
        ),
        rollout_func=rollout,
        process_oracle=oracle,
    )
    trainer.train()
    history = trainer.state.log_history
    # Training rows: "ok" in 2 of 4 completions of a group; evaluation rows never pass.
    assert [entry["lean/pass_rate"] for entry in history if "lean/pass_rate" in entry] == [0.5, 0.5, 0.5]
    assert [entry["eval_lean/pass_rate"] for entry in history if "eval_lean/pass_rate" in entry] == [0.0, 0.0, 0.0]
    # 3 training batches (step 0's own, then one generated ahead at steps 0 and 1) and 3 evaluations, each once.
    assert sorted(oracle.verified_splits) == ["eval"] * 3 + ["train"] * 3
