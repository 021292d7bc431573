"""The math recipe: its dataset handling (fast), and end to end (slow): it trains the tiny policy with the tiny PRM and
the VeriGate metrics arrive in wandb and mlflow (read back with their own libraries), on one and on two gloo processes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from tests.launch import (
    ALWAYS_LOGGED,
    LOGGED_WHEN_PRM_RAN,
    RECIPE,
    REPO_ROOT,
    TINY_CONFIG,
    TINY_DATA,
    assert_mlflow_matches_wandb,
    free_port,
    load_recipe,
    offline_env,
    wandb_offline_history,
    write_tiny_recipe_config,
)

TRAIN_STEPS = 3


@pytest.fixture(scope="module")
def recipe():
    return load_recipe("verigate_math")


@pytest.fixture
def offline_datasets_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets_cache"))


def test_local_jsonl_becomes_conversational_prompts_with_the_gold_solution(recipe, offline_datasets_cache):
    args = recipe.MathScriptArguments(dataset_name=str(TINY_DATA), max_train_samples=5)
    dataset = recipe.to_prompts(recipe.load_math_dataset(args, "train"), args)
    first = json.loads(TINY_DATA.read_text().splitlines()[0])
    assert len(dataset) == 5
    assert sorted(dataset.column_names) == ["prompt", "solution"]
    assert dataset[0]["prompt"] == [
        {"role": "system", "content": recipe.DEFAULT_SYSTEM_PROMPT},
        {"role": "user", "content": first["problem"]},
    ]
    assert dataset[0]["solution"] == first["solution"]


def test_gsm8k_style_answer_column_keeps_its_name_and_other_columns_are_dropped(recipe, tmp_path):
    from datasets import Dataset

    rows = [{"question": "What is 6 times 7?", "answer": "6 * 7 = 42\n#### 42", "source": "hand-written"}]
    args = recipe.MathScriptArguments(dataset_name="openai/gsm8k", question_field="question", answer_field="answer")
    dataset = recipe.to_prompts(Dataset.from_list(rows), args)
    assert sorted(dataset.column_names) == ["answer", "prompt"]
    assert dataset[0]["prompt"][1] == {"role": "user", "content": "What is 6 times 7?"}
    assert dataset[0]["answer"] == rows[0]["answer"]


def test_other_gold_columns_are_passed_to_the_reward_as_solution(recipe):
    from datasets import Dataset

    args = recipe.MathScriptArguments(dataset_name="local", question_field="q", answer_field="final")
    dataset = recipe.to_prompts(Dataset.from_list([{"q": "1 + 1?", "final": "2"}]), args)
    assert dataset[0]["solution"] == "2"


@pytest.mark.parametrize("field", ["question_field", "answer_field"])
def test_missing_dataset_column_names_the_field_and_the_fix(recipe, field, offline_datasets_cache):
    args = recipe.MathScriptArguments(dataset_name=str(TINY_DATA), **{field: "question"})
    with pytest.raises(ValueError, match=rf"no column `question` \(set by `{field}`\).*Set `--{field}`"):
        recipe.to_prompts(recipe.load_math_dataset(args, "train"), args)


def test_local_file_has_no_test_split(recipe, offline_datasets_cache):
    args = recipe.MathScriptArguments(dataset_name=str(TINY_DATA))
    with pytest.raises(
        ValueError, match="only provides the `train` split, not `test`.*`dataset_test_split`.*.jsonl.*eval_strategy"
    ):
        recipe.load_math_dataset(args, "test")


EVAL_ROWS = [
    {"problem": "What is 1 + 1?", "solution": "1 + 1 = 2, so the answer is \\boxed{2}."},
    {"problem": "What is 3 * 5?", "solution": "3 * 5 = 15, so the answer is \\boxed{15}."},
]


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_local_test_file_is_loaded_as_the_eval_set(recipe, tmp_path, suffix, offline_datasets_cache):
    test_file = tmp_path / f"eval{suffix}"
    if suffix == ".jsonl":
        test_file.write_text("".join(json.dumps(row) + "\n" for row in EVAL_ROWS))
    else:
        test_file.write_text(json.dumps(EVAL_ROWS))
    args = recipe.MathScriptArguments(dataset_name=str(TINY_DATA), dataset_test_split=str(test_file))
    train = recipe.load_math_dataset(args, args.dataset_train_split)
    evaluation = recipe.load_math_dataset(args, args.dataset_test_split)
    assert train.to_list() == [json.loads(line) for line in TINY_DATA.read_text().splitlines() if line.strip()]
    assert evaluation.to_list() == EVAL_ROWS
    prompts = recipe.to_prompts(evaluation, args)
    assert prompts[1]["prompt"][1] == {"role": "user", "content": "What is 3 * 5?"}
    assert prompts[1]["solution"] == EVAL_ROWS[1]["solution"]


def test_missing_local_test_file_names_the_field(recipe, tmp_path, offline_datasets_cache):
    missing = tmp_path / "no_such_eval.jsonl"
    args = recipe.MathScriptArguments(dataset_name=str(TINY_DATA), dataset_test_split=str(missing))
    with pytest.raises(ValueError, match=rf"`dataset_test_split` is {missing}.*no such file"):
        recipe.load_math_dataset(args, args.dataset_test_split)


def test_dataset_test_split_help_documents_local_files(recipe):
    from dataclasses import fields

    help_text = next(f for f in fields(recipe.MathScriptArguments) if f.name == "dataset_test_split").metadata["help"]
    assert ".jsonl" in help_text and "eval" in help_text


@pytest.mark.parametrize(
    "config", ["verigate_math.yaml", "gsm8k.yaml", "tiny/verigate_math.yaml"], ids=["math", "gsm8k", "tiny"]
)
def test_shipped_configs_parse_with_the_recipes_parser(recipe, config, tmp_path):
    """Every key of the shipped YAMLs is a field the installed TRL/transformers knows (README's GPU commands)."""
    from trl import ModelConfig, TrlParser

    from trl_verigate import VeriGateConfig

    parser = TrlParser((recipe.MathScriptArguments, VeriGateConfig, ModelConfig))
    # bf16 and use_cpu are overridden because this machine has no GPU; everything else comes from the file.
    script_args, training_args, model_args = parser.parse_args_and_config(
        args=["--config", str(REPO_ROOT / "recipes" / config), "--bf16", "false", "--use_cpu", "true"]
        + ["--output_dir", str(tmp_path)]
    )
    with open(REPO_ROOT / "recipes" / config) as handle:
        raw = yaml.safe_load(handle)
    assert script_args.dataset_name == raw["dataset_name"]
    assert model_args.model_name_or_path == raw["model_name_or_path"]
    assert training_args.prm_type == raw["prm_type"]
    assert training_args.num_generations == raw["num_generations"]


def test_missing_dataset_name_is_explained(recipe):
    with pytest.raises(ValueError, match="`dataset_name` is not set"):
        recipe.load_math_dataset(recipe.MathScriptArguments(), "train")


def write_tiny_config(tiny_models: dict, tmp_path: Path) -> Path:
    """The shipped tiny YAML, pointed at the test's tiny models and tmp output, so the test exercises that file."""
    return write_tiny_recipe_config(
        tiny_models,
        tmp_path,
        max_steps=TRAIN_STEPS,
        run_name="verigate-e2e",
        # A list only works from YAML: on the command line transformers parses `report_to` as one string.
        report_to=["wandb", "mlflow"],
    )


def tracker_env(tmp_path: Path) -> dict:
    return offline_env(
        tmp_path,
        WANDB_MODE="offline",
        WANDB_DIR=str(tmp_path),
        WANDB_PROJECT="verigate-e2e",
        WANDB_SILENT="true",
        # MLflow 3 refuses new file stores; sqlite is its recommended local backend.
        MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'mlflow.db'}",
        MLFLOW_EXPERIMENT_NAME="verigate-e2e",
    )


def run_recipe(launcher: list[str], config: Path, tmp_path: Path) -> str:
    """The run's stdout."""
    command = [*launcher, str(RECIPE), "--config", str(config)]
    result = subprocess.run(
        command, cwd=REPO_ROOT, env=tracker_env(tmp_path), capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    return result.stdout


def assert_verigate_metrics_tracked(tmp_path: Path, num_processes: int) -> None:
    wandb_runs = wandb_offline_history(tmp_path)
    assert len(wandb_runs) == 1, f"expected one wandb run (rank 0 only), found {len(wandb_runs)}"
    # transformers' WandbCallback prefixes training logs with "train/".
    wandb_rows = [row for row in wandb_runs[0] if "train/verigate/gate_rate" in row]
    assert [row["train/global_step"] for row in wandb_rows] == list(range(1, TRAIN_STEPS + 1))
    for row in wandb_rows:
        for metric in ALWAYS_LOGGED:
            assert f"train/{metric}" in row, f"{metric} missing from wandb row {sorted(row)}"
        assert 0.0 <= row["train/verigate/gate_rate"] <= 1.0
    prm_rows = [row for row in wandb_rows if row["train/verigate/prm_completions_scored"] > 0]
    assert prm_rows, "no step sent a gated group to the PRM"
    for row in prm_rows:
        assert row["train/verigate/gate_rate"] > 0.0
        assert row["train/verigate/steps_per_completion"] >= 1.0
        assert 0.0 <= row["train/verigate/prm_step_score_mean"] <= 1.0  # Qwen-Math PRM scores are probabilities

    mlflow_run = assert_mlflow_matches_wandb(tmp_path, wandb_rows, ALWAYS_LOGGED + LOGGED_WHEN_PRM_RAN, every_row=False)

    # The epoch advances by the share of prompts one step consumes over all processes: a launch that silently ran
    # fewer processes would show up here.
    tiny_config = yaml.safe_load(TINY_CONFIG.read_text())
    num_prompts = len(TINY_DATA.read_text().splitlines())
    prompts_per_step = num_processes * tiny_config["per_device_train_batch_size"] // tiny_config["num_generations"]
    # The end-of-training summary logs the last step's epoch a second time, hence the dict.
    epochs = dict(mlflow_run["epoch"])
    assert epochs == pytest.approx({step: step * prompts_per_step / num_prompts for step in range(1, TRAIN_STEPS + 1)})


@pytest.mark.slow
def test_recipe_single_process_logs_verigate_metrics_to_wandb_and_mlflow(tiny_models, tmp_path):
    config = write_tiny_config(tiny_models, tmp_path)
    stdout = run_recipe([sys.executable], config, tmp_path)
    assert_verigate_metrics_tracked(tmp_path, num_processes=1)
    assert (tmp_path / "output" / "config.json").is_file(), "the recipe did not save the trained policy"
    # The end-of-run summary: the metrics table with one column per step, where things went, and the plot.
    table = stdout.split("VeriGate metrics per step:\n", 1)[1].splitlines()
    assert table[0].split() == ["step", *(str(step) for step in range(1, TRAIN_STEPS + 1))]
    assert any(line.split()[0] == "verigate/gate_rate" for line in table[1:])
    assert f"Model: {tmp_path / 'output'}" in stdout
    logged = json.loads((tmp_path / "output" / "verigate_metrics.json").read_text())
    assert [row["step"] for row in logged] == list(range(1, TRAIN_STEPS + 1))
    assert (tmp_path / "output" / "verigate_metrics.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
def test_recipe_two_gloo_processes_logs_verigate_metrics_from_rank_zero(tiny_models, tmp_path):
    config = write_tiny_config(tiny_models, tmp_path)
    # `accelerate launch --cpu --num_processes 2` starts a single process, so launch as multi-GPU and let
    # `use_cpu: true` in the config make accelerate pick gloo on CPU.
    launcher = [
        *(sys.executable, "-m", "accelerate.commands.launch"),
        *("--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no"),
        *("--dynamo_backend", "no", "--main_process_port", str(free_port())),
    ]
    run_recipe(launcher, config, tmp_path)
    assert_verigate_metrics_tracked(tmp_path, num_processes=2)


def never_correct(completions, **kwargs):
    return [0.0] * len(completions)


@pytest.mark.slow
def test_gated_groups_get_token_level_advantages_where_grpo_has_none(tiny_models, tmp_path):
    """With a verifier that is never satisfied GRPO's advantages are all 0; VeriGate's are (B, T) and not."""
    from datasets import load_dataset

    from trl_verigate import VeriGateConfig, VeriGateGRPOTrainer

    dataset = load_dataset("json", data_files=str(TINY_DATA), split="train", cache_dir=str(tmp_path / "cache"))
    dataset = dataset.map(lambda row: {"prompt": [{"role": "user", "content": row["problem"]}]})
    num_generations = 4
    config = VeriGateConfig(
        output_dir=str(tmp_path / "output"),
        use_cpu=True,
        seed=0,
        num_generations=num_generations,
        per_device_train_batch_size=8,
        max_completion_length=24,
        max_steps=1,
        beta=0.0,
        report_to="none",
        save_strategy="no",
        prm_type="qwen_math",
        prm_model_name_or_path=tiny_models["prm_qwen_math"],
    )
    trainer = VeriGateGRPOTrainer(
        model=tiny_models["policy"], reward_funcs=[never_correct], args=config, train_dataset=dataset
    )
    batches = []
    score_batch = trainer._generate_and_score_completions

    def recording_score_batch(inputs):
        batch = score_batch(inputs)
        batches.append(batch)
        return batch

    trainer._generate_and_score_completions = recording_score_batch
    trainer.train()

    assert len(batches) == 1
    advantages, completion_mask = batches[0]["advantages"], batches[0]["completion_mask"]
    assert advantages.shape == completion_mask.shape  # token-level: (completions, completion tokens)
    assert torch.all(advantages[completion_mask == 0] == 0), "padding tokens must carry no advantage"
    groups = advantages.view(-1, num_generations, advantages.shape[1])
    for group in groups:
        # Within a group the normalized advantages of distinct PRM scores cannot all vanish.
        assert group.abs().sum() > 0, "a gated group got no learning signal"
    assert trainer.state.log_history[0]["verigate/gate_rate"] == 1.0
