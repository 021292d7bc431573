"""VeriGateGRPOTrainer on CPU with the tiny policy.

Most tests bypass sampling with a fixed `rollout_func` (TRL's hook for custom generation), so completions, step
splits and PRM scores are known and the advantages can be checked against hand arithmetic
(tests/scripts/verigate_reference.py). One test runs `trainer.train()` with real sampling.
"""

import math
import os

import pytest
import torch
import yaml
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from tests.launch import REPO_ROOT
from tests.scripts.verigate_reference import reference_step_advantages
from trl_verigate.rewards.prm import SymbolicStepScorer
from trl_verigate.steps import completion_step_token_ids
from trl_verigate.trainers import ProcessVerifiedConfig, VeriGateConfig, VeriGateGRPOTrainer

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func warns that it is experimental

NUM_GENERATIONS = 4
EASY, HARD = "What is 2 + 2?", "Prove that 7 is prime."
# One completion per position in a group: different lengths (so a length reward separates every group) and
# different numbers of "\n\n"-separated steps (so the process advantages differ per step).
COMPLETIONS = [
    "Add the numbers.\n\nThe sum is 4.",
    "Guess 5.",
    "Write 2 + 2.\n\nCount up: 3, 4.\n\nThe answer is 4.",
    "Think hard.\n\nAnswer 22.",
]


def fixed_rollout(prompts, trainer):
    """Completion k of every group is COMPLETIONS[k]; rows arrive grouped, G consecutive rows per prompt."""
    tokenizer = trainer.processing_class
    prompt_ids, completion_ids = [], []
    for row, prompt in enumerate(prompts):
        if isinstance(prompt, list):
            text = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        else:
            text = prompt
        prompt_ids.append(tokenizer(text, add_special_tokens=False)["input_ids"])
        completion = COMPLETIONS[row % NUM_GENERATIONS]
        completion_ids.append(tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])
    return {"prompt_ids": prompt_ids, "completion_ids": completion_ids, "logprobs": None}


def length_reward(completions, **kwargs):
    """Separates every group: the fixed completions all have different lengths."""
    return [float(len(_text(completion))) for completion in completions]


def easy_only_reward(prompts, completions, **kwargs):
    """Verifier that solves only the easy prompt: the hard prompt's group is all 0, hence gated."""
    return [float(len(_text(c))) if EASY in _text(p) else 0.0 for p, c in zip(prompts, completions, strict=True)]


def zero_reward(completions, **kwargs):
    return [0.0] * len(completions)


def one_reward(completions, **kwargs):
    return [1.0] * len(completions)


def _text(prompt_or_completion) -> str:
    if isinstance(prompt_or_completion, str):
        return prompt_or_completion
    return prompt_or_completion[-1]["content"]


class RecordingScorer:
    """Deterministic PRM: the score of a step depends on its text only. Records every call."""

    def __init__(self):
        self.calls = []

    def score(self, prompts, steps):
        scores = [[1.0 / (1.0 + len(step.strip())) + 0.1 * index for index, step in enumerate(row)] for row in steps]
        self.calls.append({"prompts": list(prompts), "steps": [list(row) for row in steps], "scores": scores})
        return scores

    @property
    def scored_rows(self):
        return [scores for call in self.calls for scores in call["scores"]]


COMMON_ARGS = dict(
    per_device_train_batch_size=2 * NUM_GENERATIONS,
    num_generations=NUM_GENERATIONS,
    max_completion_length=24,
    learning_rate=1e-5,
    beta=0.0,
    report_to="none",
    use_cpu=True,
    bf16=False,
    seed=0,
    save_strategy="no",
    logging_steps=1,
    max_steps=1,
)


def make_trainer(
    tiny_models,
    tmp_path,
    trainer_class=VeriGateGRPOTrainer,
    reward_funcs=easy_only_reward,
    scorer=None,
    rollout=fixed_rollout,
    trainer_kwargs=None,
    **config_overrides,
):
    config_class = VeriGateConfig if trainer_class is VeriGateGRPOTrainer else GRPOConfig
    args = config_class(output_dir=str(tmp_path / trainer_class.__name__), **{**COMMON_ARGS, **config_overrides})
    extra = dict(trainer_kwargs or {})
    if trainer_class is VeriGateGRPOTrainer and "process_reward_model" not in extra:
        extra["process_reward_model"] = scorer if scorer is not None else RecordingScorer()
    trainer = trainer_class(
        model=tiny_models["policy"],
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": [EASY, HARD]}),
        rollout_func=rollout,
        **extra,
    )
    trainer.model.train()
    return trainer


def generation_batch(prompts=(EASY, HARD)):
    return [{"prompt": prompt} for prompt in prompts for _ in range(NUM_GENERATIONS)]


def score_batch(trainer, prompts=(EASY, HARD)):
    torch.manual_seed(0)
    return trainer._generate_and_score_completions(generation_batch(prompts))


def expected_token_advantages(tokenizer, output, group_rows, group_scores, normalization):
    """(rows, T) advantages of one gated group from the reference step advantages and the step id of each token."""
    step_advantages = reference_step_advantages(group_scores, normalization)
    _, step_ids = completion_step_token_ids(tokenizer, output["completion_ids"], output["completion_mask"])
    expected = torch.zeros(len(group_rows), output["completion_ids"].shape[1])
    for position, row in enumerate(group_rows):
        for token, step in enumerate(step_ids[row].tolist()):
            if step >= 0 and output["completion_mask"][row, token]:
                expected[position, token] = step_advantages[position][step]
    return expected


@pytest.mark.parametrize("scale_rewards", ["group", "batch", "none"])
@pytest.mark.parametrize("loss_type", ["grpo", "dapo"])
def test_non_gated_groups_keep_trl_advantages(tiny_models, tmp_path, scale_rewards, loss_type):
    config = dict(scale_rewards=scale_rewards, loss_type=loss_type)
    # Every group separated: the output must be TRL's, shape included.
    trl_out = score_batch(make_trainer(tiny_models, tmp_path, GRPOTrainer, reward_funcs=length_reward, **config))
    scorer = RecordingScorer()
    ours = score_batch(make_trainer(tiny_models, tmp_path, reward_funcs=length_reward, scorer=scorer, **config))
    assert torch.equal(ours["completion_ids"], trl_out["completion_ids"])
    assert ours["advantages"].shape == trl_out["advantages"].shape == (2 * NUM_GENERATIONS,)
    assert torch.equal(ours["advantages"], trl_out["advantages"])
    assert trl_out["advantages"].abs().sum() > 0
    assert scorer.calls == []

    # The hard group gated: the easy group's rows are still TRL's advantages, broadcast over the tokens.
    trl_out = score_batch(make_trainer(tiny_models, tmp_path, GRPOTrainer, reward_funcs=easy_only_reward, **config))
    ours = score_batch(make_trainer(tiny_models, tmp_path, reward_funcs=easy_only_reward, **config))
    mask = ours["completion_mask"].float()
    assert ours["advantages"].shape == ours["completion_ids"].shape
    easy_rows = slice(0, NUM_GENERATIONS)
    assert torch.equal(ours["advantages"][easy_rows], trl_out["advantages"][easy_rows, None] * mask[easy_rows])


@pytest.mark.parametrize("normalization", ["verigate", "deepseekmath"])
def test_gated_group_gets_hand_computed_token_advantages(tiny_models, tmp_path, tokenizer, normalization):
    scorer = RecordingScorer()
    trainer = make_trainer(tiny_models, tmp_path, scorer=scorer, advantage_normalization=normalization)
    output = score_batch(trainer)

    hard_rows = list(range(NUM_GENERATIONS, 2 * NUM_GENERATIONS))
    assert len(scorer.calls) == 1
    assert scorer.calls[0]["prompts"] == [HARD] * NUM_GENERATIONS
    assert [len(steps) for steps in scorer.calls[0]["steps"]] == [2, 1, 3, 2]
    assert ["".join(steps).replace("\n", "") for steps in scorer.calls[0]["steps"]] == [
        completion.replace("\n", "") for completion in COMPLETIONS
    ]
    expected = expected_token_advantages(tokenizer, output, hard_rows, scorer.scored_rows, normalization)
    actual = output["advantages"][hard_rows]
    assert actual.abs().sum() > 0
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
    # Padding carries no advantage.
    assert (output["advantages"][output["completion_mask"] == 0] == 0).all()
    # The completions table shows the mean token advantage of each gated completion instead of TRL's 0.
    mask = output["completion_mask"][hard_rows].float()
    logged = list(trainer._logs["advantages"])[-NUM_GENERATIONS:]
    torch.testing.assert_close(torch.tensor(logged), (expected * mask).sum(1) / mask.sum(1), rtol=1e-5, atol=1e-6)


def test_non_gated_rows_with_more_steps_than_any_gated_row(tiny_models, tmp_path, tokenizer):
    """The gated rows fix the width of the step tensor; longer non-gated rows must still keep GRPO's advantages."""
    many_steps = "One.\n\nTwo.\n\nThree.\n\nFour.\n\nFive."

    def rollout(prompts, trainer):
        result = fixed_rollout(prompts, trainer)
        for row, prompt in enumerate(prompts):
            if EASY in _text(prompt):  # the non-gated group: 5 steps, more than any hard completion has
                completion = many_steps + " " * (row % NUM_GENERATIONS)  # distinct lengths separate the group
                result["completion_ids"][row] = tokenizer(completion, add_special_tokens=False)["input_ids"] + [
                    tokenizer.eos_token_id
                ]
        return result

    scorer = RecordingScorer()
    trl_out = score_batch(make_trainer(tiny_models, tmp_path, GRPOTrainer, rollout=rollout))
    ours = score_batch(make_trainer(tiny_models, tmp_path, scorer=scorer, rollout=rollout))
    assert [len(steps) for steps in scorer.calls[0]["steps"]] == [2, 1, 3, 2]
    easy_rows = slice(0, NUM_GENERATIONS)
    mask = ours["completion_mask"].float()
    assert trl_out["advantages"][easy_rows].abs().sum() > 0
    assert torch.equal(ours["advantages"][easy_rows], trl_out["advantages"][easy_rows, None] * mask[easy_rows])
    hard_rows = list(range(NUM_GENERATIONS, 2 * NUM_GENERATIONS))
    expected = expected_token_advantages(tokenizer, ours, hard_rows, scorer.scored_rows, "verigate")
    torch.testing.assert_close(ours["advantages"][hard_rows], expected, rtol=1e-5, atol=1e-6)


def test_only_scored_completions_are_split_into_steps(tiny_models, tmp_path, monkeypatch):
    # Decoding and offset mapping cost time on every step; the easy group is not gated, so it is never split.
    import trl_verigate.steps as steps_module

    split_rows = []

    def counting_split(tokenizer, completion_ids, completion_mask, **kwargs):
        split_rows.append(len(completion_ids))
        return completion_step_token_ids(tokenizer, completion_ids, completion_mask, **kwargs)

    monkeypatch.setattr(steps_module, "completion_step_token_ids", counting_split)
    output = score_batch(make_trainer(tiny_models, tmp_path))
    assert split_rows == [NUM_GENERATIONS]
    assert output["advantages"][NUM_GENERATIONS:].abs().sum() > 0


def test_both_normalizations_differ_as_computed_by_hand(tiny_models, tmp_path, tokenizer):
    """The hard group's steps (2, 1, 3, 2 of them) get step scores r = [1, 0], [1], [0, 0, 1], [0, 1].

    verigate cumulates first: c = [1, 0], [1], [1, 1, 1], [1, 1]; seven 1s and one 0, mean 7/8, sample variance
    ((7 * (1/8)^2 + (7/8)^2) / 7 = 1/8, so std = sqrt(1/8), and A = (1/8) / std for c = 1, -(7/8) / std for c = 0.
    deepseekmath normalizes r first: four 1s, four 0s, mean 1/2, variance (8 * 1/4) / 7 = 2/7, so r~ = +-a with
    a = (1/2) / sqrt(2/7); then suffix sums: [0, -a], [a], [-a, 0, a], [0, a].
    """
    step_scores = [[1.0, 0.0], [1.0], [0.0, 0.0, 1.0], [0.0, 1.0]]

    class FixedScorer:
        def score(self, prompts, steps):
            assert [len(row) for row in steps] == [len(row) for row in step_scores]
            return step_scores

    eps = 1e-4  # added to the std, as in GRPO
    std_c, std_r = math.sqrt(1 / 8), math.sqrt(2 / 7)
    high, low = (1 / 8) / (std_c + eps), -(7 / 8) / (std_c + eps)
    a = (1 / 2) / (std_r + eps)
    by_hand = {
        "verigate": [[high, low], [high], [high, high, high], [high, high]],
        "deepseekmath": [[0.0, -a], [a], [-a, 0.0, a], [0.0, a]],
    }
    hard_rows = list(range(NUM_GENERATIONS, 2 * NUM_GENERATIONS))
    advantages = {}
    for normalization, step_advantages in by_hand.items():
        trainer = make_trainer(tiny_models, tmp_path, scorer=FixedScorer(), advantage_normalization=normalization)
        output = score_batch(trainer)
        _, step_ids = completion_step_token_ids(tokenizer, output["completion_ids"], output["completion_mask"])
        expected = torch.zeros(NUM_GENERATIONS, output["completion_ids"].shape[1])
        for position, row in enumerate(hard_rows):
            for token, step in enumerate(step_ids[row].tolist()):
                if step >= 0 and output["completion_mask"][row, token]:
                    expected[position, token] = step_advantages[position][step]
        advantages[normalization] = output["advantages"][hard_rows]
        torch.testing.assert_close(advantages[normalization], expected, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(advantages["verigate"], advantages["deepseekmath"])


def test_no_prm_call_when_no_group_is_gated(tiny_models, tmp_path):
    scorer = RecordingScorer()
    trainer = make_trainer(tiny_models, tmp_path, reward_funcs=length_reward, scorer=scorer)
    score_batch(trainer)
    assert scorer.calls == []
    metrics = trainer._metrics["train"]
    assert metrics["verigate/gate_rate"] == [0.0]
    assert metrics["verigate/prm_completions_scored"] == [0.0]
    assert "verigate/prm_step_score_mean" not in metrics
    assert "verigate/prm_verifier_agreement" not in metrics


def test_all_equal_gate_also_gates_all_correct_groups(tiny_models, tmp_path):
    zero_scorer, equal_scorer = RecordingScorer(), RecordingScorer()
    all_zero = make_trainer(tiny_models, tmp_path, reward_funcs=one_reward, scorer=zero_scorer, gate="all_zero")
    all_equal = make_trainer(tiny_models, tmp_path, reward_funcs=one_reward, scorer=equal_scorer, gate="all_equal")
    assert score_batch(all_zero)["advantages"].dim() == 1
    assert zero_scorer.calls == []
    assert all_zero._metrics["train"]["verigate/gate_rate"] == [0.0]
    assert all_zero._metrics["train"]["verigate/frac_zero_std_outcome"] == [1.0]

    output = score_batch(all_equal)
    assert output["advantages"].dim() == 2
    assert len(equal_scorer.scored_rows) == 2 * NUM_GENERATIONS
    assert all_equal._metrics["train"]["verigate/gate_rate"] == [1.0]


def test_gate_none_is_trl_grpo_bit_for_bit(tiny_models, tmp_path):
    """`gate: none` is a plain-GRPO ablation: on a batch whose hard group all_zero would gate, the advantages and the
    loss are TRL's GRPOTrainer's exactly, and no PRM loads (its path does not even exist)."""
    trl_trainer = make_trainer(tiny_models, tmp_path, GRPOTrainer, reward_funcs=easy_only_reward)
    ours_trainer = make_trainer(
        tiny_models,
        tmp_path,
        reward_funcs=easy_only_reward,
        trainer_kwargs={"process_reward_model": None},  # built from the config, if the trainer wanted one
        gate="none",
        prm_model_name_or_path=str(tmp_path / "no-such-prm"),
    )
    trl_out, ours = score_batch(trl_trainer), score_batch(ours_trainer)
    assert ours_trainer.process_reward_model is None
    assert ours["advantages"].shape == trl_out["advantages"].shape == (2 * NUM_GENERATIONS,)
    assert torch.equal(ours["advantages"], trl_out["advantages"])
    assert trl_out["advantages"][NUM_GENERATIONS:].abs().sum() == 0  # the hard group: all 0, what all_zero gates
    assert trl_out["advantages"][:NUM_GENERATIONS].abs().sum() > 0
    assert ours_trainer._metrics["train"]["verigate/gate_rate"] == [0.0]
    losses = []
    for trainer, output in ((trl_trainer, trl_out), (ours_trainer, ours)):
        trainer.current_gradient_accumulation_steps = 1  # what the training loop sets before each loss
        torch.manual_seed(0)
        losses.append(trainer.compute_loss(trainer.model, output))
    assert torch.equal(losses[1], losses[0])
    assert losses[0].requires_grad
    # The same batch under the paper's gate is not plain GRPO: the check above can tell them apart.
    gated = score_batch(make_trainer(tiny_models, tmp_path, reward_funcs=easy_only_reward, gate="all_zero"))
    assert gated["advantages"].dim() == 2


def test_gate_none_refuses_an_audit_it_has_no_prm_for(tmp_path):
    with pytest.raises(ValueError, match="prm_audit_fraction=0.5 with gate='none'"):
        VeriGateConfig(output_dir=str(tmp_path), gate="none", prm_audit_fraction=0.5, **COMMON_ARGS)


@pytest.mark.parametrize("config_class", [VeriGateConfig, ProcessVerifiedConfig])
@pytest.mark.parametrize(
    ("field", "value"), [("num_generations", 0), ("num_generations", 1), ("num_generations_eval", 0)]
)
def test_groups_of_fewer_than_two_completions_are_refused_naming_the_field(tmp_path, config_class, field, value):
    overrides = {**COMMON_ARGS, "per_device_train_batch_size": 8, field: value}
    with pytest.raises(ValueError, match=rf"^{field}={value}: .* set {field} to a whole number >= "):
        config_class(output_dir=str(tmp_path), **overrides)


def test_gate_reward_funcs_picks_the_verifier_columns(tiny_models, tmp_path):
    # zero_reward is the verifier; length_reward (e.g. a format bonus) separates the groups but must not ungate them.
    rewards = [zero_reward, length_reward]
    all_funcs = RecordingScorer()
    trainer = make_trainer(tiny_models, tmp_path, reward_funcs=rewards, scorer=all_funcs)
    score_batch(trainer)
    assert all_funcs.calls == []

    verifier_only = RecordingScorer()
    trainer = make_trainer(
        tiny_models, tmp_path, reward_funcs=rewards, scorer=verifier_only, gate_reward_funcs=["zero_reward"]
    )
    output = score_batch(trainer)
    assert len(verifier_only.scored_rows) == 2 * NUM_GENERATIONS
    assert trainer._metrics["train"]["verigate/gate_rate"] == [1.0]
    assert output["advantages"].abs().sum() > 0


def test_gate_uses_reward_weights(tiny_models, tmp_path):
    # Weight 0 on the separating function leaves a verifier reward that is 0 everywhere.
    scorer = RecordingScorer()
    trainer = make_trainer(
        tiny_models, tmp_path, reward_funcs=[zero_reward, length_reward], scorer=scorer, reward_weights=[1.0, 0.0]
    )
    score_batch(trainer)
    assert trainer._metrics["train"]["verigate/gate_rate"] == [1.0]


def test_no_verdict_counts_as_zero_for_the_gate(tiny_models, tmp_path):
    def verdict_on_easy_only(prompts, completions, **kwargs):
        return [float(len(c)) if p == EASY else None for p, c in zip(prompts, completions, strict=True)]

    scorer = RecordingScorer()
    trainer = make_trainer(tiny_models, tmp_path, reward_funcs=verdict_on_easy_only, scorer=scorer)
    output = score_batch(trainer)
    assert scorer.calls[0]["prompts"] == [HARD] * NUM_GENERATIONS
    assert output["advantages"][NUM_GENERATIONS:].abs().sum() > 0


def test_unknown_gate_reward_func_name_raises(tiny_models, tmp_path):
    with pytest.raises(ValueError, match="gate_reward_funcs.*no_such_reward.*easy_only_reward"):
        make_trainer(tiny_models, tmp_path, gate_reward_funcs=["no_such_reward"])


def test_audit_scores_non_gated_groups_and_logs_agreement(tiny_models, tmp_path):
    scorer = RecordingScorer()
    trainer = make_trainer(tiny_models, tmp_path, scorer=scorer, prm_audit_fraction=1.0)
    trl_out = score_batch(make_trainer(tiny_models, tmp_path, GRPOTrainer, reward_funcs=easy_only_reward))
    output = score_batch(trainer)

    # Both groups were scored, the easy (audited) group first, but only the hard group's advantages changed.
    assert scorer.calls[0]["prompts"] == [EASY] * NUM_GENERATIONS + [HARD] * NUM_GENERATIONS
    mask = output["completion_mask"].float()
    easy_rows = slice(0, NUM_GENERATIONS)
    assert torch.equal(output["advantages"][easy_rows], trl_out["advantages"][easy_rows, None] * mask[easy_rows])

    # Agreement by hand: the verifier (easy_only_reward = length) prefers the longer completion of each pair.
    mean_scores = [sum(scores) / len(scores) for scores in scorer.scored_rows[:NUM_GENERATIONS]]
    lengths = [len(completion) for completion in COMPLETIONS]
    pairs = [(i, j) for i in range(NUM_GENERATIONS) for j in range(NUM_GENERATIONS) if lengths[i] > lengths[j]]
    agreeing = sum(mean_scores[i] > mean_scores[j] for i, j in pairs)
    metrics = trainer._metrics["train"]
    assert metrics["verigate/prm_verifier_agreement"] == [pytest.approx(agreeing / len(pairs))]
    assert metrics["verigate/prm_completions_scored"] == [2 * NUM_GENERATIONS]


def test_audit_fraction_draws_whole_groups(tiny_models, tmp_path):
    scorer = RecordingScorer()
    trainer = make_trainer(tiny_models, tmp_path, reward_funcs=length_reward, scorer=scorer, prm_audit_fraction=0.5)
    output = score_batch(trainer)
    # ceil(0.5 x 2 non-gated groups) = 1 group, all of its completions; nothing gated, so TRL's (B,) stands.
    assert len(scorer.scored_rows) == NUM_GENERATIONS
    assert len(set(scorer.calls[0]["prompts"])) == 1
    assert output["advantages"].dim() == 1
    assert "verigate/prm_verifier_agreement" in trainer._metrics["train"]


def test_metrics_are_logged(tiny_models, tmp_path):
    class CountingReward:
        __name__ = "counting_reward"

        def __init__(self):
            self.failures = 0

        def __call__(self, completions, **kwargs):
            self.failures += 3  # e.g. three verifier timeouts per batch
            return [0.0] * len(completions)

    trainer = make_trainer(tiny_models, tmp_path, reward_funcs=[easy_only_reward, CountingReward()])
    score_batch(trainer)
    score_batch(trainer)
    metrics = trainer._metrics["train"]
    assert metrics["verigate/gate_rate"] == [0.5, 0.5]
    assert metrics["verigate/frac_zero_std_outcome"] == [0.5, 0.5]
    assert metrics["verigate/prm_completions_scored"] == [NUM_GENERATIONS, NUM_GENERATIONS]
    assert metrics["verigate/steps_per_completion"] == [2.0, 2.0]  # steps 2, 1, 3, 2
    assert metrics["verigate/reward_failures"] == [3.0, 3.0]
    assert all(seconds >= 0 for seconds in metrics["verigate/prm_seconds"])
    expected_mean = sum(sum(row) for row in RecordingScorer().score([HARD] * 4, _steps())) / 8
    assert metrics["verigate/prm_step_score_mean"] == [pytest.approx(expected_mean)] * 2
    assert "verigate/prm_verifier_agreement" not in metrics
    # Every fixed completion ends with EOS.
    assert metrics["verigate/gated_truncated_fraction"] == [0.0, 0.0]


def _steps():
    return [[step for step in completion.split("\n\n")] for completion in COMPLETIONS]


def test_max_steps_per_completion_merges_the_tail_into_the_last_step(tiny_models, tmp_path):
    scorer = RecordingScorer()
    score_batch(make_trainer(tiny_models, tmp_path, scorer=scorer, max_steps_per_completion=2))
    assert [len(steps) for steps in scorer.calls[0]["steps"]] == [2, 1, 2, 2]
    assert scorer.calls[0]["steps"][2][1] == "Count up: 3, 4.\n\nThe answer is 4."


def test_eval_mode_gates_with_eval_metrics(tiny_models, tmp_path):
    scorer = RecordingScorer()
    trainer = make_trainer(tiny_models, tmp_path, scorer=scorer, per_device_eval_batch_size=2 * NUM_GENERATIONS)
    trainer.model.eval()
    output = score_batch(trainer)
    assert output["advantages"].shape == output["completion_ids"].shape
    assert trainer._metrics["eval"]["verigate/gate_rate"] == [0.5]
    assert "verigate/gate_rate" not in trainer._metrics["train"]


def test_peft_model_trains_on_a_gated_batch(tiny_models, tmp_path):
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    # beta > 0 makes TRL take the reference log-probs from the adapter-disabled base model.
    trainer = make_trainer(tiny_models, tmp_path, trainer_kwargs={"peft_config": lora}, beta=0.04)
    result = trainer.train()
    assert math.isfinite(result.training_loss)
    assert trainer.state.log_history[0]["verigate/gate_rate"] == 0.5


def test_conversational_prompt_sends_last_user_message_to_prm(tiny_models, tmp_path):
    scorer = RecordingScorer()
    trainer = make_trainer(tiny_models, tmp_path, scorer=scorer, reward_funcs=zero_reward)
    conversation = [
        {"role": "system", "content": "Reason step by step."},
        {"role": "user", "content": HARD},
    ]
    trainer._generate_and_score_completions([{"prompt": conversation}] * NUM_GENERATIONS)
    assert scorer.calls[0]["prompts"] == [HARD] * NUM_GENERATIONS


def test_scorer_returning_wrong_number_of_scores_raises(tiny_models, tmp_path):
    def one_score_per_completion(prompts, steps):
        return [[0.5] for _ in steps]

    trainer = make_trainer(tiny_models, tmp_path, scorer=one_score_per_completion)
    with pytest.raises(ValueError, match="one score per step"):
        score_batch(trainer)


@pytest.mark.parametrize(
    ("prm_type", "model_key"),
    [
        ("qwen_math", "prm_qwen_math"),
        ("math_shepherd", "prm_math_shepherd"),
        ("token_classification", "prm_token_classification"),
        ("symbolic", None),
    ],
)
def test_prm_built_from_config_scores_gated_groups(tiny_models, tmp_path, prm_type, model_key):
    config = dict(prm_type=prm_type, prm_model_name_or_path=tiny_models[model_key] if model_key else None)
    args = VeriGateConfig(output_dir=str(tmp_path), **COMMON_ARGS, **config)
    trainer = VeriGateGRPOTrainer(
        model=tiny_models["policy"],
        reward_funcs=easy_only_reward,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": [EASY, HARD]}),
        rollout_func=fixed_rollout,
    )
    trainer.model.train()
    output = score_batch(trainer)
    metrics = trainer._metrics["train"]
    assert metrics["verigate/prm_completions_scored"] == [NUM_GENERATIONS]
    assert 0.0 <= metrics["verigate/prm_step_score_mean"][0] <= 1.0
    assert output["advantages"].shape == output["completion_ids"].shape
    assert torch.isfinite(output["advantages"]).all()


def test_args_must_be_a_verigate_config(tiny_models, tmp_path):
    with pytest.raises(TypeError, match="VeriGateConfig"):
        VeriGateGRPOTrainer(
            model=tiny_models["policy"],
            reward_funcs=zero_reward,
            args=GRPOConfig(output_dir=str(tmp_path), **COMMON_ARGS),
            train_dataset=Dataset.from_dict({"prompt": [EASY]}),
            process_reward_model=RecordingScorer(),
        )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gate", "some_zero"),
        ("advantage_normalization", "ppo"),
        ("step_separator", ""),
        ("max_steps_per_completion", 0),
        ("prm_type", "llm_judge"),
        ("prm_batch_size", 0),
        ("gate_reward_funcs", []),
        ("prm_audit_fraction", 1.5),
        ("prm_advantage_epsilon", 0.0),
        ("prm_torch_dtype", "bf16"),
        ("prm_device", "gpu0"),
    ],
)
def test_bad_config_values_raise_naming_the_field(tmp_path, field, value):
    with pytest.raises(ValueError, match=field):
        VeriGateConfig(output_dir=str(tmp_path), **{**COMMON_ARGS, field: value})


def test_prm_path_required_unless_symbolic(tmp_path):
    with pytest.raises(ValueError, match="prm_model_name_or_path"):
        VeriGateConfig(output_dir=str(tmp_path), prm_model_name_or_path=None, **COMMON_ARGS)
    config = VeriGateConfig(output_dir=str(tmp_path), prm_type="symbolic", prm_model_name_or_path=None, **COMMON_ARGS)
    assert config.prm_type == "symbolic"


def test_gate_reward_funcs_accepts_comma_separated_string(tmp_path):
    config = VeriGateConfig(output_dir=str(tmp_path), gate_reward_funcs="accuracy_reward, format_reward", **COMMON_ARGS)
    assert config.gate_reward_funcs == ["accuracy_reward", "format_reward"]


def parse_cli(tmp_path, *argv):
    from trl import TrlParser

    (config,) = TrlParser((VeriGateConfig,)).parse_args_and_config(
        args=["--output_dir", str(tmp_path), "--use_cpu", "true", *argv]
    )
    return config


def test_gate_reward_funcs_from_the_command_line(tmp_path):
    # HfArgumentParser hands a list field over as the shell words: "a,b" stays one word.
    assert parse_cli(tmp_path, "--gate_reward_funcs", "acc,fmt").gate_reward_funcs == ["acc", "fmt"]
    assert parse_cli(tmp_path, "--gate_reward_funcs", "acc", "fmt").gate_reward_funcs == ["acc", "fmt"]


def test_step_separator_escapes_from_the_command_line(tmp_path):
    # A shell passes "\n\n" as backslash-n characters, which no completion contains.
    assert parse_cli(tmp_path, "--step_separator", "\\n\\n").step_separator == "\n\n"
    assert parse_cli(tmp_path, "--step_separator", "\\nStep").step_separator == "\nStep"


def test_audit_draws_depend_on_the_step_not_on_history(tiny_models, tmp_path):
    """A resumed run audits the groups an uninterrupted one would have: the draw is a function of the step."""
    candidates = torch.ones(8, dtype=torch.bool)

    def draw(trainer, step):
        trainer.state.global_step = step
        return trainer._sample_audited_groups(candidates).nonzero().flatten().tolist()

    fresh = make_trainer(tiny_models, tmp_path / "a", prm_audit_fraction=0.25)
    running = make_trainer(tiny_models, tmp_path / "b", prm_audit_fraction=0.25)
    history = [draw(running, step) for step in range(6)]
    assert draw(fresh, 5) == history[5]
    assert len(set(map(tuple, history))) > 1  # different steps audit different groups


def test_model_card_cites_verigate(tiny_models, tmp_path):
    """The card a trained model is pushed with names and cites the VeriGate paper (Agrawal, Liu, Huang, 2026,
    arXiv:2605.30451), not GRPO's DeepSeekMath paper the parent trainer cites."""
    trainer = make_trainer(tiny_models, tmp_path)
    trainer.create_model_card(model_name="tiny-verigate")
    with open(os.path.join(trainer.args.output_dir, "README.md"), encoding="utf-8") as file:
        card = file.read()
    title = "VeriGate: Verifier-Gated Step-Level Supervision for GRPO"
    assert f"trained with VeriGate, a method introduced in [{title}]" in card
    assert "(https://huggingface.co/papers/2605.30451)" in card
    assert "@article{agrawal2026verigate" in card and "Aakriti Agrawal and Minghui Liu and Furong Huang" in card
    assert "eprint       = {arXiv:2605.30451}" in card
    assert "shao2024deepseekmath" not in card and "2402.03300" not in card
    assert "- verigate" in card  # the hub tag


@pytest.mark.slow
def test_train_two_steps_with_sampling_and_symbolic_prm(tiny_models, tmp_path):
    """Real sampling from the random policy (never correct: every group gated), buffered generation reused over
    two iterations, then an evaluation pass."""
    dataset = Dataset.from_dict({"prompt": [EASY, HARD, "What is 3 * 3?", "Is 9 prime?"]})
    args = VeriGateConfig(
        output_dir=str(tmp_path),
        **{
            **COMMON_ARGS,
            "max_steps": 2,
            "per_device_train_batch_size": NUM_GENERATIONS,
            "max_completion_length": 16,
        },
        steps_per_generation=2,
        num_iterations=2,
        per_device_eval_batch_size=NUM_GENERATIONS,
        prm_type="symbolic",
    )
    trainer = VeriGateGRPOTrainer(
        model=tiny_models["policy"],
        reward_funcs=zero_reward,
        args=args,
        train_dataset=dataset,
        eval_dataset=dataset.select(range(1)),
        process_reward_model=SymbolicStepScorer(),
    )
    result = trainer.train()
    assert math.isfinite(result.training_loss)
    logged = [entry for entry in trainer.state.log_history if "verigate/gate_rate" in entry]
    assert logged and all(entry["verigate/gate_rate"] == 1.0 for entry in logged)
    assert all(math.isfinite(entry["loss"]) for entry in trainer.state.log_history if "loss" in entry)
    eval_metrics = trainer.evaluate()
    assert math.isfinite(eval_metrics["eval_loss"])
    assert eval_metrics["eval_verigate/gate_rate"] == 1.0


# --- loss options that decide per sequence from the advantage's sign (issue 7, defect 3)

# Row 0: tokens of mixed sign, mean over its 3 loss tokens (1 + 1 - 0.5) / 3 = 0.5 >= 0 (the masked 9 is padding);
# row 1: mean (-1 + 0.5 - 1 - 1) / 4 = -0.625 < 0.
MIXED_ADVANTAGES = torch.tensor([[1.0, 1.0, -0.5, 9.0], [-1.0, 0.5, -1.0, -1.0]])
LOSS_MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]])


def test_off_policy_mask_keeps_or_drops_whole_sequences_by_their_mean_token_advantage():
    # Every loss token drifted by KL 1 > threshold 0.5, so only the advantage's sign keeps a sequence.
    kept = VeriGateGRPOTrainer.get_off_policy_mask(
        advantages=MIXED_ADVANTAGES,
        per_token_logps=torch.zeros(2, 4),
        sampling_per_token_logps=torch.ones(2, 4),
        mask=LOSS_MASK,
        off_policy_threshold=0.5,
    )
    assert kept.tolist() == [[1.0], [0.0]]
    # Low drift keeps both, whatever the sign.
    kept = VeriGateGRPOTrainer.get_off_policy_mask(
        advantages=MIXED_ADVANTAGES,
        per_token_logps=torch.zeros(2, 4),
        sampling_per_token_logps=torch.full((2, 4), 0.1),
        mask=LOSS_MASK,
        off_policy_threshold=0.5,
    )
    assert kept.tolist() == [[1.0], [1.0]]


def test_vespo_gamma_weight_is_one_per_sequence_chosen_by_its_mean_token_advantage():
    # Sequence log ratio ln 2 in both rows (w = 2). phi(w) = exp(lambda + k ln w - lambda w):
    # non-negative (k=2, lambda=3): e^3 * 4 * e^-6 = 4 e^-3; negative (k=3, lambda=2): e^2 * 8 * e^-4 = 8 e^-2.
    log_ratio = torch.tensor([[math.log(2) / 3] * 3 + [5.0], [math.log(2) / 4] * 4])
    weights = VeriGateGRPOTrainer.get_gamma_weights(
        advantages=MIXED_ADVANTAGES,
        log_ratio_per_token=log_ratio,
        mask=LOSS_MASK,
        importance_sampling_ratio=None,
        k_pos=2.0,
        lambda_pos=3.0,
        k_neg=3.0,
        lambda_neg=2.0,
    )
    assert weights.shape == (2, 1)
    torch.testing.assert_close(weights, torch.tensor([[4 * math.exp(-3)], [8 * math.exp(-2)]]))


@pytest.mark.parametrize("options", [dict(off_policy_mask_threshold=0.5), dict(loss_type="vespo")])
def test_a_gated_batch_trains_with_the_per_sequence_loss_options(tiny_models, tmp_path, options):
    # TRL calls the overridden methods with keywords from its loss; one training step shows they fit.
    trainer = make_trainer(tiny_models, tmp_path, **options)
    trainer.train()
    step_log = trainer.state.log_history[0]
    assert step_log["verigate/gate_rate"] == 0.5
    assert math.isfinite(step_log["loss"])


# --- length bias (issue 7, defect 4)


def test_prm_score_center_is_subtracted_before_cumulating(tiny_models, tmp_path, tokenizer):
    scorer = RecordingScorer()
    output = score_batch(make_trainer(tiny_models, tmp_path, scorer=scorer, prm_score_center=0.5))
    hard_rows = list(range(NUM_GENERATIONS, 2 * NUM_GENERATIONS))
    centered = [[score - 0.5 for score in row] for row in scorer.scored_rows]
    expected = expected_token_advantages(tokenizer, output, hard_rows, centered, "verigate")
    torch.testing.assert_close(output["advantages"][hard_rows], expected, rtol=1e-5, atol=1e-6)
    uncentered = expected_token_advantages(tokenizer, output, hard_rows, scorer.scored_rows, "verigate")
    assert not torch.allclose(expected, uncentered, atol=1e-3)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(prm_score_center=1.5), "prm_score_center=1.5 must be a number in"),
        (dict(prm_score_center=0.5, advantage_normalization="deepseekmath"), "prm_score_center=0.5 has no effect"),
    ],
)
def test_bad_prm_score_center_is_refused(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        VeriGateConfig(output_dir=str(tmp_path), use_cpu=True, **options)


def test_gated_truncated_fraction_counts_gated_completions_without_eos(tiny_models, tmp_path):
    def rollout(prompts, trainer):
        result = fixed_rollout(prompts, trainer)
        for row in (NUM_GENERATIONS + 1, NUM_GENERATIONS + 3):  # two of the four hard (gated) completions
            result["completion_ids"][row] = result["completion_ids"][row][:-1]
        result["completion_ids"][0] = result["completion_ids"][0][:-1]  # an easy (not gated) one: not counted
        return result

    trainer = make_trainer(tiny_models, tmp_path, rollout=rollout)
    score_batch(trainer)
    assert trainer._metrics["train"]["verigate/gated_truncated_fraction"] == [0.5]


# --- tool results (issue 7, defect 6)

TOOL_RESULT = "TOOL RESULT 41.\n\nTOOL RESULT 42."


def test_tool_results_are_no_steps_and_get_no_advantage(tiny_models, tmp_path, tokenizer):
    """Each hard completion is model text, a tool result (env_mask 0), model text, EOS.

    Model text before the tool call: "Call the tool." (1 step); after it: COMPLETIONS[k] (2, 1, 3, 2 steps).
    """

    def rollout(prompts, trainer):
        result = fixed_rollout(prompts, trainer)
        result["env_mask"] = [[1] * len(ids) for ids in result["completion_ids"]]
        for row, prompt in enumerate(prompts):
            if HARD in _text(prompt):
                before = tokenizer("Call the tool.\n\n", add_special_tokens=False)["input_ids"]
                tool = tokenizer(TOOL_RESULT + "\n\n", add_special_tokens=False)["input_ids"]
                after = result["completion_ids"][row]
                result["completion_ids"][row] = before + tool + after
                result["env_mask"][row] = [1] * len(before) + [0] * len(tool) + [1] * len(after)
        return result

    scorer = RecordingScorer()
    output = score_batch(make_trainer(tiny_models, tmp_path, scorer=scorer, rollout=rollout))
    steps = scorer.calls[0]["steps"]
    assert not any("TOOL" in step for row in steps for step in row)
    assert [len(row) for row in steps] == [3, 2, 4, 3]
    assert [row[0].strip() for row in steps] == ["Call the tool."] * NUM_GENERATIONS
    assert ["".join(row[1:]).replace("\n", "") for row in steps] == [c.replace("\n", "") for c in COMPLETIONS]

    hard_rows = list(range(NUM_GENERATIONS, 2 * NUM_GENERATIONS))
    tool_tokens = output["tool_mask"][hard_rows] == 0
    assert tool_tokens.any()
    assert (output["advantages"][hard_rows][tool_tokens] == 0).all()
    # The group statistics are those of the model's steps alone: the reference over the recorded step scores.
    step_advantages = reference_step_advantages(scorer.scored_rows, "verigate")
    for position, row in enumerate(hard_rows):
        model_columns = (output["tool_mask"][row] == 1) & (output["completion_mask"][row] == 1)
        values = output["advantages"][row][model_columns]
        # Every model token carries one of its completion's step advantages, and each step's value appears.
        assert {round(value, 5) for value in values.tolist()} == {
            round(value, 5) for value in step_advantages[position]
        }


@pytest.mark.parametrize("recipe", ["verigate_math.yaml", "gsm8k.yaml"])
def test_paper_recipes_mask_truncated_completions(recipe):
    config = yaml.safe_load((REPO_ROOT / "recipes" / recipe).read_text())
    assert config["mask_truncated_completions"] is True
    assert "prm_score_center" not in config  # the paper's formula stays the default
