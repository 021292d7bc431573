"""The CPU kernel of es_noise: noise_kernel.c, built with the system C compiler on first use, called through ctypes.

The kernel computes the values `noise._normal_` defines with the same IEEE-754 float32 operations in the same order,
one pass per element instead of ~115 torch ops per chunk (tests compare the two paths and the numpy twin bit for
bit); `noise.add_scaled_noise` also uses it to write θ + σ·ε or accumulate c·ε without a noise tensor. It is built once per (source, compiler, flags, CPU) into a per-user cache directory:

    $XDG_CACHE_HOME (or ~/.cache)/trl_verigate/es_noise/<sha256 of those>.so

with `$CC` (default `cc`) and `BUILD_FLAGS`: -march=native because the cache key holds the CPU's flags, and
-ffp-contract=off -fno-fast-math so that no multiply-add is fused and nothing reassociated (either would change
bits). Without a compiler, or when the build or load fails, `load_kernel` returns None and logs one warning; the
torch ops (the definition, and the path on every other device) then compute the noise, only slower.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shlex
import subprocess
import tempfile
import threading
from pathlib import Path

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("noise_kernel.c")
BUILD_FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-fast-math", "-shared", "-fPIC")
BUILD_TIMEOUT_SECONDS = 120

_lock = threading.Lock()
_loaded: dict[str, object] = {}  # "kernel": the ctypes library or None, once load_kernel has run


def _compiler() -> list[str]:
    return shlex.split(os.environ.get("CC") or "cc")


def _cpu_description() -> str:
    """The CPU's model and feature flags (what -march=native compiles for), or the platform's machine name."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.machine() + " " + platform.processor()
    wanted = [line for line in lines if line.startswith(("model name", "flags", "Features", "CPU part"))]
    return "\n".join(sorted(set(wanted))) or platform.machine()


def cache_directory() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "trl_verigate" / "es_noise"


def _build(compiler: list[str]) -> Path:
    """The shared library for this source, compiler and CPU: from the cache, or compiled into it (atomically, so
    processes starting together never load a half-written file)."""
    version = subprocess.run(
        [*compiler, "--version"], capture_output=True, text=True, timeout=BUILD_TIMEOUT_SECONDS, check=True
    ).stdout
    key = hashlib.sha256(
        b"\0".join(part.encode() for part in (SOURCE.read_text(), " ".join(compiler), version, " ".join(BUILD_FLAGS)))
        + _cpu_description().encode()
    ).hexdigest()[:32]
    directory = cache_directory()
    library = directory / f"noise_kernel-{key}.so"
    if library.is_file():
        return library
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        built = Path(scratch) / library.name
        result = subprocess.run(
            [*compiler, *BUILD_FLAGS, "-o", str(built), str(SOURCE)],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_SECONDS,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(compiler)} exited with {result.returncode}: {result.stderr.strip()[-2000:]}")
        os.replace(built, library)
    return library


def load_kernel():
    """The built library (a ctypes.CDLL with `es_noise_fill`, `es_noise_scaled_add` and `es_noise_stages` typed), or
    None with one warning if it cannot be built or loaded."""
    with _lock:
        if "kernel" not in _loaded:
            compiler = _compiler()
            try:
                library = ctypes.CDLL(str(_build(compiler)))
            except (OSError, subprocess.SubprocessError, RuntimeError) as error:
                logger.warning(
                    "es_noise: could not build its CPU kernel with %r (%s); computing the noise with torch ops "
                    "instead (the same values, several times slower). Install a C compiler or set CC to use it.",
                    " ".join(compiler),
                    error,
                )
                library = None
            else:
                constants = [ctypes.POINTER(ctypes.c_float), ctypes.c_uint32, ctypes.c_uint32]  # see noise.py
                library.es_noise_fill.restype = None
                library.es_noise_fill.argtypes = [
                    ctypes.c_void_p,  # out: float32, contiguous
                    ctypes.c_int64,  # count
                    ctypes.c_uint64,  # first element counter
                    *[ctypes.c_uint32] * 4,  # key words k0..k3
                    *constants,
                ]
                library.es_noise_scaled_add.restype = None
                library.es_noise_scaled_add.argtypes = [
                    ctypes.c_void_p,  # out: float32, contiguous (may be addend)
                    ctypes.c_void_p,  # addend: float32, contiguous
                    ctypes.c_int64,  # count (element counters 0..count − 1)
                    *[ctypes.c_uint32] * 4,  # key words k0..k3
                    ctypes.c_float,  # scale
                    *constants,
                ]
                library.es_noise_stages.restype = None
                library.es_noise_stages.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64, *constants]
            _loaded["kernel"] = library
        return _loaded["kernel"]


def forget_kernel() -> None:
    """Make the next `load_kernel` look for (or build) the library again (tests change CC or the cache)."""
    with _lock:
        _loaded.clear()
