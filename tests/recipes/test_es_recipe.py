"""The ES recipe: its shipped configs parse (fast), and end to end (slow): the tiny policy runs ES with the Lean reward
through lean_server and the stand-in REPL (one process), and with accuracy_reward (two gloo processes); the es/*
metrics arrive in wandb (offline) and mlflow (sqlite), read back with their own libraries, and es_state.json lands in
the checkpoints and the output."""

import json
import sys
from pathlib import Path

import pytest
import yaml

from tests.launch import (
    REPO_ROOT,
    assert_mlflow_matches_wandb,
    free_port,
    launch_recipe,
    load_recipe,
    wandb_offline_history,
    write_tiny_recipe_config,
)

RECIPE = REPO_ROOT / "recipes" / "es.py"
TRAIN_STEPS = 3
ES_METRICS = (
    "es/reward_mean",
    "es/reward_std",
    "es/reward_max",
    "es/best_member",
    "es/update_norm",
    "es/seconds_perturb",
    "es/seconds_generate",
    "es/seconds_update",
    "es/members_per_second",
)


@pytest.fixture(scope="module")
def recipe():
    return load_recipe("es")


def parse(recipe, config: Path, tmp_path: Path, *extra: str):
    from trl import ModelConfig, TrlParser

    from trl_verigate.trainers.es import ESConfig

    parser = TrlParser((recipe.ESScriptArguments, ESConfig, ModelConfig))
    return parser.parse_args_and_config(
        args=["--config", str(config), "--bf16", "false", "--use_cpu", "true", "--output_dir", str(tmp_path), *extra]
    )


@pytest.mark.parametrize("config", ["es_lean.yaml", "es_math.yaml", "tiny/es.yaml"])
def test_shipped_configs_parse_with_the_recipes_parser(recipe, config, tmp_path):
    path = REPO_ROOT / "recipes" / config
    script_args, training_args, model_args = parse(recipe, path, tmp_path)
    raw = yaml.safe_load(path.read_text())
    assert script_args.task == raw["task"]
    assert model_args.model_name_or_path == raw["model_name_or_path"]
    assert training_args.population_size == raw["population_size"]
    assert training_args.per_device_train_batch_size == raw["prompts_per_iteration"] * raw["num_generations"]


def test_lean_config_is_the_case_studys_scale(recipe, tmp_path):
    script_args, training_args, model_args = parse(recipe, REPO_ROOT / "recipes" / "es_lean.yaml", tmp_path)
    assert (training_args.population_size, training_args.sigma, training_args.learning_rate) == (30, 1e-3, 5e-4)
    attempts = training_args.population_size * training_args.prompts_per_iteration * training_args.num_generations
    assert attempts == 3840
    assert script_args.lean_timeout == 15.0
    assert "Kimina-Prover" in model_args.model_name_or_path
    assert script_args.lean_repl_command == ["lake", "env", "/opt/repl/.lake/build/bin/repl"]


def test_lean_task_without_a_verifier_is_refused(recipe):
    with pytest.raises(ValueError, match="task lean needs a verifier"):
        recipe.check_lean_verifier(recipe.ESScriptArguments(dataset_name="x", task="lean"))


def write_tiny_config(tiny_models, run_dir: Path, **overrides) -> Path:
    return write_tiny_recipe_config(
        tiny_models, run_dir, "es", max_steps=TRAIN_STEPS, run_name="es-e2e", report_to=["wandb", "mlflow"], **overrides
    )


def run_recipe(launcher: list[str], config: Path, run_dir: Path) -> None:
    launch_recipe(RECIPE, launcher, config, run_dir, project="es-e2e", timeout=900)


def assert_es_run_tracked(run_dir: Path, reward_name: str, population: int) -> None:
    wandb_runs = wandb_offline_history(run_dir)
    assert len(wandb_runs) == 1, f"expected one wandb run (rank 0 only), found {len(wandb_runs)}"
    rows = [row for row in wandb_runs[0] if "train/es/reward_mean" in row]
    assert [row["train/global_step"] for row in rows] == list(range(1, TRAIN_STEPS + 1))
    state = json.loads((run_dir / "output" / "es_state.json").read_text())
    assert len(state["history"]) == TRAIN_STEPS
    for row, entry in zip(rows, state["history"], strict=True):
        assert len(entry["rewards"]) == population
        assert row["train/es/reward_mean"] == pytest.approx(sum(entry["rewards"]) / population)
        assert row["train/es/reward_max"] == pytest.approx(max(entry["rewards"]))
        assert 0 <= row["train/es/best_member"] < population
        assert row[f"train/rewards/{reward_name}/mean"] == pytest.approx(row["train/es/reward_mean"])
    assert_mlflow_matches_wandb(run_dir, rows, ES_METRICS)
    # save_steps: 2 in the tiny config: checkpoint-2 holds the first two iterations.
    checkpoint_state = json.loads((run_dir / "output" / "checkpoint-2" / "es_state.json").read_text())
    assert checkpoint_state["history"] == state["history"][:2]
    assert (run_dir / "output" / "config.json").is_file(), "the recipe did not save the policy"


@pytest.mark.slow
def test_recipe_with_lean_server_and_the_stand_in_repl_on_one_process(tiny_models, tmp_path):
    run_recipe([sys.executable], write_tiny_config(tiny_models, tmp_path), tmp_path)
    assert_es_run_tracked(tmp_path, "lean_proof", population=4)


@pytest.mark.slow
def test_recipe_with_accuracy_reward_on_two_gloo_processes(tiny_models, tmp_path):
    config = write_tiny_config(
        tiny_models, tmp_path, task="math", dataset_name=str(REPO_ROOT / "recipes" / "tiny" / "math_tiny.jsonl")
    )
    launcher = [
        *(sys.executable, "-m", "accelerate.commands.launch"),
        *("--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no"),
        *("--dynamo_backend", "no", "--main_process_port", str(free_port())),
    ]
    run_recipe(launcher, config, tmp_path)
    assert_es_run_tracked(tmp_path, "accuracy_reward", population=4)
