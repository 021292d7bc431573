"""No pure-bf16 AdamW: trainable weights in bf16/fp16 are refused unless DeepSpeed or FSDP keeps an fp32 master.

Under plain DDP or one process the optimizer steps the weights in the dtype they were loaded in, and `bf16: true`
only autocasts the compute: an AdamW step of lr 1e-6 rounds away in bf16 for most weights (`make gpu-check`'s
ddp_dtype_step row). DeepSpeed ZeRO and FSDP keep an fp32 master copy themselves.

Two checks share the rule. `load_dtype` predicts, before anything loads, the dtype `from_pretrained` will give a
policy from whatever sets it (`model_init_kwargs.dtype`, its older alias `torch_dtype`, ``auto`` or nothing: the
checkpoint's own), so a recipe refuses in a second (recipes/recipe_tools.py). `check_master_weights`, run by the
GRPO trainers once the model is in place, reads the trainable parameters themselves, which no setting can bypass
(a model passed as an object, bf16 PEFT adapters).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

LOW_PRECISION = (torch.bfloat16, torch.float16)
FIX = (
    "load the policy in float32 (model_init_kwargs dtype: float32; bf16: true still computes in bf16) or launch "
    "with DeepSpeed ZeRO (recipes/accelerate/zero2.yaml) or FSDP, which keep an fp32 master"
)


def _checkpoint_dtype(model_name_or_path: str) -> str | None:
    """The dtype ``auto`` loads: config.json's ``dtype``/``torch_dtype``, else the first floating tensor's dtype in a
    local safetensors file (transformers' own order); None when neither can be read here."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model_name_or_path)
    except (OSError, ValueError):
        return None
    dtype = getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)
    if dtype is not None:
        return str(dtype).removeprefix("torch.")
    folder = Path(model_name_or_path).expanduser()
    for weights in sorted(folder.glob("*.safetensors")) if folder.is_dir() else []:
        with weights.open("rb") as file:
            header = json.loads(file.read(int.from_bytes(file.read(8), "little")))
        names = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64"}
        for name, entry in header.items():
            if name != "__metadata__" and entry["dtype"] in names:
                return names[entry["dtype"]]
    return None


def load_dtype(model_name_or_path: str, model_init_kwargs: dict | None) -> tuple[str | None, str]:
    """(dtype name, the setting that decides it) for ``from_pretrained(model_name_or_path, **model_init_kwargs)``.

    transformers takes ``dtype`` when it is not None, else ``torch_dtype``, else ``"auto"``; ``"auto"`` is the
    checkpoint's dtype. The name is None when the checkpoint cannot be read here.
    """
    kwargs = model_init_kwargs or {}
    for field in ("dtype", "torch_dtype"):
        if kwargs.get(field) is not None:
            value = str(kwargs[field]).removeprefix("torch.")
            setting = f"model_init_kwargs.{field}={value}"
            if value != "auto":
                return value, setting
            return _checkpoint_dtype(model_name_or_path), f"{setting} (the checkpoint's dtype)"
    return _checkpoint_dtype(model_name_or_path), "no dtype set (the checkpoint's dtype)"


def keeps_fp32_master(args) -> bool:
    """Whether DeepSpeed or FSDP will wrap the model (TrainingArguments fields, or accelerate's launch settings)."""
    flags = ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_FSDP")
    launched = any(os.environ.get(flag, "false").lower() == "true" for flag in flags)
    return bool(getattr(args, "deepspeed", None) or getattr(args, "fsdp", None) or launched)


def check_master_weights(model: torch.nn.Module, args, has_own_optimizer: bool = False) -> None:
    """After the model is in place: refuse trainable bf16/fp16 parameters that AdamW would step without a master.

    `has_own_optimizer`: the trainer was given an optimizer, whose handling of low precision is its own.
    """
    optim = str(getattr(args.optim, "value", args.optim))  # an OptimizerNames member or its value
    if has_own_optimizer or keeps_fp32_master(args) or "adamw" not in optim.lower():
        return
    low = {}
    for name, param in model.named_parameters():
        if param.requires_grad and param.dtype in LOW_PRECISION:
            low.setdefault(str(param.dtype).removeprefix("torch."), name)
    if low:
        dtype, name = next(iter(low.items()))
        raise ValueError(
            f"the policy trains {dtype} parameters (e.g. {name}), and without DeepSpeed or FSDP AdamW "
            f"(optim={optim}) steps them with no fp32 master copy (most updates at learning_rate "
            f"{args.learning_rate:g} round away); {FIX}."
        )
