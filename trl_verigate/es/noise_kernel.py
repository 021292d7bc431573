"""The CPU kernel of es_noise: noise_kernel.c, built with the system C compiler on first use, called through ctypes.

The kernel computes the values `noise._normal_` defines with the same IEEE-754 float32 operations in the same order,
one pass per element instead of ~115 torch ops per chunk (tests compare the two paths and the numpy twin bit for
bit); `noise.add_scaled_noise` also uses it to write θ + σ·ε or accumulate c·ε without a noise tensor. It is built
once per (source, compiler, flags, CPU) into a per-user cache directory:

    $XDG_CACHE_HOME (or ~/.cache)/trl_verigate/es_noise/<sha256 of those>.so

with `$CC` (default `cc`) and `BUILD_FLAGS`: -march=native because the cache key holds the CPU's flags and what the
compiler makes of -march=native; -ffp-contract=off -fno-fast-math -fno-unsafe-math-optimizations so that no
multiply-add is fused, nothing reassociated (either would change bits) and crtfastmath.o, which switches on
flush-to-zero for the whole process when loaded, is not linked. A cached file that does not load is built again;
an unwritable cache directory means a build in a temporary directory (every process builds, one warning).

Every load is checked (`_SelfTest`, a few ms once per process): the kernel must give the torch ops' bits, and
loading it must not change how this thread treats denormals. A compiler or wrapper that adds its own flags after
ours (-ffp-contract=fast, -ffast-math) fails that check: the library is deleted from the cache and refused. Whenever
the kernel is not used, `load_kernel` returns None and logs one warning saying why; the torch ops (the definition,
and the path on every other device) then compute the noise, only slower.
"""

from __future__ import annotations

import contextlib
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

import torch

logger = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("noise_kernel.c")
BUILD_FLAGS = (
    "-O3",
    "-march=native",
    "-ffp-contract=off",
    "-fno-fast-math",
    "-fno-unsafe-math-optimizations",  # last wins: overrides one in CC, and crtfastmath.o is then not linked
    "-shared",
    "-fPIC",
)
BUILD_TIMEOUT_SECONDS = 120
# The self-test's counters: 0.. and a range across 2^32 (the high word), SELF_TEST_ELEMENTS each; and a scaled add
# whose scale is a float32 denormal, so its products are denormal (flush-to-zero or denormals-are-zero change them).
SELF_TEST_ELEMENTS = 4096
SELF_TEST_FIRST_COUNTERS = (0, 2**32 - SELF_TEST_ELEMENTS // 2)
SELF_TEST_DENORMAL_SCALE = 1e-40

_lock = threading.Lock()
_loaded: dict[str, object] = {}  # "kernel": the ctypes library or None, once load_kernel has run


class _KernelUnavailable(Exception):
    """Why the kernel is not used, worded for the user (with what to do about it)."""


class _CacheUnwritable(OSError):
    """The cache directory cannot hold the library (then it is built in a temporary directory)."""


def compiler_command() -> list[str]:
    """The C compiler's argv: $CC (shell-quoted, flags allowed) or `cc`."""
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


def _run_compiler(compiler: list[str], arguments: list[str]) -> subprocess.CompletedProcess:
    command = " ".join(compiler)
    try:
        return subprocess.run(
            [*compiler, *arguments], capture_output=True, text=True, timeout=BUILD_TIMEOUT_SECONDS, check=False
        )
    except OSError as error:
        raise _KernelUnavailable(
            f"no C compiler could be run as {command!r} ({error}); install a C compiler (gcc or clang) or set CC"
        ) from error
    except subprocess.TimeoutExpired as error:
        raise _KernelUnavailable(f"{command!r} did not finish within {BUILD_TIMEOUT_SECONDS} s") from error


def library_path(compiler: list[str]) -> Path:
    """Where the library for this source, compiler, flags and CPU is cached. The CPU enters twice: /proc/cpuinfo's
    model and flags, and the compiler's own expansion of -march=native (`-###` prints the target it would pass on),
    which still tells CPUs apart where /proc/cpuinfo cannot be read."""
    version = _run_compiler(compiler, ["--version"])
    if version.returncode != 0:
        raise _KernelUnavailable(
            f"`{' '.join(compiler)} --version` exited with {version.returncode} ({version.stderr.strip()[-500:]}); "
            "set CC to a working gcc or clang"
        )
    native = _run_compiler(compiler, ["-march=native", "-###", "-E", "-x", "c", os.devnull])
    parts = [
        SOURCE.read_text(),
        " ".join(compiler),
        version.stdout,
        " ".join(BUILD_FLAGS),
        _cpu_description(),
        f"{native.returncode}\n{native.stdout}\n{native.stderr}",
    ]
    key = hashlib.sha256(b"\0".join(part.encode() for part in parts)).hexdigest()[:32]
    return cache_directory() / f"noise_kernel-{key}.so"


def _compile(compiler: list[str], destination: Path) -> None:
    """Build the library into `destination` atomically (through a scratch directory beside it, so processes starting
    together never load a half-written file). Raises _CacheUnwritable where the directory cannot be written."""
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
        scratch_directory = tempfile.TemporaryDirectory(dir=destination.parent)
    except OSError as error:
        raise _CacheUnwritable(str(error)) from error
    with scratch_directory as scratch:
        built = Path(scratch) / destination.name
        result = _run_compiler(compiler, [*BUILD_FLAGS, "-o", str(built), str(SOURCE)])
        if result.returncode != 0:
            raise _KernelUnavailable(
                f"building {SOURCE.name} with {' '.join(compiler)!r} failed (exit {result.returncode}): "
                f"{result.stderr.strip()[-2000:]}; set CC to a working gcc or clang"
            )
        try:
            os.replace(built, destination)
        except OSError as error:
            raise _CacheUnwritable(str(error)) from error


def _open(path: Path) -> ctypes.CDLL:
    """The library at `path` with its three functions typed."""
    library = ctypes.CDLL(str(path))
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
    return library


def _denormal_products() -> list[int]:
    """Bits of 2e-38·0.25 (a denormal result, 0 under flush-to-zero) and 5e-39·2 (a denormal operand, 0 under
    denormals-are-zero), computed by torch in this thread: how this thread treats denormals."""
    products = torch.tensor([2e-38, 5e-39]) * torch.tensor([0.25, 2.0])
    return products.view(torch.int32).tolist()


class _SelfTest:
    """The torch ops' values for the self-test, computed before the library is loaded: a library whose loading
    switches on flush-to-zero would otherwise be compared with torch ops that flush too."""

    def __init__(self):
        from trl_verigate.es import noise  # here, not at the top: noise imports this module

        self.noise = noise
        self.key = noise.noise_key(0, "noise_kernel self-test")
        self.denormals = _denormal_products()
        self.fills = {}
        for first in SELF_TEST_FIRST_COUNTERS:
            self.fills[first] = torch.empty(SELF_TEST_ELEMENTS)
            noise._fill_noise_ops(self.fills[first], first, self.key)
        scale = torch.tensor(SELF_TEST_DENORMAL_SCALE, dtype=torch.float32)
        # The kernel's out = addend + ε·scale with a zero addend: the sum turns products that round to −0 into +0.
        self.scaled = torch.zeros(SELF_TEST_ELEMENTS) + self.fills[0] * scale

    def check(self, library: ctypes.CDLL, compiler: list[str]) -> None:
        """Raise _KernelUnavailable if loading changed how denormals are treated (switched back first) or the
        kernel's bits differ from the torch ops'."""
        command = " ".join(compiler)
        if _denormal_products() != self.denormals:
            torch.set_flush_denormal(False)
            repaired = _denormal_products() == self.denormals
            raise _KernelUnavailable(
                f"loading the kernel built by {command!r} switched on flush-to-zero of denormals in this thread (the "
                "compiler linked crtfastmath.o: -ffast-math or -funsafe-math-optimizations among flags it adds); "
                + ("switched it off again" if repaired else "it could not be switched off: start a new process")
                + "; set CC to a compiler without those flags to use the kernel"
            )
        differing = 0
        for first, expected in self.fills.items():
            out = torch.empty(SELF_TEST_ELEMENTS)
            library.es_noise_fill(out.data_ptr(), SELF_TEST_ELEMENTS, first, *self.key, *self.noise.KERNEL_CONSTANTS)
            differing += int((out.view(torch.int32) != expected.view(torch.int32)).sum())
        scaled = torch.zeros(SELF_TEST_ELEMENTS)
        library.es_noise_scaled_add(
            scaled.data_ptr(),
            scaled.data_ptr(),
            SELF_TEST_ELEMENTS,
            *self.key,
            SELF_TEST_DENORMAL_SCALE,
            *self.noise.KERNEL_CONSTANTS,
        )
        differing += int((scaled.view(torch.int32) != self.scaled.view(torch.int32)).sum())
        if differing:
            raise _KernelUnavailable(
                f"the kernel built by {command!r} gives other bits than the torch ops ({differing} of "
                f"{SELF_TEST_ELEMENTS * 3} self-test values differ; a compiler or wrapper that adds flags such as "
                "-ffp-contract=fast or -ffast-math after ours does this); set CC to a plain gcc or clang to use it"
            )


def _load_checked(compiler: list[str]) -> ctypes.CDLL:
    """The cached library (rebuilt if it does not load), or a fresh build (in a temporary directory if the cache
    cannot be written), once it has passed the self-test; a library that fails it is deleted."""
    path = library_path(compiler)
    self_test = _SelfTest()
    library = None
    if path.is_file():
        try:
            library = _open(path)
        except OSError as error:
            logger.info("es_noise: the cached kernel %s does not load (%s); building it again", path, error)
            with contextlib.suppress(OSError):
                path.unlink()
    if library is None:
        try:
            _compile(compiler, path)
        except _CacheUnwritable as error:
            logger.warning(
                "es_noise: cannot write the CPU kernel to the cache directory %s (%s); building it in a temporary "
                "directory instead, again in every process. Set XDG_CACHE_HOME to a writable directory.",
                path.parent,
                error,
            )
            with tempfile.TemporaryDirectory() as scratch:
                temporary = Path(scratch) / path.name
                try:
                    _compile(compiler, temporary)
                except _CacheUnwritable as scratch_error:
                    raise _KernelUnavailable(f"cannot write a temporary directory either ({scratch_error})") from None
                library = _open(temporary)  # stays mapped after the file is removed
            self_test.check(library, compiler)
            return library
        try:
            library = _open(path)
        except OSError as error:
            with contextlib.suppress(OSError):
                path.unlink()
            raise _KernelUnavailable(f"the kernel just built at {path} does not load ({error})") from error
    try:
        self_test.check(library, compiler)
    except _KernelUnavailable:
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    return library


def load_kernel():
    """The built library (a ctypes.CDLL with `es_noise_fill`, `es_noise_scaled_add` and `es_noise_stages` typed), or
    None with one warning saying why if it cannot be built, loaded or trusted."""
    with _lock:
        if "kernel" not in _loaded:
            library = None
            try:
                library = _load_checked(compiler_command())
            except _KernelUnavailable as error:
                reason = str(error)
            except OSError as error:  # e.g. the library built in a temporary directory does not load
                reason = f"cannot load the built kernel ({error})"
            if library is None:
                logger.warning(
                    "es_noise: %s. Computing the noise with torch ops instead (the same values, several times slower).",
                    reason,
                )
            _loaded["kernel"] = library
        return _loaded["kernel"]


def forget_kernel() -> None:
    """Make the next `load_kernel` look for (or build) the library again (tests change CC or the cache)."""
    with _lock:
        _loaded.clear()
