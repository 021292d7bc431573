"""The corpus of published, Lean-verified prover outputs (tests/data/published) and how a row is read: its request,
its code without comments, whether it uses native evaluation, and the precheck's rejection of it. Used by
tests/lean_server/precheck/test_published_proofs.py; bench/false_rejections.py measures on other sources
(bench/data), since the allow-lists were once built from these rows."""

from __future__ import annotations

import gzip
import json
import re

from tests.launch import TESTS_DIR
from tests.lean_helpers import prepare
from trl_verigate.lean_server.core.types import MINIF2F_HEADER, ProofRequest, Request, VerificationResult

CORPUS_DIR = TESTS_DIR / "data" / "published"
# Stored gzipped: Kimina zipped its solutions "to avoid contamination" of web-crawled training data; we keep that.
CORPUS_FILES = ("deepseek_prover_v2.jsonl.gz", "kimina_prover.jsonl.gz", "deepseek_prover_v15_few_shot.jsonl.gz")
# Rows per source, counted from the published archives (.lean files in each zip, lines of the few-shot jsonl).
SOURCE_SIZES = {
    "deepseek-prover-v2": 438,
    "kimina-prover-preview": 197,
    "kimina-prover-72b-0710": 28,
    "deepseek-prover-v1.5-few-shot": 67,
}

# Row id -> why the precheck still refuses this true proof (a category of CATEGORIES). Remove a row when a fix makes
# it pass (the test test_known_false_rejections_are_still_rejected says which). None are left: the last 8, complete
# files with helper lemmas before the main theorem, pass since files.py accepts helper declarations (issue 6).
KNOWN_FALSE_REJECTIONS: dict[str, str] = {}
# Category -> what it means; a row's category must be listed here.
CATEGORIES: dict[str, str] = {}

_BLOCK_COMMENT = re.compile(r"/-.*?-/", re.DOTALL)
_LINE_COMMENT = re.compile(r"--[^\n]*")
# The spellings of native evaluation Lean offers: the tactic, `decide +native` / `(config := {native := true})`,
# the axioms it rests on, and the bit-blasting tactics that call it.
_NATIVE = re.compile(
    r"\bnative_decide\b|\+\s*native\b|\bnative\s*:=|\b(?:of)?[Rr]educe(?:Bool|Nat)\b|\bbv_(?:decide|check)\b"
)
_TOP_LEVEL_DECLARATION = re.compile(
    r"^(?:@\[[^\]\n]*\]\s*)?(?:(?:private|protected|noncomputable)\s+)*(?:theorem|lemma|def|abbrev|example)\b",
    re.MULTILINE,
)


def load_rows() -> list[dict]:
    """Every row of the corpus, source by source in file order."""
    rows = []
    for name in CORPUS_FILES:
        with gzip.open(CORPUS_DIR / name, "rt", encoding="utf-8") as lines:
            rows.extend(json.loads(line) for line in lines if line.strip())
    return rows


def request_of(row: dict) -> Request:
    """A file row is sent whole, as a str (the file is its own claim); a proof row as its dataset statement + proof."""
    if row["kind"] == "file":
        return row["text"]
    return ProofRequest(row["statement"], row["proof"], row["header"])


def lean_code(row: dict) -> str:
    """The row's submitted Lean text with comments removed (docstrings included: they are comments too)."""
    text = row["text"] if row["kind"] == "file" else row["statement"] + "\n" + row["proof"]
    return _LINE_COMMENT.sub("", _BLOCK_COMMENT.sub("", text))


def uses_native_evaluation(row: dict) -> bool:
    return _NATIVE.search(lean_code(row)) is not None


def top_level_declarations(row: dict) -> int:
    return len(_TOP_LEVEL_DECLARATION.findall(lean_code(row)))


def collapsed(text: str) -> str:
    return " ".join(text.split())


def states_dataset_statement(row: dict) -> bool:
    """Whether the file states its miniF2F statement as the dataset writes it (comments and layout aside)."""
    return collapsed(_LINE_COMMENT.sub("", _BLOCK_COMMENT.sub("", row["minif2f_statement"]))) in collapsed(
        lean_code(row)
    )


def has_dataset_header(row: dict) -> bool:
    """Whether the file's header lines (those before its first declaration) are the dataset header's, blank lines aside."""
    lines = lean_code(row).splitlines()
    first_declaration = next(
        i for i, line in enumerate(lines) if _TOP_LEVEL_DECLARATION.match(line) or line.rstrip().endswith(" in")
    )
    file_header = [line.strip() for line in lines[:first_declaration] if line.strip()]
    return file_header == [line.strip() for line in row["minif2f_header"].splitlines() if line.strip()]


def rejection_of(row: dict, allow_native_decide: bool, request: Request | None = None) -> VerificationResult | None:
    """The rejection `prepare` gives the row (sent as `request`, by default its own), or None when it goes on to Lean."""
    request = request_of(row) if request is None else request
    prepared = prepare(request, MINIF2F_HEADER, allow_native_decide=allow_native_decide)
    if isinstance(prepared, VerificationResult):
        assert prepared.status == "rejected", prepared
        return prepared
    return None
