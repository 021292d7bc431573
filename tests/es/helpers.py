"""What the ES tests share: a letter-counting reward, four prompts, a small ESConfig and a copy of the weights."""

from datasets import Dataset

from trl_verigate.trainers.es import ESConfig

TARGET = "e"


def letter_reward(completions, **kwargs):
    """Fraction of the completion's characters that are the target letter."""
    return [text.count(TARGET) / max(len(text), 1) for text in completions]


def prompt_dataset():
    return Dataset.from_list([{"prompt": f"Write about {topic}:"} for topic in ("cats", "dogs", "trees", "the sea")])


def es_config(output_dir, **overrides):
    values = dict(
        output_dir=str(output_dir),
        use_cpu=True,
        seed=0,
        population_size=4,
        prompts_per_iteration=2,
        num_generations=2,
        max_completion_length=8,
        max_steps=3,
        report_to="none",
        save_strategy="steps",
        save_steps=1,
        logging_steps=1,
        sigma=0.05,
        learning_rate=0.05,
    )
    values.update(overrides)
    return ESConfig(**values)


def model_weights(trainer) -> dict:
    return {name: param.detach().clone() for name, param in trainer.model.named_parameters()}
