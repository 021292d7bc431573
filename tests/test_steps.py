import random

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

import trl_verigate.steps as steps_module
from trl_verigate.steps import (
    StepSpan,
    completion_step_token_ids,
    decode_with_offsets,
    span_token_ranges,
    split_steps,
    token_char_offsets,
    token_step_ids,
)

UNICODE_PIECES = ["ℕ", "→", "∀", "⊢", "√", "π", "😀", "🎉", "é", "中", "∑", "≤", "ε", "\u0301", "ки"]
ASCII_PIECES = ["a", "b", "x", "n", "7", "42", " ", " ", "+", "=", "(", ")", ":", ".", "\n", "\n\n", "\\boxed{", "}"]
CORPUS = [
    "theorem foo : ∀ n : ℕ, n + 0 = n := by\n  intro n\n  simp",
    "⊢ 2 * π > 6 → ∀ ε > 0, ∃ δ > 0, |x - y| < δ",
    "√49 = 7 and ∑ i ≤ n, i = n (n + 1) / 2 😀 🎉 café 中文",
    "Step 1: 3 * 4 = 12\n\nStep 2: 12 + 5 = 17\n\nThe answer is \\boxed{17}.",
]
EOS, PAD = "<|im_end|>", "<|endoftext|>"


def train_tokenizer(pre_tokenizer, decoder, vocab_size, initial_alphabet):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = decoder
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[PAD, EOS], initial_alphabet=initial_alphabet, show_progress=False
    )
    tokenizer.train_from_iterator(CORPUS * 20, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=EOS, pad_token=PAD)


@pytest.fixture(scope="module")
def byte_level_tokenizer():
    """GPT-2/Qwen-style byte-level BPE; with ~300 tokens most multi-byte characters span several tokens."""
    tokenizer = train_tokenizer(
        pre_tokenizers.ByteLevel(add_prefix_space=False),
        decoders.ByteLevel(),
        vocab_size=300,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.add_tokens(["\n<think>"])  # an added token whose text is not in the byte alphabet
    return tokenizer


@pytest.fixture(scope="module")
def metaspace_tokenizer():
    """SentencePiece-style tokenizer: not byte-level, so offsets come from the prefix-decoding definition."""
    alphabet = sorted(set("".join(CORPUS + UNICODE_PIECES + ASCII_PIECES)))
    return train_tokenizer(
        pre_tokenizers.Metaspace(), decoders.Metaspace(), vocab_size=200, initial_alphabet=alphabet + ["▁"]
    )


def byte_token_ids(tokenizer, text):
    """Ids of the single-byte tokens spelling `text` byte by byte (every byte is in a byte-level vocabulary)."""
    byte_chars = {byte: char for char, byte in steps_module._BYTE_OF_CHAR.items()}
    return tokenizer.convert_tokens_to_ids([byte_chars[byte] for byte in text.encode("utf-8")])


def random_text(rng, length):
    pieces = UNICODE_PIECES + ASCII_PIECES
    return "".join(rng.choice(pieces) for _ in range(length))


def assert_tiles(offsets, text):
    assert offsets[0][0] == 0 and offsets[-1][1] == len(text)
    for (_, previous_end), (start, end) in zip(offsets, offsets[1:], strict=False):
        assert start == previous_end and end >= start
    assert "".join(text[start:end] for start, end in offsets) == text


# ---------------------------------------------------------------- split_steps


def test_split_steps_spans_and_blank_pieces():
    text = "Step 1: x = 2\n\n\n\nStep 2: y = 3\n\n  \n\nSo 5.\n\n"
    spans = split_steps(text)
    assert [span.text for span in spans] == ["Step 1: x = 2", "Step 2: y = 3", "So 5."]
    assert spans[0] == StepSpan("Step 1: x = 2", 0, 13)
    for span in spans:
        assert text[span.start : span.end] == span.text


def test_split_steps_keeps_pieces_unstripped():
    # "\n\n\n" splits into "a" and "\nb": the leading newline stays with the second step.
    assert split_steps("a\n\n\nb") == [StepSpan("a", 0, 1), StepSpan("\nb", 3, 5)]


def test_split_steps_custom_separator_and_no_separator():
    assert split_steps("x ки y ки ", separator=" ки ") == [StepSpan("x", 0, 1), StepSpan("y", 5, 6)]
    assert split_steps("one single step") == [StepSpan("one single step", 0, 15)]


@pytest.mark.parametrize("text", ["", "   ", "\n\n", "\n\n\n\n \n\n"])
def test_split_steps_blank_text_has_no_steps(text):
    assert split_steps(text) == []


def test_split_steps_max_steps_merges_overflow_into_last_step():
    text = "s1\n\ns2\n\ns3\n\ns4\n\n"
    spans = split_steps(text, max_steps=2)
    assert spans == [StepSpan("s1", 0, 2), StepSpan("s2\n\ns3\n\ns4", 4, 14)]
    assert split_steps(text, max_steps=4) == split_steps(text)
    assert split_steps(text, max_steps=1) == [StepSpan("s1\n\ns2\n\ns3\n\ns4", 0, 14)]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"text": "a", "separator": ""}, "`separator` must be a non-empty str"),
        ({"text": "a", "max_steps": 0}, "`max_steps` must be a positive int"),
        ({"text": "a", "max_steps": True}, "`max_steps` must be a positive int"),
        ({"text": b"a"}, "`text` must be a str"),
    ],
)
def test_split_steps_bad_inputs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        split_steps(**kwargs)


# ---------------------------------------------------------------- token_char_offsets


def test_offsets_character_split_over_byte_tokens(byte_level_tokenizer):
    # "aℕb" as single-byte tokens: a | E2 | 84 | 95 | b. ℕ belongs to the token holding its last byte (0x95);
    # the tokens with its leading bytes are zero-width at ℕ's index 1.
    ids = byte_token_ids(byte_level_tokenizer, "aℕb")
    assert token_char_offsets(byte_level_tokenizer, ids) == [(0, 1), (1, 1), (1, 1), (1, 2), (2, 3)]
    # An emoji (4 bytes) between two ASCII characters.
    ids = byte_token_ids(byte_level_tokenizer, "x😀")
    assert token_char_offsets(byte_level_tokenizer, ids) == [(0, 1), (1, 1), (1, 1), (1, 1), (1, 2)]


def test_offsets_special_tokens_are_zero_width(byte_level_tokenizer):
    eos = byte_level_tokenizer.eos_token_id
    pad = byte_level_tokenizer.pad_token_id
    # A special token between the bytes of ℕ is dropped by decode, which still joins the bytes into ℕ.
    ids = byte_token_ids(byte_level_tokenizer, "ℕ")
    ids = ids[:1] + [eos] + ids[1:] + [eos, pad]
    assert byte_level_tokenizer.decode(ids, skip_special_tokens=True) == "ℕ"
    assert token_char_offsets(byte_level_tokenizer, ids) == [(0, 0), (0, 0), (0, 0), (0, 1), (1, 1), (1, 1)]
    # Kept special tokens own their text.
    ids = byte_token_ids(byte_level_tokenizer, "ℕ") + [eos] + byte_token_ids(byte_level_tokenizer, "a") + [pad]
    text = byte_level_tokenizer.decode(ids, skip_special_tokens=False)
    offsets = token_char_offsets(byte_level_tokenizer, ids, skip_special_tokens=False)
    assert [text[start:end] for start, end in offsets] == ["", "", "ℕ", EOS, "a", PAD]
    # A kept special token inside ℕ's bytes breaks it: E2 becomes U+FFFD when "<" arrives, 84 and 95 are each
    # a lone continuation byte, hence one U+FFFD each.
    ids = byte_token_ids(byte_level_tokenizer, "ℕ")
    ids = ids[:1] + [eos] + ids[1:]
    text = byte_level_tokenizer.decode(ids, skip_special_tokens=False)
    offsets = token_char_offsets(byte_level_tokenizer, ids, skip_special_tokens=False)
    assert [text[start:end] for start, end in offsets] == ["", "\ufffd" + EOS, "\ufffd", "\ufffd"]


def test_offsets_invalid_utf8_matches_decode(byte_level_tokenizer):
    # A lone lead byte followed by "a" decodes to U+FFFD + "a"; the replacement appears when "a" arrives.
    ids = byte_token_ids(byte_level_tokenizer, "ℕ")[:1] + byte_token_ids(byte_level_tokenizer, "a")
    assert byte_level_tokenizer.decode(ids) == "\ufffda"
    assert token_char_offsets(byte_level_tokenizer, ids) == [(0, 0), (0, 2)]
    # An unfinished character at the end decodes to U+FFFD, owned by the last token that carried bytes.
    ids = byte_token_ids(byte_level_tokenizer, "a") + byte_token_ids(byte_level_tokenizer, "ℕ")[:2]
    ids.append(byte_level_tokenizer.eos_token_id)
    assert byte_level_tokenizer.decode(ids, skip_special_tokens=True) == "a\ufffd"
    assert token_char_offsets(byte_level_tokenizer, ids) == [(0, 1), (1, 1), (1, 2), (2, 2)]


def test_offsets_added_token_outside_byte_alphabet(byte_level_tokenizer):
    ids = byte_level_tokenizer.encode("π\n<think>√")
    assert byte_level_tokenizer.convert_tokens_to_ids("\n<think>") in ids
    text = byte_level_tokenizer.decode(ids)
    offsets = token_char_offsets(byte_level_tokenizer, ids)
    assert_tiles(offsets, text)
    assert "\n<think>" in [text[start:end] for start, end in offsets]


def test_offsets_empty_and_tensor_input(byte_level_tokenizer):
    assert token_char_offsets(byte_level_tokenizer, []) == []
    ids = byte_level_tokenizer.encode("√2 ≤ π")
    assert token_char_offsets(byte_level_tokenizer, torch.tensor(ids)) == token_char_offsets(byte_level_tokenizer, ids)


def test_byte_level_tokenizer_takes_the_linear_path(byte_level_tokenizer, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("the prefix-decoding fallback must not run for a byte-level tokenizer")

    monkeypatch.setattr(steps_module, "_incremental_decode_offsets", fail)
    text = random_text(random.Random(5), 300)
    ids = byte_level_tokenizer.encode(text)
    assert_tiles(token_char_offsets(byte_level_tokenizer, ids), byte_level_tokenizer.decode(ids))


def test_out_of_vocabulary_ids_are_zero_width(byte_level_tokenizer, monkeypatch):
    # Models often have more embedding rows than the tokenizer has tokens; decode drops such ids.
    monkeypatch.setattr(steps_module, "_incremental_decode_offsets", None)  # the linear path must handle them
    ids = byte_token_ids(byte_level_tokenizer, "aℕ")
    ids = ids[:2] + [len(byte_level_tokenizer) + 7] + ids[2:]
    assert byte_level_tokenizer.decode(ids) == "aℕ"
    assert token_char_offsets(byte_level_tokenizer, ids) == [(0, 1), (1, 1), (1, 1), (1, 1), (1, 2)]


def prefix_decode_oracle(tokenizer, ids):
    """Independent statement of the ownership rule for texts without U+FFFD: token k ends after the characters
    that ids[:k+1] decodes completely (an unfinished trailing character decodes to U+FFFD and is not counted)."""
    ends = [
        len(tokenizer.decode(ids[: index + 1], skip_special_tokens=True).rstrip("\ufffd")) for index in range(len(ids))
    ]
    ends = [max(ends[: index + 1]) for index in range(len(ends))]
    return list(zip([0] + ends[:-1], ends, strict=True))


@pytest.mark.parametrize("tokenizer_name", ["byte_level_tokenizer", "metaspace_tokenizer"])
def test_offsets_property_random_unicode_texts(tokenizer_name, request):
    tokenizer = request.getfixturevalue(tokenizer_name)
    rng = random.Random(1234)
    for _ in range(40):
        ids = tokenizer.encode(random_text(rng, rng.randint(1, 80)))
        if rng.random() < 0.5:
            ids.insert(rng.randrange(len(ids) + 1), tokenizer.eos_token_id)
        text = tokenizer.decode(ids, skip_special_tokens=True)
        offsets = token_char_offsets(tokenizer, ids)
        assert len(offsets) == len(ids)
        assert_tiles(offsets, text)
        assert offsets == prefix_decode_oracle(tokenizer, ids)

        spans = split_steps(text, max_steps=rng.choice([None, 1, 3]))
        step_ids = token_step_ids(offsets, spans)
        if not spans:
            assert step_ids == [-1] * len(ids)
            continue
        step_of_char = [
            max([k for k, span in enumerate(spans) if span.start <= p], default=0) for p in range(len(text))
        ]
        for (start, end), step in zip(offsets, step_ids, strict=True):
            if end > start:
                assert step == step_of_char[start]


def test_offsets_tiny_policy_tokenizer(tiny_models):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["policy"])
    rng = random.Random(7)
    for _ in range(20):
        ids = tokenizer.encode(random_text(rng, 60), add_special_tokens=False) + [tokenizer.eos_token_id]
        text = tokenizer.decode(ids, skip_special_tokens=True)
        offsets = token_char_offsets(tokenizer, ids)
        assert_tiles(offsets, text)
        assert offsets == prefix_decode_oracle(tokenizer, ids)
    # Random ids, as a random policy generates them, include invalid UTF-8; offsets still tile the decoded text.
    ids = [rng.randrange(len(tokenizer)) for _ in range(400)]
    assert_tiles(token_char_offsets(tokenizer, ids), tokenizer.decode(ids, skip_special_tokens=True))


# ---------------------------------------------------------------- token_step_ids


def test_token_step_ids_hand_computed():
    #          0123456789
    # text = "  ab\n\ncd\n\ne"   steps: "  ab" [0,4), "cd" [6,8), "e" [10,11)
    spans = split_steps("  ab\n\ncd\n\ne")
    assert [(span.start, span.end) for span in spans] == [(0, 4), (6, 8), (10, 11)]
    offsets = [(0, 2), (2, 4), (4, 6), (6, 7), (7, 7), (7, 10), (10, 11), (11, 11)]
    assert token_step_ids(offsets, spans) == [0, 0, 0, 1, 1, 1, 2, 2]
    assert token_step_ids(offsets, spans, num_tokens=10) == [0, 0, 0, 1, 1, 1, 2, 2, -1, -1]


def test_token_step_ids_tokens_before_first_step_and_no_steps():
    spans = [StepSpan("ab", 3, 5)]
    assert token_step_ids([(0, 3), (3, 5), (5, 6)], spans) == [0, 0, 0]
    assert token_step_ids([(0, 1), (1, 2)], []) == [-1, -1]
    assert token_step_ids([], [], num_tokens=2) == [-1, -1]
    with pytest.raises(ValueError, match="`num_tokens`"):
        token_step_ids([(0, 1), (1, 2)], spans, num_tokens=1)


# ---------------------------------------------------------------- completion_step_token_ids


def test_completion_step_token_ids_batch(byte_level_tokenizer):
    tokenizer = byte_level_tokenizer
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    texts = ["x = 2 ℕ\n\ny → 3", "√4 = 2", ""]
    rows = [tokenizer.encode(text) + [eos] for text in texts]
    width = max(len(row) for row in rows) + 2
    # Row 1 generated tokens after EOS that TRL masks out; they must not leak into the text.
    completion_ids = torch.tensor([row + [pad if i != 1 else eos] * (width - len(row)) for i, row in enumerate(rows)])
    completion_mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in rows])

    spans, step_ids = completion_step_token_ids(tokenizer, completion_ids, completion_mask)
    assert [[span.text for span in row] for row in spans] == [["x = 2 ℕ", "y → 3"], ["√4 = 2"], []]
    assert step_ids.dtype == torch.long and step_ids.shape == completion_ids.shape
    assert (step_ids[completion_mask == 0] == -1).all()
    assert (step_ids[2] == -1).all()
    assert (step_ids[1][completion_mask[1] == 1] == 0).all()
    # Row 0: the tokens decode to steps in order; every token of "y → 3" and the EOS after it are in step 1.
    offsets = token_char_offsets(tokenizer, rows[0])
    assert step_ids[0, : len(rows[0])].tolist() == token_step_ids(offsets, spans[0])
    assert step_ids[0, len(rows[0]) - 1].item() == 1
    first_of_step_1 = next(k for k, (start, end) in enumerate(offsets) if start >= spans[0][1].start and end > start)
    assert set(step_ids[0, :first_of_step_1].tolist()) == {0}
    assert set(step_ids[0, first_of_step_1 : len(rows[0])].tolist()) == {1}


def test_completion_step_token_ids_max_steps_and_separator(byte_level_tokenizer):
    tokenizer = byte_level_tokenizer
    ids = tokenizer.encode("a ки b ки c ки d")
    completion_ids = torch.tensor([ids])
    spans, step_ids = completion_step_token_ids(
        tokenizer, completion_ids, torch.ones_like(completion_ids), separator=" ки ", max_steps=2
    )
    assert [span.text for span in spans[0]] == ["a", "b ки c ки d"]
    assert set(step_ids[0].tolist()) == {0, 1}


def test_completion_step_token_ids_bad_inputs(byte_level_tokenizer):
    with pytest.raises(ValueError, match="`completion_ids` must be a 2-D tensor"):
        completion_step_token_ids(byte_level_tokenizer, torch.zeros(3, dtype=torch.long), torch.ones(3))
    with pytest.raises(ValueError, match="`completion_mask` must be a tensor with the shape"):
        completion_step_token_ids(byte_level_tokenizer, torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 4))


# ---------------------------------------------------------------- span_token_ranges (tactics)


def test_span_token_ranges_hand_computed():
    # Tokens tile "  intro n\n  simp" as ["  ", "intro", " n", "\n ", " simp"]; tactics "intro n" and "simp".
    offsets = [(0, 2), (2, 7), (7, 9), (9, 11), (11, 16)]
    tactics = [(2, 9), (12, 16)]
    # "simp" starts at character 12, inside the token " simp" (11, 16): that token begins the tactic.
    assert span_token_ranges(offsets, tactics) == [(1, 3), (4, 5)]
    # Text outside every tactic (leading "  ", the "\n " token) belongs to no span.
    assert span_token_ranges(offsets, [StepSpan("intro", 2, 7)]) == [(1, 2)]


def test_span_token_ranges_skips_zero_width_tokens_and_rejects_empty_or_outside_spans():
    # "ℕ" split over two byte tokens: the first holds its leading bytes (zero-width), the second owns it.
    offsets = [(0, 1), (1, 1), (1, 2), (2, 3)]
    assert span_token_ranges(offsets, [(1, 3)]) == [(2, 4)]
    assert span_token_ranges(offsets, [(2, 2), (2, 9), (-1, 1)]) == [(-1, -1)] * 3
    assert span_token_ranges([], [(0, 1)]) == [(-1, -1)]


def test_span_token_ranges_on_a_unicode_proof_with_byte_tokens(byte_level_tokenizer):
    text = "  intro n\n  exact Nat.le_of_lt (h : n ≤ m → ℕ)"
    ids = byte_token_ids(byte_level_tokenizer, text)  # one token per UTF-8 byte
    decoded, offsets = decode_with_offsets(byte_level_tokenizer, ids)
    assert decoded == text
    second = text.index("exact")
    ranges = span_token_ranges(offsets, [(2, 9), (second, len(text))])
    # Byte tokens: the token owning character c is the one holding its last byte, i.e. the byte index of c's end - 1.
    byte_end = [len(text[: index + 1].encode("utf-8")) for index in range(len(text))]
    assert ranges == [(byte_end[2] - 1, byte_end[8]), (byte_end[second] - 1, byte_end[len(text) - 1])]
