"""VeriGate: verifier-gated process rewards on top of TRL's `GRPOTrainer`.

GRPO normalizes rewards within each group of `num_generations` completions of one prompt. When the verifier gives every
completion of a group the same reward (typically all 0 on hard prompts), the group's advantages are all zero and the
prompt teaches nothing ("zero-gradient collapse"). VeriGate (Agrawal, Liu, Huang, 2026, arXiv:2605.30451) keeps plain
GRPO wherever the verifier separates a group and, only for such degenerate ("gated") groups, falls back to token-level
advantages built from a process reward model's step scores.
"""

import math
import textwrap
import time
from typing import Any

import torch
from transformers import PreTrainedModel
from trl.extras.profiling import profiling_context
from trl.models import prepare_deepspeed
from trl.trainer.utils import get_config_model_id

from trl_verigate.advantages import (
    centered_step_rewards,
    gated_groups,
    process_step_advantages,
    step_advantages_to_tokens,
)
from trl_verigate.rewards.prm import as_step_scorer
from trl_verigate.rewards.prm_placement import check_dtype_under_zero3
from trl_verigate.rewards.prm_setup import check_prm_checkpoint, load_step_scorer, prm_device_for_process
from trl_verigate.steps import model_text_step_token_ids
from trl_verigate.trainers.process_grpo import ProcessGRPOTrainer, ScoredBatch
from trl_verigate.trainers.utils import given_trainer_arguments, refuse_datasets_without_prompt
from trl_verigate.trainers.verigate.verigate_config import VeriGateConfig

# Scored only to keep a ZeRO-3 PRM's forward passes in step across ranks; the scores are dropped.
_PADDING_QUESTION = "What is 1 + 1?"
_PADDING_STEP = "1 + 1 = 2."


def question_text(prompt: str | list[dict[str, Any]]) -> str:
    """The question a PRM is asked about: the prompt itself, or the last user message of a conversation."""
    if isinstance(prompt, str):
        return prompt
    user_messages = [message for message in prompt if message.get("role") == "user"]
    content = (user_messages or prompt)[-1]["content"]
    if isinstance(content, str):
        return content
    # Multimodal content is a list of typed parts; the PRM reads text only.
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


class VeriGateGRPOTrainer(ProcessGRPOTrainer):
    """GRPO with verifier-gated process-reward fallback (VeriGate; Agrawal, Liu, Huang, 2026, arXiv:2605.30451).

    Takes every argument of `trl.GRPOTrainer` (with `args` a `VeriGateConfig`) plus `process_reward_model`: a
    `StepScorer` (`score(prompts, steps) -> list[list[float]]`) or a plain callable with that signature, or None to
    build one from `args.prm_type` / `args.prm_model_name_or_path`.

    After TRL has generated, scored and normalized a generation batch:

    1. S1 gate: the verifier reward of a completion is the `reward_weights`-weighted sum of the `gate_reward_funcs`
       columns. A group is gated when these are all 0 (`gate="all_zero"`) or all equal (`gate="all_equal"`); with
       `gate="none"` no group is, no PRM is loaded, and training is TRL's GRPO exactly (an ablation). A reward
       function that returns None for a completion counts 0 here: no verdict is no separation.
    2. Non-gated groups keep exactly TRL's advantages (whatever `scale_rewards`, `loss_type` or
       `multi_objective_aggregation`).
    3. Gated completions are split into steps at `step_separator` and scored by the PRM on the process that generated
       them; step rewards are gathered so a group split over processes is normalized as a whole.
    4. S2/S3: `advantage_normalization="verigate"` gives step j of completion i the advantage
       (c_ij - mean(c)) / (std(c) + eps) with c_ij = sum_{k>=j} r_ik, mean/std over all steps of the group; every token
       of a step gets its step's advantage. `"deepseekmath"` normalizes r over the group first, then cumulates.
       With `prm_score_center` set, r_ik - prm_score_center takes the place of r_ik.
    5. Tool results (TRL's `tool_mask`) are no steps: only the model's own text is split, scored and normalized.

    When at least one group is gated, `advantages` has shape (B, T) (non-gated rows broadcast over T, padding 0),
    which `GRPOTrainer._compute_loss` accepts; otherwise it is TRL's (B,) tensor untouched. No PRM call happens when no
    group is gated and `prm_audit_fraction` is 0.

    Metrics (logged with TRL's, so they reach every `report_to` backend):

    - `verigate/gate_rate`: fraction of groups gated.
    - `verigate/frac_zero_std_outcome`: fraction of groups whose verifier rewards have zero spread.
    - `verigate/prm_completions_scored`: completions sent to the PRM this batch, all processes together.
    - `verigate/prm_seconds`: wall time of the PRM call on the slowest process.
    - `verigate/prm_step_score_mean`, `verigate/steps_per_completion`: mean PRM step score and mean step count over
      the scored completions (logged only for batches where the PRM ran).
    - `verigate/gated_truncated_fraction`: fraction of gated completions cut at `max_completion_length` (logged for
      batches with a gated group). Their early tokens get the largest cumulated advantages unless
      `mask_truncated_completions` drops them (then they have no steps) or `prm_score_center` is set.
    - `verigate/reward_failures`: new failures counted by the reward functions' `failures` attributes since the
      previous batch, all processes together (reward functions without the attribute count 0).
    - `verigate/prm_verifier_agreement` (only with `prm_audit_fraction > 0`): whole non-gated groups are drawn for
      audit (ceil(fraction x non-gated groups), seeded by `args.seed`); over every pair of audited completions of one
      group whose verifier rewards differ and which both have steps, the fraction where the completion with the higher
      verifier reward also has the strictly higher mean PRM step score. Logged for batches with at least one such pair.

    The completions table (`log_completions`) shows, for gated completions, the mean token advantage the loss uses.
    """

    _tag_names = ["trl", "grpo", "verigate"]
    _name = "VeriGate"
    # The model card cites this paper instead of GRPO's.
    _paper = {
        "title": "VeriGate: Verifier-Gated Step-Level Supervision for GRPO",
        "id": "2605.30451",
        "citation": textwrap.dedent("""\
            @article{agrawal2026verigate,
                title        = {{VeriGate: Verifier-Gated Step-Level Supervision for GRPO}},
                author       = {Aakriti Agrawal and Minghui Liu and Furong Huang},
                year         = 2026,
                eprint       = {arXiv:2605.30451},
            }"""),
    }

    def __init__(
        self,
        model,
        reward_funcs=None,
        args: VeriGateConfig | None = None,
        *trainer_args,
        process_reward_model=None,
        **trainer_kwargs,
    ):
        if args is None:
            model_name = model if isinstance(model, str) else get_config_model_id(model.config)
            args = VeriGateConfig(f"{model_name.split('/')[-1]}-VeriGate")
        elif not isinstance(args, VeriGateConfig):
            raise TypeError(
                f"args must be a VeriGateConfig, got {type(args).__name__}; build it with "
                "VeriGateConfig(**your_grpo_kwargs) so the VeriGate fields have values."
            )
        refuse_datasets_without_prompt(given_trainer_arguments(trainer_args, trainer_kwargs))
        # gate="none" gates no group, so no PRM is ever asked: none is loaded.
        uses_prm = args.gate != "none"
        builds_model_prm = uses_prm and process_reward_model is None and args.prm_type != "symbolic"
        if builds_model_prm:
            # Before the policy loads: a wrong PRM path should fail in a second with one message.
            check_prm_checkpoint(args.prm_model_name_or_path, args.prm_type)
            check_dtype_under_zero3(args.prm_torch_dtype)
        super().__init__(model, reward_funcs, args, *trainer_args, **trainer_kwargs)

        self._gate_func_indices = self._resolve_gate_reward_funcs(args.gate_reward_funcs)
        if process_reward_model is None and uses_prm:
            device = prm_device_for_process(
                args.prm_device,
                local_process_index=self.accelerator.local_process_index,
                num_processes=self.accelerator.num_processes,
                local_device=self.accelerator.device,
                zero3=self._is_zero3(),
            )
            process_reward_model = load_step_scorer(args, device)
        self._prm_is_sharded = self._shard_prm_under_zero3(process_reward_model)
        self.process_reward_model = as_step_scorer(process_reward_model) if uses_prm else None
        self._reward_failures_seen = self._local_reward_failures()

    def _shard_prm_under_zero3(self, process_reward_model) -> bool:
        """Put a model PRM into a DeepSpeed inference engine under ZeRO-3; True when it is now sharded."""
        # Under ZeRO-3, transformers partitions every model `from_pretrained` builds, the PRM included; outside a
        # DeepSpeed engine its weights stay empty placeholders. TRL wraps model reward functions the same way.
        prm_model = getattr(process_reward_model, "model", None)
        if self._is_zero3() and isinstance(prm_model, PreTrainedModel):
            process_reward_model.model = prepare_deepspeed(prm_model, self.accelerator)
            return True
        return False

    def _is_zero3(self) -> bool:
        return self.is_deepspeed_enabled and self.accelerator.state.deepspeed_plugin.zero_stage == 3

    def _resolve_gate_reward_funcs(self, names: list[str] | None) -> list[int]:
        if names is None:
            return list(range(len(self.reward_funcs)))
        unknown = [name for name in names if name not in self.reward_func_names]
        if unknown:
            raise ValueError(
                f"gate_reward_funcs names {unknown} match no reward function; choose among {self.reward_func_names}."
            )
        return [self.reward_func_names.index(name) for name in names]

    def _process_advantages(self, batch: ScoredBatch, output: dict) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Gated rows: their GRPO advantage is replaced by the PRM's token advantages; None when no group is gated."""
        prompts, rewards_per_func = batch.prompts, batch.rewards_per_func
        metrics = self._metrics[batch.mode]
        num_generations = batch.num_generations
        process_slice = batch.process_slice

        weights = self.reward_weights.to(rewards_per_func.device)[self._gate_func_indices]
        verifier_rewards = (rewards_per_func[:, self._gate_func_indices] * weights).nansum(dim=1)
        gated = gated_groups(verifier_rewards, num_generations, mode=self.args.gate)
        audited = self._sample_audited_groups(~gated)
        metrics["verigate/gate_rate"].append(gated.float().mean().item())
        zero_spread = gated_groups(verifier_rewards, num_generations, mode="all_equal")
        metrics["verigate/frac_zero_std_outcome"].append(zero_spread.float().mean().item())
        metrics["verigate/reward_failures"].append(self._reward_failures_delta())

        scored_rows = (gated | audited).repeat_interleave(num_generations)
        if not scored_rows.any():
            metrics["verigate/prm_completions_scored"].append(0.0)
            metrics["verigate/prm_seconds"].append(0.0)
            return None

        spans, token_step_ids = self._local_step_spans(output, scored_rows[process_slice])
        step_rewards, step_mask, seconds = self._score_local_steps(prompts, spans)
        step_rewards = self._gather_padded(step_rewards)
        step_mask = self._gather_padded(step_mask)

        steps_per_row = step_mask.sum(dim=1)
        sent_to_prm = steps_per_row > 0
        metrics["verigate/prm_completions_scored"].append(float(sent_to_prm.sum().item()))
        seconds = self.accelerator.gather(torch.tensor([seconds], device=step_rewards.device))
        metrics["verigate/prm_seconds"].append(seconds.max().item())
        if sent_to_prm.any():
            metrics["verigate/prm_step_score_mean"].append(step_rewards[step_mask].mean().item())
            metrics["verigate/steps_per_completion"].append(steps_per_row[sent_to_prm].float().mean().item())
        if audited.any():
            agreement = self._prm_verifier_agreement(
                verifier_rewards, step_rewards, step_mask, audited, num_generations
            )
            if agreement is not None:
                metrics["verigate/prm_verifier_agreement"].append(agreement)

        gated_rows = gated.repeat_interleave(num_generations)
        if not gated_rows.any():  # only audited groups were scored: GRPO's advantages stand
            return None
        metrics["verigate/gated_truncated_fraction"].append(
            self._truncated_rows(batch)[gated_rows].float().mean().item()
        )
        step_advantages = torch.zeros_like(step_rewards)
        gated_step_rewards = step_rewards[gated_rows]
        if self.args.prm_score_center is not None:
            gated_step_rewards = centered_step_rewards(
                gated_step_rewards, step_mask[gated_rows], self.args.prm_score_center
            )
        # Gated rows are whole groups in order, so the selection still reshapes into (groups, num_generations).
        step_advantages[gated_rows] = process_step_advantages(
            gated_step_rewards,
            step_mask[gated_rows],
            num_generations,
            normalization=self.args.advantage_normalization,
            eps=self.args.prm_advantage_epsilon,
        )
        local_gated = gated_rows[process_slice]
        token_advantages = step_advantages_to_tokens(step_advantages[process_slice], token_step_ids)
        # Audited (non-gated) rows have step ids too; only gated rows take the PRM's advantages.
        token_advantages = token_advantages * local_gated.unsqueeze(1).to(token_advantages.device)
        return token_advantages, local_gated

    def _truncated_rows(self, batch: ScoredBatch) -> torch.Tensor:
        """(N,) bool over all processes: completions cut at `max_completion_length`, by TRL's rule (the last token
        is neither an EOS nor padding)."""
        stop_ids = {*self.eos_token_ids, self._tokenizer.pad_token_id}
        truncated = [float(bool(ids) and ids[-1] not in stop_ids) for ids in batch.completion_ids]
        # Gathered as floats: not every backend gathers bool tensors.
        return self.accelerator.gather(torch.tensor(truncated, device=self.accelerator.device)).bool()

    def _local_step_spans(self, output: dict, scored: torch.Tensor) -> tuple[list, torch.Tensor]:
        """Step spans of this process's `scored` completions ([] for the others) and each token's step id (-1: none).

        Only scored completions are decoded and mapped: that is all the PRM and the advantages need, and the step
        ids of unscored rows could exceed the width of the gathered step tensor, which the scored rows alone set.
        Tool results (TRL's `tool_mask` 0) are no steps and have step id -1 (`model_text_step_token_ids`).
        """
        completion_ids = output["completion_ids"]
        token_step_ids = torch.full_like(completion_ids, -1)
        spans = [[] for _ in range(len(completion_ids))]
        rows = scored.nonzero().flatten().to(completion_ids.device)
        if len(rows) == 0:
            return spans, token_step_ids
        tool_mask = output.get("tool_mask")
        row_spans, row_step_ids = model_text_step_token_ids(
            self._tokenizer,
            completion_ids[rows],
            output["completion_mask"][rows],
            tool_mask[rows] if tool_mask is not None else None,
            separator=self.args.step_separator,
            max_steps=self.args.max_steps_per_completion,
        )
        token_step_ids[rows] = row_step_ids.to(token_step_ids.device)
        for row, row_span in zip(rows.tolist(), row_spans, strict=True):
            spans[row] = row_span
        return spans, token_step_ids

    def _sample_audited_groups(self, candidates: torch.Tensor) -> torch.Tensor:
        audited = torch.zeros_like(candidates)
        candidate_ids = candidates.nonzero().flatten()
        num_audited = math.ceil(self.args.prm_audit_fraction * len(candidate_ids))
        if num_audited == 0:
            return audited
        # Seeded by the step, so every process draws the same groups and a resumed run draws what it would have.
        mode_offset = 0 if self.model.training else 1
        generator = torch.Generator().manual_seed(self.args.seed * 1_000_003 + 2 * self.state.global_step + mode_offset)
        draw = torch.randperm(len(candidate_ids), generator=generator)[:num_audited]
        audited[candidate_ids[draw.to(candidate_ids.device)]] = True
        return audited

    def _score_local_steps(self, prompts: list, spans: list) -> tuple[torch.Tensor, torch.Tensor, float]:
        """PRM step rewards (B, S) and mask for this process's completions that have steps, and the seconds spent."""
        device = self.accelerator.device
        rows = [row for row in range(len(prompts)) if spans[row]]
        # At least one column so that padding and gathering never meet a zero-width tensor.
        num_steps = max([len(spans[row]) for row in rows], default=1)
        step_rewards = torch.zeros(len(prompts), num_steps)
        step_mask = torch.zeros(len(prompts), num_steps, dtype=torch.bool)
        questions = [question_text(prompts[row]) for row in rows]
        steps = [[span.text for span in spans[row]] for row in rows]
        if self._prm_is_sharded:
            # Each forward pass of a ZeRO-3 PRM gathers its weights from all ranks, a collective every rank must
            # join: pad this rank's request to the busiest rank's, so all run the same number of batches.
            busiest = int(self.accelerator.gather(torch.tensor([len(rows)], device=device)).max().item())
            questions += [_PADDING_QUESTION] * (busiest - len(rows))
            steps += [[_PADDING_STEP]] * (busiest - len(rows))
        if not questions:
            return step_rewards.to(device), step_mask.to(device), 0.0

        start = time.perf_counter()
        with profiling_context(self, "process_reward_model"), torch.no_grad():
            scores = self.process_reward_model.score(questions, steps)[: len(rows)]
        seconds = time.perf_counter() - start

        # as_step_scorer has checked one finite score per step.
        for row, row_scores in zip(rows, scores, strict=True):
            step_rewards[row, : len(row_scores)] = torch.tensor(row_scores)
            step_mask[row, : len(row_scores)] = True
        return step_rewards.to(device), step_mask.to(device), seconds

    @staticmethod
    def _prm_verifier_agreement(
        verifier_rewards: torch.Tensor,
        step_rewards: torch.Tensor,
        step_mask: torch.Tensor,
        audited: torch.Tensor,
        num_generations: int,
    ) -> float | None:
        num_steps = step_mask.sum(dim=1)
        mean_step_score = (step_rewards * step_mask).sum(dim=1) / num_steps.clamp(min=1)
        verifier = verifier_rewards.view(-1, num_generations)[audited]
        prm = mean_step_score.view(-1, num_generations)[audited]
        has_steps = (num_steps > 0).view(-1, num_generations)[audited]
        # Each unordered pair counted once, as (better by the verifier, worse by the verifier).
        verifier_prefers = verifier.unsqueeze(2) > verifier.unsqueeze(1)
        comparable = verifier_prefers & has_steps.unsqueeze(2) & has_steps.unsqueeze(1)
        num_pairs = comparable.sum().item()
        if num_pairs == 0:
            return None
        prm_agrees = comparable & (prm.unsqueeze(2) > prm.unsqueeze(1))
        return prm_agrees.sum().item() / num_pairs
