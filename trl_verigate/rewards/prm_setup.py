"""Where and how VeriGate loads its process reward model (PRM): one device per process, a checkpoint that is known to
exist before the policy loads, and full weights on every rank under FSDP.

`prm_device` is read per process, because every training process loads its own PRM copy:

- unset: the process's own training device (``accelerator.device``);
- ``"cpu"``: the CPU, on every process;
- ``"cuda:+K"``: the process's local GPU index plus K (with 4 processes per node on 8 GPUs, ``"cuda:+4"`` puts local
  rank r's PRM on GPU r + 4, so training GPU and PRM GPU never coincide); ``"cuda"`` alone is ``"cuda:+0"``;
- a list, or a comma-separated string, of absolute devices: entry ``local_process_index`` (``"cuda:4,cuda:5"``);
- an absolute device such as ``"cuda:1"``: only with a single process, since with more it would put every process's
  copy on one GPU, which is also another rank's training GPU.

Under DeepSpeed ZeRO-3 the PRM is partitioned and its engine lives on the training device, so the PRM's inputs must
go there too: the training device wins over `prm_device`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from pathlib import Path

import torch

from trl_verigate.rewards.prm import build_step_scorer

logger = logging.getLogger(__name__)

_OFFSET_DEVICE = re.compile(r"(?P<type>[a-z]+):\+(?P<offset>\d+)")
# Values that name a folder rather than a hub id: a hub id is "name" or "namespace/name", never ./, ../, / or ~.
_PATH_PREFIXES = ("/", "./", "../", "~", ".\\", "..\\")
# The released Qwen2.5-Math-PRM checkpoints (7B, 72B); the 7B one is VeriGateConfig's default.
_QWEN_MATH_PRM_PREFIX = "Qwen/Qwen2.5-Math-PRM-"
_EXAMPLE_CHECKPOINTS = {
    "math_shepherd": "e.g. 'peiyi9979/math-shepherd-mistral-7b-prm'",
    "token_classification": "a folder written by TRL's former PRMTrainer",
}


def prm_device_entries(prm_device) -> list[str] | None:
    """`prm_device` as a list of device strings (one per local rank when there are several), or None when unset."""
    if prm_device is None:
        return None
    if isinstance(prm_device, (list, tuple)):
        entries = [str(entry).strip() for entry in prm_device]
    elif isinstance(prm_device, (str, torch.device)):
        entries = [entry.strip() for entry in str(prm_device).split(",")]
    else:
        raise ValueError(
            f"prm_device={prm_device!r} must be a device string ('cpu', 'cuda:+1'), a list of devices with one per "
            "local rank, or None."
        )
    if not entries or not all(entries):
        raise ValueError(f"prm_device={prm_device!r} has an empty entry; write e.g. 'cuda:+1' or 'cuda:4,cuda:5'.")
    return entries


def prm_device_for_process(
    prm_device,
    *,
    local_process_index: int,
    num_processes: int,
    local_device: torch.device | str,
    zero3: bool = False,
) -> torch.device:
    """The absolute device of this process's PRM (see the module docstring for what `prm_device` may be).

    Args:
        prm_device: the config value.
        local_process_index: this process's rank on its node.
        num_processes: processes in the whole run.
        local_device: this process's training device (``accelerator.device``).
        zero3: whether the PRM is partitioned by DeepSpeed ZeRO-3, whose engine runs it on ``local_device``.
    """
    local_device = torch.device(local_device)
    entries = prm_device_entries(prm_device)
    if entries is None:
        return local_device
    if len(entries) > 1:
        if local_process_index >= len(entries):
            raise ValueError(
                f"prm_device={prm_device!r} lists {len(entries)} devices, one per local rank, but there is a local "
                f"rank {local_process_index}; list one device for each process on a node."
            )
        entry = entries[local_process_index]
        if _OFFSET_DEVICE.fullmatch(entry):
            raise ValueError(
                f"prm_device={prm_device!r} mixes a list with the offset {entry!r}; list absolute devices "
                "('cuda:4,cuda:5') or give one offset ('cuda:+4')."
            )
        device = _torch_device(entry, prm_device)
    else:
        device = _single_device(entries[0], prm_device, local_device, num_processes)
    if zero3 and device != local_device:
        logger.warning(
            "prm_device=%r is ignored under DeepSpeed ZeRO-3: the PRM is partitioned and its engine runs on the "
            "training device %s, where its inputs go too.",
            prm_device,
            local_device,
        )
        return local_device
    return device


def _single_device(entry: str, prm_device, local_device: torch.device, num_processes: int) -> torch.device:
    offset = _OFFSET_DEVICE.fullmatch(entry)
    if offset is not None or entry in ("cuda", "xpu", "npu", "mlu", "musa", "hpu"):
        device_type = offset["type"] if offset else entry
        if local_device.type != device_type:
            raise ValueError(
                f"prm_device={prm_device!r} is relative to this process's {device_type} device, but it trains on "
                f"{local_device}; give an absolute device (e.g. 'cpu') or leave prm_device unset."
            )
        # A process that trains on "cuda" without an index uses the current device, which accelerate set per rank.
        local_index = local_device.index if local_device.index is not None else _current_index(device_type)
        return torch.device(device_type, local_index + (int(offset["offset"]) if offset else 0))
    device = _torch_device(entry, prm_device)
    if num_processes > 1 and device.type != "cpu":
        raise ValueError(
            f"prm_device={prm_device!r} names one device for all {num_processes} processes: each process would put "
            f"its PRM copy on {device}, which is also another rank's training device. Write prm_device='cuda:+K' for "
            "each process's own GPU plus K (e.g. 'cuda:+4' with 4 processes per node on 8 GPUs), a comma-separated "
            "list with one device per local rank ('cuda:4,cuda:5,cuda:6,cuda:7'), or leave it unset to share each "
            "process's training GPU."
        )
    return device


def launch_training_device(use_cpu: bool, local_rank: int) -> torch.device:
    """The training device accelerate will give local rank `local_rank`, known before it sets up: that index of the
    machine's accelerator (CUDA, XPU, NPU, ...; MPS has one device), or the CPU with `use_cpu` or without one."""
    accelerator = None if use_cpu else torch.accelerator.current_accelerator(check_available=True)
    if accelerator is None:
        return torch.device("cpu")
    if accelerator.type == "mps":
        return torch.device("mps")
    return torch.device(accelerator.type, local_rank)


def _current_index(device_type: str) -> int:
    module = getattr(torch, device_type, None)
    return module.current_device() if module is not None and hasattr(module, "current_device") else 0


def _torch_device(entry: str, prm_device) -> torch.device:
    try:
        return torch.device(entry)
    except (RuntimeError, TypeError) as error:
        raise ValueError(
            f"prm_device={prm_device!r}: {entry!r} is not a device; use 'cpu', 'cuda:+1' (local GPU plus 1) or a list "
            "of devices such as 'cuda:4,cuda:5'."
        ) from error


def check_prm_checkpoint(prm_model_name_or_path: str, prm_type: str | None = None) -> None:
    """Raise a ValueError naming `prm_model_name_or_path` unless it is a checkpoint folder (one with config.json) or a
    hub id that can load.

    A hub id is accepted when its config.json is in the local cache, or when the hub may be reached (downloading
    happens at load time). Checked before the policy loads, so a typo costs a second instead of a model load.
    With `prm_type`, a released Qwen2.5-Math-PRM (the config's default) is refused for any other type: setting
    `prm_type` and forgetting the path would otherwise download the 15 GB PRM only to refuse its format.
    """
    from huggingface_hub import constants, try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    value = prm_model_name_or_path
    if prm_type not in (None, "qwen_math") and value.startswith(_QWEN_MATH_PRM_PREFIX):
        example = _EXAMPLE_CHECKPOINTS.get(prm_type, "a local checkpoint folder")
        raise ValueError(
            f"prm_model_name_or_path={value!r} is a qwen_math PRM, which prm_type={prm_type!r} cannot read: set "
            f"prm_model_name_or_path to a {prm_type} checkpoint ({example}), or prm_type='qwen_math'."
        )
    path = Path(value).expanduser()
    fix = (
        "set prm_model_name_or_path to a folder holding the PRM's config.json, weights and tokenizer (e.g. one written "
        "by `python -m trl_verigate.tiny DIR`), or to a hub id that is downloaded (`hf download ID`) when "
        "HF_HUB_OFFLINE=1; prm_type='symbolic' needs no model."
    )
    if path.is_dir():
        # Every checkpoint from_pretrained reads has one; a run's output folder or a parent folder does not.
        if not (path / "config.json").is_file():
            raise ValueError(f"prm_model_name_or_path={value!r} is a folder without config.json, no checkpoint: {fix}")
        return
    if path.exists():
        raise ValueError(f"prm_model_name_or_path={value!r} is a file, not a checkpoint folder: {fix}")
    looks_like_path = value.startswith(_PATH_PREFIXES) or value.count("/") > 1 or os.sep != "/" and os.sep in value
    try:
        validate_repo_id(value)
        is_repo_id = not looks_like_path
    except HFValidationError:
        is_repo_id = False
    if not is_repo_id:
        raise ValueError(f"prm_model_name_or_path={value!r} is not an existing folder (nor a hub id): {fix}")
    cached = try_to_load_from_cache(value, "config.json", cache_dir=constants.HF_HUB_CACHE)
    if isinstance(cached, str):
        return
    if constants.is_offline_mode():
        raise ValueError(
            f"prm_model_name_or_path={value!r} is no local folder, and the hub id is not in the cache "
            f"({constants.HF_HUB_CACHE}) while the hub is offline (HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE): {fix}"
        )


@contextlib.contextmanager
def _full_weights_on_every_rank():
    """Load models whole on every rank although FSDP's CPU-RAM-efficient loading is on.

    With `FSDP_CPU_RAM_EFFICIENT_LOADING` (set by accelerate's FSDP configs) transformers gives every rank but local
    rank 0 all-zero weights, expecting FSDP to broadcast rank 0's when it wraps the model. The PRM is never wrapped:
    each process scores its own completions with its own full copy, as under DDP, so it must load whole.
    """
    name = "FSDP_CPU_RAM_EFFICIENT_LOADING"
    previous = os.environ.get(name)
    os.environ[name] = "false"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def load_step_scorer(args, device: torch.device):
    """The step scorer `args` (a VeriGateConfig) asks for, with its model on `device`, whole on every rank."""
    with _full_weights_on_every_rank():
        return build_step_scorer(
            args.prm_type,
            model_name_or_path=args.prm_model_name_or_path,
            batch_size=args.prm_batch_size,
            device=device,
            torch_dtype=args.prm_torch_dtype,
        )
