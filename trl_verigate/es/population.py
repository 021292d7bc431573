"""The population of an ES iteration and the fitness of its members."""

from __future__ import annotations

import hashlib

import torch

FITNESS_MODES = ("zscore", "centered_rank", "none")
ZSCORE_EPSILON = 1e-8


def population_seeds(base_seed: int, iteration: int, population_size: int, antithetic: bool) -> list[tuple[int, int]]:
    """The P members (seed, sign) of iteration t, a pure function of (base_seed, t).

    Seed j of iteration t is the first 31 bits of BLAKE2b-64("es-population:{base_seed}:{t}:{j}"), so any process
    and any later replay draws the same list. Member i's weights are θ + σ·sign_i·ε(seed_i).

    - antithetic=True: P/2 seeds s_0..s_{P/2−1}, members [(s_0, +1), (s_0, −1), (s_1, +1), (s_1, −1), ...]; P even.
    - antithetic=False: P seeds, every sign +1.
    """
    if population_size < 1:
        raise ValueError(f"population_size must be at least 1, got {population_size}")
    if antithetic and population_size % 2:
        raise ValueError(
            f"population_size={population_size} is odd, but antithetic sampling pairs members (s, +1), (s, -1); "
            "set an even population_size or antithetic: false"
        )
    if iteration < 0:
        raise ValueError(f"iteration must be non-negative, got {iteration}")
    num_seeds = population_size // 2 if antithetic else population_size

    def seed(j: int) -> int:
        digest = hashlib.blake2b(f"es-population:{base_seed}:{iteration}:{j}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") & 0x7FFFFFFF

    if antithetic:
        return [(seed(j), sign) for j in range(num_seeds) for sign in (1, -1)]
    return [(seed(j), 1) for j in range(num_seeds)]


def _average_ranks(values: torch.Tensor) -> torch.Tensor:
    """0-based ranks in ascending order; tied values share the mean of the ranks they span."""
    order = torch.argsort(values, stable=True)
    ranks = torch.empty_like(values, dtype=torch.float64)
    sorted_values = values[order]
    start = 0
    count = len(values)
    while start < count:
        stop = start
        while stop + 1 < count and sorted_values[stop + 1] == sorted_values[start]:
            stop += 1
        ranks[order[start : stop + 1]] = (start + stop) / 2.0
        start = stop + 1
    return ranks


def shape_fitness(rewards, mode: str = "zscore") -> torch.Tensor:
    """Fitness F (float64, shape (P,)) of the member rewards r (shape (P,)).

    - "zscore": F_i = (r_i − mean r) / (std r + 1e-8), population std (ddof 0); all r_i equal → F = 0.
    - "centered_rank": F_i = rank_i / (P − 1) − 0.5, rank_i the 0-based ascending rank, ties given their average
      rank; P = 1 → F = 0.
    - "none": F_i = r_i.
    """
    rewards = torch.as_tensor(rewards, dtype=torch.float64).flatten()
    if mode not in FITNESS_MODES:
        raise ValueError(f"fitness_shaping must be one of {FITNESS_MODES}, got {mode!r}")
    if torch.isnan(rewards).any():
        raise ValueError(f"member rewards contain NaN: {rewards.tolist()}")
    if mode == "none":
        return rewards.clone()
    if mode == "zscore":
        if torch.all(rewards == rewards[0]):
            return torch.zeros_like(rewards)
        centered = rewards - rewards.mean()
        return centered / (rewards.std(unbiased=False) + ZSCORE_EPSILON)
    if len(rewards) == 1:
        return torch.zeros_like(rewards)
    return _average_ranks(rewards) / (len(rewards) - 1) - 0.5
