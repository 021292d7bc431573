"""Steps of completions with tool results (`model_text_step_token_ids`), on the tiny policy's tokenizer."""

import torch

from trl_verigate.steps import completion_step_token_ids, model_text_step_token_ids


def tool_completion(tokenizer, pieces):
    """(ids, tool_mask) of (text, is_tool_result) pieces, in order."""
    ids, tool_mask = [], []
    for text, is_tool in pieces:
        piece_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids += piece_ids
        tool_mask += [0 if is_tool else 1] * len(piece_ids)
    return ids, tool_mask


PIECES = [
    ("Set up.\n\nCall the tool.", False),
    ("RESULT 1\n\nRESULT 2\n\n", True),
    ("Use the result.\n\nDone.", False),
]


def test_each_run_of_model_text_is_split_and_tool_results_have_no_step(tokenizer):
    ids, tool_mask = tool_completion(tokenizer, PIECES)
    completion_ids = torch.tensor([ids + [tokenizer.pad_token_id]])
    completion_mask = torch.tensor([[1] * len(ids) + [0]])
    spans, step_ids = model_text_step_token_ids(
        tokenizer, completion_ids, completion_mask, torch.tensor([tool_mask + [1]]), separator="\n\n", max_steps=None
    )
    assert [span.text for span in spans[0]] == ["Set up.", "Call the tool.", "Use the result.", "Done."]
    step_list = step_ids[0].tolist()
    tool_columns = [column for column, keep in enumerate(tool_mask) if not keep]
    assert [step_list[column] for column in tool_columns] == [-1] * len(tool_columns)
    assert step_list[-1] == -1  # padding
    # Model tokens run through the steps in order: 0, 1 before the tool result, 2, 3 after it.
    model_steps = [step for step, keep in zip(step_list, tool_mask, strict=False) if keep]
    assert sorted(set(model_steps)) == [0, 1, 2, 3] and model_steps == sorted(model_steps)


def test_the_step_cap_counts_steps_over_all_runs(tokenizer):
    ids, tool_mask = tool_completion(tokenizer, PIECES)
    spans, step_ids = model_text_step_token_ids(
        tokenizer,
        torch.tensor([ids]),
        torch.ones(1, len(ids), dtype=torch.long),
        torch.tensor([tool_mask]),
        separator="\n\n",
        max_steps=2,
    )
    # Steps 2-4 merge into the second one, their texts joined by the separator, without the tool result.
    assert [span.text for span in spans[0]] == ["Set up.", "Call the tool.\n\nUse the result.\n\nDone."]
    assert set(step_ids[0].tolist()) == {-1, 0, 1}


def test_without_tool_results_the_split_is_the_plain_one(tokenizer):
    ids, _ = tool_completion(tokenizer, PIECES)
    completion_ids = torch.tensor([ids])
    completion_mask = torch.ones(1, len(ids), dtype=torch.long)
    expected_spans, expected_ids = completion_step_token_ids(
        tokenizer, completion_ids, completion_mask, separator="\n\n", max_steps=3
    )
    for tool_mask in (None, torch.ones(1, len(ids), dtype=torch.long)):
        spans, step_ids = model_text_step_token_ids(
            tokenizer, completion_ids, completion_mask, tool_mask, separator="\n\n", max_steps=3
        )
        assert spans == expected_spans
        assert torch.equal(step_ids, expected_ids)


def test_multi_turn_tool_calls_in_a_padded_batch(tokenizer):
    """A batch as TRL's multi-turn tool loop leaves it: two tool results in one row, none in another, one at the very
    end of a third (the loop stopped after the result), and a row masked out whole (a truncated completion under
    `mask_truncated_completions`)."""
    rows = [
        [
            ("Plan.\n\nCall A.", False),
            ("A=1\n\n", True),
            ("Got 1.\n\nCall B.", False),
            ("B=2", True),
            ("Sum 3.\n\nDone.", False),
        ],
        [("One.\n\nTwo.", False)],
        [("Only step.", False), ("RESULT 7", True)],
        [("Cut off.\n\nMore", False)],
    ]
    built = [tool_completion(tokenizer, pieces) for pieces in rows]
    width = max(len(ids) for ids, _ in built) + 1  # at least one pad column in every row
    pad = tokenizer.pad_token_id
    completion_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids, _ in built])
    completion_mask = torch.tensor([[1] * len(ids) + [0] * (width - len(ids)) for ids, _ in built])
    completion_mask[3] = 0
    # TRL pads tool_mask with 1.
    tool_mask = torch.tensor([mask + [1] * (width - len(mask)) for _, mask in built])

    spans, step_ids = model_text_step_token_ids(
        tokenizer, completion_ids, completion_mask, tool_mask, separator="\n\n", max_steps=None
    )
    assert [[span.text for span in row] for row in spans] == [
        ["Plan.", "Call A.", "Got 1.", "Call B.", "Sum 3.", "Done."],
        ["One.", "Two."],
        ["Only step."],
        [],
    ]
    # Row 0, piece by piece: the three runs of model text hold steps {0, 1}, {2, 3}, {4, 5}; tool results none.
    expected_steps_per_piece = [{0, 1}, {-1}, {2, 3}, {-1}, {4, 5}]
    column = 0
    for (text, _), expected in zip(rows[0], expected_steps_per_piece, strict=True):
        length = len(tokenizer(text, add_special_tokens=False)["input_ids"])
        piece_steps = step_ids[0, column : column + length].tolist()
        assert set(piece_steps) == expected and piece_steps == sorted(piece_steps), text
        column += length
    assert set(step_ids[0, column:].tolist()) == {-1}  # padding
    assert set(step_ids[2].tolist()) == {-1, 0}
    assert step_ids[2, len(built[2][0]) - 1].item() == -1  # the trailing tool result's last token
    assert set(step_ids[3].tolist()) == {-1}

    # A cap of 3 counts over the runs of row 0: steps 3 to 6 merge into the third, joined without the tool result.
    capped_spans, capped_ids = model_text_step_token_ids(
        tokenizer, completion_ids, completion_mask, tool_mask, separator="\n\n", max_steps=3
    )
    assert [span.text for span in capped_spans[0]] == ["Plan.", "Call A.", "Got 1.\n\nCall B.\n\nSum 3.\n\nDone."]
    assert torch.equal(capped_ids[0], step_ids[0].clamp(max=2))
    assert capped_spans[1:] == spans[1:] and torch.equal(capped_ids[1:], step_ids[1:])
