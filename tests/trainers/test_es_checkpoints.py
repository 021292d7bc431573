"""ESTrainer honours `save_total_limit` as TRL's trainers do: only the newest checkpoints stay, each with the
es_state.json that resuming replays, and the newest one resumes."""

from tests.es.helpers import es_config, letter_reward, prompt_dataset
from trl_verigate.trainers.es import ESTrainer


def checkpoint_names(output_dir) -> list[str]:
    return sorted((path.name for path in output_dir.glob("checkpoint-*")), key=lambda name: int(name.split("-")[1]))


def test_save_total_limit_keeps_the_newest_checkpoints_with_their_es_state(tiny_models, tmp_path):
    output = tmp_path / "out"
    args = es_config(output, max_steps=5, save_steps=1, save_total_limit=2)
    trainer = ESTrainer(tiny_models["policy"], [letter_reward], args=args, train_dataset=prompt_dataset())
    trainer.train()
    # Five saves, one per step, with a limit of two: steps 4 and 5 remain.
    assert checkpoint_names(output) == ["checkpoint-4", "checkpoint-5"]
    assert all((output / name / "es_state.json").is_file() for name in ("checkpoint-4", "checkpoint-5"))

    resumed = ESTrainer(
        tiny_models["policy"],
        [letter_reward],
        args=es_config(output, max_steps=6, save_steps=1, save_total_limit=2),
        train_dataset=prompt_dataset(),
    )
    resumed.train(resume_from_checkpoint=str(output / "checkpoint-5"))
    assert len(resumed.es_history) == 6
    assert checkpoint_names(output) == ["checkpoint-5", "checkpoint-6"]
