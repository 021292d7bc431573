"""Token -> character offsets (`trl_verigate.steps.token_char_offsets`): time per 1,000 tokens for a byte-level
tokenizer (GPT-2/Qwen style, the byte path) and a SentencePiece one with byte fallback (Llama-2/Mistral/Gemma style,
incremental decoding in windows), at 256, 512 and 1024 tokens, next to the definition the windows replaced (decode
every prefix whole). The two are timed in alternation on the same ids so machine load hits both alike; the ratio is
the median of per-pair ratios, with its spread (min-max).

    .venv/bin/python bench/token_offsets.py [--repeats 7]
"""

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `tests` is a package
from tests.offset_tokenizers import ASCII_PIECES, UNICODE_PIECES, byte_level, sentencepiece_byte_fallback  # noqa: E402
from trl_verigate import steps  # noqa: E402

LENGTHS = (256, 512, 1024)


def every_prefix_offsets(tokenizer, ids):
    """The definition: decode every prefix whole (what the windows replaced)."""
    text = tokenizer.decode(ids, skip_special_tokens=True)
    summaries = steps._every_prefix_summaries(tokenizer, ids, True, text)
    return [agreeing for _, agreeing in summaries]


def timed(function, *args) -> float:
    started = time.perf_counter()
    function(*args)
    return time.perf_counter() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7, help="Timed pairs per tokenizer and length.")
    args = parser.parse_args()
    rng = random.Random(0)
    # Math-like text with multi-byte characters, long enough for 1024 tokens in both vocabularies.
    text = "".join(rng.choice(UNICODE_PIECES + ASCII_PIECES * 3) for _ in range(6000))
    print(f"{'tokenizer':<30} {'tokens':>6} {'ms/1k tokens':>13} {'every prefix':>13} {'speed-up (spread)':>22}")
    for name, tokenizer in (
        ("byte-level BPE", byte_level()),
        ("SentencePiece + byte fallback", sentencepiece_byte_fallback()),
    ):
        all_ids = tokenizer.encode(text, add_special_tokens=False)
        for length in LENGTHS:
            ids = all_ids[:length]
            steps.token_char_offsets(tokenizer, ids)  # warm caches
            ours, reference, ratios = [], [], []
            for _ in range(args.repeats):
                ours.append(timed(steps.token_char_offsets, tokenizer, ids))
                reference.append(timed(every_prefix_offsets, tokenizer, ids))
                ratios.append(reference[-1] / ours[-1])
            per_thousand = 1000 / length * 1000
            print(
                f"{name:<30} {length:>6} {statistics.median(ours) * per_thousand:>13.2f} "
                f"{statistics.median(reference) * per_thousand:>13.2f} "
                f"{statistics.median(ratios):>9.1f}x ({min(ratios):.1f}-{max(ratios):.1f})"
            )


if __name__ == "__main__":
    main()
