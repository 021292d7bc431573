"""`VeriGateConfig`: the fields of verifier-gated process rewards on top of TRL's `GRPOConfig`."""

import os
from dataclasses import dataclass, field

from trl import GRPOConfig

from trl_verigate.advantages import GATE_MODES, NORMALIZATIONS
from trl_verigate.rewards.prm import PRM_TYPES, resolve_device, resolve_dtype
from trl_verigate.rewards.prm_setup import launch_training_device, prm_device_for_process
from trl_verigate.trainers.utils import is_number, refuse_negative_learning_rate, refuse_too_few_generations


@dataclass
class VeriGateConfig(GRPOConfig):
    r"""
    Configuration class for the `VeriGateGRPOTrainer`.

    Every `trl.GRPOConfig` parameter plus the ones below (their `help` metadata says more).

    Parameters:
        gate (`str`, *optional*, defaults to `"all_zero"`):
            Groups that fall back to the PRM: `"all_zero"` (the paper), `"all_equal"` or `"none"` (plain GRPO, no PRM).
        gate_reward_funcs (`list[str]` or `None`, *optional*, defaults to `None`):
            Names of the reward functions that form the verifier; `None`: all of them.
        advantage_normalization (`str`, *optional*, defaults to `"verigate"`):
            Token-level advantages of gated groups: `"verigate"` (the paper) or `"deepseekmath"`.
        prm_score_center (`float` or `None`, *optional*, defaults to `None`):
            Subtracted from every PRM step score before cumulating; `None`: the paper's formula.
        prm_advantage_epsilon (`float`, *optional*, defaults to `1e-4`):
            Added to the group standard deviation when normalizing the process advantages.
        prm_audit_fraction (`float`, *optional*, defaults to `0.0`):
            Share of non-gated groups also scored by the PRM, to log `verigate/prm_verifier_agreement`.

        step_separator (`str`, *optional*, defaults to `"\n\n"`):
            String that separates reasoning steps in a completion.
        max_steps_per_completion (`int` or `None`, *optional*, defaults to `32`):
            Most steps per completion sent to the PRM; the rest merges into the last step. Not `max_steps`, which
            `transformers.TrainingArguments` already uses for optimizer steps.

        prm_type (`str`, *optional*, defaults to `"qwen_math"`):
            PRM built when the trainer gets no `process_reward_model`: `"qwen_math"`, `"math_shepherd"`,
            `"token_classification"` or `"symbolic"`.
        prm_model_name_or_path (`str` or `None`, *optional*, defaults to `"Qwen/Qwen2.5-Math-PRM-7B"`):
            Hub id or local path of the PRM.
        prm_batch_size (`int`, *optional*, defaults to `8`):
            Completions per PRM forward pass.
        prm_device (`str` or `None`, *optional*, defaults to `None`):
            Device of each process's PRM copy: the training device, `"cpu"`, `"cuda:+K"` or one device per local rank.
        prm_torch_dtype (`str` or `None`, *optional*, defaults to `None`):
            Dtype the PRM loads in; `None`: the checkpoint's own.
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
        refuse_negative_learning_rate(self)
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
        if not is_number(self.prm_audit_fraction) or not 0.0 <= self.prm_audit_fraction <= 1.0:
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
            if not is_number(self.prm_score_center) or not 0.0 <= self.prm_score_center <= 1.0:
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
        if not is_number(self.prm_advantage_epsilon) or not self.prm_advantage_epsilon > 0:
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
