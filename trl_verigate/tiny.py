"""Tiny random models for tests, demos and benchmarks, built offline in seconds.

`build_tiny_models(out_dir)` writes four checkpoints that load with the ordinary ``from_pretrained`` calls:

- ``policy``: a 2-layer ``Qwen2ForCausalLM`` with a Qwen-like ChatML tokenizer (eos ``<|im_end|>``, pad
  ``<|endoftext|>``), for GRPO runs on CPU;
- ``prm_qwen_math``: the Qwen2.5-Math-PRM checkpoint format (``Qwen2ForProcessRewardModel``, step tag ``<extra_0>``);
- ``prm_math_shepherd``: the math-shepherd format, a ``MistralForCausalLM`` with a SentencePiece BPE tokenizer like
  Mistral's (``tokenizer.model`` and ``tokenizer.json``, byte fallback, digits split, ``<s>`` prepended), so the
  step tag is the piece ``▁ки`` and the labels the pieces ``▁+``/``▁-``, distinct from the bare ``+``/``-``;
- ``prm_token_classification``: a ``Qwen2ForTokenClassification`` with two labels, like TRL's former PRMTrainer made.

The other tokenizers are a byte-level BPE trained on the spot on a small built-in math corpus, so they split text
and multi-byte characters the way Qwen's tokenizer does, while staying small (about 1k tokens). Weights are random
(seeded), so the models say nothing meaningful; they exercise shapes, special tokens and code paths.
Command line: ``python -m trl_verigate.tiny DIR`` prints the paths as JSON.

`build_midsize_policy(out_dir)` writes ``policy_0.5b``: a random ``Qwen2ForCausalLM`` of Qwen2.5-0.5B's shape
(494M parameters, 151936-token vocabulary: the tiny tokenizer padded with filler pieces), built locally, for
timings (`python -m trl_verigate.gpu_check`) that need a model of a real size but no download.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

# Bump when anything below changes what is written, so stale builds are rebuilt instead of reused.
BUILD_VERSION = "2"
SEED = 1234
VOCAB_SIZE = 1024
COMPLETE_MARKER = ".tiny_complete"

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
QWEN_PRM_STEP_TAG = "<extra_0>"
SHEPHERD_STEP_TAG = "ки"

# ChatML as Qwen2.5 writes it. String or list-of-parts contents both render, since TRL passes either.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'text' -%}{{- part['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

_CORPUS = [
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?",
    "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether.\n#### 72",
    "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did she earn?",
    "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\nWorking 50 minutes, she earned 0.2 x 50 = $<<0.2*50=10>>10.\n"
    "#### 10",
    "Betty is saving money for a new wallet which costs $100. Betty has only half of the money she needs.",
    "Step 1: 3 * 4 = 12\nStep 2: 12 + 5 = 17\nStep 3: 17 - 2 = 15\nThe answer is: 15",
    "First, we compute 2 + 2 = 4. Then 4 * 3 = 12, so 12 / 6 = 2 and 2 - 1 = 1.",
    "Since x < 7 and x > 3, the integer values are 4, 5 and 6. Their sum is 4 + 5 + 6 = 15.",
    "The area of the rectangle is 4 \\times 8 = 32 square feet, and each piece has area \\frac{32}{4} = 8.",
    "Therefore the answer is \\boxed{42}. We have \\frac{1}{2} + \\frac{1}{3} = \\frac{5}{6}.",
    "Let $f(x) = x^2 - 3x + 2$. Then $f(1) = 1 - 3 + 2 = 0$ and $f(2) = 4 - 6 + 2 = 0$.",
    "The probability is $\\frac{3}{10} = 0.3$, so the final answer is $\\boxed{\\frac{3}{10}}$.",
    "\\sqrt{16} = 4 and \\sqrt{2} \\approx 1.414, while \\pi \\approx 3.14159.",
    "Solve for $x$: $2x + 5 = 13$, so $2x = 8$ and $x = 4$. \\[ x = \\frac{8}{2} = 4 \\]",
    "We have $a \\cdot b = 24$ and $a + b = 10$, hence $a = 4$, $b = 6$ or $a = 6$, $b = 4$.",
    "theorem add_comm' (a b : ℕ) : a + b = b + a := by\n  omega",
    "theorem foo : ∀ n : ℕ, n + 0 = n := by\n  intro n\n  simp",
    "example (x : ℝ) (h : 0 ≤ x) : √(x ^ 2) = x := by\n  rw [Real.sqrt_sq h]",
    "⊢ 2 * π > 6 → ∀ ε > 0, ∃ δ > 0, |x - y| < δ → |f x - f y| < ε",
    "The circumference is 2 π r = 2 × π × 5 = 10π ≈ 31.4, and √49 = 7, 7² = 49, 10 ÷ 2 = 5.",
    "Please reason step by step, and put your final answer within \\boxed{}.",
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins with four. "
    "She sells the remainder for $2 per fresh duck egg. How much does she make every day?",
    "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 duck eggs a day.\nShe makes 9 * 2 = $<<9*2=18>>18 every day.\n#### 18",
    "A robe takes 2 bolts of blue fiber and half that much white fiber. How many bolts in total does it take?",
    "It takes 2/2=<<2/2=1>>1 bolt of white fiber\nSo the total amount of fabric is 2+1=<<2+1=3>>3 bolts\n#### 3",
    "Step 1: The total is 5 + 7 = 12. ки\nStep 2: Half of it is 12 / 2 = 6. ки\nStep 3: The answer is: 6 ки",
    "If 3 + 5 = 8 then 8 - 5 = 3; and 10 > 9 >= 9, 1 <= 2 < 3, 4 != 5.",
    "Answer: 1,000 + 2,500 = 3,500 and 25% of 80 is 20. The result is -7 + 10 = 3.",
]


def _corpus() -> list[str]:
    # Templated lines so digits, operators and spaces get merges of their own, as in a real math tokenizer.
    names = ["Tom", "Mia", "Ali", "Sara", "Ben", "Lena"]
    things = ["apples", "marbles", "books", "eggs", "dollars", "pencils"]
    generated = [
        f"{names[a % 6]} has {a} {things[b % 6]} and buys {b} more, so {names[a % 6]} has {a} + {b} = {a + b}. "
        f"Then {a + b} - {b} = {a} and {a} * {b} = {a * b}.\n#### {a * b}"
        for a in range(40)
        for b in range(1, 40, 6)
    ]
    words = (
        "total sum difference product quotient remainder fraction decimal percent ratio proportion average mean "
        "median integer prime factor multiple divisor square cube root power exponent logarithm equation inequality "
        "variable coefficient constant polynomial function domain range slope intercept triangle circle rectangle "
        "perimeter area volume radius diameter angle degree probability expected value random sample each every per "
        "hour minute week month year cost price profit discount interest rate speed distance time left remaining "
        "theorem lemma proof induction assume suppose therefore hence since because implies natural real complex "
        "number solution answer simplify substitute compute calculate evaluate check verify step first second third"
    ).split()
    sentences = [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(12)) + "." for i in range(len(words))]
    return _CORPUS + generated + sentences


def _train_tokenizer(extra_special_tokens: list[str], extra_tokens: list[str]):
    """A byte-level BPE with Qwen2's normalizer and pre-tokenizer, trained on the built-in corpus.

    Using Qwen2's exact pipeline matters beyond realism: transformers' `Qwen2Tokenizer` (what `AutoTokenizer`
    picks for a `qwen2` config) rebuilds that pipeline around the saved vocab and merges, so any other pipeline
    would tokenize differently depending on how the checkpoint is loaded.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=1,
        special_tokens=[ENDOFTEXT, IM_START, IM_END, *extra_special_tokens],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(), trainer=trainer)
    if extra_tokens:
        tokenizer.add_tokens([AddedToken(token, normalized=False, special=False) for token in extra_tokens])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=None,
        bos_token=None,
        additional_special_tokens=extra_special_tokens or None,
        chat_template=CHAT_TEMPLATE,
        model_max_length=1024,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )


def _qwen2_config(tokenizer, **overrides):
    from transformers import Qwen2Config

    settings = {
        "vocab_size": len(tokenizer),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 1024,
        "tie_word_embeddings": True,
        # Larger than the usual 0.02 so that random PRM heads give clearly different scores at different
        # positions; tests comparing scores at tag positions would pass vacuously if every score were ~0.5.
        "initializer_range": 0.2,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": None,
    }
    settings.update(overrides)
    return Qwen2Config(**settings)


# Qwen/Qwen2.5-0.5B-Instruct's config.json: the shape, not the weights.
MIDSIZE_SHAPE = {
    "vocab_size": 151936,
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    "initializer_range": 0.02,
}


def _padded_tokenizer(vocab_size: int):
    """The tiny policy's tokenizer with filler pieces ``<fillN>`` appended to its BPE vocabulary up to `vocab_size`
    ids, so every id a model with that vocabulary samples decodes (no merge makes a filler, so text tokenizes as
    with the tiny tokenizer)."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    tiny = _train_tokenizer([], [])
    state = json.loads(tiny.backend_tokenizer.to_str())
    vocab = state["model"]["vocab"]
    taken = len(tiny)
    vocab.update({f"<fill{index}>": index for index in range(taken, vocab_size)})
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(json.dumps(state)),
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=None,
        bos_token=None,
        chat_template=CHAT_TEMPLATE,
        model_max_length=MIDSIZE_SHAPE["max_position_embeddings"],
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )


def midsize_policy_config(tokenizer, **overrides):
    """Qwen2.5-0.5B's shape (`MIDSIZE_SHAPE`) with `tokenizer`'s special tokens; `overrides` change any field."""
    return _qwen2_config(tokenizer, **{**MIDSIZE_SHAPE, **overrides})


def build_midsize_policy(out_dir: str | os.PathLike, dtype: str = "bfloat16", **overrides) -> str:
    """Build (or reuse) ``out_dir/policy_0.5b``, a random policy of Qwen2.5-0.5B's shape in `dtype`; its path.

    `overrides` change the shape (tests build one layer); the folder is then ``policy_0.5b-<fields>``.
    """
    import torch
    from transformers import Qwen2ForCausalLM

    def build(target: Path) -> None:
        tokenizer = _padded_tokenizer(MIDSIZE_SHAPE["vocab_size"])
        torch.manual_seed(SEED + 4)
        model = Qwen2ForCausalLM(midsize_policy_config(tokenizer, **overrides))
        _save(model.to(getattr(torch, dtype)), tokenizer, target)

    suffix = "".join(f"-{key}{value}" for key, value in sorted(overrides.items()))
    return _build_once(Path(out_dir).expanduser().resolve(), f"policy_0.5b{suffix}-{dtype}", build)


def _save(model, tokenizer, target: Path) -> None:
    from transformers import GenerationConfig

    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id
    )
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)


def _build_policy(target: Path) -> None:
    import torch
    from transformers import Qwen2ForCausalLM

    tokenizer = _train_tokenizer([], [])
    torch.manual_seed(SEED)
    _save(Qwen2ForCausalLM(_qwen2_config(tokenizer, initializer_range=0.02)), tokenizer, target)


def _build_prm_qwen_math(target: Path) -> None:
    import torch

    from trl_verigate.rewards.prm import Qwen2ForProcessRewardModel

    tokenizer = _train_tokenizer([QWEN_PRM_STEP_TAG], [])
    torch.manual_seed(SEED + 1)
    model = Qwen2ForProcessRewardModel(_qwen2_config(tokenizer, tie_word_embeddings=False))
    _save(model, tokenizer, target)


def _train_sentencepiece_tokenizer(target: Path):
    """A SentencePiece BPE model trained like Mistral's (byte fallback, digits split, ``<unk>``, ``<s>``, ``</s>`` at
    ids 0-2, no normalization), written to ``target/tokenizer.model`` and loaded as transformers' ``LlamaTokenizer``,
    the class Mistral checkpoints name; ``save_pretrained`` then adds the converted ``tokenizer.json``."""
    import io

    import sentencepiece
    from transformers import LlamaTokenizer

    # One sentence per line, as SentencePiece corpora are fed: a newline gets no piece of its own and falls back to
    # the byte <0x0A>, as in Mistral's vocabulary.
    lines = [line for text in _corpus() for line in text.split("\n") if line]
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        model_type="bpe",
        vocab_size=VOCAB_SIZE,
        byte_fallback=True,
        split_digits=True,
        character_coverage=1.0,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=-1,
        num_threads=1,  # one thread keeps the trained model identical from build to build
        minloglevel=2,
    )
    (target / "tokenizer.model").write_bytes(model.getvalue())
    return LlamaTokenizer.from_pretrained(str(target), add_bos_token=True, model_max_length=1024)


def _build_prm_math_shepherd(target: Path) -> None:
    import torch
    from transformers import MistralConfig, MistralForCausalLM

    tokenizer = _train_sentencepiece_tokenizer(target)
    config = MistralConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        sliding_window=None,
        tie_word_embeddings=False,
        initializer_range=0.2,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=None,
    )
    torch.manual_seed(SEED + 2)
    _save(MistralForCausalLM(config), tokenizer, target)


def _build_prm_token_classification(target: Path) -> None:
    import torch
    from transformers import Qwen2ForTokenClassification

    tokenizer = _train_tokenizer([], [])
    torch.manual_seed(SEED + 3)
    config = _qwen2_config(tokenizer, num_labels=2, tie_word_embeddings=False)
    _save(Qwen2ForTokenClassification(config), tokenizer, target)


_BUILDERS = {
    "policy": _build_policy,
    "prm_qwen_math": _build_prm_qwen_math,
    "prm_math_shepherd": _build_prm_math_shepherd,
    "prm_token_classification": _build_prm_token_classification,
}


def _is_complete(target: Path) -> bool:
    marker = target / COMPLETE_MARKER
    return marker.is_file() and marker.read_text().strip() == BUILD_VERSION


def _build_once(out: Path, name: str, builder) -> str:
    """``out/name`` built by `builder(folder)` unless a complete build is there; its path.

    The model is written to a temporary folder and renamed into place only when complete, so an interrupted build or
    two concurrent builds never leave a half-written checkpoint that a later call would reuse.
    """
    out.mkdir(parents=True, exist_ok=True)
    target = out / name
    if not _is_complete(target):
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=out))
        staging.chmod(0o755)  # mkdtemp makes it private; the checkpoint should be readable like any other.
        try:
            builder(staging)
            (staging / COMPLETE_MARKER).write_text(BUILD_VERSION + "\n")
            if target.exists():
                shutil.rmtree(target)
            try:
                staging.rename(target)
            except OSError:
                # Another process finished the same model first; its copy is equivalent (seeded build).
                if not _is_complete(target):
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return str(target)


def build_tiny_models(out_dir: str | os.PathLike) -> dict[str, str]:
    """Build (or reuse) the tiny models under `out_dir`; return {name: absolute path} (see `_build_once`)."""
    out = Path(out_dir).expanduser().resolve()
    return {name: _build_once(out, name, builder) for name, builder in _BUILDERS.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m trl_verigate.tiny",
        description="Build tiny random policy and PRM checkpoints (offline, seeded) and print their paths as JSON.",
    )
    parser.add_argument("out_dir", help="folder to build into; complete models already there are reused")
    args = parser.parse_args(argv)
    # Libraries imported during the build (deepspeed via transformers) log to stdout; keep stdout pure JSON.
    with contextlib.redirect_stdout(sys.stderr):
        paths = build_tiny_models(args.out_dir)
    print(json.dumps(paths, indent=2))


if __name__ == "__main__":
    main()
