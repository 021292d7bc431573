"""es_state.json: the whole ES run as the base model plus its (seeds, rewards) history, and its replay.

    {
      "format": "trl-verigate-es-state", "format_version": 1,
      "noise_version": "es-noise-v1",
      "base_model": {"name_or_path": ..., "revision": ..., "dtype": "bfloat16", "parameters_sha256": ...},
      "sigma": ..., "learning_rate": ..., "weight_decay": ..., "fitness_shaping": ..., "population_size": ...,
      "antithetic": ..., "seed": ...,
      "parameters": [names of the perturbed parameters, in update order],
      "history": [{"iteration": t, "seeds": [...], "signs": [...], "rewards": [...], "fitness": [...],
                   "learning_rate": α_t, "update_norm": ...}, ...]
    }

`parameters_sha256` hashes the base values of the perturbed parameters (names and raw bytes, in order), so a replay
onto other base weights is refused instead of silently producing another model. Floats are written with Python's
shortest round-tripping repr, so fitness values and α_t come back bit for bit.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable

import torch

from trl_verigate.es.noise import NOISE_VERSION
from trl_verigate.es.update import es_update

STATE_FORMAT = "trl-verigate-es-state"
STATE_FORMAT_VERSION = 1
STATE_FILENAME = "es_state.json"


def parameters_sha256(params: dict[str, torch.Tensor]) -> str:
    """SHA-256 over (name, dtype, shape, raw bytes) of each parameter, in the dict's order."""
    digest = hashlib.sha256()
    for name, param in params.items():
        tensor = param.detach().contiguous().cpu()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}\n".encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def history_entry(iteration, members, rewards, fitness, learning_rate, update_norm) -> dict:
    return {
        "iteration": int(iteration),
        "seeds": [int(seed) for seed, _ in members],
        "signs": [int(sign) for _, sign in members],
        "rewards": [float(r) for r in rewards],
        "fitness": [float(f) for f in fitness],
        "learning_rate": float(learning_rate),
        "update_norm": float(update_norm),
    }


def write_state(state: dict, path: str) -> None:
    """Write atomically (a crash mid-write leaves the previous file)."""
    temporary = f"{path}.tmp"
    with open(temporary, "w") as handle:
        json.dump(state, handle, indent=1)
    os.replace(temporary, path)


def read_state(path: str) -> dict:
    if os.path.isdir(path):
        path = os.path.join(path, STATE_FILENAME)
    with open(path) as handle:
        state = json.load(handle)
    if state.get("format") != STATE_FORMAT:
        raise ValueError(f"{path} is not an ES state file (format {state.get('format')!r}, expected {STATE_FORMAT!r})")
    if state.get("format_version") != STATE_FORMAT_VERSION:
        raise ValueError(f"{path} has format_version {state.get('format_version')}; this version reads 1")
    if state.get("noise_version") != NOISE_VERSION:
        raise ValueError(
            f"{path} was written with noise generator {state.get('noise_version')!r}, but this trl-verigate has "
            f"{NOISE_VERSION!r}; replay it with the trl-verigate version that wrote it"
        )
    for position, entry in enumerate(state["history"]):
        if entry["iteration"] != position:
            raise ValueError(
                f"{path}: history entry {position} has iteration {entry['iteration']}; entries must be 0..n-1"
            )
    return state


def replay_history(
    master: dict[str, torch.Tensor], history: Iterable[dict], weight_decay: float, progress: bool = False
) -> None:
    """Apply each recorded iteration's update to the fp32 master, in order (the same `es_update` training ran)."""
    history = list(history)
    if progress:
        from tqdm.auto import tqdm

        history = tqdm(history, desc="replaying ES iterations", unit="it")
    for entry in history:
        members = list(zip(entry["seeds"], entry["signs"], strict=True))
        es_update(master, members, entry["fitness"], entry["learning_rate"], weight_decay)
