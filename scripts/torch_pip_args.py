"""The pip arguments that install torch for this machine (`make install` runs them before the package).

On plain PyPI, ``pip install torch==2.13.0`` resolves on Linux to the CUDA build, which pulls several GB of
``nvidia-*`` wheels; a machine without CUDA wants PyTorch's CPU build. The decision:

1. pip, as configured here (pip.conf, PIP_* variables: a local wheel directory, a mirror), already resolves torch to a
   CPU build (a ``+cpu`` version, or one without ``nvidia-*`` requirements, as on macOS): install that, offline if the
   configuration is local;
2. otherwise, with an NVIDIA driver present: the configured index's (CUDA) build;
3. otherwise: the CPU build from PyTorch's own index, https://download.pytorch.org/whl/cpu.

``TORCH_INDEX_URL`` set in the environment overrides all of it. Prints the arguments on stdout (for
``pip install $(python scripts/torch_pip_args.py)``) and the reason on stderr.

    python scripts/torch_pip_args.py [--python PYTHON]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

TORCH_REQUIREMENT = "torch==2.13.0"
CPU_INDEX_URL = "https://download.pytorch.org/whl/cpu"


def resolve_torch(python: str) -> dict | None:
    """The metadata of the torch wheel pip would install with its current configuration, or None when pip cannot
    resolve it (offline with nothing configured, no such version)."""
    command = [python, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed", "--quiet"]
    command += ["--report", "-", TORCH_REQUIREMENT]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        return None
    installs = json.loads(result.stdout).get("install", [])
    return installs[0]["metadata"] if installs else None


def is_cpu_build(metadata: dict) -> bool:
    version = metadata.get("version", "")
    if "+" in version:
        return version.split("+", 1)[1].startswith("cpu")
    return not any(requirement.startswith("nvidia-") for requirement in metadata.get("requires_dist", []))


def has_nvidia_driver() -> bool:
    return shutil.which("nvidia-smi") is not None or os.path.exists("/proc/driver/nvidia/version")


def torch_pip_args(resolved: dict | None, nvidia_driver: bool, index_override: str | None) -> tuple[list[str], str]:
    """(pip install arguments, why)."""
    if index_override:
        return [TORCH_REQUIREMENT, "--index-url", index_override], f"TORCH_INDEX_URL={index_override}"
    if resolved is not None and is_cpu_build(resolved):
        return [TORCH_REQUIREMENT], f"pip's configuration provides a CPU build ({resolved['version']})"
    if nvidia_driver:
        return [TORCH_REQUIREMENT], "an NVIDIA driver is present: the configured index's CUDA build"
    found = f"it resolves to {resolved['version']}, a CUDA build" if resolved else "it cannot resolve torch"
    return [TORCH_REQUIREMENT, "--index-url", CPU_INDEX_URL], f"no CUDA here and {found}: PyTorch's CPU index"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable, help="The Python whose pip installs torch.")
    args = parser.parse_args()
    pip_args, why = torch_pip_args(resolve_torch(args.python), has_nvidia_driver(), os.environ.get("TORCH_INDEX_URL"))
    print(f"torch: {why}", file=sys.stderr)
    print(" ".join(pip_args))


if __name__ == "__main__":
    main()
