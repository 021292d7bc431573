"""An interrupted `trl-verigate evaluate` keeps every attempt judged before the interrupt, and a rerun samples only
the rest: the final numbers are those of an uninterrupted run."""

import json

import pytest

from trl_verigate.cli import main
from trl_verigate.evaluate import command

ROWS = [{"problem": "one", "answer": "1"}, {"problem": "two", "answer": "2"}, {"problem": "three", "answer": "3"}]
N = 4


class BatchedBackend:
    """Like the HF backend: sequences in batches of two, each batch handed over as it is done. Answers \\boxed{2}
    to the prompt about two and \\boxed{1} to the others; raises KeyboardInterrupt before batch ``interrupt_at``."""

    def __init__(self, interrupt_at: int | None = None):
        self.interrupt_at = interrupt_at
        self.sampled = 0

    def set_seed(self, seed):
        pass

    def generate(self, prompts, counts, on_completions=None):
        flat = [index for index, count in enumerate(counts) for _ in range(count)]
        outputs = [[] for _ in prompts]
        for number, start in enumerate(range(0, len(flat), 2)):
            if number == self.interrupt_at:
                raise KeyboardInterrupt
            batch = [(i, "\\boxed{2}" if "two" in str(prompts[i]) else "\\boxed{1}") for i in flat[start : start + 2]]
            self.sampled += len(batch)
            for index, text in batch:
                outputs[index].append(text)
            on_completions(batch)
        return outputs


def evaluate_with(monkeypatch, tmp_path, output: str, backend: BatchedBackend) -> int:
    data = tmp_path / "math.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    monkeypatch.setattr(command, "build_backend", lambda args, sampling: backend)
    argv = ["evaluate", "math", "--model", "m", "--dataset", str(data), "--n", str(N), "--k", "1,4"]
    return main([*argv, "--output", str(tmp_path / output), "--no-progress"])


def test_an_interrupted_run_keeps_its_attempts_and_the_rerun_samples_only_the_rest(tmp_path, monkeypatch, capsys):
    # 12 attempts in one chunk (--chunk-size 256): interrupted before the 4th batch, 3 batches of 2 are judged.
    assert evaluate_with(monkeypatch, tmp_path, "run", BatchedBackend(interrupt_at=3)) == 130
    samples = tmp_path / "run" / "samples.jsonl"
    assert f"interrupted; 6 attempts saved in {samples}; rerun the same command to resume" in capsys.readouterr().out
    kept = samples.read_text()
    assert [(row["problem_id"], row["attempt"]) for row in map(json.loads, kept.splitlines())] == [
        ("0", 0), ("0", 1), ("0", 2), ("0", 3), ("1", 0), ("1", 1)
    ]  # fmt: skip
    assert not (tmp_path / "run" / "summary.json").exists()

    rerun = BatchedBackend()
    assert evaluate_with(monkeypatch, tmp_path, "run", rerun) == 0
    assert "resuming: 6 attempts already in" in capsys.readouterr().out
    assert rerun.sampled == 6  # nothing judged before the interrupt is sampled again
    assert samples.read_text().startswith(kept)  # and its rows are left as they were
    resumed = json.loads((tmp_path / "run" / "summary.json").read_text())

    whole = BatchedBackend()
    assert evaluate_with(monkeypatch, tmp_path, "whole", whole) == 0
    assert whole.sampled == 12
    uninterrupted = json.loads((tmp_path / "whole" / "summary.json").read_text())
    # By hand: problems one and two are answered right in all 4 attempts, three in none.
    expected = {"accuracy": 2 / 3, "pass@1": 2 / 3, "pass@4": 2 / 3, "maj@1": 2 / 3, "maj@4": 2 / 3}
    for summary in (resumed, uninterrupted):
        assert {name: metric["value"] for name, metric in summary["metrics"].items()} == pytest.approx(expected)
        assert summary["statuses"] == {"correct": 8, "wrong": 4}
    assert resumed["metrics"] == uninterrupted["metrics"]
