"""VeriGate: verifier-gated process rewards on top of TRL's `GRPOTrainer`.

GRPO normalizes rewards within each group of `num_generations` completions of one prompt. When the verifier gives every
completion of a group the same reward (typically all 0 on hard prompts), the group's advantages are all zero and the
prompt teaches nothing ("zero-gradient collapse"). VeriGate (Agrawal, Liu, Huang, 2026, arXiv:2605.30451) keeps plain
GRPO wherever the verifier separates a group and, only for such degenerate ("gated") groups, falls back to token-level
advantages built from a process reward model's step scores.
"""

import math
import os
import textwrap
import time
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import PreTrainedModel
from trl import GRPOConfig
from trl.extras.profiling import profiling_context
from trl.models import prepare_deepspeed
from trl.trainer.utils import get_config_model_id

from trl_verigate.advantages import (
    GATE_MODES,
    NORMALIZATIONS,
    centered_step_rewards,
    gated_groups,
    process_step_advantages,
    step_advantages_to_tokens,
)
from trl_verigate.rewards.prm import PRM_TYPES, as_step_scorer, resolve_device, resolve_dtype
from trl_verigate.trainers.process_grpo import ProcessGRPOTrainer, ScoredBatch, refuse_too_few_generations
from trl_verigate.trainers.verigate_prm import (
    check_prm_checkpoint,
    launch_training_device,
    load_step_scorer,
    prm_device_for_process,
)
from trl_verigate.trainers.verigate_steps import model_text_step_token_ids


@dataclass
class VeriGateConfig(GRPOConfig):
    """Configuration of [`VeriGateGRPOTrainer`]: every [`trl.GRPOConfig`] field plus the VeriGate fields below.

    The per-completion step cap is called `max_steps_per_completion` because `max_steps` already means the number of
    optimizer steps in `transformers.TrainingArguments`.
    """

    gate: str = field(
        default="all_zero",
        metadata={
            "help": "Which groups fall back to the process reward model. 'all_zero' (default, as in the paper): groups "
            "whose verifier reward is 0 for every completion. 'all_equal': every group whose verifier rewards are all "
            "equal (also all-correct groups). 'none': no group, so the trainer is exactly TRL's GRPO and no PRM loads "
            "(a plain-GRPO ablation is this one line of YAML).",
            "choices": list(GATE_MODES),
        },
    )
    advantage_normalization: str = field(
        default="verigate",
        metadata={
            "help": "Token-level advantages of gated groups. 'verigate' (default): cumulate the step rewards from "
            "each step to the end of the completion, then normalize the cumulated values over the group. "
            "'deepseekmath': normalize the step rewards over the group first, then cumulate (DeepSeekMath process "
            "supervision).",
            "choices": list(NORMALIZATIONS),
        },
    )
    step_separator: str = field(
        default="\n\n",
        metadata={"help": "String that separates reasoning steps in a completion; the PRM scores each step."},
    )
    max_steps_per_completion: int | None = field(
        default=32,
        metadata={
            "help": "Most steps per completion sent to the PRM; text beyond the cap is merged into the last step. "
            "Bounds the PRM's cost on completions that split into many tiny steps. None: no cap."
        },
    )
    prm_type: str = field(
        default="qwen_math",
        metadata={
            "help": "Kind of process reward model built when the trainer gets no `process_reward_model`: "
            "'qwen_math' (Qwen2.5-Math-PRM), 'math_shepherd', 'token_classification', or 'symbolic' (model-free).",
            "choices": list(PRM_TYPES),
        },
    )
    prm_model_name_or_path: str | None = field(
        default="Qwen/Qwen2.5-Math-PRM-7B",
        metadata={
            "help": "Hub id or local path of the process reward model (ignored for prm_type='symbolic'). Set it "
            "together with `prm_type` when using another PRM family."
        },
    )
    prm_batch_size: int = field(
        default=8,
        metadata={"help": "Completions per forward pass of the process reward model."},
    )
    prm_device: str | None = field(
        default=None,
        metadata={
            "help": "Device of each process's PRM copy. None: the process's own training device. 'cpu'. 'cuda:+K': "
            "the process's local GPU index plus K (e.g. 'cuda:+4' with 4 processes per node on 8 GPUs). A "
            "comma-separated list (or YAML list) of absolute devices, one per local rank: 'cuda:4,cuda:5'. An "
            "absolute GPU such as 'cuda:1' only with a single process. Under DeepSpeed ZeRO-3 the training device "
            "is used whatever this says."
        },
    )
    prm_torch_dtype: str | None = field(
        default=None,
        metadata={
            "help": "Dtype the process reward model is loaded in ('bfloat16', 'float16', 'float32', 'auto'). "
            "None: the checkpoint's own dtype (dtype='auto'; bf16 for Qwen2.5-Math-PRM-7B)."
        },
    )
    gate_reward_funcs: list[str] | None = field(
        default=None,
        metadata={
            "help": "Names of the reward functions that form the verifier (as logged under `rewards/<name>/mean`). "
            "The gate looks at their `reward_weights`-weighted sum. None: all reward functions."
        },
    )
    prm_audit_fraction: float = field(
        default=0.0,
        metadata={
            "help": "Share of non-gated groups also scored by the PRM (their advantages stay GRPO's) to log "
            "`verigate/prm_verifier_agreement`. 0.0 (default): the PRM only sees gated groups."
        },
    )
    prm_score_center: float | None = field(
        default=None,
        metadata={
            "help": "Subtracted from every PRM step score before the scores are cumulated (e.g. 0.5). None "
            "(default, the paper's formula): scores in [0, 1] are cumulated as they are, which favours completions "
            "with more steps left: a bad 6-step completion scored 1/3 per step and a good 2-step one scored 1 per "
            "step both cumulate to 2 at their first step; centred at 0.5 they get -1 and +1. Only with "
            "advantage_normalization='verigate' (the other one subtracts the group mean, cancelling any constant)."
        },
    )
    prm_advantage_epsilon: float = field(
        default=1e-4,
        metadata={"help": "Added to the group standard deviation when normalizing the process advantages."},
    )

    def __post_init__(self):
        # Before the parent sets up the distributed state, which blocks until every process has started.
        if self.prm_device is not None:
            self._check_prm_device()
        refuse_too_few_generations(self)
        super().__post_init__()
        if self.gate not in GATE_MODES:
            raise ValueError(f"gate={self.gate!r} is not supported; set gate to one of {list(GATE_MODES)}.")
        if self.advantage_normalization not in NORMALIZATIONS:
            raise ValueError(
                f"advantage_normalization={self.advantage_normalization!r} is not supported; set it to one of "
                f"{list(NORMALIZATIONS)}."
            )
        if isinstance(self.step_separator, str) and "\\" in self.step_separator:
            # A shell passes `--step_separator "\n\n"` as backslash-n characters; nobody separates steps by those.
            self.step_separator = self.step_separator.replace("\\n", "\n").replace("\\t", "\t").replace("\\r", "\r")
        if not isinstance(self.step_separator, str) or not self.step_separator:
            raise ValueError(
                f"step_separator={self.step_separator!r} must be a non-empty string, e.g. '\\n\\n' (the default)."
            )
        if self.max_steps_per_completion is not None and (
            isinstance(self.max_steps_per_completion, bool)
            or not isinstance(self.max_steps_per_completion, int)
            or self.max_steps_per_completion < 1
        ):
            raise ValueError(
                f"max_steps_per_completion={self.max_steps_per_completion!r} must be a positive integer, or None for "
                "no cap."
            )
        if self.prm_type not in PRM_TYPES:
            raise ValueError(f"prm_type={self.prm_type!r} is not supported; set prm_type to one of {list(PRM_TYPES)}.")
        if self.prm_type != "symbolic" and not self.prm_model_name_or_path:
            raise ValueError(
                f"prm_model_name_or_path is empty but prm_type={self.prm_type!r} needs a model; set "
                "prm_model_name_or_path to a hub id or local path, or use prm_type='symbolic'."
            )
        if isinstance(self.prm_batch_size, bool) or not isinstance(self.prm_batch_size, int) or self.prm_batch_size < 1:
            raise ValueError(f"prm_batch_size={self.prm_batch_size!r} must be a positive integer.")
        if isinstance(self.gate_reward_funcs, str):
            self.gate_reward_funcs = [self.gate_reward_funcs]
        if self.gate_reward_funcs is not None:
            # The CLI hands `--gate_reward_funcs a,b` over as ["a,b"]; YAML may give "a,b" or a list.
            self.gate_reward_funcs = [
                name.strip() for entry in self.gate_reward_funcs for name in str(entry).split(",") if name.strip()
            ]
        if self.gate_reward_funcs is not None and (
            len(self.gate_reward_funcs) == 0 or not all(isinstance(name, str) for name in self.gate_reward_funcs)
        ):
            raise ValueError(
                f"gate_reward_funcs={self.gate_reward_funcs!r} must be a non-empty list of reward function names, or "
                "None to gate on all reward functions."
            )
        if not _is_number(self.prm_audit_fraction) or not 0.0 <= self.prm_audit_fraction <= 1.0:
            raise ValueError(f"prm_audit_fraction={self.prm_audit_fraction!r} must be a number in [0, 1].")
        if self.gate == "none" and self.prm_audit_fraction > 0:
            raise ValueError(
                f"prm_audit_fraction={self.prm_audit_fraction!r} with gate='none': plain GRPO loads no PRM to audit "
                "with; set prm_audit_fraction: 0 or another gate."
            )
        # Checked here, before the policy loads, rather than when the PRM is built at the end of trainer init.
        if self.prm_torch_dtype is not None:
            try:
                resolve_dtype(self.prm_torch_dtype)
            except ValueError as error:
                raise ValueError(f"prm_torch_dtype={self.prm_torch_dtype!r} is invalid: {error}") from error
        if self.prm_score_center is not None:
            if not _is_number(self.prm_score_center) or not 0.0 <= self.prm_score_center <= 1.0:
                raise ValueError(
                    f"prm_score_center={self.prm_score_center!r} must be a number in [0, 1] (PRM scores lie there), "
                    "e.g. 0.5, or None."
                )
            if self.advantage_normalization != "verigate":
                raise ValueError(
                    f"prm_score_center={self.prm_score_center!r} has no effect with advantage_normalization="
                    f"{self.advantage_normalization!r}, which subtracts the group mean from every step score; use "
                    "advantage_normalization='verigate' or leave prm_score_center unset."
                )
        if not _is_number(self.prm_advantage_epsilon) or not self.prm_advantage_epsilon > 0:
            raise ValueError(f"prm_advantage_epsilon={self.prm_advantage_epsilon!r} must be positive, e.g. 1e-4.")

    def _check_prm_device(self) -> None:
        """Resolve `prm_device` for each local rank as the trainer will, from the launcher's environment variables."""
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        # Every rank checks the devices of all local ranks (LOCAL_WORLD_SIZE, set by torchrun and accelerate), so a
        # bad entry stops every process with the same message, not just its own rank while the others wait.
        local_ranks = {local_rank, *range(int(os.environ.get("LOCAL_WORLD_SIZE", "1")))}
        for rank in sorted(local_ranks):
            device = prm_device_for_process(
                self.prm_device,
                local_process_index=rank,
                num_processes=int(os.environ.get("WORLD_SIZE", "1")),
                local_device=launch_training_device(self.use_cpu, rank),
            )
            try:
                resolve_device(device)
            except ValueError as error:
                raise ValueError(f"prm_device={self.prm_device!r} is invalid on local rank {rank}: {error}") from error


# Scored only to keep a ZeRO-3 PRM's forward passes in step across ranks; the scores are dropped.
_PADDING_QUESTION = "What is 1 + 1?"
_PADDING_STEP = "1 + 1 = 2."


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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

    Takes every argument of [`trl.GRPOTrainer`] (with `args` a [`VeriGateConfig`]) plus `process_reward_model`: a
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
        # gate="none" gates no group, so no PRM is ever asked: none is loaded.
        uses_prm = args.gate != "none"
        builds_model_prm = uses_prm and process_reward_model is None and args.prm_type != "symbolic"
        if builds_model_prm:
            # Before the policy loads: a wrong PRM path should fail in a second with one message.
            check_prm_checkpoint(args.prm_model_name_or_path, args.prm_type)
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
