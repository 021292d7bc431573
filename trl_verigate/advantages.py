"""Advantage math of VeriGate (arXiv 2605.30451) as pure, vectorised torch functions.

Notation. A batch holds N = B * G completions: rows ``g*G ... g*G+G-1`` are the G completions of prompt g
(the layout TRL's `GRPOTrainer` uses). Completion i is split into S_i steps with process rewards
r_{i,1..S_i}; step tensors are padded to (N, S) with S = max_i S_i and a boolean ``step_mask`` marks the
valid entries (a left-aligned prefix of length S_i in every row).

No function here keeps state or knows about the trainer, so each can be checked against hand arithmetic.
"""

from __future__ import annotations

import torch

GATE_MODES = ("all_zero", "all_equal")
NORMALIZATIONS = ("verigate", "deepseekmath")


def _check_num_generations(num_rows: int, num_generations: int, rows_name: str) -> None:
    if isinstance(num_generations, bool) or not isinstance(num_generations, int) or num_generations < 1:
        raise ValueError(f"`num_generations` must be a positive int, got {num_generations!r}.")
    if num_rows % num_generations != 0:
        raise ValueError(
            f"The number of rows of `{rows_name}` ({num_rows}) must be a multiple of `num_generations` "
            f"({num_generations}): rows are grouped contiguously, G completions per prompt."
        )


def _check_step_tensors(values: torch.Tensor, step_mask: torch.Tensor, values_name: str) -> None:
    if not isinstance(values, torch.Tensor) or values.dim() != 2:
        raise ValueError(f"`{values_name}` must be a 2-D tensor of shape (N, S), got {_describe(values)}.")
    if not values.is_floating_point():
        raise ValueError(f"`{values_name}` must be a floating-point tensor, got dtype {values.dtype}; cast it first.")
    if not isinstance(step_mask, torch.Tensor) or step_mask.dtype != torch.bool:
        raise ValueError(f"`step_mask` must be a torch.bool tensor, got {_describe(step_mask)}.")
    if step_mask.shape != values.shape:
        raise ValueError(
            f"`step_mask` shape {tuple(step_mask.shape)} must equal `{values_name}` shape {tuple(values.shape)}."
        )


def _describe(obj) -> str:
    if isinstance(obj, torch.Tensor):
        return f"a tensor of shape {tuple(obj.shape)} and dtype {obj.dtype}"
    return f"an object of type {type(obj).__name__}"


def gated_groups(outcome_rewards: torch.Tensor, num_generations: int, mode: str = "all_zero") -> torch.Tensor:
    """S1 gate: which groups the verifier fails to separate, so that they get process advantages instead.

    With outcome (verifier) rewards R_1..R_G of one group, the group is gated when

    - ``mode="all_zero"`` (paper default): R_i = 0 for all i -- no completion of the group was verified correct;
    - ``mode="all_equal"``: R_1 = R_2 = ... = R_G -- any group whose GRPO advantage would be identically zero.

    Both tests are exact float equality, without tolerance: verifier rewards are sums of a few exact values
    (0.0, 1.0, weights), and a tolerance would gate groups that GRPO does separate, however weakly.
    NaN rewards compare unequal, so a group holding a NaN is never gated.

    Args:
        outcome_rewards: (N,) verifier reward per completion.
        num_generations: G, the group size; N must be a multiple of it.
        mode: "all_zero" or "all_equal".

    Returns:
        torch.bool tensor of shape (N // G,), on the input's device.
    """
    if not isinstance(outcome_rewards, torch.Tensor) or outcome_rewards.dim() != 1:
        raise ValueError(f"`outcome_rewards` must be a 1-D tensor of shape (N,), got {_describe(outcome_rewards)}.")
    _check_num_generations(outcome_rewards.shape[0], num_generations, "outcome_rewards")
    grouped = outcome_rewards.view(-1, num_generations)
    if mode == "all_zero":
        return (grouped == 0).all(dim=1)
    if mode == "all_equal":
        return (grouped == grouped[:, :1]).all(dim=1)
    raise ValueError(f"`mode` must be one of {GATE_MODES}, got {mode!r}.")


def future_cumulated_rewards(step_rewards: torch.Tensor, step_mask: torch.Tensor) -> torch.Tensor:
    """S2: future-cumulated step rewards c_{i,j} = sum_{k=j}^{S_i} r_{i,k}.

    Computed as a reverse cumulative sum over the step axis. Masked-out entries contribute nothing (even if
    they hold NaN) and are 0 in the output.

    Args:
        step_rewards: (N, S) float, r_{i,k}.
        step_mask: (N, S) bool, valid steps.

    Returns:
        (N, S) tensor with the dtype and device of ``step_rewards``.
    """
    _check_step_tensors(step_rewards, step_mask, "step_rewards")
    valid_rewards = torch.where(step_mask, step_rewards, torch.zeros_like(step_rewards))
    cumulated = valid_rewards.flip(dims=(1,)).cumsum(dim=1).flip(dims=(1,))
    return torch.where(step_mask, cumulated, torch.zeros_like(cumulated))


def group_normalized_step_advantages(
    cumulated: torch.Tensor, step_mask: torch.Tensor, num_generations: int, eps: float = 1e-4
) -> torch.Tensor:
    """S3: group-normalised step advantages A_{i,j} = (c_{i,j} - mean(c)) / (std(c) + eps).

    mean and std are taken over every valid entry (i, j) of the group, i.e. over sum_i S_i values; std is the
    unbiased estimate (Bessel's correction), as TRL uses for its GRPO group std. A group with fewer than two
    valid entries has no defined std and gets all-zero advantages. Masked-out entries are 0.
    Invariant to c -> a*c + b with a > 0 (Prop. 3.1) up to the eps term.

    Args:
        cumulated: (N, S) float, c_{i,j} (or any per-step values to normalise per group).
        step_mask: (N, S) bool, valid steps.
        num_generations: G, the group size; N must be a multiple of it.
        eps: added to the std, as in GRPO.

    Returns:
        (N, S) tensor with the dtype and device of ``cumulated``.
    """
    _check_step_tensors(cumulated, step_mask, "cumulated")
    num_rows, num_steps = cumulated.shape
    _check_num_generations(num_rows, num_generations, "cumulated")
    # Low-precision inputs (bf16 rewards) are normalised in float32: the sums of squares lose too much otherwise.
    work_dtype = torch.promote_types(cumulated.dtype, torch.float32)
    num_groups = num_rows // num_generations  # explicit: -1 cannot be inferred when there are no steps (S = 0)
    values = cumulated.to(work_dtype).reshape(num_groups, num_generations * num_steps)
    mask = step_mask.reshape(num_groups, num_generations * num_steps)
    values = torch.where(mask, values, torch.zeros_like(values))

    counts = mask.sum(dim=1, keepdim=True).to(work_dtype)
    mean = values.sum(dim=1, keepdim=True) / counts.clamp(min=1)
    squared_deviation = torch.where(mask, (values - mean) ** 2, torch.zeros_like(values))
    std = (squared_deviation.sum(dim=1, keepdim=True) / (counts - 1).clamp(min=1)).sqrt()

    advantages = (values - mean) / (std + eps)
    keep = mask & (counts >= 2)
    advantages = torch.where(keep, advantages, torch.zeros_like(advantages))
    return advantages.reshape(num_rows, num_steps).to(cumulated.dtype)


def deepseekmath_step_advantages(
    step_rewards: torch.Tensor, step_mask: torch.Tensor, num_generations: int, eps: float = 1e-4
) -> torch.Tensor:
    """DeepSeekMath §4.1.3 process supervision: normalise step rewards per group, then sum future steps.

    r~_{i,k} = (r_{i,k} - mean(r)) / (std(r) + eps) over the group's valid entries (same rule as
    `group_normalized_step_advantages`), then A_{i,j} = sum_{k=j}^{S_i} r~_{i,k}.

    Returns:
        (N, S) tensor with the dtype and device of ``step_rewards``; 0 outside ``step_mask``.
    """
    normalized = group_normalized_step_advantages(step_rewards, step_mask, num_generations, eps=eps)
    return future_cumulated_rewards(normalized, step_mask)


def process_step_advantages(
    step_rewards: torch.Tensor,
    step_mask: torch.Tensor,
    num_generations: int,
    normalization: str = "verigate",
    eps: float = 1e-4,
) -> torch.Tensor:
    """Step advantages from process rewards.

    ``normalization="verigate"`` (paper default): cumulate then normalise, A = norm(c) with c from S2.
    ``normalization="deepseekmath"``: normalise then cumulate (DeepSeekMath §4.1.3).

    Returns:
        (N, S) tensor with the dtype and device of ``step_rewards``; 0 outside ``step_mask``.
    """
    if normalization == "verigate":
        cumulated = future_cumulated_rewards(step_rewards, step_mask)
        return group_normalized_step_advantages(cumulated, step_mask, num_generations, eps=eps)
    if normalization == "deepseekmath":
        return deepseekmath_step_advantages(step_rewards, step_mask, num_generations, eps=eps)
    raise ValueError(f"`normalization` must be one of {NORMALIZATIONS}, got {normalization!r}.")


def step_advantages_to_tokens(step_advantages: torch.Tensor, token_step_ids: torch.Tensor) -> torch.Tensor:
    """Broadcast step advantages to tokens: every token of step j of completion i gets A_{i,j}.

    Args:
        step_advantages: (N, S) float.
        token_step_ids: (N, T) long, the step index of each token; -1 for tokens outside any step (padding).

    Returns:
        (N, T) tensor with the dtype and device of ``step_advantages``; 0 where the step id is -1.
    """
    if not isinstance(step_advantages, torch.Tensor) or step_advantages.dim() != 2:
        raise ValueError(f"`step_advantages` must be a 2-D tensor (N, S), got {_describe(step_advantages)}.")
    if not isinstance(token_step_ids, torch.Tensor) or token_step_ids.dim() != 2 or token_step_ids.dtype != torch.long:
        raise ValueError(f"`token_step_ids` must be a 2-D torch.long tensor (N, T), got {_describe(token_step_ids)}.")
    if token_step_ids.shape[0] != step_advantages.shape[0]:
        raise ValueError(
            f"`token_step_ids` has {token_step_ids.shape[0]} rows but `step_advantages` has "
            f"{step_advantages.shape[0]}; both must hold one row per completion."
        )
    num_steps = step_advantages.shape[1]
    if token_step_ids.numel() > 0:
        lowest, highest = int(token_step_ids.min()), int(token_step_ids.max())
        if lowest < -1 or highest >= num_steps:
            raise ValueError(
                f"`token_step_ids` values must lie in [-1, {num_steps - 1}] (-1 = no step), "
                f"got values in [{lowest}, {highest}]."
            )
    if num_steps == 0:
        return torch.zeros(token_step_ids.shape, dtype=step_advantages.dtype, device=step_advantages.device)
    has_step = token_step_ids >= 0
    gathered = step_advantages.gather(1, token_step_ids.clamp(min=0))
    return torch.where(has_step, gathered, torch.zeros_like(gathered))
