"""The Lean process-GRPO recipe: its prompts from DeepSeek-format rows (fast), and end to end (slow): the tiny policy
trains against the stand-in REPL and the lean/* metrics arrive in wandb (offline) and mlflow (sqlite), read back with
their own libraries, on one and on two gloo processes."""

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

RECIPE = REPO_ROOT / "recipes" / "lean_process_grpo.py"
TINY_DATA = REPO_ROOT / "recipes" / "tiny" / "lean_tiny.jsonl"
TRAIN_STEPS = 2
LEAN_METRICS = (
    "lean/pass_rate",
    *(f"lean/status/{status}" for status in ("passed", "failed", "timeout", "crashed", "rejected", "error")),
    "lean/tactics_per_proof",
    "lean/verify_seconds",
    "lean/verify_hidden_fraction",
    "lean/proofs_per_second",
    "lean/frac_zero_std_outcome",
    "lean/verification_failures",
)


@pytest.fixture(scope="module")
def recipe():
    return load_recipe("lean_process_grpo")


def tiny_rows():
    return [json.loads(line) for line in TINY_DATA.read_text().splitlines() if line.strip()]


def test_tiny_dataset_is_in_deepseek_format():
    for row in tiny_rows():
        assert sorted(row) == ["formal_statement", "goal", "header", "informal_prefix", "name", "split"]
        assert row["formal_statement"].rstrip().endswith(":= by")


def test_default_prompt_is_deepseek_prover_v15s(recipe):
    from datasets import Dataset

    row = tiny_rows()[0]
    args = recipe.ProcessScriptArguments(dataset_name=str(TINY_DATA))
    dataset = recipe.to_prompts(Dataset.from_list([row]), args)
    assert dataset[0]["prompt"] == (
        "Complete the following Lean 4 code:\n\n```lean4\n"
        + row["header"]
        + row["informal_prefix"]
        + row["formal_statement"]
    )
    assert dataset[0]["formal_statement"] == row["formal_statement"]  # kept for the Lean reward


def test_template_split_filter_and_conversational(recipe):
    from datasets import Dataset

    rows = tiny_rows()
    args = recipe.ProcessScriptArguments(
        dataset_name="x", prompt_template="Prove {name}: {formal_statement}", split_filter="test", conversational=True
    )
    dataset = recipe.to_prompts(Dataset.from_list(rows), args)
    expected = [row for row in rows if row["split"] == "test"]
    assert len(dataset) == len(expected)
    assert dataset[0]["prompt"] == [
        {"role": "user", "content": f"Prove {expected[0]['name']}: {expected[0]['formal_statement']}"}
    ]


def test_missing_statement_column_names_the_field(recipe):
    from datasets import Dataset

    with pytest.raises(ValueError, match="no column `formal_statement`.*--statement_field"):
        recipe.to_prompts(Dataset.from_list([{"problem": "x"}]), recipe.ProcessScriptArguments(dataset_name="x"))


@pytest.mark.parametrize("config", ["lean_process_grpo.yaml", "tiny/lean_process_grpo.yaml"])
def test_shipped_configs_parse_with_the_recipes_parser(recipe, config, tmp_path):
    from trl import ModelConfig, TrlParser

    from trl_verigate import LeanProcessConfig

    parser = TrlParser((recipe.ProcessScriptArguments, LeanProcessConfig, ModelConfig))
    # GPU-only settings are overridden because this machine has none; everything else comes from the file.
    _, training_args, model_args = parser.parse_args_and_config(
        args=["--config", str(REPO_ROOT / "recipes" / config), "--bf16", "false", "--use_cpu", "true"]
        + ["--use_vllm", "false", "--output_dir", str(tmp_path)]
    )
    raw = yaml.safe_load((REPO_ROOT / "recipes" / config).read_text())
    assert model_args.model_name_or_path == raw["model_name_or_path"]
    assert training_args.prover_timeout == raw["prover_timeout"] == 15.0
    assert training_args.lean_repl_command == raw["lean_repl_command"]
    assert training_args.process_token_assignment == "first"
    # The switch is shown in the paper-scale YAML (off: the paper's on-policy loop), so GPU users find it.
    if config == "lean_process_grpo.yaml":
        assert training_args.pipelined_verification is raw["pipelined_verification"] is False


def write_tiny_config(tiny_models, run_dir: Path) -> Path:
    return write_tiny_recipe_config(
        tiny_models,
        run_dir,
        "lean_process_grpo",
        max_steps=TRAIN_STEPS,
        run_name="lean-e2e",
        report_to=["wandb", "mlflow"],
    )


def run_recipe(launcher: list[str], config: Path, run_dir: Path) -> None:
    launch_recipe(RECIPE, launcher, config, run_dir, project="lean-e2e", timeout=600)


def assert_lean_metrics_tracked(run_dir: Path) -> None:
    wandb_runs = wandb_offline_history(run_dir)
    assert len(wandb_runs) == 1, f"expected one wandb run (rank 0 only), found {len(wandb_runs)}"
    rows = [row for row in wandb_runs[0] if "train/lean/pass_rate" in row]
    assert [row["train/global_step"] for row in rows] == list(range(1, TRAIN_STEPS + 1))
    for row in rows:
        statuses = sum(row[f"train/lean/status/{s}"] for s in ("passed", "failed", "timeout", "crashed", "rejected"))
        assert statuses + row["train/lean/status/error"] == pytest.approx(1.0)
        assert row["train/lean/pass_rate"] == pytest.approx(row["train/lean/status/passed"])
    assert_mlflow_matches_wandb(run_dir, rows, LEAN_METRICS)


@pytest.mark.slow
def test_recipe_single_process_logs_lean_metrics_to_wandb_and_mlflow(tiny_models, tmp_path):
    run_recipe([sys.executable], write_tiny_config(tiny_models, tmp_path), tmp_path)
    assert_lean_metrics_tracked(tmp_path)
    assert (tmp_path / "output" / "config.json").is_file(), "the recipe did not save the trained policy"


@pytest.mark.slow
def test_recipe_two_gloo_processes_logs_lean_metrics_from_rank_zero(tiny_models, tmp_path):
    launcher = [
        *(sys.executable, "-m", "accelerate.commands.launch"),
        *("--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no"),
        *("--dynamo_backend", "no", "--main_process_port", str(free_port())),
    ]
    run_recipe(launcher, write_tiny_config(tiny_models, tmp_path), tmp_path)
    assert_lean_metrics_tracked(tmp_path)


@pytest.mark.slow
def test_recipe_evaluates_pass_at_k_with_its_training_prompt(recipe, tiny_models, tmp_path, monkeypatch):
    from trl_verigate import PassAtKCallback

    path = write_tiny_recipe_config(
        tiny_models,
        tmp_path,
        "lean_process_grpo",
        max_steps=1,
        prompt_template="Prove {name}:\n```lean4\n{formal_statement}",
        pass_at_k_task="lean",
        pass_at_k_dataset=str(TINY_DATA),
        pass_at_k_split="test",
        pass_at_k_limit=1,
        pass_at_k_n=2,
        pass_at_k_k="1,2",
        pass_at_k_steps=1,
        pass_at_k_max_new_tokens=8,
    )
    trainers = []
    monkeypatch.setattr(
        load_recipe("process_verified_recipe"),
        "train_and_save",
        lambda trainer, *args: (trainers.append(trainer), trainer.train()),
    )
    monkeypatch.chdir(REPO_ROOT)  # the stand-in REPL's command is relative to the repository
    recipe.main(*recipe.parse_args(["--config", str(path)]))
    trainer = trainers[0]
    (callback,) = [c for c in trainer.callback_handler.callbacks if isinstance(c, PassAtKCallback)]
    row = next(row for row in tiny_rows() if row["split"] == "test")
    # Evaluation prompts are the training prompts: the recipe's template, not the default one.
    assert (
        callback.evaluation.problem_set.problems[0].prompt
        == f"Prove {row['name']}:\n```lean4\n{row['formal_statement']}"
    )
    logged = [entry for entry in trainer.state.log_history if "eval/pass@1" in entry]
    assert [entry["step"] for entry in logged] == [1]
    assert 0.0 <= logged[0]["eval/pass@1"] <= logged[0]["eval/pass@2"] <= 1.0
