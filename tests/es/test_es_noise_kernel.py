"""Building, caching and checking es_noise's CPU kernel (noise_kernel.py): a kernel whose bits differ from the torch
ops, or whose loading changes the process's floating-point mode, is refused; a broken cache is repaired or bypassed.

The expected values are the torch ops' (es-noise-v1's definition, pinned by test_es_noise.py's numpy twin and
hard-coded values), computed with the kernel switched off."""

import logging
import os
import platform
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trl_verigate.es import noise as noise_module
from trl_verigate.es import noise_kernel
from trl_verigate.es.noise import es_noise

COMPILER = noise_kernel.compiler_command()
pytestmark = pytest.mark.skipif(
    shutil.which(COMPILER[0]) is None, reason="no C compiler (CC or cc) to build the CPU noise kernel"
)


def torch_ops_noise(seed, name, count):
    """The definition's values: es_noise through the torch ops."""
    out = torch.empty(count)
    noise_module._fill_noise_ops(out, 0, noise_module.noise_key(seed, name))
    return out


def kernel_warnings(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == noise_kernel.__name__]


def denormal_products() -> list[int]:
    """Bits of 2e-38·0.25 (a denormal result: 0 under flush-to-zero) and 5e-39·2 (a denormal operand: 0 under
    denormals-are-zero), computed by torch in this thread."""
    products = torch.tensor([2e-38, 5e-39]) * torch.tensor([0.25, 2.0])
    return products.view(torch.int32).tolist()


def write_wrapper(path: Path, body: str) -> str:
    """An executable Python script standing in for a compiler (as Nix/Spack wrappers or icx do); returns its path."""
    path.write_text(f"#!{sys.executable}\nimport subprocess, sys\nargs = sys.argv[1:]\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def has_hardware_fma() -> bool:
    if platform.machine() in ("aarch64", "arm64"):
        return True
    try:
        return any(line.startswith("flags") and " fma" in line for line in open("/proc/cpuinfo"))
    except OSError:
        return False


def links_crtfastmath() -> bool:
    """Whether the compiler links crtfastmath.o (FTZ/DAZ switched on at load) for -funsafe-math-optimizations."""
    found = subprocess.run([*COMPILER, "-print-file-name=crtfastmath.o"], capture_output=True, text=True).stdout
    return platform.machine() == "x86_64" and os.path.isabs(found.strip()) and os.path.isfile(found.strip())


@pytest.mark.parametrize("fault", ["one shift miscompiled", "-ffp-contract=fast after our flags"])
def test_a_kernel_with_other_bits_is_refused_deleted_and_replaced_by_the_torch_ops(
    kernel_cache, kernel_builds, monkeypatch, caplog, tmp_path, fault
):
    """The self-test at load compares the kernel with the torch ops; a mismatch means one warning, no cached library
    (the next process builds again instead of trusting it), and the torch ops' values."""
    if fault.startswith("-ffp-contract") and not has_hardware_fma():
        pytest.skip("without hardware FMA, -ffp-contract=fast contracts nothing")
    assert "x ^= x >> 15;" in noise_kernel.SOURCE.read_text()
    patched = tmp_path / "patched.c"
    body = {
        "one shift miscompiled": (
            f"for i, arg in enumerate(args):\n"
            f"    if arg.endswith('noise_kernel.c'):\n"
            f"        text = open(arg).read().replace('x ^= x >> 15;', 'x ^= x >> 14;')\n"
            f"        open({str(patched)!r}, 'w').write(text)\n"
            f"        args[i] = {str(patched)!r}\n"
            f"sys.exit(subprocess.call([*{COMPILER!r}, *args]))"
        ),
        "-ffp-contract=fast after our flags": f"sys.exit(subprocess.call([*{COMPILER!r}, *args, '-ffp-contract=fast']))",
    }[fault]
    monkeypatch.setenv("CC", write_wrapper(tmp_path / "wrapcc", body))
    with caplog.at_level(logging.WARNING, logger=noise_kernel.__name__):
        assert noise_kernel.load_kernel() is None
        values = es_noise(4, "w", (20_000,))
    assert len(kernel_builds) == 1
    warnings = kernel_warnings(caplog)
    assert len(warnings) == 1 and "differ" in warnings[0] and "torch ops" in warnings[0], warnings
    assert not list(kernel_cache.glob("*.so"))
    assert torch.equal(values.view(torch.int32), torch_ops_noise(4, "w", 20_000).view(torch.int32))


@pytest.mark.skipif(not links_crtfastmath(), reason="the compiler does not link crtfastmath.o on this machine")
def test_a_kernel_whose_loading_switches_on_flush_to_zero_is_refused_and_the_thread_repaired(
    kernel_cache, monkeypatch, caplog, tmp_path
):
    """-funsafe-math-optimizations at link time (here appended after our flags by a wrapper) links crtfastmath.o,
    whose constructor switches on flush-to-zero for the loading thread: ordinary torch results on denormals change.
    The load must notice, switch it back off and refuse the kernel."""
    body = f"sys.exit(subprocess.call([*{COMPILER!r}, *args, '-funsafe-math-optimizations']))"
    monkeypatch.setenv("CC", write_wrapper(tmp_path / "wrapcc", body))
    before = denormal_products()
    assert before[0] != 0 and before[1] != 0  # this thread keeps denormals (the fixture switches them back on)
    with caplog.at_level(logging.WARNING, logger=noise_kernel.__name__):
        assert noise_kernel.load_kernel() is None
    assert denormal_products() == before
    warnings = kernel_warnings(caplog)
    assert len(warnings) == 1 and "flush-to-zero" in warnings[0], warnings
    assert not list(kernel_cache.glob("*.so"))


@pytest.mark.skipif(not links_crtfastmath(), reason="the compiler does not link crtfastmath.o on this machine")
def test_unsafe_math_in_cc_is_overridden_by_the_build_flags(kernel_cache, monkeypatch, caplog):
    """CC="cc -funsafe-math-optimizations" (flags before ours): -fno-unsafe-math-optimizations wins, so crtfastmath.o
    is not linked, denormals are kept, and the kernel passes its self-test."""
    monkeypatch.setenv("CC", " ".join([*COMPILER, "-funsafe-math-optimizations"]))
    before = denormal_products()
    with caplog.at_level(logging.WARNING, logger=noise_kernel.__name__):
        assert noise_kernel.load_kernel() is not None
    assert denormal_products() == before and not kernel_warnings(caplog)
    (library,) = kernel_cache.glob("*.so")
    if shutil.which("nm"):
        symbols = subprocess.run(["nm", str(library)], capture_output=True, text=True, check=True).stdout
        assert "set_fast_math" not in symbols


@pytest.mark.parametrize("content", [b"", b"\x7fELF truncated"], ids=["empty", "truncated"])
def test_a_corrupt_cached_library_is_rebuilt(kernel_cache, kernel_builds, caplog, content):
    """A cached file that does not load (a crash mid-copy, a full disk) is deleted and built once more, instead of
    every process warning and falling back for good."""
    library = noise_kernel.library_path(COMPILER)
    library.parent.mkdir(parents=True)
    library.write_bytes(content)
    with caplog.at_level(logging.WARNING, logger=noise_kernel.__name__):
        assert noise_kernel.load_kernel() is not None
    assert not kernel_warnings(caplog) and len(kernel_builds) == 1
    assert library.read_bytes()[:4] == b"\x7fELF" and len(library.read_bytes()) > 1000
    assert es_noise(7, "w", (6,)).tolist() == torch_ops_noise(7, "w", 6).tolist()


def test_an_unwritable_cache_directory_builds_in_a_temporary_directory(monkeypatch, tmp_path, caplog):
    """XDG_CACHE_HOME that cannot hold directories (here a file): the kernel is still built and used, with a warning
    that names the cache directory and how to fix it, not a missing compiler."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    noise_kernel.forget_kernel()
    try:
        with caplog.at_level(logging.WARNING, logger=noise_kernel.__name__):
            assert noise_kernel.load_kernel() is not None
        (warning,) = kernel_warnings(caplog)
        assert str(blocker) in warning and "XDG_CACHE_HOME" in warning and "compiler" not in warning.lower()
        assert es_noise(7, "w", (6,)).tolist() == torch_ops_noise(7, "w", 6).tolist()
    finally:
        noise_kernel.forget_kernel()
    assert blocker.read_text() == ""


@pytest.mark.parametrize(
    "compiler,cause,not_said",
    [
        ("/nonexistent/cc", "install a C compiler", "exit"),
        (" ".join([*COMPILER, "-fno-such-option-anywhere"]), "fno-such-option-anywhere", "install"),
    ],
    ids=["no compiler", "build fails"],
)
def test_the_fallback_warning_names_its_cause(kernel_cache, monkeypatch, caplog, compiler, cause, not_said):
    monkeypatch.setenv("CC", compiler)
    with caplog.at_level(logging.WARNING, logger=noise_kernel.__name__):
        assert noise_kernel.load_kernel() is None
    (warning,) = kernel_warnings(caplog)
    assert cause in warning.lower() or cause in warning, warning
    assert not_said not in warning.lower(), warning


def test_the_cache_key_holds_what_the_compiler_makes_of_march_native(
    kernel_cache, kernel_builds, monkeypatch, tmp_path
):
    """Without /proc/cpuinfo (macOS, some sandboxes) the CPU description is the machine name only; two CPUs sharing a
    cache must still get two libraries, told apart by the compiler's expansion of -march=native (simulated here by a
    wrapper that reports a CPU from the environment when asked with -###)."""
    monkeypatch.setattr(noise_kernel, "_cpu_description", lambda: "x86_64 ")
    body = (
        "if '-###' in args:\n"
        "    import os\n"
        "    print('-march=' + os.environ['FAKE_NATIVE_CPU'], file=sys.stderr)\n"
        f"sys.exit(subprocess.call([*{COMPILER!r}, *args]))"
    )
    monkeypatch.setenv("CC", write_wrapper(tmp_path / "wrapcc", body))
    for cpu in ("cpu-a", "cpu-b", "cpu-a"):
        monkeypatch.setenv("FAKE_NATIVE_CPU", cpu)
        noise_kernel.forget_kernel()
        assert noise_kernel.load_kernel() is not None
    assert len(kernel_builds) == 2 and len(list(kernel_cache.glob("*.so"))) == 2
