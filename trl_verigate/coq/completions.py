"""`extract_coq_proof`: the proof in a model's completion, with its offset, so tactic spans map back to tokens."""

from __future__ import annotations

import re

# A fenced block: ```coq (or ```v, or a bare ```), up to the closing fence or the end of an unfinished completion.
_FENCE = re.compile(r"```[ \t]*(?:coq|v|Coq)?[ \t]*\n(.*?)(?:```|\Z)", re.S)


def extract_coq_proof(completion: str) -> tuple[str, int] | None:
    """(the proof text, its start offset in `completion`), or None when the completion holds no proof.

    The proof is the first ```coq fenced block when there is one, else the whole completion; it may keep its
    `Proof.` ... `Qed.` wrapper (the precheck strips it). Offsets into the proof plus `proof_start` are offsets
    into the completion.
    """
    if not isinstance(completion, str):
        raise TypeError(f"extract_coq_proof takes the completion text (str), got {type(completion).__name__}")
    fence = _FENCE.search(completion)
    if fence is not None:
        proof, start = fence.group(1), fence.start(1)
    else:
        proof, start = completion, 0
    stripped = proof.strip()
    if not stripped:
        return None
    leading = len(proof) - len(proof.lstrip())
    return stripped, start + leading
