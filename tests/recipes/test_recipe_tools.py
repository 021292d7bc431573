"""What the recipes share (recipes/recipe_tools.py): flags are spelled out in full, a missing local dataset is named
before anything loads, and the end-of-run summary (metrics table, where things went, plot)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launch import REPO_ROOT, TINY_CONFIG, load_recipe, offline_env

recipe_tools = load_recipe("recipe_tools")
RECIPES = ["verigate_math", "lean_process_grpo", "coq_process_grpo", "es"]
# A flag each recipe's parser knows, misspelled as a prefix argparse would otherwise complete, a value and its parse.
MISSPELLED = {
    "verigate_math": ("--prm_typ", "--prm_type", "symbolic", "symbolic"),
    "lean_process_grpo": ("--prover_timeou", "--prover_timeout", "30", 30.0),
    "coq_process_grpo": ("--coq_comman", "--coq_command", "coqidetop", ["coqidetop"]),
    "es": ("--population_siz", "--population_size", "4", 4),
}


@pytest.mark.parametrize("recipe_name", RECIPES)
def test_recipes_refuse_abbreviated_flags(recipe_name, tmp_path):
    recipe = load_recipe(recipe_name)
    misspelled, full, value, parsed_value = MISSPELLED[recipe_name]
    base = ["--output_dir", str(tmp_path), "--dataset_name", "x.jsonl", "--use_cpu", "true"]
    with pytest.raises(ValueError, match=rf"Unknown flag {misspelled} .*did you mean {full}\?"):
        recipe.parse_args([*base, misspelled, value])
    with pytest.raises(ValueError, match=rf"Unknown flag {misspelled} "):
        recipe.parse_args([*base, f"{misspelled}={value}"])
    parsed = recipe.parse_args([*base, full, value])
    assert parsed_value in [getattr(group, full.removeprefix("--"), None) for group in parsed]


@pytest.mark.slow
def test_a_misspelled_flag_stops_the_recipe_before_it_trains(tmp_path):
    # What a user runs; before, `--prm_typ` was read as `--prm_type` and the run trained.
    command = [sys.executable, "recipes/verigate_math.py", "--config", str(TINY_CONFIG), "--prm_typ", "symbolic"]
    command += ["--output_dir", str(tmp_path)]
    result = subprocess.run(command, cwd=REPO_ROOT, env=offline_env(tmp_path), capture_output=True, text=True)
    assert result.returncode != 0
    assert "Unknown flag --prm_typ (flags must be spelled out in full); did you mean --prm_type?" in result.stderr


@pytest.mark.slow
def test_a_missing_relative_dataset_file_is_named_before_models_load(tmp_path):
    (tmp_path / "data").mkdir()
    command = [sys.executable, str(REPO_ROOT / "recipes" / "verigate_math.py"), "--config", str(TINY_CONFIG)]
    command += ["--dataset_name", "data/train.jsonl", "--output_dir", str(tmp_path / "out")]
    command += ["--model_name_or_path", str(tmp_path / "no_model")]  # loading it first would fail differently
    result = subprocess.run(command, cwd=tmp_path, env=offline_env(tmp_path), capture_output=True, text=True)
    assert result.returncode == 2
    assert "verigate_math.py: error: `dataset_name` is data/train.jsonl, a local path, but there is no such file" in (
        result.stderr
    )
    assert "ConnectionError" not in result.stderr


@pytest.mark.parametrize(
    "name, make, is_path",
    [
        ("data/train.jsonl", "data/", True),  # the directory exists, the file does not
        ("train.json", None, True),
        ("data/train", "data/", True),
        ("./train", None, True),
        ("openai/gsm8k", None, False),
        ("gsm8k", None, False),
    ],
)
def test_which_dataset_names_are_local_paths(name, make, is_path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if make:
        (tmp_path / make).mkdir()
    assert recipe_tools.looks_like_a_local_path(name) is is_path
    if is_path:
        with pytest.raises(FileNotFoundError, match=rf"`dataset_name` is {name}, a local path, but there is no such"):
            recipe_tools.check_dataset_name(name)
    else:
        recipe_tools.check_dataset_name(name)  # a hub id: left to `datasets`


def test_existing_local_dataset_paths_pass(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text("{}\n")
    recipe_tools.check_dataset_name("data/train.jsonl")
    recipe_tools.check_dataset_name("data")  # a directory `datasets` can load


@pytest.mark.parametrize("recipe_name", RECIPES)
def test_recipe_mains_check_the_dataset_name_first(recipe_name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    recipe = load_recipe(recipe_name)
    args = recipe.parse_args(
        ["--dataset_name", "data/missing.jsonl", "--output_dir", str(tmp_path), "--model_name_or_path", "nowhere"]
        + ["--use_cpu", "true"]
    )
    with pytest.raises(FileNotFoundError, match="`dataset_name` is data/missing.jsonl"):
        recipe.main(*args)


@pytest.mark.parametrize(
    "recipe_name,config", [("verigate_math", "verigate_math.yaml"), ("lean_process_grpo", "lean_process_grpo.yaml")]
)
def test_bf16_weights_without_an_fp32_master_stop_the_recipe_before_models_load(
    recipe_name, config, tmp_path, monkeypatch
):
    """The shipped GPU configs load the policy in bf16; under ddp.yaml (no DeepSpeed, no FSDP) nothing keeps an fp32
    master, so the recipe must refuse before any download or load, saying what to do instead."""
    for variable in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP"):
        monkeypatch.delenv(variable, raising=False)
    recipe = load_recipe(recipe_name)
    args = recipe.parse_args(
        ["--config", str(REPO_ROOT / "recipes" / config), "--output_dir", str(tmp_path), "--use_cpu", "true"]
        + ["--bf16", "false", "--use_vllm", "false", "--dataset_name", str(TINY_CONFIG)]
    )
    with pytest.raises(ValueError, match=r"dtype=bfloat16 without DeepSpeed or FSDP .*set --dtype float32.*zero2.yaml"):
        recipe.main(*args)


def test_the_dtype_check_lets_through_what_keeps_an_fp32_master(tmp_path, monkeypatch, tiny_models):
    from types import SimpleNamespace

    from trl import ModelConfig

    for variable in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP"):
        monkeypatch.delenv(variable, raising=False)
    training = SimpleNamespace(deepspeed=None, fsdp=[], learning_rate=1e-6)
    bf16 = ModelConfig(model_name_or_path="some/model", dtype="bfloat16")
    with pytest.raises(ValueError, match="no fp32 master"):
        recipe_tools.check_policy_dtype(training, bf16)
    recipe_tools.check_policy_dtype(training, ModelConfig(model_name_or_path="some/model", dtype="float32"))
    recipe_tools.check_policy_dtype(training, ModelConfig(model_name_or_path="m", dtype="bfloat16", use_peft=True))
    recipe_tools.check_policy_dtype(SimpleNamespace(deepspeed={"zero_optimization": {}}, fsdp=[]), bf16)
    recipe_tools.check_policy_dtype(SimpleNamespace(deepspeed=None, fsdp=["full_shard"]), bf16)
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")  # what `accelerate launch --config_file zero2.yaml` sets
    recipe_tools.check_policy_dtype(training, bf16)
    monkeypatch.delenv("ACCELERATE_USE_DEEPSPEED")
    # dtype auto loads the checkpoint's own dtype: read from its config.json.
    checkpoint = tmp_path / "bf16_checkpoint"
    checkpoint.mkdir()
    config = json.loads((Path(tiny_models["policy"]) / "config.json").read_text())
    (checkpoint / "config.json").write_text(json.dumps({**config, "dtype": "bfloat16", "torch_dtype": "bfloat16"}))
    with pytest.raises(ValueError, match="dtype=auto without DeepSpeed"):
        recipe_tools.check_policy_dtype(training, ModelConfig(model_name_or_path=str(checkpoint), dtype="auto"))
    recipe_tools.check_policy_dtype(training, ModelConfig(model_name_or_path=tiny_models["policy"], dtype="auto"))


# ---------------------------------------------------------------- end-of-run summary

# Three logging steps as transformers records them, then the end-of-training summary row (no metrics).
LOG_HISTORY = [
    {"step": 1, "loss": 0.1, "reward": 0.0, "verigate/gate_rate": 1.0, "verigate/prm_step_score_mean": 0.5},
    {"step": 2, "loss": 0.2, "reward": 0.25, "verigate/gate_rate": 0.5},
    {"step": 3, "loss": 0.3, "reward": 0.5, "verigate/gate_rate": 0.0, "verigate/prm_step_score_mean": 0.75},
    {"step": 3, "train_runtime": 12.0, "train_loss": 0.2},
]


def test_metrics_table_has_a_column_per_step_and_a_row_per_metric():
    lines = recipe_tools.metrics_table(LOG_HISTORY).splitlines()
    assert [line.split() for line in lines] == [
        ["step", "1", "2", "3"],
        ["reward", "0", "0.25", "0.5"],
        ["verigate/gate_rate", "1", "0.5", "0"],
        ["verigate/prm_step_score_mean", "0.5", "-", "0.75"],  # not logged at step 2
    ]
    assert recipe_tools.metrics_table([{"step": 1, "loss": 0.1}]) == "No verigate/* metrics were logged."


def test_long_runs_show_evenly_spaced_steps_ending_with_the_last():
    history = [{"step": step, "verigate/gate_rate": step / 100} for step in range(1, 101)]
    header = recipe_tools.metrics_table(history).splitlines()[0].split()
    # 8 columns over steps 1..100: indices round(k * 99 / 7) for k = 0..7, i.e. 0, 14, 28, 42, 57, 71, 85, 99.
    assert header == ["step", "1", "15", "29", "43", "58", "72", "86", "100"]


def test_summarize_run_prints_the_table_and_writes_metrics_and_plot(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "w"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    printed = []
    recipe_tools.summarize_run(LOG_HISTORY, str(tmp_path / "out"), ["wandb"], printed.append)
    text = "\n".join(printed)
    assert recipe_tools.metrics_table(LOG_HISTORY, "verigate/", recipe_tools.VERIGATE_SUMMARY.also) in text
    assert f"Model: {tmp_path / 'out'}" in text
    assert f"wandb (offline): {tmp_path / 'w' / 'wandb'}" in text
    assert json.loads((tmp_path / "out" / "verigate_metrics.json").read_text()) == LOG_HISTORY[:3]
    png = (tmp_path / "out" / "verigate_metrics.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    plot = tmp_path / "out" / "verigate_metrics.png"
    assert f"Plot of gate rate, reward, PRM step score per optimizer step: {plot}" in text


def test_without_matplotlib_the_plot_is_skipped_with_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    printed = []
    recipe_tools.summarize_run(LOG_HISTORY, str(tmp_path), [], printed.append)
    assert printed[-2] == "No plot: matplotlib is not installed (pip install matplotlib)."
    assert "Trackers: none (report_to: none)" in printed
    assert not (tmp_path / "verigate_metrics.png").exists()


# ---------------------------------------------------------------- pass@k during training


@pytest.mark.slow
def test_the_math_recipe_switches_pass_at_k_on_from_its_config(tiny_models, tmp_path, monkeypatch):
    from tests.launch import write_tiny_recipe_config

    recipe = load_recipe("verigate_math")
    trainers = []
    train_and_save = recipe.train_and_save
    monkeypatch.setattr(
        recipe, "train_and_save", lambda trainer, *args: (trainers.append(trainer), train_and_save(trainer, *args))
    )
    monkeypatch.chdir(REPO_ROOT)  # the tiny config's dataset path is relative to the repository
    config = write_tiny_recipe_config(
        tiny_models,
        tmp_path,
        max_steps=2,
        pass_at_k_dataset="recipes/tiny/math_tiny.jsonl",
        pass_at_k_limit=2,
        pass_at_k_n=2,
        pass_at_k_k="1,2",
        pass_at_k_steps=1,
        pass_at_k_max_new_tokens=8,
    )
    recipe.main(*recipe.parse_args(["--config", str(config), "--output_dir", str(tmp_path / "out")]))
    logged = [row for row in trainers[0].state.log_history if "eval/pass@1" in row]
    assert [row["step"] for row in logged] == [1, 2]
    assert all(0.0 <= row["eval/pass@1"] <= row["eval/pass@2"] <= 1.0 for row in logged)

    # Unset, nothing is evaluated.
    trainers.clear()
    recipe.main(
        *recipe.parse_args(["--config", str(config), "--output_dir", str(tmp_path / "off"), "--pass_at_k_dataset", ""])
    )
    assert not any("eval/pass@1" in row for row in trainers[0].state.log_history)


@pytest.mark.parametrize("recipe_name", ["verigate_math", "lean_process_grpo"])
@pytest.mark.parametrize(
    "flags, message",
    [
        (["--pass_at_k_n", "2", "--pass_at_k_k", "4"], "pass_at_k_k: k=4 is larger than pass_at_k_n=2"),
        (["--pass_at_k_k", "1,x"], "pass_at_k_k must be comma-separated integers"),
        (["--pass_at_k_task", "proofs"], "pass_at_k_task must be math or lean"),
    ],
)
def test_bad_pass_at_k_settings_stop_the_recipe_when_it_parses(recipe_name, flags, message, tmp_path):
    # Parsing happens before any model loads; the callback is built only after the policy has.
    recipe = load_recipe(recipe_name)
    base = ["--output_dir", str(tmp_path), "--dataset_name", "x.jsonl", "--use_cpu", "true"]
    with pytest.raises(ValueError, match=message):
        recipe.parse_args([*base, "--pass_at_k_dataset", "eval.jsonl", *flags])
