"""How a policy completion becomes a Lean request held to the dataset's trusted statement and header.

Two completion shapes:

- ``"proof_body"`` (DeepSeek-Prover-V1.5, STP): the prompt ends with the statement (``... := by``) inside an open
  ``lean4`` code fence and the completion continues it with the proof body, up to the closing fence if any. It is
  sent as ``ProofRequest(formal_statement, body, header)``.
- ``"fenced_block"`` (Kimina-Prover, DeepSeek-Prover-V2): free text, then a fenced ``lean4`` block restating the
  whole theorem. The last block is used; its theorem must state the dataset's ``formal_statement`` up to whitespace,
  otherwise the proof fails with the reason "statement changed". What is verified is always the dataset's header and
  statement with the block's proof: the block's own header lines (``import``, ``set_option``, ``open``, ``open …
  renaming``) are dropped. Anything else before the theorem (helper lemmas) is verified with it, as a `FileRequest`
  held to the trusted statement and header, so `lean_server` polices what may precede the theorem.

The prompt: `format_prompt` renders a dataset row through a template, by default DeepSeek-Prover-V1.5's
(`DEFAULT_PROMPT_TEMPLATE`, the statement inside an open ``lean4`` fence, for the proof-body shape); conversational
models (the fenced-block shape) get the same text as a user message.

``"auto"`` reads a completion holding a ```` ```lean ```` / ```` ```lean4 ```` opening fence as a fenced block and any
other as a proof body. A completion without a proof (blank, no block, a block cut off before its closing fence) gives
no request: it fails without reaching Lean.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass

from trl_verigate.lean_server import FileRequest, ProofRequest

COMPLETION_FORMATS = ("auto", "proof_body", "fenced_block")
FENCE = "```"
_OPENING_FENCE = re.compile(r"```[ \t]*lean4?[ \t]*\r?\n")
_BLOCK_COMMENT = re.compile(r"/-.*?-/", re.DOTALL)
_LINE_COMMENT = re.compile(r"--[^\n]*")
# A block's own header lines, dropped: the dataset's trusted header replaces them. `open … in` prefixes what follows
# and is kept with it.
_HEADER_LINE = re.compile(r"\s*(?:import\s|set_option\s|open\s)")
_ENDS_WITH_IN = re.compile(r"\bin\s*(?:--[^\n]*)?$")

# DeepSeek-Prover-V1.5's prompt: the model continues the statement inside an open lean4 fence (completion shape
# "proof_body"); the fields are the row's, missing ones empty.
DEFAULT_PROMPT_TEMPLATE = "Complete the following Lean 4 code:\n\n```lean4\n{header}{informal_prefix}{formal_statement}"

NO_PROOF = "no proof in the completion"
CUT_OFF = "the lean4 block has no closing fence (cut off)"
STATEMENT_CHANGED = "statement changed: the block's theorem does not state the dataset's formal_statement"


@dataclass(frozen=True)
class ExtractedProof:
    """The request for one completion, and where its proof lies.

    ``request`` is None when there is nothing to verify (``reason`` says why). Otherwise the request's proof body is
    ``completion[proof_start:proof_start + len(proof)]``, and it starts at ``submitted_proof_start`` in the source
    Lean's messages are positioned in (``submitted``: ``statement + "\\n" + proof`` for a `ProofRequest`, the file
    for a `FileRequest`).
    """

    request: ProofRequest | FileRequest | None
    proof: str = ""
    proof_start: int = 0
    submitted: str = ""
    submitted_proof_start: int = 0
    reason: str | None = None


def completion_text(completion) -> str:
    """The text of a completion: a str, or the content of the last message of a conversational completion."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        content = completion[-1].get("content", "")
        if isinstance(content, str):
            return content
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    raise TypeError(f"a completion must be a str or a list of messages, got {type(completion).__name__}")


def prompt_fields(template: str) -> list[str]:
    """The row columns a prompt template names (``{header}`` -> ``header``)."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


def format_prompt(row: dict, template: str = DEFAULT_PROMPT_TEMPLATE, conversational: bool = False):
    """The prompt for a dataset row: ``template`` over the row's columns (missing or empty ones as ""); a user
    message list when ``conversational`` (models prompted through their chat template)."""
    text = template.format(**{name: row.get(name) or "" for name in prompt_fields(template)})
    return [{"role": "user", "content": text}] if conversational else text


def extract_row_proof(
    completion: str,
    row: dict,
    statement_field: str,
    header_field: str,
    default_header: str,
    completion_format: str = "auto",
) -> ExtractedProof:
    """`extract_proof` for a dataset row: its trusted statement (``row[statement_field]``) and header
    (``row[header_field]``, else ``default_header``). Training's oracle and evaluation both read rows this way."""
    if statement_field not in row:
        raise ValueError(
            f"the dataset row has no `{statement_field}` column (its keys: {sorted(row)}); set `statement_field` to "
            "the column holding the theorem statement that ends in `:= by`"
        )
    statement = row[statement_field]
    # DeepSeek's rows end the statement with ":= by\n"; the request's statement ends at `by`.
    statement = statement.rstrip() if isinstance(statement, str) else statement
    return extract_proof(completion, statement, row.get(header_field) or None, default_header, completion_format)


def extract_proof(
    completion: str, formal_statement: str, header: str | None, default_header: str, completion_format: str = "auto"
) -> ExtractedProof:
    """The Lean request for ``completion`` (see the module docstring), held to ``formal_statement`` and the header
    (``header``, or ``default_header`` when the row has none)."""
    if completion_format not in COMPLETION_FORMATS:
        raise ValueError(f"completion_format must be one of {COMPLETION_FORMATS}, got {completion_format!r}")
    if not isinstance(formal_statement, str) or not formal_statement.strip():
        raise ValueError(
            "the dataset row has no `formal_statement` (the theorem ending in `:= by`); set `statement_field` to the "
            "column that holds it"
        )
    is_block = completion_format == "fenced_block" or (
        completion_format == "auto" and _OPENING_FENCE.search(completion) is not None
    )
    if is_block:
        return _from_fenced_block(completion, formal_statement, header or default_header)
    end = completion.find(FENCE)
    body = completion if end < 0 else completion[:end]
    if not body.strip():
        return ExtractedProof(request=None, reason=NO_PROOF)
    return ExtractedProof(
        request=ProofRequest(formal_statement, body, header),
        proof=body,
        proof_start=0,
        submitted=formal_statement + "\n" + body,
        submitted_proof_start=len(formal_statement) + 1,
    )


def _statement_pattern(formal_statement: str) -> re.Pattern:
    # Up to whitespace: the same words with any whitespace between them, where the statement has whitespace.
    words = formal_statement.split()
    return re.compile(r"(?<!\S)" + r"\s+".join(re.escape(word) for word in words) + r"(?!\S)")


def _is_only_comments(text: str) -> bool:
    return not _LINE_COMMENT.sub("", _BLOCK_COMMENT.sub("", text)).strip()


def _drop_header_lines(block: str) -> str:
    """The block without its leading header lines (and blank or comment lines among them)."""
    position = 0
    while position < len(block):
        line_end = block.find("\n", position)
        line_end = len(block) if line_end < 0 else line_end
        line = block[position:line_end]
        stripped = line.strip()
        header_line = _HEADER_LINE.match(line) is not None and not _ENDS_WITH_IN.search(line)
        if stripped and not stripped.startswith("--") and not header_line:
            break
        position = line_end + 1
    return block[position:]


def _from_fenced_block(completion: str, formal_statement: str, header: str) -> ExtractedProof:
    openings = list(_OPENING_FENCE.finditer(completion))
    if not openings:
        return ExtractedProof(request=None, reason=NO_PROOF)
    block_start = openings[-1].end()
    block_end = completion.find(FENCE, block_start)
    if block_end < 0:
        return ExtractedProof(request=None, reason=CUT_OFF)
    block = completion[block_start:block_end]
    match = _statement_pattern(formal_statement).search(block)
    if match is None:
        return ExtractedProof(request=None, reason=STATEMENT_CHANGED)
    proof = block[match.end() :]
    if not proof.strip():
        return ExtractedProof(request=None, reason=NO_PROOF)
    proof_start = block_start + match.end()
    preamble = _drop_header_lines(block[: match.start()])
    if _is_only_comments(preamble):
        return ExtractedProof(
            request=ProofRequest(formal_statement, proof, header),
            proof=proof,
            proof_start=proof_start,
            submitted=formal_statement + "\n" + proof,
            submitted_proof_start=len(formal_statement) + 1,
        )
    # Helper lemmas: verified with the theorem, in a file of the trusted header, the block's preamble, the trusted
    # statement and the block's proof.
    prefix = header.rstrip("\n") + "\n\n" + preamble.strip("\n") + "\n\n" + formal_statement
    file = prefix + proof
    return ExtractedProof(
        request=FileRequest(file, statement=formal_statement, header=header),
        proof=proof,
        proof_start=proof_start,
        submitted=file,
        submitted_proof_start=len(prefix),
    )
