"""The process-advantage layer shared by VeriGate and Lean process GRPO, on top of TRL's `GRPOTrainer`.

Both trainers do the same thing with TRL: keep the batch TRL scored (rows, prompts, completions and their token
ids, the gathered reward table), turn spans of each completion (reasoning steps, Lean tactics) into per-span values,
map the spans to tokens, write (B, T) advantages back for the loss, and show the per-completion advantage the loss
really uses in the completions table. `ProcessGRPOTrainer` does all of it once; a subclass fills one hook,
`_process_advantages`, with its span values placed on tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from trl import GRPOTrainer

from trl_verigate.advantages import sequence_mean_advantages


@dataclass
class ScoredBatch:
    """What TRL scored in one generation batch, on this process.

    ``inputs``, ``prompts``, ``completions`` and ``completion_ids`` are this process's rows (``completion_ids`` the
    unpadded ids TRL decoded into ``completions``); ``rewards_per_func`` is TRL's gathered (N, F) reward table over
    all processes, whose rows ``process_slice`` are this process's.
    """

    inputs: list[dict[str, Any]]
    prompts: list
    completions: list
    completion_ids: list[list[int]]
    rewards_per_func: torch.Tensor
    num_generations: int
    process_slice: slice
    mode: str


class ProcessGRPOTrainer(GRPOTrainer):
    """`GRPOTrainer` whose advantages may become token-level: A[i, t] = base[i] + P[i, t] on completion tokens, 0 on
    padding, where ``base[i]`` is TRL's GRPO advantage (whatever `scale_rewards`, `loss_type` and
    `reward_weights`) unless the subclass replaces row i, then 0, and P is the subclass's token process values.

    Subclasses implement `_process_advantages`. (B, T) advantages reach every loss type: TRL's `_compute_loss` only
    unsqueezes 1-D advantages. The two loss options that decide once per sequence from the advantage's sign
    (`off_policy_mask_threshold`, VESPO's gamma weights) take it from each sequence's mean token advantage
    (`sequence_mean_advantages`), so a sequence is kept or weighted whole rather than token by token.
    """

    _scored_batch: ScoredBatch | None = None

    def _process_advantages(self, batch: ScoredBatch, output: dict) -> tuple[torch.Tensor, torch.Tensor] | None:
        """This process's token process values P (B, T) and the rows (B,) bool whose GRPO advantage they replace
        rather than add to; None keeps TRL's (B,) advantages untouched. ``output`` is TRL's batch dict."""
        raise NotImplementedError(f"{type(self).__name__} must implement _process_advantages")

    @staticmethod
    def get_off_policy_mask(advantages, per_token_logps, sampling_per_token_logps, mask, off_policy_threshold):
        return GRPOTrainer.get_off_policy_mask(
            sequence_mean_advantages(advantages, mask),
            per_token_logps,
            sampling_per_token_logps,
            mask,
            off_policy_threshold,
        )

    @staticmethod
    def get_gamma_weights(advantages, log_ratio_per_token, mask, importance_sampling_ratio, **gamma_parameters):
        return GRPOTrainer.get_gamma_weights(
            sequence_mean_advantages(advantages, mask),
            log_ratio_per_token,
            mask,
            importance_sampling_ratio,
            **gamma_parameters,
        )

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        # TRL does not hand the gathered rewards or the final prompts on: keep them for the hook.
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        mode = "train" if self.model.training else "eval"
        local_size = len(prompts)
        start = self.accelerator.process_index * local_size
        self._scored_batch = ScoredBatch(
            inputs=inputs,
            prompts=prompts,
            completions=completions,
            completion_ids=[list(ids) for ids in completion_ids_list],
            rewards_per_func=rewards_per_func,
            num_generations=self.num_generations if mode == "train" else self.num_generations_eval,
            process_slice=slice(start, start + local_size),
            mode=mode,
        )
        return rewards_per_func

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        batch, self._scored_batch = self._scored_batch, None
        process = self._process_advantages(batch, output)
        if process is None:
            return output
        token_values, replaced_rows = process
        completion_mask = output["completion_mask"]
        if token_values.shape != completion_mask.shape:
            raise RuntimeError(
                f"_process_advantages returned token values of shape {tuple(token_values.shape)}; the completions are "
                f"{tuple(completion_mask.shape)}."
            )
        outcome = output["advantages"]
        base = torch.where(replaced_rows.to(outcome.device), torch.zeros_like(outcome), outcome)
        advantages = base.unsqueeze(1) + token_values.to(device=outcome.device, dtype=outcome.dtype)
        mask = completion_mask.to(advantages.dtype)
        advantages = advantages * mask
        self._log_completion_advantages(advantages, mask)
        output["advantages"] = advantages
        return output

    def _gather_padded(self, values: torch.Tensor) -> torch.Tensor:
        """Every process's (B, K) tensor, padded with 0 (False) to the widest K and stacked in process order."""
        is_bool = values.dtype == torch.bool
        values = values.to(self.accelerator.device)
        padded = self.accelerator.pad_across_processes(values.long() if is_bool else values, dim=1)
        gathered = self.accelerator.gather(padded)
        return gathered.bool() if is_bool else gathered

    def _local_reward_failures(self) -> int:
        return sum(int(getattr(func, "failures", 0) or 0) for func in self.reward_funcs)

    def _reward_failures_delta(self) -> float:
        """Failures counted by the reward functions' `failures` attributes since the last call, all processes."""
        seen = getattr(self, "_reward_failures_seen", 0)
        current = self._local_reward_failures()
        delta = torch.tensor([float(current - seen)], device=self.accelerator.device)
        self._reward_failures_seen = current
        return self.accelerator.gather(delta).sum().item()

    def _log_completion_advantages(self, advantages: torch.Tensor, completion_mask: torch.Tensor) -> None:
        # TRL logged one scalar per completion; show the token mean the loss actually uses (`advantages` is already 0
        # on padding). TRL keeps the table in `_logs["advantages"]`, one entry per gathered completion, newest last.
        per_completion = advantages.sum(dim=1) / completion_mask.sum(dim=1).clamp(min=1)
        values = self.accelerator.gather(per_completion).tolist()
        logged = self._logs["advantages"]
        for offset in range(1, min(len(values), len(logged)) + 1):
            logged[-offset] = values[-offset]
