"""Where and in what dtype a PRM runs: the device and dtype settings checked, and the dtype DeepSpeed ZeRO-3 imposes.

Checked before any weights load, so a wrong setting costs a second, not a checkpoint load.
"""

from __future__ import annotations

import torch


def resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise ValueError(f"device={device!r} is not a torch device; use e.g. 'cpu', 'cuda' or 'cuda:1'") from error
    # Checked here because torch only fails at the first tensor moved there, after the checkpoint has loaded.
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"device={str(resolved)!r} but there is no CUDA device (torch.cuda.is_available() is False: no GPU "
                "visible or a CPU-only torch build); use device='cpu', or leave it unset to take CUDA when available"
            )
        count = torch.cuda.device_count()
        if resolved.index is not None and resolved.index >= count:
            visible = "cuda:0" if count == 1 else f"cuda:0 to cuda:{count - 1}"
            raise ValueError(
                f"device={str(resolved)!r} but only {count} CUDA device{'s' if count != 1 else ''} visible; use "
                f"{visible} (CUDA_VISIBLE_DEVICES renumbers the GPUs it keeps from 0)"
            )
    return resolved


def resolve_dtype(torch_dtype: str | torch.dtype | None) -> str | torch.dtype | None:
    if torch_dtype is None or isinstance(torch_dtype, torch.dtype) or torch_dtype == "auto":
        return torch_dtype
    dtype = getattr(torch, str(torch_dtype), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(
            f"torch_dtype={torch_dtype!r} is not a torch dtype; use 'bfloat16', 'float16', 'float32' or 'auto'"
        )
    return dtype


def zero3_build_dtype() -> torch.dtype | None:
    """The dtype DeepSpeed ZeRO-3 builds every model in, or None when ZeRO-3 is off.

    Under ZeRO-3 transformers builds each model inside ``deepspeed.zero.Init``, which partitions the weights in the
    dtype of the DeepSpeed config (`Init._set_dtype`: bf16 when ``bf16.enabled``, fp16 when ``fp16.enabled``, else
    fp32), whatever dtype ``from_pretrained`` was asked for.
    """
    from transformers.integrations import is_deepspeed_zero3_enabled
    from transformers.integrations.deepspeed import deepspeed_config

    if not is_deepspeed_zero3_enabled():
        return None
    config = deepspeed_config() or {}

    def enabled(*keys: str) -> bool:
        return any(str((config.get(key) or {}).get("enabled", False)).lower() == "true" for key in keys)

    # DeepSpeed reads the bf16 block under either name.
    if enabled("bf16", "bfloat16"):
        return torch.bfloat16
    return torch.float16 if enabled("fp16") else torch.float32


def check_dtype_under_zero3(torch_dtype: str | torch.dtype | None, setting: str = "prm_torch_dtype") -> None:
    """Refuse a PRM dtype that DeepSpeed ZeRO-3 would silently replace by its config's (see `zero3_build_dtype`).

    Unset (or ``"auto"``) asks for no dtype in particular and passes; under ZeRO-3 it is the config's dtype.
    """
    requested = resolve_dtype(torch_dtype)
    built = zero3_build_dtype()
    if not isinstance(requested, torch.dtype) or built is None or requested == built:
        return
    built_name = str(built).removeprefix("torch.")
    source = {torch.bfloat16: "bf16.enabled", torch.float16: "fp16.enabled"}.get(
        built, "neither bf16.enabled nor fp16.enabled"
    )
    raise ValueError(
        f"{setting}={torch_dtype!r} cannot be honoured under DeepSpeed ZeRO-3, which builds every model, the PRM "
        f"included, in its config's dtype: {built_name} ({source} in the DeepSpeed config, set by accelerate's "
        f"mixed_precision). Set {setting} to {built_name!r} or leave it unset, or train with ZeRO-2, where the PRM "
        "stays whole and loads in the dtype asked for."
    )
