"""The windowed offset mapping for tokenizers that are not byte-level (`steps._incremental_decode_offsets`) against
the definition it replaced, kept here as the reference: decode every prefix ids[:k+1] whole."""

import random

import pytest

import trl_verigate.steps as steps_module
from tests.offset_tokenizers import ASCII_PIECES, BUILDERS, CLEANUP_PIECES, UNICODE_PIECES
from trl_verigate.steps import token_char_offsets


def reference_offsets(tokenizer, token_ids, skip_special_tokens, text):
    """Token k ends where the decoded prefix ids[:k+1] stops agreeing with ``text``, never before token k-1's end;
    the last token also takes any text no prefix reached. Quadratic: every prefix is decoded whole."""
    offsets = []
    position = 0
    for index in range(len(token_ids)):
        prefix = tokenizer.decode(token_ids[: index + 1], skip_special_tokens=skip_special_tokens)
        agreeing = 0
        while agreeing < min(len(prefix), len(text)) and prefix[agreeing] == text[agreeing]:
            agreeing += 1
        end = max(position, agreeing)
        offsets.append((position, end))
        position = end
    if offsets and position < len(text):
        offsets[-1] = (offsets[-1][0], len(text))
    return offsets


@pytest.fixture
def windows_only(monkeypatch):
    """The windows alone must be exact for these tokenizers: the whole-prefix safety net must not run."""

    def fail(*args, **kwargs):
        raise AssertionError("the windows did not rebuild the text; every prefix was about to be decoded")

    monkeypatch.setattr(steps_module, "_every_prefix_summaries", fail)


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def named_tokenizer(request):
    """(name, tokenizer) for each offset-test tokenizer of offset_tokenizers.BUILDERS."""
    return request.param, BUILDERS[request.param]()


def sample_ids(tokenizer, rng, length):
    """Ids as a policy might sample them: encoded text (with clean-up patterns and multibyte characters), or random
    ids (lone byte pieces, invalid UTF-8, special tokens anywhere), or a mix, plus ids beyond the vocabulary."""
    pieces = UNICODE_PIECES + ASCII_PIECES + CLEANUP_PIECES
    text_ids = tokenizer.encode("".join(rng.choice(pieces) for _ in range(length)), add_special_tokens=False)
    random_ids = [rng.randrange(len(tokenizer)) for _ in range(length)]
    kind = rng.choice(["text", "random", "mixed"])
    if kind == "text":
        ids = text_ids
    elif kind == "random":
        ids = random_ids
    else:
        ids = [rng.choice(pair) for pair in zip(text_ids, random_ids, strict=False)]
    for _ in range(rng.randint(0, 3)):
        ids.insert(rng.randrange(len(ids) + 1), rng.choice([tokenizer.eos_token_id, len(tokenizer) + 3]))
    return ids


def test_windowed_offsets_equal_the_prefix_decoding_definition(named_tokenizer, windows_only):
    name, tokenizer = named_tokenizer
    rng = random.Random(20261201)
    for _ in range(60):
        ids = sample_ids(tokenizer, rng, rng.randint(1, 160))
        for skip_special_tokens in (True, False):
            text = tokenizer.decode(ids, skip_special_tokens=skip_special_tokens)
            expected = reference_offsets(tokenizer, ids, skip_special_tokens, text)
            assert steps_module._incremental_decode_offsets(tokenizer, ids, skip_special_tokens, text) == expected
            if name != "byte_level":  # byte-level tokenizers take the byte path, whose rule is its own
                assert token_char_offsets(tokenizer, ids, skip_special_tokens=skip_special_tokens) == expected


@pytest.mark.parametrize("name", ["unigram_cleanup", "wordpiece_cleanup"])
def test_clean_up_of_spaces_across_a_window_start(name, windows_only):
    # " n't", " ' " and " ." are rewritten once their last piece arrives, which changes text decoded before it; shifting
    # the text by one token at a time puts every piece of them at the start of a window once.
    tokenizer = BUILDERS[name]()
    for shift in range(24):
        ids = tokenizer.encode("x " * shift + "Do n't stop ' now , you 're right .", add_special_tokens=False)
        text = tokenizer.decode(ids, skip_special_tokens=True)
        assert token_char_offsets(tokenizer, ids) == reference_offsets(tokenizer, ids, True, text)


def test_byte_fallback_runs_and_special_tokens_across_windows(windows_only):
    # Emoji are spelled with 4 byte pieces each; runs longer than a window, broken by a lone lead byte (invalid UTF-8,
    # so ByteFallback turns the whole run into U+FFFD) and by special tokens, must still match the definition.
    tokenizer = BUILDERS["sentencepiece_byte_fallback"]()
    emoji = tokenizer.encode("😀🎉" * 12, add_special_tokens=False)
    lone_lead = tokenizer.convert_tokens_to_ids("<0xF0>")
    words = tokenizer.encode("x = 42 and y", add_special_tokens=False)
    for ids in (
        words + emoji + words,
        words + emoji[:37] + [lone_lead] + emoji + words,
        emoji[:20] + [tokenizer.eos_token_id] + emoji[20:] + words,
    ):
        text = tokenizer.decode(ids, skip_special_tokens=True)
        assert token_char_offsets(tokenizer, ids) == reference_offsets(tokenizer, ids, True, text)


def test_sentencepiece_offsets_by_hand(windows_only):
    # "x ℕ" in the Llama-style tokenizer: ▁, x, ▁, then ℕ's three UTF-8 bytes as byte-fallback pieces. The decoder
    # strips the text's leading space, so the first ▁ alone decodes to nothing; the lead bytes decode to U+FFFD, so
    # they are zero-width until ℕ is complete.
    tokenizer = BUILDERS["sentencepiece_byte_fallback"]()
    ids = tokenizer.convert_tokens_to_ids(["▁", "x", "▁", "<0xE2>", "<0x84>", "<0x95>"])
    assert tokenizer.decode(ids) == "x ℕ"
    assert token_char_offsets(tokenizer, ids) == [(0, 0), (0, 1), (1, 2), (2, 2), (2, 2), (2, 3)]


def test_offsets_decode_a_linear_number_of_tokens(windows_only):
    tokenizer = BUILDERS["sentencepiece_byte_fallback"]()
    rng = random.Random(3)
    pieces = UNICODE_PIECES + ASCII_PIECES
    ids = tokenizer.encode("".join(rng.choice(pieces) for _ in range(4000)), add_special_tokens=False)[:1024]
    decoded_tokens = 0
    batch_decode = tokenizer.batch_decode

    def counting_batch_decode(sequences, **kwargs):
        nonlocal decoded_tokens
        decoded_tokens += sum(len(sequence) for sequence in sequences)
        return batch_decode(sequences, **kwargs)

    tokenizer.batch_decode = counting_batch_decode
    offsets = token_char_offsets(tokenizer, ids)
    # Decoding every prefix would be 1024 * 1025 / 2 = 524,800 tokens; windows of 16 after a context of 8 decode
    # at most 8 + 16 tokens per token (and a few contexts).
    assert decoded_tokens <= 32 * len(ids)
    tokenizer.batch_decode = batch_decode
    assert offsets == reference_offsets(tokenizer, ids, True, tokenizer.decode(ids, skip_special_tokens=True))


class FirstTokenShoutsTokenizer:
    """A decoder no window can follow: the whole text is upper-cased when the first token is "!"."""

    def __init__(self):
        self.vocabulary = ["!", "a", "b", " "]

    def convert_ids_to_tokens(self, ids):
        return [self.vocabulary[token_id] for token_id in ids]

    def decode(self, ids, skip_special_tokens=True):
        text = "".join(self.convert_ids_to_tokens(ids))
        return text.upper() if text.startswith("!") else text

    def batch_decode(self, sequences, skip_special_tokens=True):
        return [self.decode(ids) for ids in sequences]


def test_a_decoder_the_windows_cannot_follow_gets_every_prefix_decoded():
    tokenizer = FirstTokenShoutsTokenizer()
    ids = [0] + [1, 2, 3] * 20
    text = tokenizer.decode(ids)
    assert text == "!" + "AB " * 20
    # Windows after the first would decode lower-case text; the last prefix then disagrees with the text, and the
    # mapping falls back to the definition: every token owns its upper-cased character.
    assert steps_module._incremental_decode_offsets(tokenizer, ids, True, text) == [(k, k + 1) for k in range(61)]
