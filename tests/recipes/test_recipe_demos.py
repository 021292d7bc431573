"""Every demo ends like `make demo`: a per-step table of its own metrics, a plot a person would rather look at, and
where the model, the metrics, the checkpoints and es_state.json went. `make demo-coq`'s config runs end to end on
the real Coq (slow)."""

import hashlib
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.launch import REPO_ROOT, load_recipe, offline_env

recipe_tools = load_recipe("recipe_tools")

ES_HISTORY = [
    {"step": 1, "es/reward_mean": 0.25, "es/reward_max": 0.5, "es/update_norm": 0.01},
    {"step": 2, "es/reward_mean": 0.5, "es/reward_max": 1.0, "es/update_norm": 0.02},
    {"step": 2, "train_runtime": 3.0},
]


def test_the_es_summary_says_where_the_checkpoints_and_es_state_went(tmp_path):
    pytest.importorskip("matplotlib")
    output = tmp_path / "run"
    for folder in (output / "checkpoint-10", output / "checkpoint-2", output):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "es_state.json").write_text("{}")
    printed = []
    recipe_tools.summarize_run(
        ES_HISTORY, str(output), "none", printed.append, summary=recipe_tools.ES_SUMMARY, state_file="es_state.json"
    )
    text = "\n".join(printed)
    assert "ES metrics per step:\nstep" in text
    assert [line.split() for line in text.splitlines() if line.startswith("es/reward_mean")] == [
        ["es/reward_mean", "0.25", "0.5"]
    ]
    assert f"Checkpoints (2): {output / 'checkpoint-2'}, {output / 'checkpoint-10'}" in printed  # step order
    states = [output / "es_state.json", output / "checkpoint-2" / "es_state.json"]
    assert f"es_state.json: {states[0]}, {states[1]}, {output / 'checkpoint-10' / 'es_state.json'}" in printed
    assert json.loads((output / "es_metrics.json").read_text()) == ES_HISTORY[:2]
    plot_line = f"Plot of the population's mean and best reward, the update's norm per ES iteration: {output / 'es_metrics.png'}"
    assert printed[-2:] == [plot_line, recipe_tools.reading(ES_HISTORY, recipe_tools.ES_SUMMARY)]
    assert (output / "es_metrics.png").read_bytes().startswith(b"\x89PNG")


def test_a_run_without_checkpoints_says_so(tmp_path, monkeypatch):
    printed = []
    history = [{"step": 1, "lean/pass_rate": 0.5}]
    monkeypatch.setattr(recipe_tools, "plot_metrics", lambda *args: False)
    recipe_tools.summarize_run(history, str(tmp_path), [], printed.append, summary=recipe_tools.process_summary("lean"))
    assert printed[0].startswith("\nLean process metrics per step:\nstep")
    assert "Checkpoints: none (save_strategy: no)" in printed


@pytest.mark.parametrize(
    "summary",
    [recipe_tools.VERIGATE_SUMMARY, recipe_tools.ES_SUMMARY, recipe_tools.process_summary("coq")],
    ids=lambda summary: summary.name,
)
def test_each_panel_is_labelled_and_its_legend_is_beside_the_lines(summary):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    history = [{"step": step, **{name: step / 4 for name in summary.plotted}} for step in range(1, 5)]
    figure = recipe_tools.metrics_figure(history, summary)
    try:
        assert len(figure.axes) == len(summary.panels)
        assert figure.axes[0].get_title() == summary.title and figure.axes[-1].get_xlabel() == summary.xlabel
        figure.canvas.draw()
        renderer = figure.canvas.get_renderer()
        for axes, panel in zip(figure.axes, summary.panels, strict=True):
            assert axes.get_ylabel() == panel.ylabel
            assert [line.get_label() for line in axes.get_lines()] == list(panel.metrics)
            assert len({(line.get_linestyle(), line.get_marker()) for line in axes.get_lines()}) == len(panel.metrics)
            legend = axes.get_legend().get_window_extent(renderer)
            assert legend.x0 >= axes.get_window_extent(renderer).x1  # entirely right of the axes: it covers no line
    finally:
        plt.close(figure)


def test_the_process_table_and_reading_show_the_gradient():
    history = [
        {"step": 1, "lean/pass_rate": 0.5, "grad_norm": 0.0, "loss": 0.1},
        {"step": 2, "lean/pass_rate": 0.5, "grad_norm": 1.5, "loss": 0.2},
    ]
    summary = recipe_tools.process_summary("lean")
    table = recipe_tools.metrics_table(history, summary.prefix, summary.also).splitlines()
    assert [line.split() for line in table[1:]] == [["grad_norm", "0", "1.5"], ["lean/pass_rate", "0.5", "0.5"]]
    assert recipe_tools.reading(history, summary) == (
        "Reading (2 steps): moved: grad_norm 0..1.5 | flat: lean/pass_rate 0.5 | never logged: lean/status/rejected, "
        "lean/status/failed, lean/first_error_relative"
    )


def test_the_captions_promise_only_panels_the_plots_have():
    coq = recipe_tools.process_summary("coq")
    assert "first error" in coq.caption and ("coq/first_error_relative",) in [p.metrics for p in coq.panels]
    assert "optimizer" not in recipe_tools.ES_SUMMARY.xlabel and "iteration" in recipe_tools.ES_SUMMARY.xlabel
    (prm_panel,) = [p for p in recipe_tools.VERIGATE_SUMMARY.panels if "verigate/prm_step_score_mean" in p.metrics]
    assert "PRM" in prm_panel.ylabel and prm_panel.metrics == ("verigate/prm_step_score_mean",)


def test_a_panel_whose_metric_was_never_logged_says_so():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    history = [{"step": 1, "coq/pass_rate": 0.0, "coq/status/rejected": 1.0, "coq/status/failed": 0.0}]
    figure = recipe_tools.metrics_figure(history, recipe_tools.process_summary("coq"))
    try:
        assert [text.get_text() for text in figure.axes[1].texts] == ["not logged in this run"]
        assert not figure.axes[0].texts
    finally:
        plt.close(figure)


def test_the_reading_names_what_moved_what_stayed_and_what_was_never_logged():
    history = [
        {"step": 1, "es/reward_mean": 0.25, "es/reward_max": 1.0},
        {"step": 2, "es/reward_mean": 0.5, "es/reward_max": 1.0},
        {"step": 2, "train_runtime": 3.0},
    ]
    assert recipe_tools.reading(history, recipe_tools.ES_SUMMARY) == (
        "Reading (2 steps): moved: es/reward_mean 0.25..0.5 | flat: es/reward_max 1 | never logged: es/update_norm"
    )


def test_demo_coq_config_parses_with_the_coq_recipe(tmp_path):
    recipe = load_recipe("coq_process_grpo")
    config = REPO_ROOT / "recipes" / "tiny" / "coq_process_grpo.yaml"
    script_args, training_args, model_args, _ = recipe.parse_args(
        ["--config", str(config), "--output_dir", str(tmp_path)]
    )
    assert training_args.prover == "coq" and training_args.num_generations == 4
    rows = [json.loads(line) for line in (REPO_ROOT / script_args.dataset_name).read_text().splitlines()]
    assert len(rows) == 8
    assert all(row["formal_statement"].startswith("Theorem ") and row["formal_statement"].endswith(".") for row in rows)
    assert {row["header"] for row in rows} == {training_args.prover_header}
    gpu_config = REPO_ROOT / "recipes" / "coq_process_grpo.yaml"
    on_cpu = ["--use_cpu", "true", "--bf16", "false", "--use_vllm", "false", "--output_dir", str(tmp_path)]
    _, gpu_args, _, _ = recipe.parse_args(["--config", str(gpu_config), *on_cpu])
    assert (
        gpu_args.prover == "coq" and gpu_args.prover_header == yaml.safe_load(gpu_config.read_text())["prover_header"]
    )


def test_the_warm_start_teaches_each_demo_its_own_prompts_with_right_and_wrong_completions():
    warm_start = load_recipe("tiny.warm_start")
    math = warm_start.math_examples()
    rows = [json.loads(line) for line in (REPO_ROOT / "recipes/tiny/math_tiny.jsonl").read_text().splitlines()]
    assert len(math) == len(rows) + (len(rows) + 1) // 2  # two answers for even rows, one for odd rows
    first = [example["completion"][0]["content"] for example in math[:2]]
    assert first == ["The answer is 12.\n\n\\boxed{12}", "The answer is 13.\n\n\\boxed{13}"]  # 3 boxes of 4
    assert math[0]["prompt"][-1] == {"role": "user", "content": rows[0]["problem"]}
    coq = warm_start.coq_examples()
    assert len(coq) == 16 and coq[0]["prompt"].endswith("Theorem add_zero_r : forall n : nat, n + 0 = n.\nProof.\n")
    assert [example["completion"] for example in coq[:2]] == [
        "intros. lia.\nQed.\n```",
        "intros. reflexivity.\nQed.\n```",
    ]
    lean = warm_start.lean_examples()
    assert len(lean) == 12 and {example["completion"] for example in lean} == {"  omega\n```", "  sorry\n```"}


def shipped_policy(kind: str) -> str:
    """The warm-started policy the ``kind`` demo runs, as shipped in recipes/tiny/warm/."""
    return str(REPO_ROOT / "recipes" / "tiny" / "warm" / kind)


@pytest.mark.parametrize("kind", ["math", "coq", "lean"])
def test_each_shipped_warm_start_was_built_from_the_data_and_completions_of_today(kind):
    """A shipped checkpoint goes stale when its demo's data or taught completions change: rebuild it then."""
    warm_start = load_recipe("tiny.warm_start")
    provenance = json.loads((Path(shipped_policy(kind)) / "provenance.json").read_text())
    data = REPO_ROOT / provenance["data"]["path"]
    assert provenance["data"]["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest(), "run `make warm-starts`"
    taught = {json.dumps(example["completion"]) for example in warm_start.EXAMPLES[kind]()}
    assert {json.dumps(completion) for completion in provenance["completions"]} == taught, "run `make warm-starts`"
    assert provenance["sft"]["trainer"] == "trl.SFTTrainer" and provenance["git_commit"]
    assert (Path(shipped_policy(kind)) / "model.safetensors").is_file()


@pytest.mark.slow
def test_the_warm_start_build_writes_a_checkpoint_and_its_provenance(tiny_models, tmp_path):
    warm_start = load_recipe("tiny.warm_start")
    out = tmp_path / "warm_lean"
    assert warm_start.build("lean", tiny_models["policy"], out, ["warm_start.py", "lean"], max_steps=2) == str(out)
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["sft"]["max_steps"] == 2 and provenance["command"] == ["warm_start.py", "lean"]
    assert provenance["base"] == tiny_models["policy"] and provenance["git_commit"]
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    assert not (out / "sft").exists() and not (out / "training_args.bin").exists()  # only the checkpoint stays


def _demo_rows(tmp_path, recipe: str, config: str, stem: str, *extra: str, policy: str):
    """Run the demo's recipe on ``policy``; return its metrics rows."""
    output = tmp_path / "run"
    command = [sys.executable, f"recipes/{recipe}.py", "--config", f"recipes/tiny/{config}.yaml"]
    command += ["--model_name_or_path", policy, "--output_dir", str(output), *extra]
    result = subprocess.run(
        command, cwd=REPO_ROOT, env=offline_env(tmp_path, TRL_EXPERIMENTAL_SILENCE="1"), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Reading (" in result.stdout.splitlines()[-1]
    return json.loads((output / f"{stem}.json").read_text())


@pytest.mark.slow
def test_demo_rewards_vary_and_the_gate_fires_on_some_groups_only(tiny_models, tmp_path):
    prm = ["--prm_model_name_or_path", tiny_models["prm_qwen_math"]]
    rows = _demo_rows(
        tmp_path, "verigate_math", "verigate_math", "verigate_metrics", *prm, policy=shipped_policy("math")
    )
    assert max(row["reward_std"] for row in rows) > 0
    assert 0 < sum(row["verigate/gate_rate"] for row in rows) / len(rows) < 1


@pytest.mark.slow
def test_demo_lean_trains_against_the_stand_in_with_a_gradient(tmp_path):
    rows = _demo_rows(tmp_path, "lean_process_grpo", "lean_process_grpo", "lean_metrics", policy=shipped_policy("lean"))
    assert max(row["lean/pass_rate"] for row in rows) > 0
    assert max(row["grad_norm"] for row in rows) > 0


def audit_arguments(makefile: str) -> list[str]:
    """The overrides `make demo-lean-audit` adds to demo-lean's command, read from the Makefile itself."""
    block = makefile.split("\ndemo-lean-audit:", 1)[1].split("\n\n", 1)[0]
    words = shlex.split(" ".join(line.strip().rstrip("\\") for line in block.splitlines()[2:]))
    overrides = words[words.index("recipes/tiny/lean_process_grpo.yaml") + 1 :]
    checker = makefile.split("AUDIT_CHECKER := ", 1)[1].split("\n", 1)[0].replace("$(VENV)/bin/python", sys.executable)
    overrides = [checker if word == "$(AUDIT_CHECKER)" else word for word in overrides]
    at = overrides.index("--output_dir")
    return overrides[:at] + overrides[at + 2 :]


@pytest.mark.slow
def test_demo_lean_audit_catches_the_hack_escalates_and_zeroes_its_rewards(tmp_path):
    """The stand-in REPL passes `omega`; the stand-in checker refuses it. The audit sample (r = 0.25) must draw one
    such pass, overturn it, escalate to rechecking every pass, and from then on no pass survives."""
    audit = audit_arguments((REPO_ROOT / "Makefile").read_text())
    rows = _demo_rows(
        tmp_path, "lean_process_grpo", "lean_process_grpo", "lean_metrics", *audit, policy=shipped_policy("lean")
    )
    assert sum(row["lean/recheck_overturned"] for row in rows) > 0
    escalated = [row["step"] for row in rows if row["lean/recheck_escalated"] == 1]
    assert escalated, "the audit never escalated"
    # After the escalating step every pass is rechecked and every omega pass overturned: nothing passes.
    assert all(row["lean/pass_rate"] == 0 for row in rows if row["step"] > escalated[0])


@pytest.mark.slow
def test_demo_es_makes_updates(tmp_path):
    rows = _demo_rows(tmp_path, "es", "es", "es_metrics", policy=shipped_policy("lean"))
    assert max(row["es/update_norm"] for row in rows) > 0


@pytest.mark.slow
@pytest.mark.usefixtures("coq_required")
def test_demo_coq_passes_and_fails_proofs_on_real_coq_and_ends_with_its_summary(tmp_path):
    policy = shipped_policy("coq")
    output = tmp_path / "run"
    command = [sys.executable, "recipes/coq_process_grpo.py", "--config", "recipes/tiny/coq_process_grpo.yaml"]
    command += ["--model_name_or_path", policy, "--output_dir", str(output), "--max_steps", "2"]
    result = subprocess.run(
        command, cwd=REPO_ROOT, env=offline_env(tmp_path, TRL_EXPERIMENTAL_SILENCE="1"), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Coq process metrics per step:\nstep" in result.stdout
    rows = json.loads((output / "coq_metrics.json").read_text())
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:
        statuses = [value for name, value in row.items() if name.startswith("coq/status/")]
        assert len(statuses) == 6 and sum(statuses) == pytest.approx(1.0)
        assert row["coq/status/error"] == 0 and row["coq/verification_failures"] == 0  # Coq answered every proof
    assert max(row["coq/pass_rate"] for row in rows) > 0 and max(row["coq/status/failed"] for row in rows) > 0
    assert (
        f"Plot of pass rate and verdicts, where the first error falls per optimizer step: {output / 'coq_metrics.png'}"
        in (result.stdout)
    )
    assert (output / "coq_metrics.png").is_file() and (output / "model.safetensors").is_file()
