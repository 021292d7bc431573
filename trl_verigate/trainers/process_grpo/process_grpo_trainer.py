"""The process-advantage layer shared by VeriGate and process-verified GRPO, on top of TRL's `GRPOTrainer`.

Both trainers do the same thing with TRL: keep the batch TRL scored (rows, prompts, completions and their token
ids, the gathered reward table), turn spans of each completion (reasoning steps, prover tactics) into per-span values,
map the spans to tokens, write (B, T) advantages back for the loss, and show the per-completion advantage the loss
really uses in the completions table. `ProcessGRPOTrainer` does all of it once; a subclass fills one hook,
`_process_advantages`, with its span values placed on tokens.

It also offers, opt-in, one-step off-policy pipelining for rewards that are computed in the background (a prover's
verification): each training step generates the next batch, whose scoring starts at once, and trains on the batch
generated at the step before, whose scoring ran meanwhile (`_pipelines_generation`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from trl import GRPOTrainer
from trl.models.utils import disable_gradient_checkpointing
from trl.trainer.utils import pad

from trl_verigate.advantages import sequence_mean_advantages
from trl_verigate.master_weights import check_master_weights
from trl_verigate.peft_sync import keep_base_exact_across_syncs

# Metrics TRL's `_generate` assigns instead of appending: num_tokens, the running total of tokens generated. A batch
# generated ahead assigns its value again when it is scored, so the log shows the total up to the batch trained.
ASSIGNED_METRICS = ("num_tokens",)


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


@dataclass
class GeneratedBatch:
    """A training batch generated at one step and scored at a later one (pipelined generation).

    ``generation`` is what `_generate` returned for ``inputs``; ``old_per_token_logps`` the per-token log-probs of
    its completions under the weights that generated them (None for a batch trained at the step that generated it,
    where TRL's on-policy default applies); ``metrics`` what `_generate` appended, appended again when the batch is
    scored, so a step's completion lengths and rewards describe the same batch; ``assigned_metrics`` what it
    assigned (`ASSIGNED_METRICS`), assigned again then; ``step`` the global step it was
    generated at; ``scoring`` what the subclass started in the background to score it (`_take_scoring_started`;
    the Lean verification's handle), so that it is this batch's scores that are collected when it is scored.
    """

    inputs: list[dict[str, Any]]
    generation: tuple
    old_per_token_logps: torch.Tensor | None
    step: int
    metrics: dict[str, list[float]] = field(default_factory=dict)
    assigned_metrics: dict[str, list[float]] = field(default_factory=dict)
    scoring: Any = None


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
    # Pipelined generation: the batch generated ahead for the next step, and the one being scored now.
    _pipeline_pending: GeneratedBatch | None = None
    _replayed_batch: GeneratedBatch | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        check_master_weights(
            self.accelerator.unwrap_model(self.model), self.args, has_own_optimizer=self.optimizer is not None
        )
        # With PEFT and vLLM each weight sync merges the adapters into the frozen base and unmerges them.
        self._frozen_base = keep_base_exact_across_syncs(self)

    def _pipelines_generation(self) -> bool:
        """Whether training steps train on the batch generated at the step before (one-step off-policy); off here."""
        return False

    def _take_scoring_started(self) -> Any:
        """What the last `_generate` started in the background to score its batch (None here), kept with the batch
        generated ahead and found again in ``_replayed_batch.scoring`` when that batch is scored."""
        return None

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
        if self.model.training and self._pipelines_generation():
            output = self._score_previous_batch(inputs)
        else:
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

    # ---------------------------------------------------------------- pipelined generation (one step off-policy)

    def train(self, *args, **kwargs):
        try:
            return super().train(*args, **kwargs)
        finally:
            # A batch generated ahead for a step that will not come (training stopped early) is dropped.
            self._pipeline_pending = None

    def _generate(self, prompts: list):
        if self._replayed_batch is not None:
            return self._replayed_batch.generation  # generated at an earlier step, scored now
        return super()._generate(prompts)

    def _score_previous_batch(self, inputs: list[dict[str, Any]]) -> dict:
        """TRL's batch dict for the batch generated at the previous step; generates this step's batch first.

        The first step of `train()` has no previous batch: it generates its own, waits for its scores and trains on
        it on-policy, and also generates the batch for the next step from the same prompts, so they are trained
        twice (the next step's prompts are not known yet). The last step generates nothing ahead, so the
        dataloader's prompts of the last step are not trained on. Resumed from a checkpoint (which does not hold the
        batch generated ahead), the prompts of the step before it are never trained and the first resumed step's
        twice.
        """
        batch, self._pipeline_pending = self._pipeline_pending, None
        if batch is None:
            batch = self._generate_batch(inputs, old_logps=False)
        if self.state.global_step + 1 < self.state.max_steps:
            self._pipeline_pending = self._generate_batch(inputs, old_logps=True)
        return self._score_generated(batch)

    def _generate_batch(self, inputs: list[dict[str, Any]], old_logps: bool) -> GeneratedBatch:
        metrics = self._metrics["train"]
        logged_before = {name: len(values) for name, values in metrics.items()}
        assigned_before = {name: metrics[name] for name in ASSIGNED_METRICS if name in metrics}
        generation = self._generate([row["prompt"] for row in inputs])
        assigned_metrics = {name: metrics.pop(name) for name in ASSIGNED_METRICS if name in metrics}
        metrics.update(assigned_before)
        generation_metrics = {}
        for name, values in metrics.items():
            if name in ASSIGNED_METRICS:
                continue
            start = logged_before.get(name, 0)
            if len(values) > start:
                generation_metrics[name] = values[start:]
                del values[start:]
        old_per_token_logps = self._generating_policy_logps(generation[0], generation[1]) if old_logps else None
        scoring = self._take_scoring_started()
        return GeneratedBatch(
            inputs,
            generation,
            old_per_token_logps,
            self.state.global_step,
            metrics=generation_metrics,
            assigned_metrics=assigned_metrics,
            scoring=scoring,
        )

    def _generating_policy_logps(self, prompt_ids_list: list, completion_ids_list: list) -> torch.Tensor:
        """(B, T) per-token log-probs of the completions under the current weights, padded and masked exactly as
        TRL's `_generate_and_score_completions` will pad them when the batch is scored."""
        device = self.accelerator.device
        pad_id = self._tokenizer.pad_token_id
        multiple = self.pad_to_multiple_of
        prompts = [torch.tensor(ids) for ids in prompt_ids_list]
        completions = [torch.tensor(ids) for ids in completion_ids_list]
        prompt_ids = pad(prompts, padding_value=pad_id, padding_side="left", pad_to_multiple_of=multiple)
        prompt_mask = pad(
            [torch.ones_like(ids, dtype=torch.long) for ids in prompts],
            padding_value=0,
            padding_side="left",
            pad_to_multiple_of=multiple,
        )
        completion_ids = pad(completions, padding_value=pad_id, padding_side="right", pad_to_multiple_of=multiple)
        completion_mask = pad(
            [torch.ones_like(ids, dtype=torch.long) for ids in completions],
            padding_value=0,
            padding_side="right",
            pad_to_multiple_of=multiple,
        )
        if self.mask_truncated_completions:
            eos_and_pad = [*self.eos_token_ids, pad_id]
            is_truncated = torch.tensor([ids[-1] not in eos_and_pad for ids in completion_ids_list])
            completion_mask = completion_mask * (~is_truncated).unsqueeze(1).int()
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1).to(device)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1).to(device)
        with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            logps, _, _ = self._get_per_token_logps_and_entropies(
                self.model,
                input_ids,
                attention_mask,
                completion_ids.size(1),
                batch_size=self.args.per_device_train_batch_size,
            )
        return logps

    def _score_generated(self, batch: GeneratedBatch) -> dict:
        """TRL's scoring of a batch generated earlier (its `_generate` answers with the stored generation), with the
        generating weights' log-probs as the PPO ratio's old policy."""
        for name, values in batch.metrics.items():
            self._metrics["train"][name].extend(values)
        self._metrics["train"].update(batch.assigned_metrics)
        self._replayed_batch = batch
        try:
            output = super()._generate_and_score_completions(batch.inputs)
        finally:
            self._replayed_batch = None
        if batch.old_per_token_logps is not None:
            if batch.old_per_token_logps.shape != output["completion_ids"].shape:
                raise RuntimeError(
                    f"the generating policy's log-probs have shape {tuple(batch.old_per_token_logps.shape)}, TRL "
                    f"padded the completions to {tuple(output['completion_ids'].shape)}: TRL's padding changed."
                )
            output["old_per_token_logps"] = batch.old_per_token_logps
        # Optimizer steps between the weights that generated the batch and the weights it trains (TRL's async GRPO
        # calls this staleness): 0 on the step that fills the pipeline, 1 after.
        self._metrics["train"]["pipeline/staleness"].append(float(self.state.global_step - batch.step))
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
