"""`trl-verigate evaluate` end to end on CPU with the tiny random policy, as a user runs it (a subprocess):

- Lean: DeepSeek-format rows, verified by the repository's stand-in REPL; the output files, the plot, the metrics
  recomputed here from samples.jsonl alone, and resume after the run is killed (SIGKILL) midway.
- Math: a MATH-500-format file.
"""

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.fake_repl import repl_command
from tests.launch import REPO_ROOT, offline_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

LEAN_ROWS = REPO_ROOT / "recipes" / "tiny" / "lean_tiny.jsonl"
N, KS = 2, (1, 2)


def evaluate_command(tiny_models, task: str, dataset: Path, output: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "trl_verigate.cli", "evaluate", task, "--model", tiny_models["policy"],
            "--dataset", str(dataset), "--output", str(output), "--n", str(N), "--k", ",".join(map(str, KS)),
            "--max-new-tokens", "24", "--seed", "0", *extra]  # fmt: skip


def lean_flags(tmp_path: Path) -> list[str]:
    repl = " ".join(repl_command("--no-transcripts"))
    return ["--split", "test", "--lean-repl-command", repl, "--lean-project-dir", str(tmp_path),
            "--lean-workers", "1", "--lean-memory-limit-mb", "4096", "--chunk-size", str(N)]  # fmt: skip


def samples(output: Path) -> list[dict]:
    return [json.loads(line) for line in (output / "samples.jsonl").read_text().splitlines()]


def expected_pass_at_k(rows: list[dict], n: int, k: int) -> float:
    """Chen et al.'s estimator, computed here from the rows alone."""
    correct = Counter()
    problems = {row["problem_id"] for row in rows}
    for row in rows:
        correct[row["problem_id"]] += row["status"] == "passed" or row["status"] == "correct"
    return sum(1 - math.comb(n - correct[p], k) / math.comb(n, k) for p in problems) / len(problems)


def assert_plot_drawn(path: Path):
    import matplotlib.image

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = matplotlib.image.imread(path)
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100
    assert pixels.std() > 0.05  # axes, curve and text, not a blank canvas


def test_lean_evaluation_files_metrics_and_resume_after_a_kill(tiny_models, tmp_path):
    dataset = tmp_path / "minif2f.jsonl"
    base = [json.loads(line) for line in LEAN_ROWS.read_text().splitlines()]
    # Three copies of the 6 problems under new names: enough work that the poll below finds the first attempts on
    # disk well before the last (with 6, a loaded machine once kept the poll waiting until all 12 were written).
    rows = [{**row, "name": f"{row['name']}_{copy}"} for copy in range(3) for row in base]
    dataset.write_text("".join(json.dumps({**row, "split": "test"}) + "\n" for row in rows))
    total = len(rows) * N
    env = offline_env(tmp_path)

    # Killed midway: once some attempts are on disk, the process gets SIGKILL (no clean-up runs).
    output = tmp_path / "results"
    command = evaluate_command(tiny_models, "lean", dataset, output, *lean_flags(tmp_path))
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    samples_path = output / "samples.jsonl"
    deadline = time.monotonic() + 300
    while not (samples_path.exists() and samples_path.read_text().count("\n") >= N):
        assert process.poll() is None, process.stdout.read().decode()[-3000:]
        assert time.monotonic() < deadline, "no attempt written within 300 s"
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    before_text = samples_path.read_text()
    before = samples(output)
    assert N <= len(before) < total, "the run finished before it could be killed midway"
    assert not (output / "summary.json").exists()

    # Rerun with the same --output: only the missing attempts are sampled.
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]
    after = samples(output)
    keys = [(row["problem_id"], row["attempt"]) for row in after]
    assert len(keys) == len(set(keys)) == total
    assert set(keys) == {(row["name"], attempt) for row in rows for attempt in range(N)}
    # What the first run had finished is kept as it was, in front.
    assert samples_path.read_text().startswith(before_text.rsplit("\n", 1)[0])

    for row in after:
        assert set(row) >= {"problem_id", "attempt", "completion", "proof", "status", "first_error_tactic", "time_s"}
        assert row["correct"] == (row["status"] == "passed")

    summary = json.loads((output / "summary.json").read_text())
    assert summary["model"] == tiny_models["policy"] and len(summary["dataset_sha256"]) == 64
    assert summary["config"]["lean_timeout"] == 300.0  # the default: evaluations allow long proofs
    assert summary["attempts"] == total and summary["resumed_attempts"] == len(before)
    assert summary["statuses"] == dict(Counter(row["status"] for row in after))
    for k in KS:
        metric = summary["metrics"][f"pass@{k}"]
        assert metric["value"] == pytest.approx(expected_pass_at_k(after, N, k))
        assert metric["ci_low"] <= metric["value"] <= metric["ci_high"]
    assert_plot_drawn(output / "pass_at_k.png")
    assert "pass@2" in done.stdout and f"{len(rows)} problems x {N} attempts" in done.stdout

    # A third run finds everything done: nothing new sampled, the same numbers.
    again = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert again.returncode == 0, again.stderr[-4000:]
    assert samples(output) == after
    assert json.loads((output / "summary.json").read_text())["metrics"] == summary["metrics"]


def test_math_evaluation_on_a_math500_file(tiny_models, tmp_path):
    dataset = tmp_path / "math500.jsonl"
    problems = [
        {"problem": "What is $2+3$?", "answer": "5", "unique_id": "test/algebra/1.json"},
        {"problem": "Simplify $\\frac{2}{4}$.", "answer": "\\frac{1}{2}", "unique_id": "test/algebra/2.json"},
        {"problem": "What is $7 \\cdot 6$?", "answer": "42", "unique_id": "test/prealgebra/3.json"},
    ]
    dataset.write_text("".join(json.dumps(row) + "\n" for row in problems))
    output = tmp_path / "results"
    command = evaluate_command(tiny_models, "math", dataset, output, "--batch-size", "4")
    done = subprocess.run(command, cwd=REPO_ROOT, env=offline_env(tmp_path), capture_output=True, text=True,
                          timeout=400)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    rows = samples(output)
    assert sorted((row["problem_id"], row["attempt"]) for row in rows) == sorted(
        (row["unique_id"], attempt) for row in problems for attempt in range(N)
    )
    assert all(row["status"] in ("correct", "wrong", "no_answer", "error") for row in rows)
    summary = json.loads((output / "summary.json").read_text())
    assert summary["format"] == "math500" and summary["attempts"] == len(problems) * N
    correct = sum(row["correct"] for row in rows)
    assert summary["metrics"]["accuracy"]["value"] == pytest.approx(correct / len(rows))
    for k in KS:
        assert summary["metrics"][f"pass@{k}"]["value"] == pytest.approx(expected_pass_at_k(rows, N, k))
        assert f"maj@{k}" in summary["metrics"]
    assert_plot_drawn(output / "pass_at_k.png")
