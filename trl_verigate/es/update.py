"""Perturb, restore and update the ES parameters through an fp32 master copy.

The master holds θ, the current value of every perturbed parameter, in float32, whatever the model's dtype:

- perturb(s, sign): write round(θ + σ·sign·ε(s)) into the model;
- restore: write round(θ) back, bit for bit what the model held before the perturbation (no subtraction of noise,
  which in bf16 does not give the original weights back);
- update: change θ, then write round(θ) into the model. Updates of size α·ε accumulate in fp32 even when they are
  below the model dtype's resolution (bf16 would round most of them away).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable

import torch

from trl_verigate.es.noise import add_scaled_noise_each, noise_batches


def _f32(value: float, device) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.float32, device=device)


def _one_intra_op_thread(function):
    """Run `function` with one intra-op thread when its first argument (a dict of tensors) is on the CPU.

    Perturb, restore and update are memory-bound passes beside the noise ops, whose chunks run in one thread each
    (`noise.CHUNK_ELEMENTS`), so a second thread saves them little; but every op split over threads (above torch's
    grain of 32768 elements) waits at a barrier for all of them, and on a shared, loaded CPU a descheduled thread
    turns that wait into a scheduler time slice per op. Measured on this project's 2 loaded cores, tiny policy: update 45-97 ms with two
    threads, 1.5 ms with one; restore 5-10 ms vs 0.07 ms. The values are the same either way (elementwise ops).
    """

    @functools.wraps(function)
    def wrapper(tensors: dict[str, torch.Tensor], *args, **kwargs):
        previous = torch.get_num_threads()
        if previous == 1 or not any(tensor.device.type == "cpu" for tensor in tensors.values()):
            return function(tensors, *args, **kwargs)
        torch.set_num_threads(1)
        try:
            return function(tensors, *args, **kwargs)
        finally:
            torch.set_num_threads(previous)

    return wrapper


def make_master(params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """θ: a contiguous float32 copy of each parameter, on the parameter's device.

    Contiguous whatever the parameter's strides, so that perturb and es_update write noise into it in row-major
    order (`add_scaled_noise` needs a contiguous `out`) for a transposed or strided parameter too; `param.copy_(θ)`
    writes it back through the parameter's strides."""
    return {
        name: param.detach().to(torch.float32, copy=True, memory_format=torch.contiguous_format)
        for name, param in params.items()
    }


@torch.no_grad()
@_one_intra_op_thread
def write_master(params: dict[str, torch.Tensor], master: dict[str, torch.Tensor]) -> None:
    """Model ← round(θ) (also the restore after a perturbation)."""
    for name, param in params.items():
        param.copy_(master[name])


@torch.no_grad()
@_one_intra_op_thread
def perturb(params: dict[str, torch.Tensor], master: dict[str, torch.Tensor], seed: int, sign: int, sigma: float):
    """Model ← round(θ + f32(σ·sign)·ε(seed)), ε keyed per parameter name, never held whole.

    θ + f32(σ·sign)·ε is rounded to float32, then to the parameter's dtype (`add_scaled_noise_each`, chunk by chunk,
    small tensors together), straight into each parameter.
    """
    add_scaled_noise_each({name: (param.detach(), master[name]) for name, param in params.items()}, seed, sigma * sign)


def seed_coefficients(members: Iterable[tuple[int, int]], fitness) -> list[tuple[int, float]]:
    """[(s, c_s)] with c_s = Σ_{i: s_i = s} F_i·sign_i, seeds in order of first appearance (an antithetic pair's two
    members share one noise draw)."""
    coefficients: dict[int, float] = {}
    for (seed, sign), value in zip(members, [float(f) for f in fitness], strict=True):
        coefficients[seed] = coefficients.get(seed, 0.0) + value * sign
    return list(coefficients.items())


@torch.no_grad()
@_one_intra_op_thread
def es_update(
    master: dict[str, torch.Tensor],
    members: list[tuple[int, int]],
    fitness,
    learning_rate: float,
    weight_decay: float = 0.0,
) -> float:
    """θ ← θ·(1 − α·wd), then θ ← θ + α·(1/P)·Σ_i F_i·sign_i·ε(s_i); returns ‖Δθ‖₂ of the second step.

    α = `learning_rate`, P = len(members), F = `fitness` (shape_fitness's output), in place on the fp32 master.
    All F_i = 0 (e.g. equal rewards under z-scoring) means no update at all, weight decay included. Per tensor:
    acc = Σ_s f32(c_s)·ε(s) in the seeds' order, then θ += f32(α/P)·acc, each a separate rounded fp32 op, so every
    process and every replay computes the same bits.
    """
    fitness = [float(f) for f in fitness]
    if len(fitness) != len(members):
        raise ValueError(f"{len(fitness)} fitness values for {len(members)} members")
    if not any(fitness):
        return 0.0
    coefficients = [(seed, c) for seed, c in seed_coefficients(members, fitness) if c != 0.0]
    step = learning_rate / len(members)
    squared_norm = 0.0
    for theta in master.values():
        if weight_decay:
            theta.mul_(_f32(1.0 - learning_rate * weight_decay, theta.device))
    if not coefficients:
        return 0.0
    for names in noise_batches(master):  # one batch's accumulators alive at a time
        accumulated = {name: torch.zeros_like(master[name]) for name in names}
        for seed, coefficient in coefficients:
            add_scaled_noise_each({name: (acc, acc) for name, acc in accumulated.items()}, seed, coefficient)
        for name, acc in accumulated.items():
            acc.mul_(_f32(step, acc.device))
            master[name].add_(acc)
            squared_norm += float(acc.double().square().sum())
    return math.sqrt(squared_norm)
