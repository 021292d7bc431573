import math

import pytest
import torch

from trl_verigate.advantages import (
    centered_step_rewards,
    deepseekmath_step_advantages,
    future_cumulated_rewards,
    gated_groups,
    group_normalized_step_advantages,
    process_step_advantages,
    sequence_mean_advantages,
    step_advantages_to_tokens,
    tactic_advantages_to_tokens,
    tactic_process_advantages,
    tactic_scores,
)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def mask_from_counts(counts, num_steps):
    return torch.arange(num_steps).unsqueeze(0) < torch.tensor(counts).unsqueeze(1)


# ---------------------------------------------------------------- S1 gate


def test_gated_groups_all_zero_vs_all_equal():
    # G=4: group 0 has one verified completion, group 1 none, group 2 all verified.
    rewards = torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    assert gated_groups(rewards, 4).tolist() == [False, True, False]
    assert gated_groups(rewards, 4, mode="all_zero").tolist() == [False, True, False]
    assert gated_groups(rewards, 4, mode="all_equal").tolist() == [False, True, True]


def test_gated_groups_all_equal_is_exact_and_nan_never_gates():
    rewards = torch.tensor([0.5, 0.5, 0.5, 0.5 + 1e-6, float("nan"), float("nan")])
    assert gated_groups(rewards, 2, mode="all_equal").tolist() == [True, False, False]
    assert gated_groups(rewards, 2, mode="all_zero").tolist() == [False, False, False]


def test_gated_groups_group_of_one():
    rewards = torch.tensor([0.0, 2.0, 0.0])
    gated = gated_groups(rewards, 1)
    assert gated.dtype == torch.bool and gated.tolist() == [True, False, True]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"outcome_rewards": torch.zeros(6), "num_generations": 4}, "multiple of `num_generations`"),
        ({"outcome_rewards": torch.zeros(6), "num_generations": 0}, "`num_generations` must be a positive int"),
        ({"outcome_rewards": torch.zeros(6), "num_generations": 2.0}, "`num_generations` must be a positive int"),
        ({"outcome_rewards": torch.zeros(2, 3), "num_generations": 3}, "`outcome_rewards` must be a 1-D tensor"),
        ({"outcome_rewards": torch.zeros(6), "num_generations": 3, "mode": "any_zero"}, "`mode` must be one of"),
    ],
)
def test_gated_groups_bad_inputs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gated_groups(**kwargs)


# ---------------------------------------------------------------- S2 future-cumulated rewards


def test_future_cumulated_rewards_hand_computed_ragged_and_empty_rows():
    # row 0: 3 steps r=(1,2,3) -> c=(1+2+3, 2+3, 3) = (6,5,3)
    # row 1: 2 steps r=(4,5)   -> c=(9,5), padding stays 0 even though it holds NaN
    # row 2: 0 steps           -> all 0
    rewards = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, float("nan")], [7.0, 8.0, 9.0]])
    mask = mask_from_counts([3, 2, 0], 3)
    cumulated = future_cumulated_rewards(rewards, mask)
    assert cumulated.tolist() == [[6.0, 5.0, 3.0], [9.0, 5.0, 0.0], [0.0, 0.0, 0.0]]


def test_future_cumulated_rewards_zero_steps_axis():
    cumulated = future_cumulated_rewards(torch.zeros(4, 0), torch.zeros(4, 0, dtype=torch.bool))
    assert cumulated.shape == (4, 0)


@pytest.mark.parametrize(
    "rewards, mask, match",
    [
        (torch.zeros(3), torch.zeros(3, dtype=torch.bool), "`step_rewards` must be a 2-D tensor"),
        (torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.bool), "floating-point"),
        (torch.zeros(2, 3), torch.ones(2, 3), "`step_mask` must be a torch.bool tensor"),
        (torch.zeros(2, 3), torch.ones(2, 2, dtype=torch.bool), "`step_mask` shape"),
    ],
)
def test_future_cumulated_rewards_bad_inputs(rewards, mask, match):
    with pytest.raises(ValueError, match=match):
        future_cumulated_rewards(rewards, mask)


# ---------------------------------------------------------------- S3 group normalisation


def test_group_normalized_step_advantages_hand_computed():
    # One group (G=2) with c = [[6,5,3],[9,5,pad]]: valid values 6,5,3,9,5.
    # mean = 28/5 = 5.6; deviations .4,-.6,-2.6,3.4,-.6; squares sum 19.2; unbiased var = 19.2/4 = 4.8.
    cumulated = torch.tensor([[6.0, 5.0, 3.0], [9.0, 5.0, 123.0]], dtype=torch.float64)
    mask = mask_from_counts([3, 2], 3)
    std = math.sqrt(4.8)
    expected = torch.tensor([[0.4, -0.6, -2.6], [3.4, -0.6, 0.0]], dtype=torch.float64) / (std + 1e-4)
    expected[1, 2] = 0.0
    advantages = group_normalized_step_advantages(cumulated, mask, num_generations=2)
    torch.testing.assert_close(advantages, expected)


def test_group_normalized_groups_are_independent_and_small_groups_get_zero():
    # G=2, three groups:
    # group 0: c = [[1,0],[0,pad]] -> values 1,0,0; mean 1/3; squares 4/9+1/9+1/9 = 2/3; var = (2/3)/2 = 1/3
    #          A = (2/3, -1/3, -1/3) / sqrt(1/3) = (2/sqrt3, -1/sqrt3, -1/sqrt3)   (eps = 0)
    # group 1: one valid entry only -> no std -> all 0
    # group 2: no valid entries -> all 0
    cumulated = torch.tensor([[1.0, 0.0], [0.0, 5.0], [4.0, 5.0], [6.0, 7.0], [1.0, 2.0], [3.0, 4.0]])
    mask = mask_from_counts([2, 1, 1, 0, 0, 0], 2)
    advantages = group_normalized_step_advantages(cumulated, mask, num_generations=2, eps=0.0)
    root3 = math.sqrt(3.0)
    expected = torch.tensor([[2 / root3, -1 / root3], [-1 / root3, 0.0], [0.0] * 2, [0.0] * 2, [0.0] * 2, [0.0] * 2])
    torch.testing.assert_close(advantages, expected)


def test_group_normalized_constant_group_gives_zero():
    cumulated = torch.full((4, 3), 2.5)
    mask = mask_from_counts([3, 1, 2, 3], 3)
    assert group_normalized_step_advantages(cumulated, mask, 4).abs().max().item() == 0.0


@pytest.mark.parametrize("scale, shift", [(3.0, -7.0), (0.01, 100.0), (250.0, 0.5)])
def test_group_normalized_is_affine_invariant(scale, shift):
    # Prop. 3.1: A(a*c + b) = A(c) for a > 0 (exact when eps = 0).
    generator = torch.Generator().manual_seed(0)
    cumulated = torch.randn(8, 5, generator=generator, dtype=torch.float64)
    mask = mask_from_counts([5, 3, 0, 1, 4, 4, 2, 5], 5)
    reference = group_normalized_step_advantages(cumulated, mask, 4, eps=0.0)
    transformed = group_normalized_step_advantages(scale * cumulated + shift, mask, 4, eps=0.0)
    torch.testing.assert_close(transformed, reference)
    # The same holds for the whole VeriGate pipeline when each step reward is scaled (shift is not invariant there
    # because it is multiplied by the number of future steps).
    step_rewards = torch.randn(8, 5, generator=generator, dtype=torch.float64)
    torch.testing.assert_close(
        process_step_advantages(scale * step_rewards, mask, 4, eps=0.0),
        process_step_advantages(step_rewards, mask, 4, eps=0.0),
    )


def test_group_normalized_matches_per_group_reference():
    # Compare the vectorised computation with torch.mean / torch.std on each group's valid entries.
    generator = torch.Generator().manual_seed(1)
    cumulated = torch.randn(9, 6, generator=generator, dtype=torch.float64)
    counts = [6, 2, 0, 3, 3, 1, 5, 6, 4]
    mask = mask_from_counts(counts, 6)
    advantages = group_normalized_step_advantages(cumulated, mask, 3, eps=1e-4)
    for group in range(3):
        rows = slice(3 * group, 3 * group + 3)
        values = cumulated[rows][mask[rows]]
        expected = (values - values.mean()) / (values.std() + 1e-4)
        torch.testing.assert_close(advantages[rows][mask[rows]], expected)
        assert (advantages[rows][~mask[rows]] == 0).all()


def test_group_normalized_bad_inputs():
    with pytest.raises(ValueError, match="multiple of `num_generations`"):
        group_normalized_step_advantages(torch.zeros(3, 2), torch.ones(3, 2, dtype=torch.bool), 2)
    with pytest.raises(ValueError, match="`cumulated` must be a floating-point"):
        group_normalized_step_advantages(torch.zeros(2, 2, dtype=torch.int32), torch.ones(2, 2, dtype=torch.bool), 2)


# ---------------------------------------------------------------- DeepSeekMath variant and dispatch


def test_deepseekmath_step_advantages_hand_computed():
    # G=2, r = [[1,0],[0,pad]]: normalise first (eps=0) -> r~ = [[2/sqrt3, -1/sqrt3], [-1/sqrt3, 0]]
    # then cumulate future steps -> [[2/sqrt3 - 1/sqrt3, -1/sqrt3], [-1/sqrt3, 0]] = [[1/sqrt3, -1/sqrt3], ...]
    rewards = torch.tensor([[1.0, 0.0], [0.0, 9.0]])
    mask = mask_from_counts([2, 1], 2)
    root3 = math.sqrt(3.0)
    expected = torch.tensor([[1 / root3, -1 / root3], [-1 / root3, 0.0]])
    torch.testing.assert_close(deepseekmath_step_advantages(rewards, mask, 2, eps=0.0), expected)


def test_process_step_advantages_dispatch_and_hand_computed_verigate():
    # VeriGate on the same r = [[1,0],[0,pad]]: c = [[1,0],[0,pad]], which normalises to
    # [[2/sqrt3, -1/sqrt3], [-1/sqrt3, 0]] -- different from the DeepSeekMath result above.
    rewards = torch.tensor([[1.0, 0.0], [0.0, 9.0]])
    mask = mask_from_counts([2, 1], 2)
    root3 = math.sqrt(3.0)
    verigate = process_step_advantages(rewards, mask, 2, eps=0.0)
    torch.testing.assert_close(verigate, torch.tensor([[2 / root3, -1 / root3], [-1 / root3, 0.0]]))
    torch.testing.assert_close(
        process_step_advantages(rewards, mask, 2, normalization="deepseekmath", eps=0.0),
        deepseekmath_step_advantages(rewards, mask, 2, eps=0.0),
    )
    with pytest.raises(ValueError, match="`normalization` must be one of"):
        process_step_advantages(rewards, mask, 2, normalization="grpo")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("normalization", ["verigate", "deepseekmath"])
def test_dtype_and_device_preserved(device, dtype, normalization):
    rewards = torch.tensor([[0.9, 0.2, 0.4], [0.1, 0.8, 0.0], [0.5, 0.5, 0.3], [0.7, 0.0, 0.0]], dtype=dtype)
    rewards = rewards.to(device)
    mask = mask_from_counts([3, 2, 3, 1], 3).to(device)
    advantages = process_step_advantages(rewards, mask, 2, normalization=normalization)
    assert advantages.dtype == dtype and advantages.device == rewards.device
    token_ids = torch.tensor([[0, 1, 2, -1], [1, 1, -1, -1], [2, 2, 2, 2], [-1, -1, -1, -1]], device=device)
    tokens = step_advantages_to_tokens(advantages, token_ids)
    assert tokens.dtype == dtype and tokens.device == rewards.device
    assert tokens.shape == (4, 4)


# ---------------------------------------------------------------- tokens


def test_step_advantages_to_tokens_hand_computed():
    advantages = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    token_ids = torch.tensor([[0, 0, 1, 2, -1], [1, -1, -1, -1, -1]])
    tokens = step_advantages_to_tokens(advantages, token_ids)
    assert tokens.tolist() == [[1.0, 1.0, 2.0, 3.0, 0.0], [5.0, 0.0, 0.0, 0.0, 0.0]]


def test_step_advantages_to_tokens_without_steps():
    tokens = step_advantages_to_tokens(torch.zeros(2, 0), torch.full((2, 3), -1, dtype=torch.long))
    assert tokens.tolist() == [[0.0] * 3] * 2


def test_pipeline_tokens_of_one_step_share_advantage():
    # G=2: completion 0 has steps with PRM scores (1, 0), completion 1 a single step scoring 0.
    # From the hand case above: A = [[2/sqrt3, -1/sqrt3], [-1/sqrt3, pad]].
    rewards = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    mask = mask_from_counts([2, 1], 2)
    token_ids = torch.tensor([[0, 0, 0, 1, 1, -1], [0, 0, 0, 0, -1, -1]])
    tokens = step_advantages_to_tokens(process_step_advantages(rewards, mask, 2, eps=0.0), token_ids)
    a, b = 2 / math.sqrt(3.0), -1 / math.sqrt(3.0)
    torch.testing.assert_close(tokens, torch.tensor([[a, a, a, b, b, 0.0], [b, b, b, b, 0.0, 0.0]]))


@pytest.mark.parametrize(
    "advantages, token_ids, match",
    [
        (torch.zeros(2, 3), torch.zeros(2, 4), "`token_step_ids` must be a 2-D torch.long"),
        (torch.zeros(2, 3), torch.zeros(3, 4, dtype=torch.long), "one row per completion"),
        (torch.zeros(2, 3), torch.full((2, 4), 3, dtype=torch.long), r"must lie in \[-1, 2\]"),
        (torch.zeros(2, 3), torch.full((2, 4), -2, dtype=torch.long), r"must lie in \[-1, 2\]"),
        (torch.zeros(3), torch.zeros(3, 4, dtype=torch.long), "`step_advantages` must be a 2-D tensor"),
    ],
)
def test_step_advantages_to_tokens_bad_inputs(advantages, token_ids, match):
    with pytest.raises(ValueError, match=match):
        step_advantages_to_tokens(advantages, token_ids)


@pytest.mark.parametrize("normalization", ["verigate", "deepseekmath"])
def test_no_step_column_at_all_gives_empty_advantages(normalization):
    # A batch in which no completion has a step: (N, 0) in, (N, 0) out, for both orders.
    step_rewards = torch.zeros(4, 0)
    step_mask = torch.zeros(4, 0, dtype=torch.bool)
    advantages = process_step_advantages(step_rewards, step_mask, num_generations=2, normalization=normalization)
    assert advantages.shape == (4, 0)


# ---------------------------------------------------------------- Lean process GRPO
# d1 = -0.05, d2 = -0.1 (paper defaults); the expected tables below are written out from the rules, not computed.
D1, D2 = -0.05, -0.1


def test_tactic_scores_passed_failed_incomplete_timeout_and_no_tactics():
    passed = torch.tensor([True, False, False, False, False])
    num_tactics = torch.tensor([3, 4, 2, 3, 0])
    # passed; fails at tactic 1 of 4; incomplete (first_error == num_tactics); timeout (0); no proof at all
    first_error = torch.tensor([3, 1, 2, 0, 0])
    scores, mask = tactic_scores(passed, num_tactics, first_error)
    expected = torch.tensor(
        [
            [1.0, 1.0, 1.0, 0.0],
            [D1, D2, D2, D2],
            [D1, D1, 0.0, 0.0],
            [D2, D2, D2, 0.0],
            [0.0, 0.0, 0.0, 0.0],
        ]
    )
    expected_mask = torch.tensor(
        [[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0], [0, 0, 0, 0]], dtype=torch.bool
    )
    assert torch.equal(mask, expected_mask)
    assert torch.allclose(scores, expected)


def test_tactic_scores_custom_scores_and_all_rows_without_tactics():
    scores, mask = tactic_scores(
        torch.tensor([False, False]), torch.tensor([0, 0]), torch.tensor([0, 0]), partial_score=-1.0, error_score=-2.0
    )
    assert scores.shape == mask.shape == (2, 1)  # M = max(1, max num_tactics)
    assert not mask.any() and torch.equal(scores, torch.zeros(2, 1))
    scores, _ = tactic_scores(torch.tensor([False]), torch.tensor([3]), torch.tensor([2]), -1.0, -2.0)
    assert scores.tolist() == [[-1.0, -1.0, -2.0]]


def test_tactic_scores_without_propagation_marks_only_error_tactics():
    passed = torch.tensor([False, False, True])
    num_tactics = torch.tensor([4, 2, 2])
    first_error = torch.tensor([1, 2, 2])
    # row 0: errors start in tactics 1 and 3 only; row 1: incomplete, no error tactic; row 2 passed (flags ignored)
    error_tactics = torch.tensor(
        [[False, True, False, True, False], [False, False, False, False, False], [True, True, False, False, False]]
    )
    scores, _ = tactic_scores(passed, num_tactics, first_error, error_tactics=error_tactics)
    expected = torch.tensor([[D1, D2, D1, D2], [D1, D1, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    assert torch.allclose(scores, expected)
    # With propagation the same verdict gives d2 to every tactic from the first error on.
    propagated, _ = tactic_scores(passed, num_tactics, first_error)
    assert torch.allclose(propagated[0], torch.tensor([D1, D2, D2, D2]))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(passed=torch.tensor([1, 0]), num_tactics=torch.tensor([1, 1]), first_error=torch.tensor([0, 0])), "bool"),
        (dict(passed=torch.tensor([True]), num_tactics=torch.tensor([1.0]), first_error=torch.tensor([0])), "long"),
        (dict(passed=torch.tensor([True]), num_tactics=torch.tensor([2, 2]), first_error=torch.tensor([0])), "rows"),
        (dict(passed=torch.tensor([False]), num_tactics=torch.tensor([2]), first_error=torch.tensor([3])), "first_e"),
        (dict(passed=torch.tensor([False]), num_tactics=torch.tensor([-1]), first_error=torch.tensor([0])), ">= 0"),
        (
            dict(
                passed=torch.tensor([False]),
                num_tactics=torch.tensor([3]),
                first_error=torch.tensor([0]),
                error_tactics=torch.tensor([[True, False]]),
            ),
            "columns",
        ),
    ],
)
def test_tactic_scores_bad_inputs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tactic_scores(**kwargs)


def test_tactic_process_advantages_subtracts_the_group_mean_of_g():
    # Two groups of 2. Group 0: g = (1, 0), mean 0.5. Group 1: g = (0, 0), mean 0.
    scores = torch.tensor([[1.0, 1.0, 0.0], [D1, D2, D2], [D2, 0.0, 0.0], [D1, D1, D1]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]], dtype=torch.bool)
    advantages = tactic_process_advantages(scores, mask, torch.tensor([1.0, 0.0, 0.0, 0.0]), num_generations=2)
    expected = torch.tensor([[0.5, 0.5, 0.0], [-0.55, -0.6, -0.6], [D2, 0.0, 0.0], [D1, D1, D1]])
    assert torch.allclose(advantages, expected)


def test_tactic_process_advantages_ragged_group_all_passed():
    # A ragged group that all passed: g mean 1, so phi - 1 = 0 everywhere (outcome-only credit, as GRPO).
    scores, mask = tactic_scores(torch.tensor([True, True, True]), torch.tensor([1, 3, 2]), torch.tensor([1, 3, 2]))
    advantages = tactic_process_advantages(scores, mask, torch.ones(3), num_generations=3)
    assert torch.equal(advantages, torch.zeros(3, 3))


def test_tactic_process_advantages_bad_inputs():
    scores, mask = torch.zeros(3, 2), torch.ones(3, 2, dtype=torch.bool)
    with pytest.raises(ValueError, match="multiple of `num_generations`"):
        tactic_process_advantages(scores, mask, torch.zeros(3), num_generations=2)
    with pytest.raises(ValueError, match="one per completion"):
        tactic_process_advantages(scores, mask, torch.zeros(4), num_generations=1)


# Completion 0 has tactics on tokens [1, 3) and [3, 6); completion 1 one tactic on [2, 3) and a padding entry.
TOKEN_SPANS = torch.tensor([[[1, 3], [3, 6]], [[2, 3], [-1, -1]]])
TACTIC_ADVANTAGES = torch.tensor([[0.5, -0.25], [2.0, 9.0]])


@pytest.mark.parametrize(
    "assignment, expected",
    [
        ("first", [[0, 0.5, 0, -0.25, 0, 0, 0], [0, 0, 2.0, 0, 0, 0, 0]]),
        ("last", [[0, 0, 0.5, 0, 0, -0.25, 0], [0, 0, 2.0, 0, 0, 0, 0]]),
        ("all", [[0, 0.5, 0.5, -0.25, -0.25, -0.25, 0], [0, 0, 2.0, 0, 0, 0, 0]]),
    ],
)
def test_tactic_advantages_to_tokens_each_assignment(assignment, expected):
    tokens = tactic_advantages_to_tokens(TACTIC_ADVANTAGES, TOKEN_SPANS, num_tokens=7, assignment=assignment)
    assert torch.allclose(tokens, torch.tensor(expected))


def test_tactic_advantages_to_tokens_shared_token_gets_both():
    # Two tactics begin in token 2 (e.g. "simp;ring" in one token): both credits land there.
    spans = torch.tensor([[[2, 3], [2, 4]]])
    tokens = tactic_advantages_to_tokens(torch.tensor([[1.0, 0.25]]), spans, num_tokens=4, assignment="first")
    assert tokens.tolist() == [[0.0, 0.0, 1.25, 0.0]]


def test_tactic_advantages_to_tokens_bad_inputs():
    with pytest.raises(ValueError, match="assignment"):
        tactic_advantages_to_tokens(TACTIC_ADVANTAGES, TOKEN_SPANS, 7, assignment="middle")
    with pytest.raises(ValueError, match="tactic_token_spans"):
        tactic_advantages_to_tokens(TACTIC_ADVANTAGES, TOKEN_SPANS[:, :1], 7)
    with pytest.raises(ValueError, match="num_tokens"):
        tactic_advantages_to_tokens(TACTIC_ADVANTAGES, TOKEN_SPANS, -1)


# ---------------------------------------------------------------- per-sequence summary of token advantages


def test_sequence_mean_advantages_averages_over_the_loss_tokens():
    advantages = torch.tensor([[1.0, 1.0, -0.5, 7.0], [-1.0, 0.5, -1.0, -1.0], [3.0, 3.0, 3.0, 3.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1], [0, 0, 0, 0]])
    # (1 + 1 - 0.5) / 3 = 0.5 (the masked 7 is left out); (-1 + 0.5 - 1 - 1) / 4 = -0.625; no loss token: 0.
    assert sequence_mean_advantages(advantages, mask).tolist() == [[0.5], [-0.625], [0.0]]


def test_sequence_mean_advantages_passes_one_value_per_sequence_through():
    advantages = torch.tensor([[0.25], [-2.0]])
    assert sequence_mean_advantages(advantages, torch.ones(2, 5)) is advantages
    with pytest.raises(ValueError, match="mask"):
        sequence_mean_advantages(torch.zeros(2, 3), torch.ones(2, 4))


# ---------------------------------------------------------------- centred step scores (length bias)


def test_centering_step_scores_lets_a_short_good_completion_beat_a_long_bad_one():
    # The example of the docstring and README: a bad completion of 6 steps scored 1/3 and a good one of 2 steps
    # scored 1, in a group of 2.
    rewards = torch.tensor([[1 / 3] * 6, [1.0, 1.0, 0, 0, 0, 0]])
    mask = mask_from_counts([6, 2], 6)
    plain = future_cumulated_rewards(rewards, mask)
    assert plain[0, 0].item() == pytest.approx(2.0) and plain[1, 0].item() == pytest.approx(2.0)
    plain_advantages = process_step_advantages(rewards, mask, num_generations=2)
    assert plain_advantages[0, 0].item() == pytest.approx(plain_advantages[1, 0].item())

    centered = centered_step_rewards(rewards, mask, 0.5)
    assert centered[:, :2].flatten().tolist() == pytest.approx([-1 / 6, -1 / 6, 0.5, 0.5])
    assert centered[1, 2:].tolist() == [0.0] * 4
    cumulated = future_cumulated_rewards(centered, mask)
    assert cumulated[0, 0].item() == pytest.approx(-1.0) and cumulated[1, 0].item() == pytest.approx(1.0)
    advantages = process_step_advantages(centered, mask, num_generations=2)
    assert advantages[1, 0] > 0 > advantages[0, 0]


def test_centering_rejects_a_non_number():
    with pytest.raises(ValueError, match="center"):
        centered_step_rewards(torch.zeros(1, 1), torch.ones(1, 1, dtype=torch.bool), float("nan"))
