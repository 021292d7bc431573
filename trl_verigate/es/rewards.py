"""One member's reward functions, started without waiting for the asynchronous ones.

TRL's `GRPOTrainer._calculate_rewards` blocks on async reward functions and all-gathers the result, which would make
each ES member wait for its own verification. Here the synchronous functions run at once (in the calling thread, as
in TRL), and the coroutines of the async ones (a Lean reward through `lean_server`) are submitted to TRL's daemon
event loop and left running: the next member generates while they verify, and `PendingRewards.result()` collects
them before the update. Inputs and outputs follow TRL's conventions (same keyword arguments, None → NaN, one
reward per completion).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future

import torch
from trl.trainer.utils import is_async_callable


def _checked(output, name: str, expected: int) -> list[float]:
    values = [float("nan") if reward is None else float(reward) for reward in output]
    if len(values) != expected:
        raise ValueError(
            f"The reward function '{name}' returned {len(values)} rewards, but {expected} were expected (one per "
            "prompt-completion pair)."
        )
    return values


class PendingRewards:
    """Rewards of one member: columns already computed, plus futures of the async columns."""

    def __init__(self, num_completions: int, num_funcs: int):
        self.values = torch.full((num_completions, num_funcs), float("nan"), dtype=torch.float32)
        self.futures: list[tuple[int, str, Future]] = []

    def result(self) -> torch.Tensor:
        """(completions, reward functions) float32, NaN where a function returned None; waits for async columns."""
        for column, name, future in self.futures:
            self.values[:, column] = torch.tensor(_checked(future.result(), name, len(self.values)))
        self.futures = []
        return self.values


def start_member_rewards(trainer, inputs: list[dict], prompts: list, completions: list, completion_ids: list):
    """Run the synchronous reward functions and submit the async ones of one member's completions; no collective."""
    keys = [key for key in inputs[0] if key not in ("prompt", "completion", "completion_ids")]
    reward_kwargs = {key: [example[key] for example in inputs] for key in keys}
    reward_kwargs.update(
        trainer_state=trainer.state, log_extra=trainer._log_completion_extra, log_metric=trainer._log_metric
    )
    if getattr(trainer, "environments", None) is not None:
        reward_kwargs["environments"] = trainer.environments
    pending = PendingRewards(len(prompts), len(trainer.reward_funcs))
    arguments = dict(prompts=prompts, completions=completions, completion_ids=completion_ids, **reward_kwargs)
    for column, (func, name) in enumerate(zip(trainer.reward_funcs, trainer.reward_func_names, strict=True)):
        if isinstance(func, torch.nn.Module):
            raise TypeError(
                f"ESTrainer does not support reward models ('{name}' is an nn.Module); wrap the model in a reward "
                "function (prompts, completions, **kwargs) -> list[float]"
            )
        if is_async_callable(func):
            future = asyncio.run_coroutine_threadsafe(func(**arguments), trainer.async_loop)
            pending.futures.append((column, name, future))
        else:
            pending.values[:, column] = torch.tensor(_checked(func(**arguments), name, len(prompts)))
    return pending


def member_reward(rewards_per_func: torch.Tensor, reward_weights: torch.Tensor) -> float:
    """r_i = mean over completions of Σ_f w_f·r_f (TRL's weighted sum, NaN terms skipped as TRL's nansum does)."""
    totals = (rewards_per_func.double() * reward_weights.double().cpu().unsqueeze(0)).nansum(dim=1)
    return float(totals.mean())
