"""Bad input to a recipe is one line naming the field and the fix, exit status 2, no traceback, and nothing trains:
each case runs the recipe's entry point (`recipe_tools.run_recipe`) with a `train` that records whether it was
reached. One slow test runs a recipe as a user does, plain and under `accelerate launch --quiet`."""

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.launch import REPO_ROOT, TINY_YAMLS, load_recipe, offline_env, write_tiny_recipe_config

recipe_tools = load_recipe("recipe_tools")


def run_entry_point(recipe_name: str, argv: list[str], capsys, train=None) -> str:
    """The recipe's entry point on ``argv`` (after `--config` of its tiny YAML): it must exit 2 before training;
    returns its line. ``train``: the recipe's own (default: one that records whether it was reached)."""
    recipe = load_recipe(recipe_name)
    trained = []
    with pytest.raises(SystemExit) as exit_info:
        recipe_tools.run_recipe(
            recipe.parse_args, recipe.prepare, train or (lambda *a, **k: trained.append(a)), argv=argv
        )
    assert exit_info.value.code == 2
    assert trained == []
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    lines = captured.err.strip().splitlines()
    # The recipe's own `train` may draw a progress bar over the dataset first; the line is then the last one.
    assert len(lines) == 1 or train is not None, captured.err
    return lines[-1]


@pytest.fixture
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)  # the tiny YAMLs' REPL commands are relative to the repository root


@pytest.fixture
def tiny_config(tmp_path, tiny_models):
    """``tiny_config(recipe_name, **changes)``: `--config` of the recipe's tiny YAML on the session's tiny models,
    so every check past the models' own is reached."""
    return lambda recipe_name, **changes: [
        "--config",
        str(write_tiny_recipe_config(tiny_models, tmp_path, recipe_name, **changes)),
    ]


@pytest.mark.parametrize(
    "recipe_name, misspelled, meant",
    [
        ("verigate_math", "prm_batch_sise", "prm_batch_size"),
        ("lean_process_grpo", "prover_timout", "prover_timeout"),
        ("coq_process_grpo", "prover_timout", "prover_timeout"),
        ("es", "population_sise", "population_size"),
    ],
)
def test_a_misspelled_yaml_key_names_the_key_and_the_closest_field(recipe_name, misspelled, meant, tmp_path, capsys):
    config = yaml.safe_load(TINY_YAMLS[recipe_name].read_text())
    config[misspelled] = config.pop(meant, 8)
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(config))
    line = run_entry_point(recipe_name, ["--config", str(path)], capsys)
    assert line.endswith(f"error: --config {path}: unknown key `{misspelled}`; did you mean `{meant}`?")


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--prm_typ", "symbolic"],
            "Unknown flag --prm_typ (flags must be spelled out in full); did you mean --prm_type?",
        ),
        (["--max_steps", "three"], "argument --max_steps/--max-steps: invalid int value: 'three'"),
        (["--num_generations", "0"], "num_generations=0: GRPO compares the completions of one prompt"),
        (["--num_generations", "1"], "set num_generations to a whole number >= 2"),
        (
            ["--dataset_name", "data/missing.jsonl"],
            "`dataset_name` is data/missing.jsonl, a local path, but there is no",
        ),
        (
            ["--dataset_name", "nobody/no-such-dataset"],
            "neither a local file nor a dataset the hub serves to this machine",
        ),
        (["--model_name_or_path", "nobody/no-such-model"], "neither a local folder nor a model the hub serves to this"),
        (["--model_name_or_path", "./no/such/folder"], "`model_name_or_path` is ./no/such/folder, a local path, but"),
        (
            ["--prm_model_name_or_path", "/no/such/prm"],
            "prm_model_name_or_path='/no/such/prm' is not an existing folder",
        ),
    ],
)
def test_bad_flags_of_the_math_recipe_are_one_line(argv, message, tiny_config, capsys, in_repo):
    line = run_entry_point("verigate_math", [*tiny_config("verigate_math"), *argv], capsys)
    assert line.startswith(f"{os.path.basename(sys.argv[0])}: error: ")
    assert message in line


@pytest.mark.parametrize("recipe_name", ["verigate_math", "lean_process_grpo", "coq_process_grpo", "es"])
@pytest.mark.parametrize("flags", [["--learning_rate=-1e-5"], ["--learning_rate", "-1e-5"], ["--learning_rate", "-3"]])
def test_a_negative_learning_rate_is_read_as_a_number_and_refused(recipe_name, flags, tiny_config, capsys, in_repo):
    # `-1e-5` after a flag is a value (argparse alone says "expected one argument"), and a negative rate is refused.
    line = run_entry_point(recipe_name, [*tiny_config(recipe_name), *flags], capsys)
    assert "learning_rate=" in line and "a negative rate moves the weights against the reward" in line


def test_a_negative_learning_rate_in_the_yaml_is_refused(tiny_config, capsys, in_repo):
    line = run_entry_point("verigate_math", tiny_config("verigate_math", learning_rate=-1e-5), capsys)
    assert "learning_rate=-1e-05: a negative rate" in line


@pytest.mark.parametrize("content", ["", "\n", "[]"])
@pytest.mark.parametrize("field", ["dataset_name", "dataset_test_split"])
def test_a_dataset_file_without_rows_is_named(content, field, tiny_config, tmp_path, capsys, in_repo):
    path = tmp_path / ("empty.json" if content == "[]" else "empty.jsonl")
    path.write_text(content)
    argv = [*tiny_config("verigate_math"), f"--{field}", str(path)]
    if field == "dataset_test_split":
        argv += ["--eval_strategy", "steps"]
    line = run_entry_point("verigate_math", argv, capsys)
    assert f"`{field}` is {path}, a file with no rows" in line


def test_a_missing_config_file_is_one_line(tmp_path, capsys):
    line = run_entry_point("verigate_math", ["--config", str(tmp_path / "nope.yaml")], capsys)
    assert f"--config {tmp_path / 'nope.yaml'}: no such file" in line


def not_executable(tmp_path: Path) -> str:
    path = tmp_path / "repl"
    path.write_text("#!/bin/sh\n")
    path.chmod(stat.S_IRUSR | stat.S_IWUSR)
    return str(path)


@pytest.mark.parametrize("recipe_name", ["lean_process_grpo", "es"])
def test_a_repl_command_that_cannot_run_is_refused_before_the_model_loads(
    recipe_name, tiny_config, tmp_path, capsys, in_repo
):
    base = tiny_config(recipe_name)
    line = run_entry_point(recipe_name, [*base, "--lean_repl_command", "/nonexistent/repl"], capsys)
    assert "`lean_repl_command` runs /nonexistent/repl, which does not exist; give an argv whose program" in line
    path = not_executable(tmp_path)
    line = run_entry_point(recipe_name, [*base, "--lean_repl_command", path], capsys)
    assert f"`lean_repl_command` runs {path}, which is not an executable file" in line
    line = run_entry_point(recipe_name, [*base, "--lean_repl_command", "no-such-repl-program", "serve"], capsys)
    assert "`lean_repl_command` runs no-such-repl-program, which is not on PATH" in line


def test_a_lean_recipe_without_a_verifier_is_refused_before_the_model_loads(tiny_config, capsys, in_repo):
    line = run_entry_point("lean_process_grpo", tiny_config("lean_process_grpo", lean_repl_command=None), capsys)
    assert "no Lean verifier: set lean_repl_command (a local pool" in line and "or lean_server_urls" in line


def test_a_coq_config_refuses_the_prover_key_and_lean_settings(tiny_config, capsys, in_repo):
    line = run_entry_point("coq_process_grpo", tiny_config("coq_process_grpo", prover="lean"), capsys)
    assert line.endswith("unknown key `prover`; did you mean `prover_header`?") or "unknown key `prover`" in line
    line = run_entry_point(
        "coq_process_grpo", [*tiny_config("coq_process_grpo"), "--lean_repl_command", "repl"], capsys
    )
    assert "prover='coq' with lean_repl_command or lean_server_urls set: those configure Lean" in line


def test_a_coq_command_that_cannot_run_is_refused_before_the_model_loads(tiny_config, capsys, in_repo):
    base = tiny_config("coq_process_grpo")
    line = run_entry_point("coq_process_grpo", [*base, "--coq_command", "/nonexistent/coqidetop"], capsys)
    assert "`coq_command` runs /nonexistent/coqidetop, which does not exist" in line


@pytest.mark.parametrize(
    "recipe_name, project_field",
    [
        ("lean_process_grpo", "prover_project_dir"),
        ("coq_process_grpo", "prover_project_dir"),
        ("es", "lean_project_dir"),
    ],
)
def test_a_verifier_that_cannot_run_a_trivial_proof_is_one_line_before_the_policy_loads(
    recipe_name, project_field, tiny_config, tiny_models, tmp_path, capsys, in_repo
):
    """The recipe's own `train`: its liveness proof fails (the prover's project folder does not exist), and the
    policy is never loaded: its weights here are not a checkpoint, so loading them would fail otherwise."""
    if recipe_name.startswith("coq"):
        pytest.importorskip("trl_verigate.coq")
    policy = tmp_path / "unloadable-policy"
    shutil.copytree(tiny_models["policy"], policy)
    (policy / "model.safetensors").write_bytes(b"not a checkpoint")
    argv = [*tiny_config(recipe_name), "--model_name_or_path", str(policy)]
    argv += [f"--{project_field}", str(tmp_path / "no-such-project"), "--output_dir", str(tmp_path / "out")]
    line = run_entry_point(recipe_name, argv, capsys, train=load_recipe(recipe_name).train)
    assert "the verifier cannot run a trivial proof (error: " in line
    assert ("coq-doctor" if recipe_name.startswith("coq") else "lean-doctor") in line


def test_an_es_population_that_cannot_move_is_one_line(tiny_config, capsys, in_repo):
    argv = [*tiny_config("es"), "--population_size", "1", "--antithetic", "false"]
    line = run_entry_point("es", argv, capsys)
    assert "population_size=1 without antithetic" in line and "set population_size >= 2" in line


def test_other_ranks_wait_for_the_first_to_print_the_line_then_print_theirs(tmp_path, capsys, monkeypatch):
    waits = []
    monkeypatch.setattr(recipe_tools.time, "sleep", waits.append)
    recipe = load_recipe("verigate_math")
    for rank, expected_waits in (("0", []), ("1", [recipe_tools.OTHER_RANKS_WAIT_S])):
        monkeypatch.setenv("RANK", rank)
        waits.clear()
        with pytest.raises(SystemExit) as exit_info:
            recipe_tools.run_recipe(recipe.parse_args, recipe.prepare, None, argv=["--config", str(tmp_path / "x")])
        assert exit_info.value.code == 2 and waits == expected_waits
        assert f"--config {tmp_path / 'x'}: no such file" in capsys.readouterr().err


@pytest.mark.slow
def test_the_documented_lean_command_reaches_the_one_line_repl_error(tiny_models, tmp_path):
    # README and docs: `accelerate launch recipes/lean_process_grpo.py --config recipes/lean_process_grpo.yaml`; on a
    # machine without its GPU, model and data, those three are overridden so that the REPL check is the one reached.
    command = [str(Path(sys.executable).parent / "accelerate"), "launch", "--quiet", "--config_file"]
    command += [
        "recipes/accelerate/cpu.yaml",
        "recipes/lean_process_grpo.py",
        "--config",
        "recipes/lean_process_grpo.yaml",
    ]
    command += ["--model_name_or_path", tiny_models["policy"], "--dtype", "float32", "--use_cpu", "true"]
    command += ["--dataset_name", "recipes/tiny/lean_tiny.jsonl", "--output_dir", str(tmp_path / "out")]
    command += ["--lean_repl_command", "/nonexistent/repl"]
    result = subprocess.run(command, cwd=REPO_ROOT, env=offline_env(tmp_path), capture_output=True, text=True)
    output = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in output, output[-3000:]
    expected = "lean_process_grpo.py: error: `lean_repl_command` runs /nonexistent/repl, which does not exist; give "
    assert any(line.startswith(expected) for line in output.splitlines()), output


@pytest.mark.slow
def test_a_user_sees_one_line_plain_and_under_accelerate_launch_quiet(tmp_path):
    config = yaml.safe_load(TINY_YAMLS["verigate_math"].read_text())
    config["prm_batch_sise"] = config.pop("prm_batch_size")
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(config))
    expected = f"verigate_math.py: error: --config {path}: unknown key `prm_batch_sise`; did you mean `prm_batch_size`?"
    env = offline_env(tmp_path)
    plain = [sys.executable, "recipes/verigate_math.py", "--config", str(path)]
    result = subprocess.run(plain, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert (result.returncode, result.stderr) == (2, expected + "\n")
    assert "Traceback" not in result.stdout
    accelerate = [str(Path(sys.executable).parent / "accelerate"), "launch", "--quiet", "--config_file"]
    accelerate += ["recipes/accelerate/cpu.yaml", *plain[1:]]
    result = subprocess.run(accelerate, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    # accelerate turns the child's status 2 into 1 under --quiet (without it, into a CalledProcessError traceback).
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    assert expected in output.splitlines()
    # The line, wandb's offline note, and accelerate's 3-line note on its CPU thread default.
    assert len(output.splitlines()) <= 5, output
