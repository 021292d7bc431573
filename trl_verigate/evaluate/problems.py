"""Evaluation problems from a local .json/.jsonl file, a local dataset folder or a hub dataset id, and their formats.

Lean rows are in DeepSeek-Prover-V1.5's format (`name`, `split`, `informal_prefix`, `formal_statement`, `goal`,
`header`). Coq rows have `formal_statement` (`Theorem name : T.`) and optionally `header` (`Require Import ...`),
`name` and `split`. Math rows are one of

- ``math500``: `problem` and a bare `answer` (HuggingFaceH4/MATH-500);
- ``math``: `problem` and a `solution` whose final answer is in ``\\boxed{}`` (hendrycks MATH);
- ``gsm8k``: `question` and an `answer` ending in ``#### N`` (openai/gsm8k);

``auto`` picks the one whose columns the rows have. Every check here runs before a model is loaded, and its error
names the flag that fixes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass, field

from trl_verigate.rewards.coq import COQ_PROMPT_TEMPLATE
from trl_verigate.rewards.lean_proofs import DEFAULT_PROMPT_TEMPLATE, format_prompt

MATH_FORMATS = ("auto", "math500", "math", "gsm8k")
# format -> (question column, gold column)
_MATH_COLUMNS = {"math500": ("problem", "answer"), "math": ("problem", "solution"), "gsm8k": ("question", "answer")}
# The row's own id where the dataset has one (MATH-500: unique_id; DeepSeek's miniF2F: name).
_ID_COLUMNS = ("unique_id", "id", "name", "problem_id")
LOCAL_SUFFIXES = (".json", ".jsonl")
# Blank-line separated steps and a \boxed{} answer, as the VeriGate math recipe trains with.
DEFAULT_MATH_SYSTEM_PROMPT = (
    "Solve the problem step by step. Separate consecutive reasoning steps with a blank line, "
    "and put the final answer in \\boxed{}."
)


@dataclass(frozen=True)
class Problem:
    """One problem: its id (unique in the run), the prompt (text, or messages for a chat template), and the fields
    scoring needs (Lean: the row; math: the gold solution text)."""

    id: str
    prompt: str | list
    row: dict = field(default_factory=dict)
    gold: str | None = None


@dataclass(frozen=True)
class ProblemSet:
    problems: list[Problem]
    sha256: str  # of the selected rows, so a summary says exactly which data it scored
    format: str


def load_rows(dataset: str, split: str | None, config_name: str | None = None) -> list[dict]:
    """Rows of ``dataset``: a local .json/.jsonl file (all rows), a local dataset folder or a hub id (its ``split``,
    or, when it has no such split but one split whose rows have a `split` column, that split's rows). Rows with a
    `split` column are then kept only where it equals ``split``."""
    return select_rows(dataset, split, config_name)[0]


@contextlib.contextmanager
def _no_progress_bars():
    from datasets.utils import logging as datasets_logging

    enabled = datasets_logging.is_progress_bar_enabled()
    datasets_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            datasets_logging.enable_progress_bar()


def select_rows(dataset: str, split: str | None, config_name: str | None = None) -> tuple[list[dict], str]:
    """`load_rows`, and a line saying which rows ``split`` picked (the command prints it)."""
    from datasets import load_dataset

    if dataset.endswith(LOCAL_SUFFIXES):
        if not os.path.isfile(dataset):
            raise ValueError(f"--dataset {dataset}: no such file; give a local .json/.jsonl file or a hub dataset id")
        with open(dataset, "rb") as file:
            if not file.read().strip():
                raise ValueError(f"--dataset {dataset}: the file is empty; give a file with one problem per row")
        try:
            with _no_progress_bars():  # a local file loads in a moment; its bar would only sit above any error line
                rows = list(load_dataset("json", data_files=dataset, split="train"))
        except Exception as error:  # noqa: BLE001 - datasets raises many kinds; the user needs the flag and the cause
            raise ValueError(
                f"--dataset {dataset}: not a JSON Lines file of rows ({type(error).__name__}: {error}); give one JSON "
                "object per line"
            ) from error
        source = f"{dataset}"
    else:
        try:
            splits = load_dataset(dataset, name=config_name)
        except Exception as error:  # noqa: BLE001 - datasets raises many kinds; the user needs the flag and the cause
            raise ValueError(
                f"--dataset {dataset}: could not load it ({type(error).__name__}: {error}); give a local "
                ".json/.jsonl file, a dataset folder, or a hub id reachable from here"
            ) from error
        only = next(iter(splits.values())) if len(splits) == 1 else None
        if split is not None and split in splits:
            rows = list(splits[split])
            source = f"the {split!r} split of {dataset}"
        elif only is not None and (split is None or "split" in only.column_names):
            rows = list(only)  # the one split; rows that say their own split are filtered below
            source = f"{dataset} (its one split, {next(iter(splits))!r})"
        else:
            raise ValueError(f"--split {split}: {dataset} has the splits {sorted(splits)}; name one of them")
    if split is not None and rows and "split" in rows[0]:
        kept = [row for row in rows if row.get("split") == split]
        if not kept:
            present = sorted({str(row.get("split")) for row in rows})
            raise ValueError(f"--split {split}: no row of {dataset} has split {split!r}; its rows have {present}")
        note = f"--split {split}: the {len(kept)} of {len(rows)} rows of {source} whose `split` column is {split!r}"
        rows = kept
    elif source.startswith("the "):
        note = f"--split {split}: {source}, {len(rows)} rows"
    else:
        note = f"--split {split}: not applied, the rows of {source} have no `split` column; all {len(rows)} are used"
    if not rows:
        raise ValueError(f"--dataset {dataset}: no rows")
    return rows, note


def rows_sha256(rows: list[dict]) -> str:
    text = "\n".join(json.dumps(row, sort_keys=True, ensure_ascii=False, default=str) for row in rows)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _problem_ids(rows: list[dict]) -> list[str]:
    """The rows' own ids (the first id column every row fills); a repeated id gets ``#<row index>`` after its second
    occurrence, so each problem keeps its name and every id stays unique (resume keys rows by it). Row indexes when
    no column fills every row."""
    for column in _ID_COLUMNS:
        ids = [row.get(column) for row in rows]
        if all(isinstance(value, (str, int)) and not isinstance(value, bool) and value != "" for value in ids):
            seen: set[str] = set()
            taken = set(map(str, ids))
            unique = []
            for index, value in enumerate(map(str, ids)):
                if value in seen:
                    value = f"{value}#{index}"
                    while value in taken:  # a dataset id that already reads like this
                        value += "#"
                    taken.add(value)
                seen.add(value)
                unique.append(value)
            return unique
    return [str(index) for index in range(len(rows))]


def proof_problems(
    rows: list[dict],
    prompt_template: str,
    conversational: bool,
    statement_field: str,
    limit: int | None,
    statement_shape: str,
    format_name: str,
) -> ProblemSet:
    """Theorem-proving problems: a trusted statement per row and the prompt from the training template
    (`lean_proofs.format_prompt`). ``statement_shape`` says in the error what the statement looks like."""
    rows = rows[:limit] if limit is not None else rows
    columns = sorted(rows[0]) if rows else []
    for index, row in enumerate(rows):
        statement = row.get(statement_field)
        if not isinstance(statement, str) or not statement.strip():
            raise ValueError(
                f"--statement-field {statement_field}: row {index} has no such column or it is empty (columns: "
                f"{columns}); name the column holding the theorem statement {statement_shape}"
            )
    try:
        prompts = [format_prompt(row, prompt_template, conversational) for row in rows]
    except (KeyError, IndexError, ValueError) as error:
        raise ValueError(
            f"--prompt-template: cannot format it ({type(error).__name__}: {error}); use {{column}} fields only"
        ) from error
    ids = _problem_ids(rows)
    problems = [Problem(id=i, prompt=p, row=row) for i, p, row in zip(ids, prompts, rows, strict=True)]
    return ProblemSet(problems, rows_sha256(rows), format_name)


def lean_problems(
    rows: list[dict],
    prompt_template: str = DEFAULT_PROMPT_TEMPLATE,
    conversational: bool = False,
    statement_field: str = "formal_statement",
    limit: int | None = None,
) -> ProblemSet:
    """Lean problems: the prompt from the same template the Lean process trainer uses (`lean_proofs`)."""
    return proof_problems(
        rows, prompt_template, conversational, statement_field, limit, "ending in `:= by`", "deepseek"
    )


def coq_problems(
    rows: list[dict],
    prompt_template: str = COQ_PROMPT_TEMPLATE,
    conversational: bool = False,
    statement_field: str = "formal_statement",
    limit: int | None = None,
    header_field: str = "header",
) -> ProblemSet:
    """Coq problems: rows with a trusted statement (`Theorem name : T.`) and an optional header of `Require Import`
    sentences, each checked here (a header Coq's server would refuse names its row before any model loads)."""
    from trl_verigate.coq.config import header_problem

    problem_set = proof_problems(
        rows, prompt_template, conversational, statement_field, limit, "(`Theorem name : T.`)", "coq"
    )
    for index, problem in enumerate(problem_set.problems):
        header = problem.row.get(header_field)
        problem_text = header_problem(header) if header else None
        if problem_text is not None:
            raise ValueError(f"--dataset: row {index} ({problem.id}) has a `{header_field}` that {problem_text}")
    return problem_set


def detect_math_format(columns) -> str:
    columns = set(columns)
    for name in ("gsm8k", "math500", "math"):
        if set(_MATH_COLUMNS[name]) <= columns:
            return name
    raise ValueError(
        f"--format auto: the rows' columns {sorted(columns)} match no known format; MATH-500 has problem/answer, "
        "MATH problem/solution, GSM8K question/answer. Rename the columns or pass --format"
    )


def math_problems(
    rows: list[dict],
    math_format: str = "auto",
    system_prompt: str | None = DEFAULT_MATH_SYSTEM_PROMPT,
    limit: int | None = None,
) -> ProblemSet:
    """Math problems: prompt messages (system prompt, then the question) and the gold solution text."""
    if math_format not in MATH_FORMATS:
        raise ValueError(f"--format {math_format}: unknown format; use one of {', '.join(MATH_FORMATS)}")
    rows = rows[:limit] if limit is not None else rows
    columns = sorted(rows[0]) if rows else []
    if math_format == "auto":
        math_format = detect_math_format(columns)
    question_column, gold_column = _MATH_COLUMNS[math_format]
    for index, row in enumerate(rows):
        for column in (question_column, gold_column):
            if not isinstance(row.get(column), str) or not row[column].strip():
                raise ValueError(
                    f"--format {math_format}: row {index} has no `{column}` text (columns: {columns}); a {math_format} "
                    f"row has `{question_column}` and `{gold_column}`: pick the --format these rows are in"
                )
    ids = _problem_ids(rows)
    problems = []
    for problem_id, row in zip(ids, rows, strict=True):
        messages = [{"role": "user", "content": row[question_column]}]
        if system_prompt:
            messages.insert(0, {"role": "system", "content": system_prompt})
        problems.append(Problem(id=problem_id, prompt=messages, row=row, gold=row[gold_column]))
    return ProblemSet(problems, rows_sha256(rows), math_format)
