"""ES learns: on the tiny policy, 20 iterations raise a letter-count reward of the unperturbed weights.

The task: write many `e`s. A completion's reward is its count of `e` characters over a fixed 32 (monotone in the
count, so an empty completion is no shortcut). The random tiny policy has near-uniform logits (std ≈ 0.16), which no
small weight move changes, so the test first makes it peaked like a trained model (final norm weight 8: logits ≈ 8x)
and lets ES perturb only the (tied) token embeddings, the most direct lever on token probabilities. θ's own reward is
measured before and after training on the same 128 seeded samples.

Measured on this machine (P = 8, σ = 0.01, α = 0.04, 20 iterations): θ's reward went 0.163 → 0.241 with seed 0
(this test), and 0.163 → 0.145, 0.209, 0.627 with seeds 1, 2, 3: ES with P = 8 is noisy, so the test pins seed 0
(runs on CPU are deterministic) and asserts less than half the measured gain.
"""

import pytest
import torch
from datasets import Dataset

from trl_verigate.trainers.es import ESConfig, ESTrainer

TARGET = "e"
MARGIN = 0.03


def letter_count_reward(completions, **kwargs):
    return [text.count(TARGET) / 32 for text in completions]


def theta_reward(trainer, prompts, samples: int = 128) -> float:
    """Mean reward of the current (unperturbed) weights over `samples` completions with a fixed sampling seed."""
    torch.manual_seed(1234)
    _, _, _, completions, _, _, _, _ = trainer._generate(prompts * samples)
    return sum(letter_count_reward(completions)) / len(completions)


@pytest.mark.slow
def test_es_raises_the_letter_reward_of_the_tiny_policy(tiny_models, tmp_path):
    from transformers import AutoModelForCausalLM

    policy = AutoModelForCausalLM.from_pretrained(tiny_models["policy"])
    with torch.no_grad():
        policy.model.norm.weight.fill_(8.0)
    prompts = ["Write a word:"]
    args = ESConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        seed=0,
        population_size=8,
        sigma=0.01,
        learning_rate=0.04,
        fitness_shaping="centered_rank",
        es_param_regex="embed_tokens",
        prompts_per_iteration=1,
        num_generations=4,
        max_completion_length=16,
        max_steps=20,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
    )
    trainer = ESTrainer(
        model=policy,
        reward_funcs=[letter_count_reward],
        args=args,
        train_dataset=Dataset.from_list([{"prompt": prompts[0]}] * 4),
    )
    before = theta_reward(trainer, prompts)
    trainer.train()
    after = theta_reward(trainer, prompts)
    assert after - before > MARGIN, f"theta's reward went {before:.4f} -> {after:.4f}"
