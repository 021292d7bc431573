"""Datasets, formats and arguments of `trl-verigate evaluate`: every bad input fails before a model is loaded, with
a message naming the flag that fixes it."""

import json
import re

import pytest

from tests.evaluate.fakes import ListBackend
from trl_verigate.cli import build_parser, main
from trl_verigate.evaluate import command
from trl_verigate.evaluate.problems import detect_math_format, lean_problems, load_rows, math_problems
from trl_verigate.rewards.lean_proofs import DEFAULT_PROMPT_TEMPLATE, format_prompt

HEADER = "import Mathlib\n\n"
LEAN_ROWS = [
    {"name": "t1", "split": "test", "informal_prefix": "/-- one -/\n", "formal_statement": "theorem t1 : 1 = 1 := by\n",
     "goal": "⊢ 1 = 1", "header": HEADER},
    {"name": "t2", "split": "valid", "informal_prefix": "", "formal_statement": "theorem t2 : 2 = 2 := by\n",
     "goal": "⊢ 2 = 2", "header": HEADER},
]  # fmt: skip


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_lean_prompt_is_the_trainers_template(tmp_path):
    rows = load_rows(write_jsonl(tmp_path / "lean.jsonl", LEAN_ROWS), "test")
    problem_set = lean_problems(rows)
    (problem,) = problem_set.problems
    assert problem.id == "t1"
    expected = (
        "Complete the following Lean 4 code:\n\n```lean4\nimport Mathlib\n\n/-- one -/\ntheorem t1 : 1 = 1 := by\n"
    )
    assert problem.prompt == expected == format_prompt(LEAN_ROWS[0], DEFAULT_PROMPT_TEMPLATE)
    assert lean_problems(rows, conversational=True).problems[0].prompt == [{"role": "user", "content": expected}]


def test_split_column_filters_and_names_the_flag(tmp_path):
    path = write_jsonl(tmp_path / "lean.jsonl", LEAN_ROWS)
    assert [row["name"] for row in load_rows(path, "valid")] == ["t2"]
    with pytest.raises(ValueError, match=r"--split dev: no row .* has split 'dev'; its rows have \['test', 'valid'\]"):
        load_rows(path, "dev")


def test_dataset_folder_loads_its_named_split(tmp_path):
    # A folder with test.jsonl/train.jsonl loads like a hub dataset with those splits.
    folder = tmp_path / "ds"
    folder.mkdir()
    write_jsonl(folder / "test.jsonl", [{"problem": "p", "answer": "1"}])
    write_jsonl(folder / "train.jsonl", [{"problem": "q", "answer": "2"}, {"problem": "r", "answer": "3"}])
    assert [row["problem"] for row in load_rows(str(folder), "test")] == ["p"]
    with pytest.raises(ValueError, match=r"--split dev: .* has the splits \['test', 'train'\]"):
        load_rows(str(folder), "dev")
    # One split whose rows carry no `split` column: another split name is an error, not that split's rows.
    single = tmp_path / "single"
    single.mkdir()
    write_jsonl(single / "test.jsonl", [{"problem": "p", "answer": "1"}])
    assert len(load_rows(str(single), "test")) == 1
    with pytest.raises(ValueError, match=r"--split valid: .* has the splits \['test'\]"):
        load_rows(str(single), "valid")
    # One split of DeepSeek rows that say their split: the --split value filters them.
    deepseek = tmp_path / "deepseek"
    deepseek.mkdir()
    write_jsonl(deepseek / "train.jsonl", LEAN_ROWS)
    assert [row["name"] for row in load_rows(str(deepseek), "valid")] == ["t2"]


def test_math_formats_and_gold_columns():
    math500 = math_problems([{"problem": "p", "answer": "\\frac{1}{2}", "unique_id": "test/x.json"}])
    assert (math500.format, math500.problems[0].gold, math500.problems[0].id) == (
        "math500",
        "\\frac{1}{2}",
        "test/x.json",
    )
    hendrycks = math_problems([{"problem": "p", "solution": "so \\boxed{3}"}], system_prompt=None)
    assert hendrycks.format == "math" and hendrycks.problems[0].gold == "so \\boxed{3}"
    assert hendrycks.problems[0].prompt == [{"role": "user", "content": "p"}]
    gsm8k = math_problems([{"question": "q", "answer": "3 + 4 = 7\n#### 7"}])
    assert gsm8k.format == "gsm8k" and gsm8k.problems[0].prompt[-1]["content"] == "q"
    assert gsm8k.problems[0].prompt[0]["role"] == "system"
    with pytest.raises(ValueError, match="--format auto: the rows' columns .* match no known format"):
        detect_math_format(["text", "label"])
    with pytest.raises(ValueError, match="--format gsm8k: row 0 has no `question`"):
        math_problems([{"problem": "p", "answer": "1"}], "gsm8k")


def test_dataset_hash_follows_the_rows():
    first = math_problems([{"problem": "p", "answer": "1"}]).sha256
    assert first == math_problems([{"answer": "1", "problem": "p"}]).sha256
    assert first != math_problems([{"problem": "p", "answer": "2"}]).sha256


def run_error(capsys, argv) -> str:
    """`trl-verigate ARGV` exits 2 with one line on stderr, the message then where help is; returns that line."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.out + captured.err, captured.err
    prog = f"trl-verigate evaluate {argv[1]}" if len(argv) > 1 and not argv[1].startswith("-") else "trl-verigate"
    assert lines[0].startswith(f"{prog}: error: ") and lines[0].endswith(f"(`{prog} --help` lists every flag)")
    return lines[0]


@pytest.mark.parametrize(
    "extra, flag",
    [
        (["--n", "4", "--k", "1,8"], "--k: k=8 is larger than --n=4"),
        (["--k", "1,two"], "--k 1,two: give comma-separated whole numbers"),
        (["--n", "0"], "--n must be >= 1"),
        (["--batch-size", "0"], "--batch-size must be >= 1"),
        (["--math-timeout", "0"], "--math-timeout must be > 0"),
        (["--temperature", "-1"], "--temperature must be >= 0"),
        (["--format", "gsm8k"], "--format gsm8k: row 0 has no `question`"),
        (["--format", "latex"], "argument --format: invalid choice: 'latex'"),
        (["--dataset", "missing.jsonl"], "--dataset missing.jsonl: no such file"),
        (["--dtype", "bf16"], "--dtype bf16: not a torch dtype; use auto, bfloat16"),
        (["--temperature", "0", "--n", "4"], "--temperature 0 decodes greedily, so the 4 attempts (--n) of a problem"),
        # vLLM's greedy threshold is 1e-5 (`_SAMPLING_EPS` in vllm/sampling_params.py).
        (["--temperature", "0.000009", "--n", "2"], "--temperature 9e-06 is under vLLM's greedy threshold 1e-05"),
        (["--top-k", "-1"], "--top-k must be a whole number >= 0"),
        (["--min-p", "2"], "--min-p must be in [0, 1]"),
        (["--repetition-penalty", "0"], "--repetition-penalty must be > 0"),
    ],
)
def test_bad_math_arguments_fail_before_the_model_loads(tmp_path, capsys, no_model_load, extra, flag):
    data = write_jsonl(tmp_path / "m.jsonl", [{"problem": "p", "answer": "1"}])
    err = run_error(capsys, ["evaluate", "math", "--model", "m", "--dataset", data, "--output", str(tmp_path / "o"),
                             *extra])  # fmt: skip
    assert flag in err
    assert no_model_load == []


def test_bad_lean_arguments_fail_before_the_model_loads(tmp_path, capsys, no_model_load, monkeypatch):
    monkeypatch.delenv("TRL_VERIGATE_LEAN_REPL", raising=False)
    data = write_jsonl(tmp_path / "lean.jsonl", LEAN_ROWS)
    base = ["evaluate", "lean", "--model", "m", "--dataset", data, "--output", str(tmp_path / "o")]
    missing_column = write_jsonl(tmp_path / "bad.jsonl", [{"name": "t", "split": "test", "statement": "x"}])
    cases = [
        (["--lean-project-dir", str(tmp_path)], "--lean-repl-command: no Lean REPL given or found"),
        (
            ["--lean-repl-command", "/nonexistent/repl"],
            "--lean-repl-command /nonexistent/repl runs /nonexistent/repl, ",
        ),
        (["--lean-repl-command", "no-such-repl --flag"], "runs no-such-repl, which is not on PATH; give a built REPL"),
        (["--lean-server-urls", "http://127.0.0.1:9", "--lean-timeout", "0"], "--lean-timeout must be > 0"),
        (["--lean-server-urls", "http://127.0.0.1:9", "--lean-workers", "0"], "--lean-workers must be >= 1"),
        (["--lean-server-urls", "http://127.0.0.1:9", "--lean-repl-command", "repl"], "give one"),
        (
            ["--lean-server-urls", "http://127.0.0.1:9", "--dataset", missing_column],
            "--statement-field formal_statement",
        ),
        (["--lean-server-urls", "http://127.0.0.1:9", "--n", "2", "--k", "4"], "--k: k=4 is larger than --n=2"),
    ]
    for extra, flag in cases:
        assert flag in run_error(capsys, [*base, *extra]), extra
    assert no_model_load == []


class BoxedOneBackend(ListBackend):
    """Stands in for a loaded model: every completion answers \\boxed{1}."""

    def completions(self, prompt, count):
        return ["\\boxed{1}"] * count


def test_output_of_another_evaluation_is_refused(tmp_path, capsys, monkeypatch):
    first = write_jsonl(tmp_path / "a.jsonl", [{"problem": "p", "answer": "1"}])
    second = write_jsonl(tmp_path / "b.jsonl", [{"problem": "p", "answer": "2"}])
    output = str(tmp_path / "o")
    loads = []
    monkeypatch.setattr(command, "build_backend", lambda args, sampling: loads.append(args.model) or BoxedOneBackend())
    assert main(["evaluate", "math", "--model", "m", "--dataset", first, "--output", output, "--no-progress"]) == 0
    err = run_error(capsys, ["evaluate", "math", "--model", "m", "--dataset", second, "--output", output])
    assert f"--output {output} holds another evaluation (dataset_sha256:" in err
    assert "(the hash of the rows --dataset, --split and --limit select)" in err
    err = run_error(capsys, ["evaluate", "math", "--model", "m2", "--dataset", first, "--output", output])
    assert "model: 'm' there, 'm2' now" in err
    assert loads == ["m"]


def test_a_run_whose_model_fails_to_load_records_nothing(tmp_path, no_model_load):
    data = write_jsonl(tmp_path / "a.jsonl", [{"problem": "p", "answer": "1"}])
    output = tmp_path / "o"
    with pytest.raises(AssertionError, match="a model was loaded"):
        main(["evaluate", "math", "--model", "typo", "--dataset", data, "--output", str(output)])
    assert not (output / "run.json").exists()  # so the corrected rerun into the same folder is not refused


def test_resume_refuses_other_sampling_or_scoring_settings_and_says_how_a_new_n_resumes(tmp_path, capsys, monkeypatch):
    data = write_jsonl(tmp_path / "a.jsonl", [{"problem": "p", "answer": "1"}, {"problem": "q", "answer": "2"}])
    output = tmp_path / "o"
    monkeypatch.setattr(command, "build_backend", lambda args, sampling: BoxedOneBackend())
    base = ["evaluate", "math", "--model", "m", "--dataset", data, "--output", str(output), "--no-progress"]
    assert main([*base, "--n", "2"]) == 0
    # Attempts drawn or judged another way would be mixed into the same pass@k: refused, naming what differs.
    for extra, difference in [
        (["--temperature", "0.5"], "temperature: 1.0 there, 0.5 now"),
        (["--top-p", "0.5"], "top_p: 0.95 there, 0.5 now"),
        (["--max-new-tokens", "8"], "max_new_tokens: 1024 there, 8 now"),
        (["--seed", "3"], "seed: 0 there, 3 now"),
        (["--top-k", "20"], "top_k: 0 there, 20 now"),
        (["--repetition-penalty", "1.1"], "repetition_penalty: 1.0 there, 1.1 now"),
        (["--math-timeout", "1"], "math_timeout: 5.0 there, 1.0 now"),
    ]:
        assert difference in run_error(capsys, [*base, "--n", "2", *extra]), extra
    # --format auto and the format it resolves to are the same evaluation.
    assert main([*base, "--n", "2", "--format", "math500"]) == 0
    capsys.readouterr()
    # A larger --n samples the missing attempts with the same settings, and says so.
    assert main([*base, "--n", "3", "--k", "1,3"]) == 0
    out = capsys.readouterr().out
    assert f"--n 3: {output} was run with --n 2; sampling attempts 2..2" in out
    rows = [json.loads(line) for line in (output / "samples.jsonl").read_text().splitlines()]
    assert sorted((row["problem_id"], row["attempt"]) for row in rows) == [(p, a) for p in "01" for a in range(3)]
    # A smaller one counts only the first attempts.
    assert main([*base, "--n", "1"]) == 0
    assert f"--n 1: {output} was run with --n 3; only attempts 0..0" in capsys.readouterr().out
    assert json.loads((output / "summary.json").read_text())["attempts"] == 2


def test_an_output_that_is_a_file_fails_before_the_model_loads(tmp_path, capsys, no_model_load):
    data = write_jsonl(tmp_path / "a.jsonl", [{"problem": "p", "answer": "1"}])
    output = tmp_path / "results"
    output.write_text("not a folder")
    err = run_error(capsys, ["evaluate", "math", "--model", "m", "--dataset", data, "--output", str(output)])
    assert f"--output {output} is a file, not a folder" in err
    err = run_error(capsys, ["evaluate", "math", "--model", "m", "--dataset", data, "--output", str(output / "sub")])
    assert f"--output {output / 'sub'}: cannot create or write it ({output} is not a writable folder)" in err
    assert no_model_load == []


def test_an_empty_or_broken_dataset_file_names_the_flag(tmp_path, capsys, no_model_load):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"problem": "p", "answer": \n')
    for path, message in [(empty, "the file is empty"), (broken, "not a JSON Lines file of rows")]:
        err = run_error(capsys, ["evaluate", "math", "--model", "m", "--dataset", str(path), "--output", "o"])
        assert f"--dataset {path}: {message}" in err
    assert no_model_load == []


def test_repeated_problem_names_keep_their_names_and_stay_unique():
    rows = [{**LEAN_ROWS[0], "name": name} for name in ["定理_αβ", "dup", "dup", "dup#2", "dup"]]
    ids = [problem.id for problem in lean_problems(rows).problems]
    assert ids == ["定理_αβ", "dup", "dup#2#", "dup#2", "dup#4"]


def test_a_damaged_samples_line_stops_the_run_before_the_model_loads_and_keeps_the_file(tmp_path, capsys, monkeypatch):
    data = write_jsonl(tmp_path / "a.jsonl", [{"problem": "p", "answer": "1"}])
    output = tmp_path / "o"
    loads = []
    monkeypatch.setattr(command, "build_backend", lambda args, sampling: loads.append(args.model) or BoxedOneBackend())
    argv = ["evaluate", "math", "--model", "m", "--dataset", data, "--output", str(output), "--no-progress"]
    assert main([*argv, "--n", "2"]) == 0
    first, second = (output / "samples.jsonl").read_text().splitlines(keepends=True)
    text = first + "not json\n" + second
    (output / "samples.jsonl").write_text(text)
    err = run_error(capsys, [*argv, "--n", "3"])
    assert "samples.jsonl line 2 is not an attempt row" in err
    assert (output / "samples.jsonl").read_text() == text  # no verdict after the bad line was thrown away
    assert loads == ["m"]  # the rerun stopped before loading the model


def test_unreachable_lean_servers_fail_before_the_model_loads(tmp_path, capsys, no_model_load):
    from tests.launch import refused_url

    data = write_jsonl(tmp_path / "lean.jsonl", LEAN_ROWS)
    with refused_url() as url:
        argv = ["evaluate", "lean", "--model", "m", "--dataset", data, "--output", str(tmp_path / "o")]
        err = run_error(capsys, [*argv, "--lean-server-urls", url])
    assert f"--lean-server-urls: no server answers /health ({url}: ConnectError" in err
    assert no_model_load == []


@pytest.mark.parametrize("conversational", [False, True])
@pytest.mark.parametrize("template", [None, "{formal_statement}{goal}"])
def test_evaluation_prompts_are_the_lean_recipes_training_prompts(conversational, template):
    # The recipe builds the training prompts; evaluation must show the model the very same text for a row.
    from datasets import Dataset

    from tests.launch import load_recipe

    recipe = load_recipe("lean_process_grpo")
    template = template or recipe.RECIPE.prompt_template
    args = recipe.ProcessScriptArguments(dataset_name="x", prompt_template=template, conversational=conversational)
    rows = [{**LEAN_ROWS[0], "informal_prefix": None}, LEAN_ROWS[1]]  # a missing field renders as ""
    trained = recipe.to_prompts(Dataset.from_list(rows), args)["prompt"]
    evaluated = [problem.prompt for problem in lean_problems(rows, template, conversational).problems]
    assert evaluated == trained


def test_a_model_that_cannot_load_names_the_flag(tmp_path, capsys, no_model_load, monkeypatch):
    data = write_jsonl(tmp_path / "a.jsonl", [{"problem": "p", "answer": "1"}])
    base = ["evaluate", "math", "--dataset", data, "--output", str(tmp_path / "o")]
    # A path that is not there: refused before anything loads.
    missing = str(tmp_path / "no-such-model")
    assert f"--model {missing}: no such folder" in run_error(capsys, [*base, "--model", missing])
    assert no_model_load == []

    # A folder or hub id transformers cannot load: the flag and transformers' reason, not a traceback.
    def cannot_load(args, sampling):
        raise OSError("no file named config.json")

    monkeypatch.setattr(command, "build_backend", cannot_load)
    err = run_error(capsys, [*base, "--model", "org/typo"])
    assert "--model org/typo: no such folder here, and as a hub id cannot load it (no file named config.json)" in err
    assert not (tmp_path / "o" / "run.json").exists()


def test_a_model_path_that_is_not_there_is_one_line_before_anything_loads(tmp_path, capsys, no_model_load, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "outputs").mkdir()  # where a training run wrote its checkpoints
    data = write_jsonl(tmp_path / "a.jsonl", [{"problem": "p", "answer": "1"}])
    read_from_hub = []
    monkeypatch.setattr(command, "model_sampling_defaults", lambda model: read_from_hub.append(model) or {})
    base = ["evaluate", "math", "--dataset", data, "--output", str(tmp_path / "o")]
    for model in ["outputs/nope", "./nope", "../nope", "runs/a/b", "~/no-such-model-here", "runs\\a"]:
        err = run_error(capsys, [*base, "--model", model])
        assert f"--model {model}: no such folder (" in err and "hub id" in err, err
    assert read_from_hub == [] and no_model_load == []
    # Hub ids stay hub ids: `org/name` with no folder `org` here, and a bare name.
    assert not command.written_as_path("Qwen/Qwen2.5-0.5B") and not command.written_as_path("gpt2")
    assert command.written_as_path("outputs/nope") and command.written_as_path("a/b/c")


def test_samples_without_run_json_are_not_resumed(tmp_path, capsys, no_model_load):
    data = write_jsonl(tmp_path / "a.jsonl", [{"problem": "p", "answer": "1"}])
    output = tmp_path / "o"
    output.mkdir()
    (output / "samples.jsonl").write_text('{"problem_id": "0", "attempt": 0, "status": "wrong", "correct": false}\n')
    err = run_error(capsys, ["evaluate", "math", "--model", "m", "--dataset", data, "--output", str(output)])
    assert f"--output {output} has a samples.jsonl but no run.json" in err
    assert no_model_load == []


def test_a_rerun_with_every_attempt_sampled_loads_no_model(tmp_path, capsys, monkeypatch):
    data = write_jsonl(tmp_path / "a.jsonl", [{"problem": "p", "answer": "1"}, {"problem": "q", "answer": "2"}])
    output = tmp_path / "o"
    loads = []
    monkeypatch.setattr(command, "build_backend", lambda args, sampling: loads.append(args.n) or BoxedOneBackend())
    argv = ["evaluate", "math", "--model", "m", "--dataset", data, "--output", str(output), "--no-progress"]
    assert main([*argv, "--n", "4", "--k", "1"]) == 0
    # Other k, or fewer attempts: the metrics are recomputed from samples.jsonl without loading the model.
    assert main([*argv, "--n", "4", "--k", "1,2,4"]) == 0
    assert main([*argv, "--n", "2", "--k", "2"]) == 0
    assert loads == [4]
    summary = json.loads((output / "summary.json").read_text())
    # Every attempt answers \boxed{1}: problem p (gold 1) always right, q (gold 2) never.
    assert summary["ks"] == [2] and summary["metrics"]["pass@2"]["value"] == 0.5
    assert main([*argv, "--n", "5", "--k", "1"]) == 0  # one attempt more each: the model is needed
    assert loads == [4, 5]


def test_the_run_says_which_rows_split_picked_and_ends_with_its_output_folder(tmp_path, capsys, monkeypatch):
    rows = [{"problem": "p", "answer": "1", "split": "test"}, {"problem": "q", "answer": "2", "split": "train"}]
    data = write_jsonl(tmp_path / "a.jsonl", rows)
    monkeypatch.setattr(command, "build_backend", lambda args, sampling: BoxedOneBackend())
    output = tmp_path / "o"
    assert main(["evaluate", "math", "--model", "m", "--dataset", data, "--output", str(output), "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"--split test: the 1 of 2 rows of {data} whose `split` column is 'test'"
    assert lines[-1] == f"Outputs: {output.resolve()} (samples.jsonl: one row per attempt; summary.json; pass_at_k.png)"
    no_split = write_jsonl(tmp_path / "b.jsonl", [{"problem": "p", "answer": "1"}])
    assert main(["evaluate", "math", "--model", "m", "--dataset", no_split, "--output", str(tmp_path / "o2"),
                 "--no-progress"]) == 0  # fmt: skip
    first = capsys.readouterr().out.splitlines()[0]
    assert first == f"--split test: not applied, the rows of {no_split} have no `split` column; all 1 are used"


def test_an_argparse_error_is_one_line_with_where_help_is(capsys):
    line = run_error(capsys, ["evaluate", "lean", "--model", "m", "--dataset", "d.jsonl", "--n", "many"])
    assert "argument --n: invalid int value: 'many'" in line
    assert "usage:" not in line


@pytest.mark.parametrize("task", ["lean", "coq", "math"])
def test_help_shows_every_default(task, capsys):
    evaluate = build_parser()._subparsers._group_actions[0].choices["evaluate"]
    task_parser = evaluate._subparsers._group_actions[0].choices[task]
    flags = [
        action
        for action in task_parser._actions
        if action.option_strings and not action.required and action.nargs != 0 and action.dest != "help"
    ]
    # The options section, one block per flag: each starts on a line indented by two spaces.
    options = task_parser.format_help().split("options:", 1)[1]
    blocks = {block.split()[0].rstrip(","): " ".join(block.split()) for block in re.split(r"\n  (?=-)", options)[1:]}
    assert set(blocks) >= {action.option_strings[0] for action in flags}
    for action in flags:
        assert "default" in blocks[action.option_strings[0]], blocks[action.option_strings[0]]
    assert "(default: 1)" in blocks["--n"] and "(default: 0.95)" in blocks["--top-p"]
