"""scripts/torch_pip_args.py, which `make install` asks how to install torch: against fake pip configurations (a
wheel directory holding a CPU build, a CUDA build, or nothing), with every real pip setting of this machine hidden."""

import importlib.util
import os
import subprocess
import zipfile

import pytest

from tests.launch import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "torch_pip_args.py"
CPU_INDEX = ["torch==2.13.0", "--index-url", "https://download.pytorch.org/whl/cpu"]


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("torch_pip_args", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_wheel(directory, version: str, requires: list[str]) -> None:
    """A minimal installable torch wheel: just the metadata pip reads to resolve it."""
    dist_info = f"torch-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {requirement}\n" for requirement in requires)
    wheel = "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    with zipfile.ZipFile(directory / f"torch-{version}-py3-none-any.whl", "w") as archive:
        archive.writestr("torch/__init__.py", "")
        archive.writestr(f"{dist_info}/METADATA", metadata)
        archive.writestr(f"{dist_info}/WHEEL", wheel)
        archive.writestr(f"{dist_info}/RECORD", "")


@pytest.fixture
def fake_pip_config(tmp_path, monkeypatch):
    """pip sees only a local wheel directory (the test fills it): no config files, no index, no network."""
    for name in list(os.environ):
        if name.startswith("PIP_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    return tmp_path


def test_a_configured_cpu_wheel_is_installed_as_configured(script, fake_pip_config):
    write_wheel(fake_pip_config, "2.13.0+cpu", ["filelock"])
    resolved = script.resolve_torch(os.sys.executable)
    assert resolved["version"] == "2.13.0+cpu"
    assert script.torch_pip_args(resolved, nvidia_driver=False, index_override=None)[0] == ["torch==2.13.0"]


def test_a_cuda_build_is_replaced_by_the_cpu_index_without_a_driver(script, fake_pip_config):
    write_wheel(fake_pip_config, "2.13.0", ["filelock", 'nvidia-cublas-cu13; platform_system == "Linux"'])
    resolved = script.resolve_torch(os.sys.executable)
    assert resolved["version"] == "2.13.0"
    args, why = script.torch_pip_args(resolved, nvidia_driver=False, index_override=None)
    assert args == CPU_INDEX
    assert "2.13.0, a CUDA build" in why
    # With a driver the configured CUDA build is what is wanted.
    assert script.torch_pip_args(resolved, nvidia_driver=True, index_override=None)[0] == ["torch==2.13.0"]


def test_nothing_resolvable_falls_back_to_the_cpu_index(script, fake_pip_config):
    assert script.resolve_torch(os.sys.executable) is None
    assert script.torch_pip_args(None, nvidia_driver=False, index_override=None)[0] == CPU_INDEX


def test_a_build_without_nvidia_requirements_counts_as_cpu(script):
    # macOS and Windows wheels on PyPI: no local version label, no nvidia-* requirements.
    assert script.is_cpu_build({"version": "2.13.0", "requires_dist": ["filelock"]})
    assert not script.is_cpu_build({"version": "2.13.0+cu130", "requires_dist": []})
    assert script.is_cpu_build({"version": "2.13.0+cpu.cxx11.abi"})


def test_torch_index_url_overrides(script):
    args, why = script.torch_pip_args({"version": "2.13.0+cpu"}, nvidia_driver=False, index_override="file:///m")
    assert args == ["torch==2.13.0", "--index-url", "file:///m"]
    assert why == "TORCH_INDEX_URL=file:///m"


def test_the_script_prints_pip_arguments_and_the_reason(fake_pip_config):
    write_wheel(fake_pip_config, "2.13.0+cpu", [])
    result = subprocess.run([os.sys.executable, str(SCRIPT)], capture_output=True, text=True, check=True)
    assert result.stdout == "torch==2.13.0\n"
    assert result.stderr == "torch: pip's configuration provides a CPU build (2.13.0+cpu)\n"


def test_make_install_asks_the_script():
    # A fresh venv path, so that make prints the install recipe instead of finding it done.
    result = subprocess.run(
        ["make", "-n", "install", "VENV=/nonexistent-venv"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    lines = result.stdout.splitlines()
    torch_line = next(line for line in lines if "torch_pip_args.py" in line and not line.startswith("#"))
    assert torch_line == (
        "/nonexistent-venv/bin/python -m pip install -q $(/nonexistent-venv/bin/python scripts/torch_pip_args.py)"
    )
    assert lines.index(torch_line) < next(index for index, line in enumerate(lines) if ".[dev]" in line)
