"""Advantage math of VeriGate (arXiv 2605.30451) as pure, vectorised torch functions.

Notation. A batch holds N = B * G completions: rows ``g*G ... g*G+G-1`` are the G completions of prompt g
(the layout TRL's `GRPOTrainer` uses). Completion i is split into S_i steps with process rewards
r_{i,1..S_i}; step tensors are padded to (N, S) with S = max_i S_i and a boolean ``step_mask`` marks the
valid entries (a left-aligned prefix of length S_i in every row).

No function here keeps state or knows about the trainer, so each can be checked against hand arithmetic.
"""

from __future__ import annotations

import math

import torch

GATE_MODES = ("all_zero", "all_equal", "none")
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
    - ``mode="all_equal"``: R_1 = R_2 = ... = R_G -- any group whose GRPO advantage would be identically zero;
    - ``mode="none"``: no group (VeriGate switched off: plain GRPO).

    Both tests are exact float equality, without tolerance: verifier rewards are sums of a few exact values
    (0.0, 1.0, weights), and a tolerance would gate groups that GRPO does separate, however weakly.
    NaN rewards compare unequal, so a group holding a NaN is never gated.

    Args:
        outcome_rewards: (N,) verifier reward per completion.
        num_generations: G, the group size; N must be a multiple of it.
        mode: "all_zero", "all_equal" or "none".

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
    if mode == "none":
        return torch.zeros(grouped.shape[0], dtype=torch.bool, device=grouped.device)
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


# ---------------------------------------------------------------------------------------------------------------
# Process-verified GRPO (Kim & Yun, ICLR 2026, for Lean; the same on Coq): tactic scores from the prover's verdict,
# process advantages against the group's outcome mean, and their placement on the tokens of each tactic.
#
# Notation. Completion i holds tactics T_{i,1..N_i}; tactic tensors are padded to (N, M) with M = max(1, max_i N_i),
# and ``mask`` marks j < N_i. g_i in {0, 1} is the prover's outcome (1 exactly when the proof passed).

TACTIC_ASSIGNMENTS = ("first", "all", "last")


def _check_long_vector(values, name: str, num_rows: int | None = None) -> None:
    if not isinstance(values, torch.Tensor) or values.dim() != 1 or values.dtype != torch.long:
        raise ValueError(f"`{name}` must be a 1-D torch.long tensor of shape (N,), got {_describe(values)}.")
    if num_rows is not None and values.shape[0] != num_rows:
        raise ValueError(f"`{name}` has {values.shape[0]} rows but `passed` has {num_rows}; give one per completion.")


def tactic_scores(
    passed: torch.Tensor,
    num_tactics: torch.Tensor,
    first_error: torch.Tensor,
    partial_score: float = -0.05,
    error_score: float = -0.1,
    error_tactics: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Tactic scores phi_{i,j} of the prover's verdict, with first-error propagation.

    With d1 = ``partial_score`` and d2 = ``error_score``:

    - a passed proof: phi_{i,j} = 1 for every tactic;
    - otherwise phi_{i,j} = d1 for j < first_error[i] and d2 for j >= first_error[i]: the first failing tactic and
      every tactic after it count as wrong. ``first_error[i] == num_tactics[i]`` (no tactic failed, the proof is
      incomplete) gives every tactic d1; ``first_error[i] == 0`` (timeout, crash, rejection, error) every tactic d2.

    Without first-error propagation, pass ``error_tactics`` (N, >= max num_tactics) bool, True for the tactics an
    error message starts in: a failed proof's tactic then gets d2 exactly when it carries an error, d1 otherwise
    (``first_error`` is then only checked for range). A verdict other than passed/failed marks every tactic.

    Args:
        passed: (N,) bool, g_i == 1.
        num_tactics: (N,) long, N_i >= 0.
        first_error: (N,) long, in [0, N_i].
        partial_score: d1 (paper: -0.05).
        error_score: d2 (paper: -0.1).
        error_tactics: optional (N, K) bool with K >= max N_i; entries past N_i are ignored.

    Returns:
        (scores, mask): (N, M) float32 and bool on the input's device, M = max(1, max N_i); scores are 0 outside
        mask.
    """
    if not isinstance(passed, torch.Tensor) or passed.dim() != 1 or passed.dtype != torch.bool:
        raise ValueError(f"`passed` must be a 1-D torch.bool tensor of shape (N,), got {_describe(passed)}.")
    num_rows = passed.shape[0]
    _check_long_vector(num_tactics, "num_tactics", num_rows)
    _check_long_vector(first_error, "first_error", num_rows)
    if num_rows and int(num_tactics.min()) < 0:
        raise ValueError(f"`num_tactics` must be >= 0, got minimum {int(num_tactics.min())}.")
    if num_rows and ((first_error < 0) | (first_error > num_tactics)).any():
        row = int(((first_error < 0) | (first_error > num_tactics)).nonzero()[0])
        raise ValueError(
            f"`first_error[{row}]` = {int(first_error[row])} must lie in [0, num_tactics[{row}]] = "
            f"[0, {int(num_tactics[row])}] (num_tactics means no tactic failed)."
        )
    width = max(1, int(num_tactics.max()) if num_rows else 1)
    columns = torch.arange(width, device=passed.device)
    mask = columns.unsqueeze(0) < num_tactics.unsqueeze(1)
    if error_tactics is None:
        wrong = columns.unsqueeze(0) >= first_error.unsqueeze(1)
    else:
        if (
            not isinstance(error_tactics, torch.Tensor)
            or error_tactics.dtype != torch.bool
            or error_tactics.dim() != 2
            or error_tactics.shape[0] != num_rows
        ):
            raise ValueError(f"`error_tactics` must be a (N, K) torch.bool tensor, got {_describe(error_tactics)}.")
        if num_rows and int(num_tactics.max()) > error_tactics.shape[1]:
            raise ValueError(
                f"`error_tactics` has {error_tactics.shape[1]} columns but a completion has {int(num_tactics.max())} "
                "tactics; give one column per tactic."
            )
        wrong = torch.zeros(num_rows, width, dtype=torch.bool, device=passed.device)
        kept = min(width, error_tactics.shape[1])
        wrong[:, :kept] = error_tactics[:, :kept].to(passed.device)
    failed_scores = torch.where(wrong, float(error_score), float(partial_score))
    scores = torch.where(passed.unsqueeze(1), torch.ones_like(failed_scores), failed_scores)
    return torch.where(mask, scores, torch.zeros_like(scores)), mask


def tactic_process_advantages(
    scores: torch.Tensor, mask: torch.Tensor, outcome_rewards: torch.Tensor, num_generations: int
) -> torch.Tensor:
    """Process advantages A_proc[i, j] = phi[i, j] - mean_{k in group(i)} g_k, and 0 where ``mask`` is False.

    The mean is over the G outcome rewards of the completion's group (rows grouped as in TRL, G per prompt), the
    prover's outcome alone, whatever other rewards are trained on.

    Args:
        scores: (N, M) float, phi from `tactic_scores`.
        mask: (N, M) bool, valid tactics.
        outcome_rewards: (N,) g (0/1).
        num_generations: G; N must be a multiple of it.

    Returns:
        (N, M) tensor with the dtype and device of ``scores``.
    """
    _check_step_tensors(scores, mask, "scores")
    if not isinstance(outcome_rewards, torch.Tensor) or outcome_rewards.dim() != 1:
        raise ValueError(f"`outcome_rewards` must be a 1-D tensor of shape (N,), got {_describe(outcome_rewards)}.")
    if outcome_rewards.shape[0] != scores.shape[0]:
        raise ValueError(
            f"`outcome_rewards` has {outcome_rewards.shape[0]} rows but `scores` has {scores.shape[0]}; give one "
            "per completion."
        )
    _check_num_generations(scores.shape[0], num_generations, "scores")
    group_mean = outcome_rewards.to(scores.dtype).view(-1, num_generations).mean(dim=1)
    advantages = scores - group_mean.repeat_interleave(num_generations).unsqueeze(1).to(scores.device)
    return torch.where(mask, advantages, torch.zeros_like(advantages))


def tactic_advantages_to_tokens(
    tactic_advantages: torch.Tensor,
    tactic_token_spans: torch.Tensor,
    num_tokens: int,
    assignment: str = "first",
) -> torch.Tensor:
    """Place tactic advantages on the completion tokens.

    Tactic j of completion i covers tokens [a, b) = ``tactic_token_spans[i, j]`` (a: the token holding the tactic's
    first character, b - 1: the one holding its last). Token t of completion i gets sum_j A[i, j] * [t in S_j] with

    - ``"first"`` (paper): S_j = {a}, the token at which the tactic begins;
    - ``"all"``: S_j = {a, ..., b - 1}, every token of the tactic;
    - ``"last"``: S_j = {b - 1}.

    A tactic without tokens (a < 0 or b <= a, e.g. a padding entry) places nothing; tokens outside every tactic get
    0. Two tactics that begin (or end) in one token both place their advantage on it.

    Args:
        tactic_advantages: (N, M) float.
        tactic_token_spans: (N, M, 2) long [a, b) token ranges.
        num_tokens: T, the completion width.
        assignment: "first", "all" or "last".

    Returns:
        (N, T) tensor with the dtype and device of ``tactic_advantages``.
    """
    if assignment not in TACTIC_ASSIGNMENTS:
        raise ValueError(f"`assignment` must be one of {TACTIC_ASSIGNMENTS}, got {assignment!r}.")
    if not isinstance(tactic_advantages, torch.Tensor) or tactic_advantages.dim() != 2:
        raise ValueError(f"`tactic_advantages` must be a 2-D tensor (N, M), got {_describe(tactic_advantages)}.")
    if (
        not isinstance(tactic_token_spans, torch.Tensor)
        or tactic_token_spans.dtype != torch.long
        or tactic_token_spans.shape != (*tactic_advantages.shape, 2)
    ):
        raise ValueError(
            f"`tactic_token_spans` must be a torch.long tensor of shape {(*tactic_advantages.shape, 2)} (a [start, end) "
            f"token range per tactic), got {_describe(tactic_token_spans)}."
        )
    if isinstance(num_tokens, bool) or not isinstance(num_tokens, int) or num_tokens < 0:
        raise ValueError(f"`num_tokens` must be a non-negative int, got {num_tokens!r}.")
    spans = tactic_token_spans.to(tactic_advantages.device)
    first, end = spans[..., 0], spans[..., 1]
    has_tokens = (first >= 0) & (end > first)
    if assignment == "first":
        low, high = first, first + 1
    elif assignment == "last":
        low, high = end - 1, end
    else:
        low, high = first, end
    positions = torch.arange(num_tokens, device=tactic_advantages.device).view(1, 1, -1)
    covered = (positions >= low.unsqueeze(2)) & (positions < high.unsqueeze(2)) & has_tokens.unsqueeze(2)
    placed = torch.where(covered, tactic_advantages.unsqueeze(2), torch.zeros((), dtype=tactic_advantages.dtype))
    return placed.sum(dim=1)


# ---------------------------------------------------------------------------------------------------------------
# Per-sequence summaries of token-level advantages, for the loss options that decide once per sequence.


def sequence_mean_advantages(advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Each sequence's mean token advantage over its loss tokens: a_i = sum_t A[i, t] m[i, t] / max(1, sum_t m[i, t]).

    TRL's off-policy sequence mask and VESPO's gamma weights choose per sequence by the sign of the advantage
    (``advantages >= 0``). Given (B, T) token advantages of mixed sign, that test would run token by token; its sign
    is taken from this summary instead, the same per-completion value the completions table shows. (B, 1)
    advantages (one per sequence, broadcast over the tokens) are returned unchanged.

    Args:
        advantages: (B, 1) or (B, T) float.
        mask: (B, T) loss mask (completion tokens, tool results excluded), 0/1 of any dtype.

    Returns:
        (B, 1) tensor with the dtype and device of ``advantages``.
    """
    if not isinstance(advantages, torch.Tensor) or advantages.dim() != 2:
        raise ValueError(f"`advantages` must be a 2-D tensor (B, 1) or (B, T), got {_describe(advantages)}.")
    if advantages.shape[1] == 1:
        return advantages
    if not isinstance(mask, torch.Tensor) or mask.shape != advantages.shape:
        raise ValueError(f"`mask` must be a tensor of shape {tuple(advantages.shape)}, got {_describe(mask)}.")
    weights = mask.to(advantages.dtype)
    return (advantages * weights).sum(dim=1, keepdim=True) / weights.sum(dim=1, keepdim=True).clamp(min=1)


def centered_step_rewards(step_rewards: torch.Tensor, step_mask: torch.Tensor, center: float) -> torch.Tensor:
    """Step scores minus a constant, before they are cumulated: r'_{i,k} = r_{i,k} - center on valid steps, 0 elsewhere.

    Why: PRM scores lie in [0, 1], so the paper's c_{i,j} = sum_{k>=j} r_{i,k} grows with the number of steps left
    and favours long completions. A bad completion of 6 steps scored 1/3 each and a good one of 2 steps scored 1 each
    both have c_{i,1} = 2, hence the same first-step advantage. With ``center = 0.5`` the cumulated values become
    6 x (1/3 - 1/2) = -1 and 2 x (1 - 1/2) = +1: a step now adds to c only when the PRM rates it above ``center``.
    (DeepSeekMath-style normalization subtracts the group mean from every step score, which cancels any constant.)

    Args:
        step_rewards: (N, S) float, r_{i,k}.
        step_mask: (N, S) bool, valid steps.
        center: the constant subtracted, e.g. 0.5.

    Returns:
        (N, S) tensor with the dtype and device of ``step_rewards``.
    """
    _check_step_tensors(step_rewards, step_mask, "step_rewards")
    if isinstance(center, bool) or not isinstance(center, (int, float)) or not math.isfinite(center):
        raise ValueError(f"`center` must be a finite number, got {center!r}.")
    return torch.where(step_mask, step_rewards - center, torch.zeros_like(step_rewards))
