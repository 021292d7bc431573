"""`extract_coq_proof`: the proof in a model's completion, with its offset, so tactic spans map back to tokens."""

from __future__ import annotations

import re

# A fenced block: ```coq (or ```v, or a bare ```), up to the closing fence or the end of an unfinished completion.
_UNTAGGED = re.compile(r"```[ \t]*(?:\n|\Z)")
_FENCE = re.compile(r"```[ \t]*(?:coq|v|Coq)?[ \t]*\n(.*?)(?:```|\Z)", re.S)


def extract_coq_proof(completion: str) -> tuple[str, int] | None:
    """(the proof text, its start offset in `completion`), or None when the completion holds no proof.

    The proof is the first fenced block (```coq, ```v or a bare ``` opening the completion), else the completion up
    to an untagged fence that closes a block the prompt opened (`rewards.coq.COQ_PROMPT_TEMPLATE`), or to its end; it
    may keep its
    `Proof.` ... `Qed.` wrapper (the precheck strips it). Offsets into the proof plus `proof_start` are offsets
    into the completion.
    """
    if not isinstance(completion, str):
        raise TypeError(f"extract_coq_proof takes the completion text (str), got {type(completion).__name__}")
    before_fence = completion.split("```", 1)[0]
    fence = _FENCE.search(completion)
    if fence is not None and not (before_fence.strip() and _UNTAGGED.match(completion, len(before_fence))):
        proof, start = fence.group(1), fence.start(1)
    else:
        # No block, or text and then an untagged fence: the completion continues a prompt's open block (as
        # `rewards.coq.COQ_PROMPT_TEMPLATE` leaves it) and that fence closes it.
        proof, start = before_fence, 0
    stripped = proof.strip()
    if not stripped:
        return None
    leading = len(proof) - len(proof.lstrip())
    return stripped, start + leading
