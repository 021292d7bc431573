"""Character spans of a completion (reasoning steps, Lean tactics) and the policy tokens that belong to each span.

This is the one span-to-token layer of both process trainers. A completion's text is what TRL scores:
``tokenizer.batch_decode(completion_ids, skip_special_tokens=True)``. `token_char_offsets` (or `decode_with_offsets`)
gives every policy token its character span in that text; two rules then join tokens and spans:

- steps TILE the completion (`token_step_ids`, VeriGate): every token belongs to a step, the one whose start is the
  last at or before the token's start -- leading text to step 0, separators to the step before them;
- tactics do NOT (`span_token_ranges`, Lean process GRPO): a span covers exactly the tokens holding its first to
  last character, so the statement echo, reasoning prose and code fences around the tactics belong to no span.

`split_steps` cuts a completion into steps with character spans; `model_text_step_token_ids` splits only the model's
own text when tool results interleave it. Only the POLICY tokenizer is involved here: a process
reward model re-tokenizes the step texts itself, and Lean reads the text.

Character ownership rule (`token_char_offsets`). Byte-level BPE tokenizers (GPT-2, Qwen, Llama 3) can split one
character over several tokens (``ℕ`` is three UTF-8 bytes, an emoji four). A character belongs to the token that
holds its LAST byte -- the token after which the character can first be decoded, as in incremental detokenization.
Each token's span starts where the previous one ends, so the spans tile the text without gaps or overlaps:

- a token holding only the leading bytes of a character is zero-width, at the character it begins in;
- the token completing the character starts at that character, which is also the character its first byte lies in;
- special tokens removed by ``skip_special_tokens``, and ids beyond the vocabulary, which decoding also drops, are
  zero-width at the current position;
- bytes that are not valid UTF-8 decode to U+FFFD exactly as ``tokenizer.decode`` does (errors="replace"), and each
  U+FFFD belongs to the token whose byte made the decoder emit it.
"""

from __future__ import annotations

import bisect
import codecs
import re
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers.convert_slow_tokenizer import bytes_to_unicode

# GPT-2's byte-level BPE writes each byte as one printable character; this is the inverse table.
_BYTE_OF_CHAR = {char: byte for byte, char in bytes_to_unicode().items()}

# Incremental decoding in windows (`_incremental_decode_offsets`): every token k of a window is decoded together with
# the window's earlier tokens and a context of tokens before the window; the context absorbs the decoder's rules that
# look at neighbouring tokens (SentencePiece's leading-space strip on the first token, clean-up of spaces, a byte-level
# character split over tokens). A window is a few dozen tokens, so the work is linear in the completion's length.
_WINDOW_TOKENS = 16
_CONTEXT_TOKENS = 8
# The context must decode to at least this many characters (skipped special tokens decode to nothing): the decoders'
# clean-up rules rewrite at most 5 characters, so no rule reaches from before the context into the window.
_CONTEXT_CHARS = 8
# SentencePiece byte-fallback pieces. The ByteFallback decoder turns a whole run of them into text, or into one U+FFFD
# per byte when the run is not valid UTF-8, so a context must not start inside such a run.
_BYTE_FALLBACK_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")

# Per tokenizer: {skip_special_tokens: {token_id: the token's bytes, or None when decoding drops it}}.
_TOKEN_BYTES_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class StepSpan:
    """One reasoning step: ``text == completion[start:end]``."""

    text: str
    start: int
    end: int


def split_steps(text: str, separator: str = "\n\n", max_steps: int | None = None) -> list[StepSpan]:
    """Split a completion into steps at ``separator``, keeping each step's character span.

    Pieces that are empty or whitespace-only are not steps (so repeated separators and a trailing separator add
    nothing). A step's text is the piece exactly as it appears between separators, unstripped, so that
    ``text[span.start:span.end] == span.text``; consumers that want stripped steps strip the text themselves.
    When ``max_steps`` is set and there are more pieces, the overflow is merged into the last kept step, whose span
    then runs to the end of the last non-blank piece (separators included): no text is dropped.
    """
    if not isinstance(text, str):
        raise ValueError(f"`text` must be a str, got {type(text).__name__}.")
    if not isinstance(separator, str) or not separator:
        raise ValueError(f"`separator` must be a non-empty str, got {separator!r}.")
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
        raise ValueError(f"`max_steps` must be a positive int or None, got {max_steps!r}.")

    spans = []
    start = 0
    while start <= len(text):
        found = text.find(separator, start)
        end = len(text) if found < 0 else found
        piece = text[start:end]
        if piece and not piece.isspace():
            spans.append(StepSpan(piece, start, end))
        if found < 0:
            break
        start = found + len(separator)

    if max_steps is not None and len(spans) > max_steps:
        merged_start, merged_end = spans[max_steps - 1].start, spans[-1].end
        spans = spans[: max_steps - 1] + [StepSpan(text[merged_start:merged_end], merged_start, merged_end)]
    return spans


def _token_bytes_table(tokenizer, skip_special_tokens: bool) -> dict:
    try:
        per_tokenizer = _TOKEN_BYTES_CACHE.setdefault(tokenizer, {})
    except TypeError:  # not weak-referenceable: work without a cache
        per_tokenizer = {}
    return per_tokenizer.setdefault(skip_special_tokens, {})


def _byte_level_pieces(tokenizer, token_ids: list[int], skip_special_tokens: bool) -> list[bytes | None]:
    """The bytes each token contributes under byte-level decoding; None for a token that decoding drops.

    Mirrors the `tokenizers` ByteLevel decoder: a token whose characters are all in the byte table maps to those
    bytes, any other token (an added token such as ``"\\n<think>"``) to its UTF-8 text. Decoding drops skipped
    special tokens and ids beyond the vocabulary (models often have more embedding rows than the tokenizer has
    tokens, and a policy can sample those ids).
    """
    table = _token_bytes_table(tokenizer, skip_special_tokens)
    missing = [token_id for token_id in set(token_ids) if token_id not in table]
    if missing:
        special = {
            token_id for token_id, added in tokenizer.added_tokens_decoder.items() if getattr(added, "special", False)
        }
        for token_id, token in zip(missing, tokenizer.convert_ids_to_tokens(missing), strict=True):
            if token is None or (skip_special_tokens and token_id in special):
                table[token_id] = None
                continue
            try:
                table[token_id] = bytes(_BYTE_OF_CHAR[char] for char in token)
            except KeyError:
                table[token_id] = token.encode("utf-8")
    return [table[token_id] for token_id in token_ids]


def _byte_level_offsets(
    tokenizer, token_ids: list[int], skip_special_tokens: bool, text: str
) -> list[tuple[int, int]] | None:
    """Offsets from the tokens' bytes, or None when they do not rebuild ``text`` (not a byte-level tokenizer)."""
    pieces = _byte_level_pieces(tokenizer, token_ids, skip_special_tokens)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    chunks = []
    offsets = []
    position = 0
    last_with_bytes = -1
    for index, piece in enumerate(pieces):
        if piece:
            chunk = decoder.decode(piece)
            chunks.append(chunk)
            end = position + len(chunk)
            offsets.append((position, end))
            position = end
            last_with_bytes = index
        else:
            offsets.append((position, position))
    # Bytes of an unfinished character at the very end decode to U+FFFD only now; they came with the last
    # byte-carrying token, and any dropped tokens after it sit at the new end.
    tail = decoder.decode(b"", final=True)
    if tail:
        chunks.append(tail)
        start, end = offsets[last_with_bytes]
        offsets[last_with_bytes] = (start, end + len(tail))
        offsets[last_with_bytes + 1 :] = [(end + len(tail), end + len(tail))] * (len(offsets) - last_with_bytes - 1)
    if "".join(chunks) != text:
        return None
    return offsets


def _agreeing_length(text: str, start: int, piece: str) -> int:
    """Length of the common prefix of ``piece`` and ``text[start:]``, without copying ``text``."""
    if text.startswith(piece, start):
        return len(piece)
    low, high = 0, max(0, min(len(piece), len(text) - start))  # the answer lies in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if text.startswith(piece[:middle], start):
            low = middle
        else:
            high = middle - 1
    return low


# A decoded prefix is summarised as (its length, how many of its leading characters agree with the full text).
def _summary(text: str, decoded: str) -> tuple[int, int]:
    return len(decoded), _agreeing_length(text, 0, decoded)


def _extended_summary(text: str, summary: tuple[int, int], piece: str) -> tuple[int, int]:
    """The summary of a decoded prefix followed by ``piece``."""
    length, agreeing = summary
    if agreeing < length:  # already disagrees: what follows cannot agree
        return length + len(piece), agreeing
    return length + len(piece), length + _agreeing_length(text, length, piece)


def _every_prefix_summaries(tokenizer, token_ids: list[int], skip_special_tokens: bool, text: str) -> list:
    """The definition, quadratic: decode every prefix ids[:k+1] whole."""
    prefixes = tokenizer.batch_decode(
        [token_ids[: index + 1] for index in range(len(token_ids))], skip_special_tokens=skip_special_tokens
    )
    return [_summary(text, prefix) for prefix in prefixes]


def _windowed_prefix_summaries(tokenizer, token_ids: list[int], skip_special_tokens: bool, text: str) -> list:
    """The summary of every decoded prefix ids[:k+1], in linear time.

    Tokens go in windows starting at an anchor. With A the decoded prefix before the anchor and C the decoded context
    (the tokens just before the anchor), token k's prefix is A followed by what decoding context + window up to k adds
    after C. That holds when no decoder rule reaches from before the context into the window: the context starts
    outside byte-fallback runs and decodes to enough characters, and decoding context + window must reproduce C
    itself (a token that rewrites C, e.g. by clean-up of spaces, restarts the window at that token, and a token
    right after its context that still rewrites it has its prefix decoded whole).

    A window never ends inside a run of byte-fallback pieces, so a run is decoded as a whole with each of its tokens:
    quadratic in the run's length, which is a few pieces per character outside the vocabulary.
    """

    def decode(sequences: list[list[int]]) -> list[str]:
        return tokenizer.batch_decode(sequences, skip_special_tokens=skip_special_tokens)

    pieces = tokenizer.convert_ids_to_tokens(token_ids)
    is_byte_piece = [isinstance(piece, str) and _BYTE_FALLBACK_PIECE.fullmatch(piece) is not None for piece in pieces]

    def inside_byte_run(index: int) -> bool:
        return 0 < index < len(token_ids) and is_byte_piece[index - 1] and is_byte_piece[index]

    def context_before(anchor: int) -> tuple[int, str]:
        size = _CONTEXT_TOKENS
        while True:
            start = max(0, anchor - size)
            while inside_byte_run(start):
                start -= 1
            if start == 0:
                return 0, ""
            context = decode([token_ids[start:anchor]])[0]
            if len(context) >= _CONTEXT_CHARS:
                return start, context
            size *= 2

    summaries: list[tuple[int, int]] = []
    anchor = 0
    while anchor < len(token_ids):
        context_start, context = context_before(anchor)
        window_end = min(anchor + _WINDOW_TOKENS, len(token_ids))
        while inside_byte_run(window_end):  # the next anchor must not split a run
            window_end += 1
        decoded_windows = decode([token_ids[context_start : index + 1] for index in range(anchor, window_end)])
        before = summaries[anchor - 1] if anchor else (0, 0)
        rewritten_at = None
        for index, decoded in zip(range(anchor, window_end), decoded_windows, strict=True):
            if context_start == 0:  # the window is the whole prefix: exact as it stands
                summaries.append(_summary(text, decoded))
            elif decoded.startswith(context):
                summaries.append(_extended_summary(text, before, decoded[len(context) :]))
            else:
                rewritten_at = index
                break
        if rewritten_at is None:
            anchor = window_end
        elif rewritten_at > anchor and not inside_byte_run(rewritten_at):
            anchor = rewritten_at
        else:
            summaries.append(_summary(text, decode([token_ids[: rewritten_at + 1]])[0]))
            anchor = rewritten_at + 1
    return summaries


def _incremental_decode_offsets(
    tokenizer, token_ids: list[int], skip_special_tokens: bool, text: str
) -> list[tuple[int, int]]:
    """Exact offsets for any tokenizer: token k ends where the decoded prefix ids[:k+1] stops agreeing with text.

    This reproduces whatever the tokenizer's decoder does (SentencePiece's leading-space rule, byte fallback, clean-up
    of spaces); it is only used when the byte-level path does not rebuild the text. The prefixes are decoded in
    windows (`_windowed_prefix_summaries`, linear); should the last one not be the text, which no decoder the windows
    were built for does, every prefix is decoded whole instead.
    """
    summaries = _windowed_prefix_summaries(tokenizer, token_ids, skip_special_tokens, text)
    if summaries[-1] != (len(text), len(text)):
        summaries = _every_prefix_summaries(tokenizer, token_ids, skip_special_tokens, text)
    offsets = []
    position = 0
    for _, agreeing in summaries:
        # The max() keeps spans monotone when a decoder rewrites already-emitted text (clean-up of spaces).
        end = max(position, agreeing)
        offsets.append((position, end))
        position = end
    if offsets and position < len(text):
        start, _ = offsets[-1]
        offsets[-1] = (start, len(text))
    return offsets


def _decode_with_offsets(tokenizer, token_ids, skip_special_tokens: bool) -> tuple[str, list[tuple[int, int]]]:
    if isinstance(token_ids, torch.Tensor):
        token_ids = token_ids.tolist()
    token_ids = [int(token_id) for token_id in token_ids]
    text = tokenizer.decode(token_ids, skip_special_tokens=skip_special_tokens)
    if not token_ids:
        return text, []
    offsets = _byte_level_offsets(tokenizer, token_ids, skip_special_tokens, text)
    if offsets is None:
        offsets = _incremental_decode_offsets(tokenizer, token_ids, skip_special_tokens, text)
    return text, offsets


def token_char_offsets(tokenizer, token_ids, skip_special_tokens: bool = True) -> list[tuple[int, int]]:
    """Each token's [start, end) character span in ``tokenizer.decode(token_ids, skip_special_tokens=...)``.

    The spans tile the decoded text in token order (see the module docstring for which token owns a character
    split over several tokens). Byte-level BPE tokenizers take a linear fast path, checked against the real decode;
    any other tokenizer, or a mismatch, gets the spans the decoded prefixes define (`_incremental_decode_offsets`),
    also in linear time.

    Args:
        tokenizer: a `transformers` tokenizer (the policy's).
        token_ids: a list or 1-D tensor of ids.
        skip_special_tokens: as in ``tokenizer.decode``; TRL decodes completions with True.
    """
    return _decode_with_offsets(tokenizer, token_ids, skip_special_tokens)[1]


def decode_with_offsets(tokenizer, token_ids, skip_special_tokens: bool = True) -> tuple[str, list[tuple[int, int]]]:
    """``tokenizer.decode(token_ids, skip_special_tokens=...)`` and each token's character span in it (as
    `token_char_offsets`), from one decode."""
    return _decode_with_offsets(tokenizer, token_ids, skip_special_tokens)


def span_token_ranges(offsets: Sequence[tuple[int, int]], spans: Sequence) -> list[tuple[int, int]]:
    """The [first, end) token range of each character span: ``first`` holds the span's first character and
    ``end - 1`` its last (the token that owns a character is the one holding its last byte, see the module
    docstring).

    ``spans`` holds objects with ``start``/``end`` character offsets (`StepSpan`, `lean_server.Tactic`) or
    ``(start, end)`` pairs, into the text ``offsets`` tile. An empty span, or one past the decoded text, gets
    (-1, -1): it has no token.
    """
    ends = [end for _, end in offsets]
    text_length = ends[-1] if ends else 0
    ranges = []
    for span in spans:
        start, end = (span.start, span.end) if hasattr(span, "start") else span
        if not 0 <= start < end <= text_length:
            ranges.append((-1, -1))
            continue
        # The owner of character c is the first token ending after c; zero-width tokens (end == start) never are.
        first = bisect.bisect_right(ends, start)
        last = bisect.bisect_right(ends, end - 1)
        ranges.append((first, last + 1))
    return ranges


def token_step_ids(
    offsets: Sequence[tuple[int, int]], spans: Sequence[StepSpan], num_tokens: int | None = None
) -> list[int]:
    """The step index of each token: the last step whose start is at or before the token's start.

    Tokens before the first step (leading blank text) belong to step 0, tokens in a separator to the step before
    it, tokens after the last step to the last step. With no steps every token gets -1. ``num_tokens`` pads the
    result with -1 up to that length (padding positions).
    """
    if num_tokens is None:
        num_tokens = len(offsets)
    elif num_tokens < len(offsets):
        raise ValueError(f"`num_tokens` ({num_tokens}) must be at least the number of offsets ({len(offsets)}).")
    if not spans:
        return [-1] * num_tokens
    starts = [span.start for span in spans]
    step_ids = [max(bisect.bisect_right(starts, start) - 1, 0) for start, _ in offsets]
    return step_ids + [-1] * (num_tokens - len(offsets))


def completion_step_token_ids(
    tokenizer,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    separator: str = "\n\n",
    max_steps: int | None = None,
) -> tuple[list[list[StepSpan]], torch.Tensor]:
    """Steps of every completion and the step index of every completion token, for the trainer.

    Each row is decoded from its masked tokens only (TRL pads on the right and masks everything after EOS), with
    ``skip_special_tokens=True`` as TRL decodes completions, then split with `split_steps`.

    Returns:
        (spans per row, (B, T) torch.long step ids on ``completion_ids.device``; -1 where the mask is 0 and in rows
        without steps).
    """
    if not isinstance(completion_ids, torch.Tensor) or completion_ids.dim() != 2:
        raise ValueError("`completion_ids` must be a 2-D tensor (B, T) of token ids.")
    if not isinstance(completion_mask, torch.Tensor) or completion_mask.shape != completion_ids.shape:
        raise ValueError(
            f"`completion_mask` must be a tensor with the shape of `completion_ids` {tuple(completion_ids.shape)}."
        )
    all_spans = []
    step_ids = torch.full(completion_ids.shape, -1, dtype=torch.long)
    for row, (row_ids, row_mask) in enumerate(
        zip(completion_ids.tolist(), completion_mask.bool().tolist(), strict=True)
    ):
        positions = [column for column, keep in enumerate(row_mask) if keep]
        text, offsets = _decode_with_offsets(tokenizer, [row_ids[column] for column in positions], True)
        spans = split_steps(text, separator=separator, max_steps=max_steps)
        all_spans.append(spans)
        if positions:
            step_ids[row, positions] = torch.tensor(token_step_ids(offsets, spans), dtype=torch.long)
    return all_spans, step_ids.to(completion_ids.device)


# With tools (or a rollout function's ``env_mask``), TRL's completions interleave model text with tool results and mark
# the result tokens 0 in ``tool_mask``. Tool results are not the model's reasoning: they must not become PRM steps nor
# enter a group's step statistics, and the loss already ignores their tokens. Each maximal run of model tokens is
# therefore split into steps on its own, so a tool result also ends the step before it.


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
