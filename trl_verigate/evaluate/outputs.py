"""What an evaluation leaves in ``--output``: ``samples.jsonl`` (one row per attempt, appended and flushed as each
is judged, which is what a rerun resumes from), ``summary.json`` and the terminal table.

A run killed mid-write can leave a partial last line; opening the file drops it, so the attempt is redone.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

SAMPLES_FILE = "samples.jsonl"
SUMMARY_FILE = "summary.json"
RUN_FILE = "run.json"
PLOT_FILE = "pass_at_k.png"


class SamplesFile:
    """``samples.jsonl`` of an output folder: the rows already there (by (problem_id, attempt)), and `append`."""

    def __init__(self, output_dir: str | os.PathLike):
        self.path = Path(output_dir) / SAMPLES_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rows: dict[tuple[str, int], dict] = {}
        self._lock = threading.Lock()
        if self.path.exists():
            self._read_and_repair()
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - held open for the run, closed in close()

    def _read_and_repair(self) -> None:
        data = self.path.read_bytes()
        good_end = 0
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # cut off by a kill mid-write
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                break
            self.rows.setdefault((str(row["problem_id"]), int(row["attempt"])), row)
            good_end += len(line)
        if good_end < len(data):
            with open(self.path, "r+b") as file:
                file.truncate(good_end)

    def done(self, problem_id: str, attempt: int) -> bool:
        return (problem_id, attempt) in self.rows

    def append(self, row: dict) -> None:
        """Write one attempt's row and flush it to disk before returning: a crash after this loses nothing."""
        key = (str(row["problem_id"]), int(row["attempt"]))
        with self._lock:
            if key in self.rows:
                return
            self._file.write(json.dumps(row, ensure_ascii=False) + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())
            self.rows[key] = row

    def close(self) -> None:
        self._file.close()


def read_samples(output_dir: str | os.PathLike) -> list[dict]:
    """Every complete row of ``samples.jsonl``."""
    samples = SamplesFile(output_dir)
    samples.close()
    return list(samples.rows.values())


def check_same_run(output_dir: str | os.PathLike, identity: dict) -> None:
    """A rerun into an output folder must evaluate what its `run.json` says (task, model, dataset hash, prompt), or
    resuming would mix two evaluations."""
    path = Path(output_dir) / RUN_FILE
    if not path.exists():
        return
    recorded = json.loads(path.read_text(encoding="utf-8"))
    changed = sorted(key for key in set(recorded) | set(identity) if recorded.get(key) != identity.get(key))
    if changed:
        details = "; ".join(f"{key}: {recorded.get(key)!r} there, {identity.get(key)!r} now" for key in changed)
        raise ValueError(
            f"--output {output_dir} holds another evaluation ({details}); give a new --output, or rerun with the "
            "same settings to resume it"
        )


def record_run(output_dir: str | os.PathLike, identity: dict) -> None:
    """Write `run.json`; called once the model has loaded, so a run that never started records nothing."""
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    (Path(output_dir) / RUN_FILE).write_text(
        json.dumps(identity, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def write_summary(output_dir: str | os.PathLike, summary: dict) -> Path:
    path = Path(output_dir) / SUMMARY_FILE
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return path


def format_table(summary: dict) -> str:
    """The metrics as a fixed-width table, then the problem/attempt counts and the statuses."""
    lines = [f"{'metric':<12}{'value':>8}   95% CI (bootstrap over problems)"]
    for name, metric in summary["metrics"].items():
        lines.append(f"{name:<12}{metric['value']:>8.4f}   [{metric['ci_low']:.4f}, {metric['ci_high']:.4f}]")
    statuses = ", ".join(f"{status} {count}" for status, count in sorted(summary["statuses"].items()))
    lines.append(f"{summary['problems']} problems x {summary['n']} attempts; statuses: {statuses}")
    return "\n".join(lines)
