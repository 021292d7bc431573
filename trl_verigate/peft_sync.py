"""Weight syncs into vLLM that leave a PEFT model's frozen base weights bit for bit as they were.

TRL's `VLLMGeneration.sync_weights` pushes a PEFT model into vLLM by merging the adapters into the base weights,
reading them, and unmerging: `w <- (w + d) - d` in the base's dtype. In bf16 that is not `w` (tests/test_peft_sync.py:
12219 of the 12480 LoRA-wrapped base weights of the tiny bf16 policy change over 200 syncs with moving adapters), so
the base drifts at every sync, and the saved adapter, later applied to the untouched base, is not the policy that
was trained. `FrozenBase` copies the weights the
adapters merge into once, while they are still the loaded ones, and writes them back after every sync;
`keep_base_exact_across_syncs` installs that around a trainer's `sync_weights`. ESTrainer, which syncs once per
population member, and the GRPO trainers, once per optimizer step, share it.

Under DeepSpeed ZeRO-3 TRL merges inside `GatheredParameters` without a modifier rank, which discards the changes
when the parameters are partitioned again, so partitioned parameters need no copy and get none.
"""

from __future__ import annotations

import functools

import torch


def merged_into(model: torch.nn.Module) -> dict[str, torch.nn.Parameter]:
    """The frozen weights PEFT merges adapters into (those under a tuner layer's `base_layer`), by name; {} when
    `model` is no PEFT model."""
    if not hasattr(model, "peft_config"):
        return {}
    return {
        name: param
        for name, param in model.named_parameters()
        if ".base_layer." in name and not param.requires_grad and not hasattr(param, "ds_tensor")
    }


class FrozenBase:
    """An exact copy of a PEFT model's frozen base weights (on their own device), and `restore` to write it back."""

    def __init__(self, model: torch.nn.Module):
        self.params = merged_into(model)
        self.values = {name: param.detach().clone() for name, param in self.params.items()}

    @torch.no_grad()
    def restore(self) -> None:
        for name, param in self.params.items():
            param.copy_(self.values[name])


def keep_base_exact_across_syncs(trainer) -> FrozenBase | None:
    """Make `trainer.vllm_generation.sync_weights` restore the PEFT base bit for bit after each sync.

    Returns the `FrozenBase` it restores from, or None when nothing is merged: no vLLM, or no PEFT model. Call it
    once the trainer's model is in place (end of `__init__`), before the first sync.
    """
    if not getattr(trainer, "use_vllm", False):
        return None
    base = FrozenBase(trainer.accelerator.unwrap_model(trainer.model))
    if not base.params:
        return None
    generation = trainer.vllm_generation
    sync_weights = generation.sync_weights

    @functools.wraps(sync_weights)
    def sync_then_restore(*args, **kwargs):
        try:
            return sync_weights(*args, **kwargs)
        finally:
            # Also after a failed sync, which may stop with the adapters merged.
            base.restore()

    generation.sync_weights = sync_then_restore
    return base
