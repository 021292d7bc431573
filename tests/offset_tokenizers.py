"""Small tokenizers of every decoder family the offset mapping meets, trained locally (no hub), for the offset tests
and bench/token_offsets.py.

- ``sentencepiece_byte_fallback``: Llama-2 / Mistral v0.1 style: SentencePiece BPE with byte fallback (``<0xE2>``
  pieces for characters outside the vocabulary), ``▁`` for spaces, a ``▁`` prepended to the text, and a decoder that
  strips the first leading space;
- ``sentencepiece_no_strip``: Gemma style: the same pieces, no prepended ``▁`` and no strip;
- ``unigram_cleanup``: T5 / ALBERT style: SentencePiece Unigram with the Metaspace decoder, and transformers' clean-up
  of spaces (``"Do n't ."`` decodes to ``"Don't."``), which applies because the model is not BPE;
- ``wordpiece_cleanup``: BERT style: ``##`` continuation pieces and the same clean-up;
- ``byte_level``: GPT-2 / Qwen / Llama 3 style byte-level BPE.
"""

from __future__ import annotations

import json

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

EOS, PAD = "<|im_end|>", "<|endoftext|>"
UNICODE_PIECES = ["ℕ", "→", "∀", "⊢", "√", "π", "😀", "🎉", "é", "中", "∑", "≤", "ε", "\u0301", "ки", "\ufffd"]
ASCII_PIECES = ["a", "b", "x", "n", "7", "42", " ", "  ", "+", "=", "(", ")", ":", ".", "\n", "\n\n", "\\boxed{", "}"]
# Pieces the clean-up of spaces rewrites.
CLEANUP_PIECES = [" ,", " .", " n't", " 're", " ?", " !", " 'm", " 's", " 've"]
CORPUS = [
    "theorem foo : ∀ n : ℕ, n + 0 = n := by\n  intro n\n  simp",
    "⊢ 2 * π > 6 → ∀ ε > 0, ∃ δ > 0, |x - y| < δ",
    "√49 = 7 and ∑ i ≤ n, i = n (n + 1) / 2 😀 🎉 café 中文",
    "Step 1: 3 * 4 = 12\n\nStep 2: 12 + 5 = 17\n\nThe answer is \\boxed{17}.",
    "Hello , world . Do n't stop ! You 're right ? I 'm sure , it 's fine and we 've won .",
]
# Left out of the SentencePiece vocabularies so that they are spelled with byte-fallback pieces.
BYTE_FALLBACK_CHARACTERS = "😀🎉中ℕ√"


def _wrap(tokenizer: Tokenizer, clean_up_tokenization_spaces: bool = False) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=EOS,
        pad_token=PAD,
        clean_up_tokenization_spaces=clean_up_tokenization_spaces,
    )


def sentencepiece_byte_fallback(strip_leading_space: bool = True) -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.BPE(byte_fallback=True))
    spaces = normalizers.Replace(" ", "▁")
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), spaces]) if strip_leading_space else spaces
    steps = [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()]
    if strip_leading_space:
        steps.append(decoders.Strip(" ", 1, 0))
    tokenizer.decoder = decoders.Sequence(steps)
    trainer = trainers.BpeTrainer(vocab_size=150, special_tokens=[PAD, EOS], show_progress=False)
    corpus = ["".join(char for char in text if char not in BYTE_FALLBACK_CHARACTERS) for text in CORPUS]
    tokenizer.train_from_iterator(corpus * 20, trainer)
    # The 256 byte pieces are ordinary vocabulary entries, as in SentencePiece models (not special tokens, which
    # decoding with skip_special_tokens would drop).
    state = json.loads(tokenizer.to_str())
    vocabulary = state["model"]["vocab"]
    for byte in range(256):
        vocabulary.setdefault(f"<0x{byte:02X}>", len(vocabulary))
    state["model"]["byte_fallback"] = True
    return _wrap(Tokenizer.from_str(json.dumps(state)))


def sentencepiece_no_strip() -> PreTrainedTokenizerFast:
    return sentencepiece_byte_fallback(strip_leading_space=False)


def unigram_cleanup() -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=150, special_tokens=[PAD, EOS], unk_token=PAD, show_progress=False)
    tokenizer.train_from_iterator(CORPUS * 20, trainer)
    return _wrap(tokenizer, clean_up_tokenization_spaces=True)


def wordpiece_cleanup() -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.WordPiece(unk_token=PAD))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=200, special_tokens=[PAD, EOS], show_progress=False)
    tokenizer.train_from_iterator(CORPUS * 20, trainer)
    return _wrap(tokenizer, clean_up_tokenization_spaces=True)


def byte_level() -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=[PAD, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(CORPUS * 20, trainer)
    return _wrap(tokenizer)


BUILDERS = {
    "sentencepiece_byte_fallback": sentencepiece_byte_fallback,
    "sentencepiece_no_strip": sentencepiece_no_strip,
    "unigram_cleanup": unigram_cleanup,
    "wordpiece_cleanup": wordpiece_cleanup,
    "byte_level": byte_level,
}
