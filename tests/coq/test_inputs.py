"""No input costs another request its result: malformed strings in one `CoqServer.verify` call each come back
"rejected" with a reason, and the honest requests beside them pass."""

import pytest

from trl_verigate.coq import CoqProofRequest

from .helpers import STATEMENT

pytestmark = pytest.mark.timeout(300)
HONEST = "intros n. lia."

MALFORMED = {
    "lone_surrogate": "\ud800",
    "surrogate_in_a_tactic": "intros n. exact (\udfff). lia.",
    "nul": "intros n.\x00 lia.",
    # What invalid UTF-8 becomes when it is decoded with `surrogateescape` (how Python reads undecodable bytes).
    "invalid_utf8_round_trip": b"intros n. \xff\xfe lia.".decode("utf-8", "surrogateescape"),
    "combining_marks_64_kib": "\u0301" * (64 << 10),
    "combining_marks_after_a_tactic": "intros n. lia." + "\u0301" * 20_000,
    "lone_carriage_return": "intros n.\rlia.",
    "escape_character": 'intros n. idtac "\x1b[2J". lia.',
}


def test_a_mixed_batch_rejects_each_malformed_request_and_passes_the_honest_ones(coq_server):
    names = list(MALFORMED)
    requests = []
    for name in names:
        requests += [CoqProofRequest(STATEMENT, MALFORMED[name]), CoqProofRequest(STATEMENT, HONEST)]
    results = coq_server.verify(requests)
    assert len(results) == len(requests)
    for name, bad, honest in zip(names, results[0::2], results[1::2], strict=True):
        assert honest.passed, (name, honest.reason)
        assert bad.status in ("rejected", "failed") and bad.reason, (name, bad.status, bad.reason)
        if name != "combining_marks_after_a_tactic":
            # Refused before Coq runs; marks after `lia.` reach Coq, whose lexer refuses them as a failed step.
            assert bad.status == "rejected", (name, bad.status, bad.reason)


def test_a_request_whose_fields_are_not_strings_is_judged_alone(coq_server):
    odd, honest = coq_server.verify([CoqProofRequest(STATEMENT, None), CoqProofRequest(STATEMENT, HONEST)])
    assert odd.status == "rejected" and "str" in odd.reason
    assert honest.passed


def test_a_malformed_trusted_statement_is_an_error_of_its_own(coq_server):
    bad, honest = coq_server.verify(
        [CoqProofRequest("Theorem t\x00 : True.", "exact I."), CoqProofRequest(STATEMENT, HONEST)]
    )
    assert bad.status == "error" and bad.reason.startswith("CoqProofRequest.statement")
    assert honest.passed
