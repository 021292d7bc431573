"""Helpers for tests that launch servers or training processes: loopback ports and an offline environment."""

import os
import socket
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def offline_env(run_dir: Path, **extra: str) -> dict:
    """This process's environment for a child run: no hub access, a private datasets cache, one thread per op."""
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        HF_DATASETS_CACHE=str(Path(run_dir) / "datasets_cache"),
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS="1",
    )
    env.update(extra)
    return env
