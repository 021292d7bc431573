"""Checks the trainers share: config values, and `GRPOTrainer` arguments a trainer option cannot serve."""

from __future__ import annotations

import inspect
import shlex

from trl import GRPOTrainer


def is_number(value) -> bool:
    """An int or a float, not a bool (which Python counts as an int)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def argv(command: str | list[str] | None) -> list[str] | None:
    """A command as argv: a string, or the one-item list a command-line flag gives (`--coq_command "a -b"`), is
    split like a shell."""
    if isinstance(command, list) and len(command) == 1:
        command = command[0]
    return shlex.split(command) if isinstance(command, str) else command


def refuse_too_few_generations(config) -> None:
    """Refuse a GRPO-family config (`VeriGateConfig`, `ProcessVerifiedConfig`) whose group holds fewer than two
    completions, before TRL's own checks divide by `num_generations` (a ZeroDivisionError for 0): a group of one has
    no spread, so every advantage would be 0."""
    for name, minimum in (("num_generations", 2), ("num_generations_eval", 1)):
        value = getattr(config, name)
        if value is None and name == "num_generations_eval":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(
                f"{name}={value!r}: GRPO compares the completions of one prompt with each other, so set {name} to a "
                f"whole number >= {minimum} (e.g. {name}: 4)"
            )


def refuse_negative_learning_rate(config) -> None:
    """Refuse a negative `learning_rate` in a trainer config, before the parent's setup: it would step uphill (TRL
    itself only fails in torch's optimizer, after the models have loaded)."""
    if is_number(config.learning_rate) and config.learning_rate < 0:
        raise ValueError(
            f"learning_rate={config.learning_rate:g}: a negative rate moves the weights against the reward; set a "
            "positive one, e.g. learning_rate: 1e-6"
        )


def given_trainer_arguments(args: tuple, kwargs: dict) -> dict:
    """`GRPOTrainer` arguments after ``model, reward_funcs, args`` (``args`` positional, ``kwargs`` by name), by
    name."""
    parameters = list(inspect.signature(GRPOTrainer.__init__).parameters)[4:]
    return dict(zip(parameters, args, strict=False)) | kwargs


def refuse_datasets_without_prompt(given: dict) -> None:
    """Refuse a train or eval dataset (`given_trainer_arguments`) whose known columns lack `prompt`, before any model
    loads: TRL reads each row's `prompt` only once generation starts, and then fails with a bare KeyError."""
    for name in ("train_dataset", "eval_dataset"):
        columns = _known_columns(given.get(name))
        if columns and "prompt" not in columns:
            raise ValueError(
                f"{name} has no `prompt` column (its columns are {sorted(columns)}): GRPO generates from each row's "
                "`prompt`; add it, e.g. dataset.map(lambda row: {'prompt': row['question']})"
            )


def refuse_unpipelinable_trainer_arguments(field_name: str, args: tuple, kwargs: dict) -> None:
    """Raise before any model loads when `GRPOTrainer` arguments (``args``/``kwargs`` after ``model, reward_funcs,
    args``) ask for something pipelined generation does not replay: tools and environments (their state belongs
    to the step that generated), and images (the generating policy's log-probs are computed without them)."""
    given = given_trainer_arguments(args, kwargs)
    for name in ("tools", "environment_factory"):
        if given.get(name):
            raise ValueError(
                f"{field_name}=True does not support {name}=: a multi-turn rollout's state belongs to the step that "
                f"generated it. Drop {name}= or set {field_name}=False."
            )
    columns = _known_columns(given.get("train_dataset"))
    if "image" in columns or "images" in columns:
        raise ValueError(
            f"{field_name}=True does not support image datasets (the train_dataset has an image column): set "
            f"{field_name}=False."
        )


def _known_columns(dataset) -> set[str]:
    """The columns of a dataset that can be known without reading it: its features (a `Dataset`, an `IterableDataset`
    built with them), else its column names; for a `DatasetDict`/`IterableDatasetDict`, every split's. An
    `IterableDataset` without features (built from a generator) has no known columns, and reading a row to find
    them would consume it: such a dataset is not refused here."""
    if isinstance(dataset, dict):
        return set().union(*(_known_columns(split) for split in dataset.values()))
    features = getattr(dataset, "features", None)
    if features:
        return set(features)
    names = getattr(dataset, "column_names", None)
    return set(names) if isinstance(names, (list, tuple)) else set()
