"""Reasoning steps of completions that may hold tool results, and the step of every completion token.

With tools (or a rollout function's ``env_mask``), TRL's completions interleave model text with tool results and mark
the result tokens 0 in ``tool_mask``. Tool results are not the model's reasoning: they must not become PRM steps nor
enter a group's step statistics, and the loss already ignores their tokens. Each maximal run of model tokens is
therefore split into steps on its own, so a tool result also ends the step before it.
"""

from __future__ import annotations

import torch

from trl_verigate.steps import StepSpan, completion_step_token_ids


def _model_token_runs(model_tokens: list[bool]) -> list[tuple[int, int]]:
    """[start, end) column ranges of the maximal runs of True."""
    runs, start = [], None
    for column, keep in enumerate([*model_tokens, False]):
        if keep and start is None:
            start = column
        elif not keep and start is not None:
            runs.append((start, column))
            start = None
    return runs


def model_text_step_token_ids(
    tokenizer,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    tool_mask: torch.Tensor | None,
    separator: str,
    max_steps: int | None,
) -> tuple[list[list[StepSpan]], torch.Tensor]:
    """Steps of the model-written text of each row and the (B, T) step id of each token (-1: tool result, padding).

    Without tool results this is `completion_step_token_ids`. A row with tool results is split run by run (a run:
    consecutive tokens with ``completion_mask`` and ``tool_mask`` both 1); its steps are the runs' steps in order.
    Beyond ``max_steps`` steps in all, the overflow is merged into the last kept step, whose text then joins the
    merged steps' texts with ``separator`` (no tool text between them); a step's ``start``/``end`` are offsets in
    the decoded text of its own run.
    """
    model_tokens = completion_mask.bool()
    if tool_mask is not None:
        model_tokens = model_tokens & tool_mask.to(model_tokens.device).bool()
    runs_per_row = [_model_token_runs(row) for row in model_tokens.tolist()]
    if all(len(runs) <= 1 for runs in runs_per_row):
        return completion_step_token_ids(
            tokenizer, completion_ids, model_tokens.long(), separator=separator, max_steps=max_steps
        )

    # One pseudo-row per run: the row's ids with only that run unmasked, split without a cap (applied over the row).
    run_rows = [row for row, runs in enumerate(runs_per_row) for _ in runs]
    run_masks = torch.zeros((len(run_rows), completion_ids.shape[1]), dtype=torch.long)
    index = 0
    for runs in runs_per_row:
        for start, end in runs:
            run_masks[index, start:end] = 1
            index += 1
    run_spans, run_step_ids = completion_step_token_ids(
        tokenizer, completion_ids[run_rows], run_masks.to(completion_ids.device), separator=separator
    )
    spans: list[list[StepSpan]] = [[] for _ in runs_per_row]
    step_ids = torch.full(completion_ids.shape, -1, dtype=torch.long, device=run_step_ids.device)
    for row, row_run_spans, row_run_step_ids in zip(run_rows, run_spans, run_step_ids, strict=True):
        in_run = row_run_step_ids >= 0
        step_ids[row, in_run] = row_run_step_ids[in_run] + len(spans[row])
        spans[row].extend(row_run_spans)
    if max_steps is not None:
        for row, row_spans in enumerate(spans):
            if len(row_spans) > max_steps:
                merged = row_spans[max_steps - 1 :]
                text = separator.join(span.text for span in merged)
                spans[row] = [*row_spans[: max_steps - 1], StepSpan(text, merged[0].start, merged[0].start + len(text))]
                step_ids[row] = step_ids[row].clamp(max=max_steps - 1)
    return spans, step_ids.to(completion_ids.device)
