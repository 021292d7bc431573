"""One evaluation: sample the attempts still missing, score each as it comes, and compute the metrics from the rows.

Generation runs in chunks of attempts (one backend call each). Each completion goes to scoring as soon as the backend
hands it over (the HF backend after every batch), its proof (Lean, Coq) verifies in the background while generation
goes on, and each verdict is handed to ``on_row`` (appended to ``samples.jsonl`` and flushed by `evaluate`) as soon as
it is known: an interrupted run keeps every judged attempt, and a rerun samples only the rest. The metrics are
computed from the rows alone, so ``samples.jsonl`` reproduces every reported number.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from trl_verigate.evaluate.metrics import maj_at_k_metrics, mean_with_ci, pass_at_k_metrics
from trl_verigate.evaluate.outputs import FAULT_STATUS, PLOT_FILE, SamplesFile, format_table, write_summary
from trl_verigate.evaluate.plot import plot_pass_at_k
from trl_verigate.evaluate.problems import ProblemSet

TASKS = ("lean", "coq", "math")
PROVER_TASKS = ("lean", "coq")


@dataclass
class Evaluation:
    """What to evaluate: the problems, how to score an attempt (`LeanScorer`, `CoqScorer` or `MathScorer`), n attempts each, the
    k of pass@k (and maj@k for math)."""

    task: str
    problem_set: ProblemSet
    scorer: object
    n: int
    ks: list[int]
    seed: int = 0
    chunk_size: int = 64
    config: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        if self.chunk_size < 1:
            raise ValueError(f"--chunk-size must be >= 1, got {self.chunk_size}")


def _progress_bar(total: int, desc: str, unit: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled or total == 0, file=sys.stderr)


def generate_and_score(
    evaluation: Evaluation,
    backend,
    missing: dict[int, list[int]],
    on_row: Callable[[dict], None],
    progress: bool = True,
    rejudge: Sequence[tuple[int, dict]] = (),
) -> None:
    """Sample and score the attempts ``missing[problem index]`` (attempt numbers), calling ``on_row`` for each;
    first score again the completions of ``rejudge`` ((problem index, row) of attempts whose judging failed)."""
    problems = evaluation.problem_set.problems
    order = [index for index in range(len(problems)) if missing.get(index)]
    total = sum(len(missing[index]) for index in order)
    proving = evaluation.task in PROVER_TASKS
    unit = "proof" if proving else "answer"
    generation_bar = _progress_bar(total, "generate", "sample", progress)
    scoring_bar = _progress_bar(total + len(rejudge), "verify" if proving else "score", unit, progress)

    def scored(row: dict) -> None:
        on_row(row)
        scoring_bar.update(1)

    try:
        for index, row in rejudge:
            evaluation.scorer.submit(problems[index], int(row["attempt"]), row["completion"], scored)
        for chunk in _chunks(order, missing, evaluation.chunk_size):
            attempts = {i: iter(missing[i]) for i in chunk}

            def submit(pairs: list[tuple[int, str]], chunk: list[int] = chunk, attempts: dict = attempts) -> None:
                # Each completion goes to scoring (and its row to disk) as the backend hands it over, not when the
                # whole chunk is generated: an interrupted run keeps every attempt judged so far.
                for position, text in pairs:
                    index = chunk[position]
                    evaluation.scorer.submit(problems[index], next(attempts[index]), text, scored)
                generation_bar.update(len(pairs))

            backend.generate([problems[i].prompt for i in chunk], [len(missing[i]) for i in chunk], submit)
        evaluation.scorer.drain()
    finally:
        generation_bar.close()
        scoring_bar.close()


def _chunks(order: list[int], missing: dict[int, list[int]], chunk_size: int):
    """The problem indices of ``order`` in runs of about ``chunk_size`` missing attempts (one backend call each)."""
    chunk: list[int] = []
    for position, index in enumerate(order):
        chunk.append(index)
        if sum(len(missing[i]) for i in chunk) >= chunk_size or position + 1 == len(order):
            yield chunk
            chunk = []


def compute_metrics(
    rows: Sequence[dict],
    problem_ids: Sequence[str],
    n: int,
    ks: Sequence[int],
    equivalent: Callable[[str, str], bool] | None = None,
    seed: int = 0,
) -> dict:
    """The metrics from the rows of attempts 0..n-1 of every problem: pass@k for each k, and with ``equivalent``
    (math) the accuracy (mean fraction of correct attempts) and maj@k."""
    by_problem: dict[str, dict[int, dict]] = {problem_id: {} for problem_id in problem_ids}
    for row in rows:
        attempts = by_problem.get(str(row["problem_id"]))
        if attempts is not None and int(row["attempt"]) < n:
            attempts[int(row["attempt"])] = row
    incomplete = [problem_id for problem_id, attempts in by_problem.items() if len(attempts) != n]
    if incomplete:
        raise RuntimeError(f"{len(incomplete)} problems lack some of their {n} attempts, e.g. {incomplete[0]!r}")
    ordered = [[attempts[a] for a in range(n)] for attempts in by_problem.values()]
    metrics = {}
    if equivalent is not None:
        metrics["accuracy"] = mean_with_ci([sum(r["correct"] for r in rows_) / n for rows_ in ordered], seed=seed)
    metrics.update(pass_at_k_metrics([[r["correct"] for r in rows_] for rows_ in ordered], ks, seed=seed))
    if equivalent is not None:
        answers = [[(r.get("answer"), r["correct"]) for r in rows_] for rows_ in ordered]
        metrics.update(maj_at_k_metrics(answers, ks, equivalent, seed=seed))
    return metrics


def missing_attempts(samples: SamplesFile, problem_ids: Sequence[str], n: int) -> dict[int, list[int]]:
    return {
        index: [attempt for attempt in range(n) if not samples.done(problem_id, attempt)]
        for index, problem_id in enumerate(problem_ids)
    }


def evaluate(evaluation: Evaluation, backend, output_dir: str, progress: bool = True, echo=print) -> dict:
    """Run ``evaluation`` into ``output_dir`` (resuming what ``samples.jsonl`` already holds), write
    ``summary.json`` and ``pass_at_k.png``, print the table; return the summary. ``backend`` may be None when
    ``samples.jsonl`` already holds every attempt."""
    problem_ids = [problem.id for problem in evaluation.problem_set.problems]
    samples = SamplesFile(output_dir)
    started = time.perf_counter()
    try:
        missing = missing_attempts(samples, problem_ids, evaluation.n)
        resumed = len(problem_ids) * evaluation.n - sum(map(len, missing.values()))
        if resumed:
            echo(f"resuming: {resumed} attempts already in {samples.path}")
        index_of = {problem_id: index for index, problem_id in enumerate(problem_ids)}
        rejudge = [
            (index_of[str(row["problem_id"])], row)
            for row in samples.faults()
            if str(row["problem_id"]) in index_of and int(row["attempt"]) < evaluation.n
        ]
        if rejudge:
            echo(f"judging again {len(rejudge)} attempts whose verification failed (status {FAULT_STATUS!r})")
        # A resumed run is seeded apart (by the attempts it already has), so it cannot redraw them.
        if backend is not None:  # None: every attempt is sampled already, only metrics (and faults) to redo
            backend.set_seed(evaluation.seed + resumed)
        generate_and_score(evaluation, backend, missing, samples.append, progress, rejudge)
    finally:
        samples.close()
    samples.compact()
    rows = list(samples.rows.values())
    equivalent = getattr(evaluation.scorer, "equivalent", None) if evaluation.task == "math" else None
    metrics = compute_metrics(rows, problem_ids, evaluation.n, evaluation.ks, equivalent, evaluation.seed)
    evaluated = set(problem_ids)
    scored = [row for row in rows if str(row["problem_id"]) in evaluated and row["attempt"] < evaluation.n]
    statuses = Counter(row["status"] for row in scored)
    summary = {
        "task": evaluation.task,
        "model": evaluation.config.get("model"),
        "dataset": evaluation.config.get("dataset"),
        "config": evaluation.config,
        "dataset_sha256": evaluation.problem_set.sha256,
        "format": evaluation.problem_set.format,
        "problems": len(problem_ids),
        "n": evaluation.n,
        "ks": list(evaluation.ks),
        "attempts": len(scored),
        "resumed_attempts": resumed,
        "statuses": dict(statuses),
        # The prover's passes its recheck refused: failures here, and a sign of a verifier being gamed.
        "recheck_overturned": sum(row["status"] == "failed" and bool(row.get("rechecked")) for row in scored),
        "metrics": metrics,
        "seconds": time.perf_counter() - started,
    }
    write_summary(output_dir, summary)
    title = f"{evaluation.task}: {evaluation.config.get('model', '')} (n={evaluation.n})"
    plot_pass_at_k(metrics, f"{output_dir}/{PLOT_FILE}", title)
    echo(format_table(summary))
    return summary
