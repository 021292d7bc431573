"""`ESConfig`: the evolution-strategies fields on top of TRL's `GRPOConfig`, and what ES refuses."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from trl import GRPOConfig

from trl_verigate.es.population import FITNESS_MODES
from trl_verigate.trainers.utils import refuse_negative_learning_rate

TRAINING_ARGUMENTS_DEFAULT_BATCH_SIZE = 8
GRPO_DEFAULT_NUM_GENERATIONS = GRPOConfig.__dataclass_fields__["num_generations"].default


@dataclass
class ESConfig(GRPOConfig):
    r"""
    Configuration class for the `ESTrainer`.

    Every `trl.GRPOConfig` parameter plus the ones below. `per_device_train_batch_size` is derived
    (prompts_per_iteration × num_generations: one member's completions); gradient accumulation, `num_iterations`,
    `beta`, DeepSpeed and FSDP do not apply to ES and are refused.

    Parameters:
        population_size (`int`, *optional*, defaults to `30`):
            P, members per iteration; even with `antithetic`.
        sigma (`float`, *optional*, defaults to `1e-3`):
            σ, the perturbation scale: member weights θ + σ·sign·ε.
        antithetic (`bool`, *optional*, defaults to `True`):
            Members in pairs (s, +1), (s, -1) sharing one noise draw.
        fitness_shaping (`str`, *optional*, defaults to `"zscore"`):
            How member rewards become fitness: `"zscore"`, `"centered_rank"` or `"none"` (the rewards themselves).
        es_param_regex (`str` or `None`, *optional*, defaults to `None`):
            Perturb only trainable parameters whose name matches this regex; `None`: every trainable parameter.

        prompts_per_iteration (`int`, *optional*, defaults to `8`):
            Prompts every member of an iteration answers, each `num_generations` times.
        greedy (`bool`, *optional*, defaults to `False`):
            Decode greedily, one completion per prompt, so a member's reward depends on its weights alone.
    """

    population_size: int = field(
        default=30,
        metadata={
            "help": "P, members per iteration (default 30, as in Qiu et al. 2025); even with `antithetic`. Members are "
            "split over the processes in blocks of ceil(P / processes); a multiple of the process count wastes no slot."
        },
    )
    sigma: float = field(
        default=1e-3, metadata={"help": "σ, the perturbation scale: member weights θ + σ·sign·ε (default 1e-3)."}
    )
    antithetic: bool = field(
        default=True,
        metadata={"help": "Members in pairs (s, +1), (s, -1) sharing one noise draw (default true)."},
    )
    fitness_shaping: str = field(
        default="zscore",
        metadata={
            "help": "How member rewards become fitness (default zscore): zscore = (r - mean) / (std + 1e-8), "
            "population std; centered_rank = rank / (P - 1) - 0.5 with average ranks for ties; none = r."
        },
    )
    prompts_per_iteration: int = field(
        default=8,
        metadata={"help": "Prompts every member of an iteration answers, each `num_generations` times (default 8)."},
    )
    es_param_regex: str | None = field(
        default=None,
        metadata={
            "help": "Perturb only trainable parameters whose name matches this regex (re.search); default "
            "None = every parameter with requires_grad (with PEFT: the adapters)."
        },
    )
    learning_rate: float = field(
        default=5e-4,
        metadata={
            "help": "α of the ES update θ += α·(1/P)·Σ F_i·sign_i·ε_i, no 1/σ (es-at-scale's convention; "
            "default 5e-4). A scheduler other than `constant` scales it per iteration."
        },
    )
    lr_scheduler_type: str = field(default="constant", metadata={"help": "Schedule of α (default constant)."})
    beta: float = field(default=0.0, metadata={"help": "Must stay 0: ES has no KL term."})
    disable_dropout: bool = field(
        default=True,
        metadata={
            "help": "Turn dropout off in the policy (default true): a member's reward should measure its weights, "
            "not dropout noise."
        },
    )
    max_grad_norm: float = field(default=0.0, metadata={"help": "Unused by ES (no gradients); 0 skips clipping."})
    num_generations: int | None = field(
        default=None,
        metadata={"help": "Completions per prompt per member (default 8; with `greedy`, 1 and it may only be 1)."},
    )
    greedy: bool = field(
        default=False,
        metadata={
            "help": "Decode greedily, one completion per prompt, as es-at-scale evaluates members (default false): "
            "a member's reward then depends on its weights alone, and no prompt is generated twice."
        },
    )

    def __post_init__(self):
        self._refuse_distributed_backends()
        refuse_negative_learning_rate(self)
        problems = []
        if self.num_generations is None:
            self.num_generations = 1 if self.greedy else GRPO_DEFAULT_NUM_GENERATIONS
        if self.greedy and self.num_generations != 1:
            problems.append(
                f"num_generations={self.num_generations} with greedy=true: greedy decoding gives every copy of a "
                "prompt the same completion; leave num_generations unset (or 1)"
            )
        if self.population_size < 1:
            problems.append(f"population_size={self.population_size}: set at least 1")
        elif self.population_size == 1 and not self.antithetic:
            problems.append(
                "population_size=1 without antithetic: a lone member's shaped fitness is always 0 (unshaped, the "
                "update is a random walk), so the weights never learn; set population_size >= 2"
            )
        if self.antithetic and self.population_size % 2:
            problems.append(
                f"population_size={self.population_size} is odd but antithetic=true pairs members (s, +1), (s, -1): "
                "set an even population_size or antithetic: false"
            )
        if not self.sigma > 0:
            problems.append(f"sigma={self.sigma}: set a positive perturbation scale such as 1e-3")
        if self.fitness_shaping not in FITNESS_MODES:
            problems.append(f"fitness_shaping={self.fitness_shaping!r}: set one of {', '.join(FITNESS_MODES)}")
        if self.prompts_per_iteration < 1:
            problems.append(f"prompts_per_iteration={self.prompts_per_iteration}: set at least 1")
        if self.beta != 0.0:
            problems.append(f"beta={self.beta}: ES has no KL term, set beta: 0")
        if self.gradient_accumulation_steps != 1:
            problems.append(
                f"gradient_accumulation_steps={self.gradient_accumulation_steps}: one ES iteration is one step, set 1"
            )
        if self.num_iterations != 1:
            problems.append(f"num_iterations={self.num_iterations}: ES reuses no generations, set 1")
        if self.steps_per_generation not in (None, 1) or self.generation_batch_size is not None:
            problems.append("steps_per_generation/generation_batch_size: ES derives them, leave both unset")
        if self.es_param_regex is not None:
            try:
                re.compile(self.es_param_regex)
            except re.error as error:
                problems.append(f"es_param_regex={self.es_param_regex!r} is not a regex ({error})")
        member_batch = self.prompts_per_iteration * self.num_generations
        if self.per_device_train_batch_size not in (TRAINING_ARGUMENTS_DEFAULT_BATCH_SIZE, member_batch):
            problems.append(
                f"per_device_train_batch_size={self.per_device_train_batch_size}: ES sets it to prompts_per_iteration "
                f"× num_generations = {member_batch}; set prompts_per_iteration instead"
            )
        if "seed" in (self.generation_kwargs or {}):
            problems.append(
                "generation_kwargs.seed: ES seeds each member's sampling itself (one seed per iteration, common to "
                "all members); a fixed seed would give every copy of a prompt the same completion, remove it"
            )
        if self.use_vllm and self.vllm_mode == "colocate" and member_batch % self.vllm_tensor_parallel_size:
            problems.append(
                f"vllm_tensor_parallel_size={self.vllm_tensor_parallel_size}: the processes of a TP group share each "
                f"member's {member_batch} completions (prompts_per_iteration × num_generations); make that a "
                "multiple of it"
            )
        if problems:
            raise ValueError("Invalid ESConfig: " + "; ".join(problems))
        self.per_device_train_batch_size = member_batch
        if self.greedy:
            # GRPOConfig insists on groups of >= 2 completions (GRPO's advantages need them); ES does not use
            # groups, so its checks run on a stand-in of 2 and the one-completion values are set after them.
            self.num_generations, self.per_device_train_batch_size = 2, 2 * member_batch
            super().__post_init__()
            self.num_generations, self.per_device_train_batch_size = 1, member_batch
            self.generation_batch_size = member_batch * self.world_size
        else:
            super().__post_init__()
        self._refuse_unsupported_vllm_layouts()

    def _refuse_unsupported_vllm_layouts(self):
        """Layouts known only once the process count is (after GRPOConfig's setup), still before any model loads."""
        if not self.use_vllm:
            return
        if self.vllm_mode == "server" and self.world_size > 1:
            raise ValueError(
                f"ES with vLLM server mode needs one training process per server, got {self.world_size}: TRL pushes "
                "the main process's weights and scores every process's prompts with them; use vllm_mode: colocate "
                "(one engine per process) or launch one process"
            )
        if self.vllm_mode == "colocate" and self.world_size % self.vllm_tensor_parallel_size:
            raise ValueError(
                f"vllm_tensor_parallel_size={self.vllm_tensor_parallel_size} must divide the {self.world_size} "
                "training processes (each TP group is that many processes); change one of them"
            )

    def _refuse_distributed_backends(self):
        if self.deepspeed or os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
            raise ValueError(
                "ESTrainer does not run under DeepSpeed: ES keeps a full fp32 master of the perturbed parameters on "
                "every process and never shards them. Launch with recipes/accelerate/ddp.yaml (or cpu.yaml) and "
                "unset `deepspeed`."
            )
        if self.fsdp or os.environ.get("ACCELERATE_USE_FSDP", "false").lower() == "true":
            raise ValueError(
                "ESTrainer does not run under FSDP: ES keeps a full fp32 master of the perturbed parameters on every "
                "process. Launch with recipes/accelerate/ddp.yaml and unset `fsdp`."
            )
