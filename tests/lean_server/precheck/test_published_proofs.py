"""False rejections of the precheck on published, Lean-verified prover outputs (tests/data/published).

The corpus holds 730 proofs whose authors report them verified by Lean (sources, commits and licences in
tests/data/published/LICENSES.md): DeepSeek-Prover-V2's miniF2F solutions, Kimina-Prover-Preview's solved
miniF2F-test problems plus the later Kimina-Prover-72B additions, and DeepSeek-Prover-V1.5's few-shot examples.
Each is a true proof, so `prepare` may refuse one only by policy: native evaluation (`native_decide` and its
spellings), which passes once `allow_native_decide=True`. Any other rejection is a false rejection.

Rows still falsely rejected are listed in KNOWN_FALSE_REJECTIONS (tests/published_proofs.py) with their category; the test that checks them
fails as soon as one is accepted, so the list only shrinks. Which rows are native is read off the row text by a
scan of its own here (`uses_native_evaluation`), not from the precheck's reasons.
"""

from __future__ import annotations

import pytest

from tests.published_proofs import (
    CATEGORIES,
    KNOWN_FALSE_REJECTIONS,
    SOURCE_SIZES,
    collapsed,
    has_dataset_header,
    load_rows,
    rejection_of,
    states_dataset_statement,
    top_level_declarations,
    uses_native_evaluation,
)
from trl_verigate.lean_server.core.types import FileRequest, VerificationResult


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return load_rows()


@pytest.fixture(scope="module")
def verdicts(rows) -> dict[str, tuple[VerificationResult | None, VerificationResult | None]]:
    """Row id -> (rejection without native evaluation, rejection with allow_native_decide=True)."""
    return {row["id"]: (rejection_of(row, False), rejection_of(row, True)) for row in rows}


def test_corpus_rows_are_well_formed(rows):
    ids = [row["id"] for row in rows]
    assert len(ids) == len(set(ids)), "row ids must be unique"
    sizes = {source: sum(row["source"] == source for row in rows) for source in SOURCE_SIZES}
    assert sizes == SOURCE_SIZES
    for row in rows:
        assert row["id"].startswith(f"{row['source']}/") and row["id"].endswith(f"/{row['name']}"), row["id"]
        assert row["licence"] and row["origin"].startswith("github.com/"), row["id"]
        if row["kind"] == "file":
            assert row["text"].lstrip().startswith("import "), row["id"]
            assert row["minif2f_statement"].endswith(":= by") and row["minif2f_header"].startswith("import "), row["id"]
        else:
            assert row["kind"] == "proof" and row["statement"].endswith(":= by") and row["proof"].strip(), row["id"]
    assert set(KNOWN_FALSE_REJECTIONS) <= set(ids), "KNOWN_FALSE_REJECTIONS names rows that are not in the corpus"


def test_known_false_rejections_match_their_category():
    for row_id, category in KNOWN_FALSE_REJECTIONS.items():
        assert category in CATEGORIES, f"{row_id}: undocumented category {category!r}"


def test_files_with_helper_lemmas_are_accepted(rows, verdicts):
    # Kimina-Prover-72B's files prove helper lemmas before the main theorem; they are true proofs.
    helper_files = [row for row in rows if row["kind"] == "file" and top_level_declarations(row) > 1]
    assert len(helper_files) >= 8, "the corpus should hold files with helper lemmas, or this test checks nothing"
    refused = [f"{row['id']}: {verdicts[row['id']][1].reason}" for row in helper_files if verdicts[row["id"]][1]]
    assert not refused, "\n".join(refused)


def test_every_rejection_is_native_evaluation_or_a_known_false_rejection(rows, verdicts):
    unexpected = []
    for row in rows:
        refused, refused_with_native = verdicts[row["id"]]
        if row["id"] in KNOWN_FALSE_REJECTIONS:
            continue
        if refused_with_native is not None:
            unexpected.append(f"{row['id']} (even with allow_native_decide=True): {refused_with_native.reason}")
        elif refused is not None and not uses_native_evaluation(row):
            unexpected.append(f"{row['id']}: {refused.reason}")
    assert not unexpected, f"{len(unexpected)} published Lean-verified proofs are falsely rejected:\n" + "\n".join(
        unexpected
    )


def test_native_evaluation_is_refused_by_policy_and_passes_when_allowed(rows, verdicts):
    native_rows = [row for row in rows if uses_native_evaluation(row)]
    assert native_rows, "the corpus should hold proofs using native_decide, or this test checks nothing"
    for row in native_rows:
        refused, refused_with_native = verdicts[row["id"]]
        assert refused is not None, f"{row['id']} uses native evaluation but passed without allow_native_decide"
        if row["id"] in KNOWN_FALSE_REJECTIONS:
            continue
        assert "native" in refused.reason, f"{row['id']}: the policy rejection should say so: {refused.reason}"
        assert refused_with_native is None, f"{row['id']} with allow_native_decide=True: {refused_with_native.reason}"


def test_known_false_rejections_are_still_rejected(verdicts):
    # Fails when a fix makes one of them pass: then delete it from KNOWN_FALSE_REJECTIONS so that it stays fixed.
    now_accepted = [row_id for row_id in KNOWN_FALSE_REJECTIONS if verdicts[row_id][1] is None]
    assert not now_accepted, f"now accepted, remove from KNOWN_FALSE_REJECTIONS: {now_accepted}"


# Files whose own header opens a namespace the miniF2F header does not (`open Real Set`): held to their statement
# without a header they are held to the default header, where that `open` could change what the statement's names
# mean, so they are refused for that line (read off the files: no other published file opens another namespace).
OPENS_BEYOND_THE_DEFAULT_HEADER = {"kimina-prover-72b-0710/aime_1995_p7"}


def test_files_held_to_their_dataset_statement_are_judged_as_when_sent_alone(rows, verdicts):
    # A FileRequest holds the file to the trusted miniF2F statement (and header); for a file that states exactly
    # those, being held to them must not turn a verdict into a rejection (or a rejection into a pass), except for
    # an `open` of a namespace the trusted header does not open.
    held_rows = [row for row in rows if row["kind"] == "file" and states_dataset_statement(row)]
    assert len(held_rows) > 600, "most published files state their dataset statement verbatim"
    differ, refused_opens = [], set()
    for row in held_rows:
        header = row["minif2f_header"] if has_dataset_header(row) else None
        request = FileRequest(row["text"], statement=row["minif2f_statement"], header=header)
        held = rejection_of(row, True, request)
        alone = verdicts[row["id"]][1]
        if held is not None and alone is None and "may only open namespaces the trusted header opens" in held.reason:
            refused_opens.add(row["id"])
        elif (held is None) != (alone is None):
            differ.append(f"{row['id']} (header {'held' if header else 'free'}): alone {alone}, held {held}")
    assert not differ, f"{len(differ)} files judged differently when held to their dataset statement:\n" + "\n".join(
        differ
    )
    assert refused_opens == OPENS_BEYOND_THE_DEFAULT_HEADER


def test_files_held_to_a_statement_they_restate_differently_are_rejected(rows, verdicts):
    # 23 files restate their theorem other than the dataset does (Kimina's corrected statements, added hypotheses,
    # changed brackets): held to the dataset's statement, each must be refused, for the statement, not the proof.
    differing = [row for row in rows if row["kind"] == "file" and not states_dataset_statement(row)]
    assert len(differing) == 23
    for row in differing:
        header = row["minif2f_header"] if has_dataset_header(row) else None
        held = rejection_of(row, True, FileRequest(row["text"], statement=row["minif2f_statement"], header=header))
        assert held is not None, f"{row['id']} passed held to a statement it does not state"
        assert "does not state the trusted statement" in held.reason, f"{row['id']}: {held.reason}"
        assert collapsed(row["minif2f_statement"]) in held.reason, f"{row['id']}: the expected statement is not shown"


def test_false_rejection_rate(rows, verdicts):
    falsely_rejected = [row["id"] for row in rows if verdicts[row["id"]][1] is not None]
    policy = [row["id"] for row in rows if verdicts[row["id"]][0] is not None and verdicts[row["id"]][1] is None]
    print(
        f"\npublished proofs: {len(rows)}, rejected by native-evaluation policy: {len(policy)}, "
        f"falsely rejected: {len(falsely_rejected)} ({len(falsely_rejected) / len(rows):.2%})"
    )
    assert sorted(falsely_rejected) == sorted(KNOWN_FALSE_REJECTIONS)
