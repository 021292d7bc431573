"""MathShepherdPRM against the real Math-Shepherd (Mistral-7B v0.1) vocabulary, not only the tiny stand-in's.

The model card reads P(+) at each `ки` tag from the logits of ids 648 and 387, the pieces `▁+` and `▁-`; the tag
itself is the piece `▁ки` (12902). Those ids come from the model card and from SentencePiece itself, not from the
code under test. The weights here are a tiny random Mistral with the real vocabulary size: only the tokenizer is real.
"""

import shutil
from pathlib import Path

import pytest
import torch
from transformers import LlamaTokenizer, MistralConfig, MistralForCausalLM

from tests.launch import TESTS_DIR
from trl_verigate.rewards.prm import MathShepherdPRM

REAL_TOKENIZER = TESTS_DIR / "data" / "mistral_7b_v0.1_tokenizer" / "tokenizer.model"
PLUS, MINUS, TAG = 648, 387, 12902


@pytest.fixture(scope="module")
def checkpoint_with_only_tokenizer_model(tmp_path_factory) -> Path:
    """What the hub checkpoint ships: config, weights and tokenizer.model, no tokenizer.json."""
    path = tmp_path_factory.mktemp("math_shepherd_real_vocab")
    config = MistralConfig(
        vocab_size=32000,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        sliding_window=None,
        bos_token_id=1,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    MistralForCausalLM(config).save_pretrained(path)
    shutil.copy(REAL_TOKENIZER, path / "tokenizer.model")
    return path


def test_the_sentencepiece_model_itself_has_the_model_cards_ids():
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=str(REAL_TOKENIZER))
    assert [processor.piece_to_id(piece) for piece in ("▁+", "▁-", "▁ки")] == [PLUS, MINUS, TAG]
    # A label after a tag and a space, as in the training data, is the spaced piece; "48+24" has the bare "+".
    assert processor.encode("ки +", out_type=str) == ["▁ки", "▁+"]
    assert "▁+" not in processor.encode("48+24", out_type=str)


def test_only_tokenizer_model_is_refused_then_the_fix_finds_the_real_label_ids(
    checkpoint_with_only_tokenizer_model, tmp_path
):
    path = tmp_path / "checkpoint"
    shutil.copytree(checkpoint_with_only_tokenizer_model, path)
    with pytest.raises(ValueError, match=r"does not prepend its bos token '<s>'.*only tokenizer\.model"):
        MathShepherdPRM(str(path), device="cpu")

    # The one-line conversion the message gives.
    LlamaTokenizer.from_pretrained(path, add_bos_token=True).save_pretrained(path)
    scorer = MathShepherdPRM(str(path), device="cpu")
    assert scorer.label_pieces == ["▁+", "▁-"]
    assert list(scorer.candidate_ids) == [PLUS, MINUS]

    # Every step's score is read at its own `▁ки` tag, the last token of the step.
    ids, positions = scorer._encode("What is 2 + 2?", ["2 + 2 = 4", "So the answer is 4"])
    assert ids[0] == 1  # <s>
    assert [ids[position] for position in positions] == [TAG, TAG]
    assert ids.count(TAG) == 2
    scores = scorer.score(["What is 2 + 2?"], [["2 + 2 = 4", "So the answer is 4"]])
    assert len(scores[0]) == 2 and all(0.0 < score < 1.0 for score in scores[0])
