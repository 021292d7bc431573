"""What an evaluation leaves in ``--output``: ``samples.jsonl`` (one row per attempt, appended and flushed as each
is judged, which is what a rerun resumes from), ``summary.json`` and the terminal table.

A run killed mid-write can leave a partial last line (no newline); opening the file drops it, so the attempt is
redone. Any other line that is not a row stops the run instead: dropping it would lose the verdicts after it. A row
whose judging failed (`FAULT_STATUS`) is judged again by a rerun, and its new row replaces it.
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
# A fault of the verifier or scorer (unreachable server, a verifier that raised, math-verify failing), not a verdict
# on the attempt: a rerun judges the row's completion again, and the new row replaces it.
FAULT_STATUS = "error"


class SamplesFile:
    """``samples.jsonl`` of an output folder: the rows already there (by (problem_id, attempt)), and `append`."""

    def __init__(self, output_dir: str | os.PathLike):
        self.path = Path(output_dir) / SAMPLES_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rows: dict[tuple[str, int], dict] = {}
        self.replaced = 0  # fault rows a later row superseded (the file then holds both until `compact`)
        self._lock = threading.Lock()
        if self.path.exists():
            self._read_and_repair()
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - held open for the run, closed in close()

    def _read_and_repair(self) -> None:
        data = self.path.read_bytes()
        good_end = 0
        for number, line in enumerate(data.splitlines(keepends=True), start=1):
            if not line.endswith(b"\n"):
                break  # the last line, cut off by a kill mid-write: dropped, its attempt is redone
            try:
                row = json.loads(line)
                key = (str(row["problem_id"]), int(row["attempt"]))
            except (ValueError, KeyError, TypeError) as error:
                # A whole line this writer never wrote: cutting the file here would throw away every verdict after it.
                raise ValueError(
                    f"--output: {self.path} line {number} is not an attempt row ({type(error).__name__}: {error}); "
                    "fix or delete that line, or give a new --output"
                ) from error
            self._keep(key, row)
            good_end += len(line)
        if good_end < len(data):
            with open(self.path, "r+b") as file:
                file.truncate(good_end)

    def _keep(self, key: tuple[str, int], row: dict) -> bool:
        """Take ``row`` unless ``key`` already has a verdict (a row whose status is not a fault)."""
        existing = self.rows.get(key)
        if existing is not None and existing.get("status") != FAULT_STATUS:
            return False
        self.replaced += existing is not None
        self.rows[key] = row
        return True

    def done(self, problem_id: str, attempt: int) -> bool:
        """Whether the attempt has been sampled (it has a row, perhaps a fault to judge again)."""
        return (problem_id, attempt) in self.rows

    def faults(self) -> list[dict]:
        """The rows whose judging failed (`FAULT_STATUS`): their completions are to be judged again."""
        return [row for row in self.rows.values() if row.get("status") == FAULT_STATUS]

    def append(self, row: dict) -> None:
        """Write one attempt's row and flush it to disk before returning: a crash after this loses nothing. A verdict
        that arrives after `close` (a proof still verifying when the run was interrupted) is dropped: a rerun redoes
        that attempt."""
        key = (str(row["problem_id"]), int(row["attempt"]))
        with self._lock:
            if self._file.closed or not self._keep(key, row):
                return
            self._file.write(json.dumps(row, ensure_ascii=False) + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def compact(self) -> None:
        """After `close`: rewrite the file with one row per attempt when faults were superseded (atomically)."""
        if not self.replaced:
            return
        temporary = self.path.with_suffix(".jsonl.tmp")
        with open(temporary, "w", encoding="utf-8") as file:
            file.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in self.rows.values())
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, self.path)
        self.replaced = 0


def read_samples(output_dir: str | os.PathLike) -> list[dict]:
    """Every complete row of ``samples.jsonl``."""
    samples = SamplesFile(output_dir)
    samples.close()
    return list(samples.rows.values())


def check_output_dir(output_dir: str | os.PathLike) -> None:
    """``--output`` must be a folder this process can create and write (checked before any model loads)."""
    path = Path(output_dir)
    if path.exists() and not path.is_dir():
        raise ValueError(
            f"--output {output_dir} is a file, not a folder; give a folder path (it is created if missing)"
        )
    existing = next((parent for parent in (path, *path.parents) if parent.exists()), Path("."))
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"--output {output_dir}: cannot create or write it ({existing} is not a writable folder)")


def check_same_run(output_dir: str | os.PathLike, identity: dict, n: int) -> str | None:
    """A rerun into an output folder must evaluate what its `run.json` says (task, model, dataset hash, prompt,
    sampling and scoring settings), or resuming would mix two evaluations. Only --n may change: more attempts are
    drawn with the same settings, fewer count only the first ones. Returns a line saying so when it changed."""
    path = Path(output_dir) / RUN_FILE
    if not path.exists():
        if (Path(output_dir) / SAMPLES_FILE).exists():
            raise ValueError(
                f"--output {output_dir} has a {SAMPLES_FILE} but no {RUN_FILE}, so nothing says what its attempts "
                "evaluated; give a new --output"
            )
        return None
    recorded = json.loads(path.read_text(encoding="utf-8"))
    recorded_n = recorded.pop("n", None)
    changed = sorted(key for key in set(recorded) | set(identity) if recorded.get(key) != identity.get(key))
    if changed:
        details = "; ".join(f"{key}: {recorded.get(key)!r} there, {identity.get(key)!r} now" for key in changed)
        if "dataset_sha256" in changed:
            details += " (the hash of the rows --dataset, --split and --limit select)"
        raise ValueError(
            f"--output {output_dir} holds another evaluation ({details}); give a new --output, or rerun with the "
            "same settings to resume it"
        )
    if recorded_n is None or recorded_n == n:
        return None
    before = f"--n {n}: {output_dir} was run with --n {recorded_n}"
    if n > recorded_n:
        return f"{before}; sampling attempts {recorded_n}..{n - 1} of each problem with the same settings"
    return f"{before}; only attempts 0..{n - 1} of each problem are counted"


def record_run(output_dir: str | os.PathLike, identity: dict, n: int) -> None:
    """Write `run.json` (the identity and the largest --n run into the folder); called once the model has loaded, so
    a run that never started records nothing."""
    path = Path(output_dir) / RUN_FILE
    if path.exists():
        n = max(n, json.loads(path.read_text(encoding="utf-8")).get("n", n))
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**identity, "n": n}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_summary(output_dir: str | os.PathLike, summary: dict) -> Path:
    path = Path(output_dir) / SUMMARY_FILE
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return path


def format_table(summary: dict) -> str:
    """The metrics as a fixed-width table, then the problem/attempt counts, the statuses and the passes the recheck
    overturned."""
    lines = [f"{'metric':<12}{'value':>8}   95% CI (bootstrap over problems)"]
    for name, metric in summary["metrics"].items():
        lines.append(f"{name:<12}{metric['value']:>8.4f}   [{metric['ci_low']:.4f}, {metric['ci_high']:.4f}]")
    statuses = ", ".join(f"{status} {count}" for status, count in sorted(summary["statuses"].items()))
    lines.append(f"{summary['problems']} problems x {summary['n']} attempts; statuses: {statuses}")
    if "recheck_overturned" in summary:
        lines.append(f"passes overturned by the recheck (counted as failed): {summary['recheck_overturned']}")
    return "\n".join(lines)
