"""The Lean process oracle and the lean_proof reward without a trainer: completion shapes, request building, verdicts
mapped back to completion coordinates, failures, and the background verification the trainer starts."""

import asyncio

import pytest

from trl_verigate.lean_server import FileRequest, Message, ProofRequest, Tactic, VerificationResult
from trl_verigate.rewards.lean import LeanProcessOracle, LeanProofReward
from trl_verigate.rewards.lean_proofs import CUT_OFF, NO_PROOF, STATEMENT_CHANGED, extract_proof
from trl_verigate.rewards.process import ProcessVerdict

STATEMENT = "theorem t (a b : ℕ) (h : a ≤ b) : a < b + 1 := by"
HEADER = "import Mathlib\nopen Nat"


class RecordingVerifier:
    """A Verifier whose verdicts a test chooses per proof text; records every request."""

    def __init__(self, answer=None):
        self.requests = []
        self.answer = answer or (lambda request: VerificationResult(status="passed"))

    def verify(self, requests, timeout=None, progress=None):
        self.requests.extend(requests)
        return [self.answer(request) for request in requests]

    async def averify(self, requests, timeout=None, progress=None):
        return self.verify(requests, timeout, progress)


def test_proof_body_goes_as_a_proof_request_up_to_the_closing_fence():
    extracted = extract_proof("\n  omega\n```\nsome chatter", STATEMENT, "H", "DEFAULT", "auto")
    assert extracted.request == ProofRequest(STATEMENT, "\n  omega\n", "H")
    assert extracted.proof_start == 0


@pytest.mark.parametrize("completion", ["", "   \n", "```\n"])
def test_blank_proof_body_is_no_proof(completion):
    assert extract_proof(completion, STATEMENT, None, "D").reason == NO_PROOF


def test_fenced_block_uses_the_trusted_statement_and_header_never_the_blocks():
    completion = (
        "Think: a ≤ b → a < b + 1.\n```lean4\nimport Evil\nset_option maxHeartbeats 0\nopen Nat renaming succ → s\n"
        "-- restated\ntheorem t (a b : ℕ)\n    (h : a ≤ b) : a < b + 1 := by\n  omega\n```\nDone."
    )
    extracted = extract_proof(completion, STATEMENT, HEADER, "D")
    assert extracted.request == ProofRequest(STATEMENT, "\n  omega\n", HEADER)
    assert completion[extracted.proof_start :].startswith("\n  omega\n```")


def test_fenced_block_with_another_statement_fails_as_statement_changed():
    completion = "```lean4\ntheorem t (a b : ℕ) (h : a ≤ b) : a < b + 2 := by\n  omega\n```"
    extracted = extract_proof(completion, STATEMENT, None, "D")
    assert extracted.request is None and extracted.reason == STATEMENT_CHANGED


def test_whitespace_is_not_free_inside_words():
    # "a<b" is not "a < b" up to whitespace: the words differ.
    statement = "theorem u : a < b := by"
    assert extract_proof("```lean4\ntheorem u : a<b := by\n  rfl\n```", statement, None, "D").reason == (
        STATEMENT_CHANGED
    )


def test_fenced_block_cut_off_is_no_proof():
    assert extract_proof("```lean4\ntheorem t (a b : ℕ) (h : a ≤ b) :", STATEMENT, None, "D").reason == CUT_OFF


def test_helper_lemmas_are_verified_with_the_theorem_in_a_file_held_to_statement_and_header():
    completion = (
        "```lean4\nimport Mathlib\nopen Nat\n\nlemma helper (x : ℕ) : x ≤ x + 1 := by\n  omega\n\n"
        + STATEMENT
        + "\n  exact Nat.lt_succ_of_le h\n```"
    )
    extracted = extract_proof(completion, STATEMENT, None, "DEFAULT HEADER")
    request = extracted.request
    assert isinstance(request, FileRequest)
    assert (request.statement, request.header) == (STATEMENT, "DEFAULT HEADER")
    assert request.file == (
        "DEFAULT HEADER\n\nlemma helper (x : ℕ) : x ≤ x + 1 := by\n  omega\n\n"
        + STATEMENT
        + "\n  exact Nat.lt_succ_of_le h\n"
    )
    assert request.file[extracted.submitted_proof_start :] == extracted.proof


def test_oracle_maps_tactics_and_error_messages_to_completion_offsets():
    prefix = "Reasoning: ≤ → <.\n```lean4\n" + STATEMENT
    completion = prefix + "\n  intro x\n  simp at h\n  omega\n```"
    proof = "\n  intro x\n  simp at h\n  omega\n"
    tactics = [Tactic("intro x", 3, 10), Tactic("simp at h", 13, 22), Tactic("omega", 25, 30)]
    # Submitted source: statement + "\n" + proof; "simp at h" is on line 4, column 2.
    messages = [Message("error", 4, 7, None, "simp made no progress"), Message("warning", 3, 2, None, "unused")]

    def answer(request):
        assert request.proof == proof
        return VerificationResult(status="failed", tactics=tactics, first_error_tactic=1, messages=messages)

    (verdict,) = LeanProcessOracle(RecordingVerifier(answer)).verify(
        [None], [{"formal_statement": STATEMENT}], [completion]
    )
    assert [completion[start:end] for start, end in verdict.spans] == ["intro x", "simp at h", "omega"]
    assert verdict.spans[0][0] == len(prefix) + 3
    assert (verdict.status, verdict.first_error, verdict.error_tactics) == ("failed", 1, (1,))


def test_oracle_timeout_marks_every_tactic_and_mismatched_tactics_are_dropped():
    results = iter(
        [
            VerificationResult(status="timeout", tactics=[Tactic("omega", 3, 8)], first_error_tactic=0),
            VerificationResult(status="passed", tactics=[Tactic("not the text", 3, 8)], first_error_tactic=1),
        ]
    )
    oracle = LeanProcessOracle(RecordingVerifier(lambda request: next(results)))
    timeout, passed = oracle.verify([None, None], [{"formal_statement": STATEMENT}] * 2, ["\n  omega"] * 2)
    assert (timeout.status, timeout.spans, timeout.first_error, timeout.error_tactics) == (
        "timeout",
        ((3, 8),),
        0,
        (0,),
    )
    assert passed.passed and passed.spans == ()


def test_oracle_needs_the_statement_column():
    with pytest.raises(ValueError, match="statement_field"):
        LeanProcessOracle(RecordingVerifier()).verify([None], [{"problem": "x"}], ["\n  omega"])


def test_conversational_completion_is_read_from_its_last_message():
    verifier = RecordingVerifier()
    LeanProcessOracle(verifier).verify(
        [None], [{"formal_statement": STATEMENT}], [[{"role": "assistant", "content": "\n  omega"}]]
    )
    assert verifier.requests == [ProofRequest(STATEMENT, "\n  omega", None)]


def reward_call(reward, completions, rows):
    columns = {key: [row[key] for row in rows] for key in rows[0]}
    return asyncio.run(reward(prompts=[None] * len(completions), completions=completions, **columns))


def test_reward_is_one_exactly_for_passed_and_counts_failures():
    statuses = iter(["passed", "failed", "timeout", "crashed", "error", "rejected"])
    verifier = RecordingVerifier(lambda request: VerificationResult(status=next(statuses)))
    reward = LeanProofReward(LeanProcessOracle(verifier))
    rows = [{"formal_statement": STATEMENT}] * 6
    assert reward_call(reward, ["\n  omega"] * 6, rows) == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert reward.failures == 3  # timeout, crashed, error: the verification failed, not the proof
    assert [verdict.status for verdict in reward.last_verdicts] == [
        "passed",
        "failed",
        "timeout",
        "crashed",
        "error",
        "rejected",
    ]


def test_a_raising_verifier_gives_zero_and_is_counted():
    def explode(request):
        raise ConnectionError("server unreachable")

    reward = LeanProofReward(LeanProcessOracle(RecordingVerifier(explode)))
    assert reward_call(reward, ["\n  omega", "\n  simp"], [{"formal_statement": STATEMENT}] * 2) == [0.0, 0.0]
    assert reward.failures == 2
    assert "server unreachable" in reward.last_verdicts[0].reason


def test_started_verification_is_collected_not_repeated():
    verifier = RecordingVerifier()
    reward = LeanProofReward(LeanProcessOracle(verifier))
    rows = [{"formal_statement": STATEMENT}]
    reward.start([None], ["\n  omega"], rows)
    assert reward_call(reward, ["\n  omega"], rows) == [1.0]
    assert len(verifier.requests) == 1
    # Other completions than the started ones are verified on the spot.
    assert reward_call(reward, ["\n  simp"], rows) == [1.0]
    assert [request.proof for request in verifier.requests] == ["\n  omega", "\n  simp"]


def test_any_oracle_plugs_in():
    class EveryOtherPasses:
        def verify(self, prompts, rows, completions):
            return [ProcessVerdict("passed" if index % 2 == 0 else "failed") for index in range(len(completions))]

    reward = LeanProofReward(EveryOtherPasses())
    assert reward_call(reward, ["a", "b", "c"], [{"x": 1}] * 3) == [1.0, 0.0, 1.0]


def test_statement_with_deepseek_trailing_newline_is_sent_ending_at_by():
    verifier = RecordingVerifier()
    LeanProcessOracle(verifier).verify([None], [{"formal_statement": STATEMENT + "\n", "header": HEADER}], ["  omega"])
    assert verifier.requests == [ProofRequest(STATEMENT, "  omega", HEADER)]


def test_helper_lemmas_reach_lean_and_only_the_theorems_tactics_get_spans(tmp_path):
    from tests.fake_repl import stand_in_config
    from trl_verigate.lean_server import LeanServer

    completion = (
        "Use a helper.\n```lean4\nimport Mathlib\n\nlemma helper (x : ℕ) : x ≤ x + 1 := by\n  omega\n\n"
        + STATEMENT
        + "\n  have := helper a\n  omega\n```"
    )
    with LeanServer(stand_in_config(tmp_path)) as server:
        (verdict,) = LeanProcessOracle(server).verify([None], [{"formal_statement": STATEMENT}], [completion])
    assert verdict.passed
    # The helper's `omega` is verified but credited to no span: only the theorem's two tactics are.
    assert [completion[start:end] for start, end in verdict.spans] == ["have := helper a", "omega"]
    assert verdict.spans[0][0] > completion.index(STATEMENT)
