"""Steps of completions with tool results (`model_text_step_token_ids`), on the tiny policy's tokenizer."""

import pytest
import torch
from transformers import AutoTokenizer

from trl_verigate.steps import completion_step_token_ids
from trl_verigate.trainers.verigate_steps import model_text_step_token_ids


@pytest.fixture(scope="module")
def tokenizer(tiny_models):
    return AutoTokenizer.from_pretrained(tiny_models["policy"])


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
