"""The layers of `trl_verigate.lean_server`: every module sits in one subpackage, imports run downward, and a module
uses another subpackage only through the names that subpackage's `__init__` lists in `__all__`."""

import ast
import importlib
from pathlib import Path

import pytest

import trl_verigate.lean_server as lean_server

PACKAGE = "trl_verigate.lean_server"
ROOT = Path(lean_server.__file__).parent
# Bottom to top: a subpackage may import only those before it.
LAYERS = ("core", "precheck", "repl", "recheck", "verdict", "service", "cli")


def imports_of(source: str) -> list[tuple[str, list[str], int]]:
    """(module imported, names taken from it, line) for every import of `lean_server`, at any depth in the code."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [alias.name for alias in node.names]
            if node.module == "trl_verigate" and "lean_server" in names:
                found.append((PACKAGE, [], node.lineno))
            found.append((node.module, names, node.lineno))
        elif isinstance(node, ast.Import):
            found.extend((alias.name, [], node.lineno) for alias in node.names)
    return [(module, names, line) for module, names, line in found if module.split(".")[:2] == PACKAGE.split(".")]


def violations(layer: str, source: str) -> list[str]:
    """What breaks the layering in the source of a module of subpackage `layer`."""
    problems = []
    for module, names, line in imports_of(source):
        parts = module.split(".")
        if len(parts) < 3:
            problems.append(f"line {line}: imports the top package {module}, which sits above every layer")
            continue
        target = parts[2]
        if target == layer:
            continue
        if target not in LAYERS or LAYERS.index(target) > LAYERS.index(layer):
            problems.append(f"line {line}: {layer} imports {module}, which is not below it")
        elif len(parts) > 3 or not names:
            problems.append(f"line {line}: imports {module} instead of the public names of {PACKAGE}.{target}")
        else:
            public = getattr(importlib.import_module(f"{PACKAGE}.{target}"), "__all__", ())
            private = [name for name in names if name not in public]
            if private:
                problems.append(f"line {line}: imports {private} of {target}, which its __all__ does not list")
    return problems


def test_every_module_belongs_to_one_layer():
    loose = sorted(path.name for path in ROOT.glob("*.py") if path.name != "__init__.py")
    assert not loose, f"modules outside every subpackage: {loose}"
    packages = sorted(path.parent.name for path in ROOT.glob("*/__init__.py"))
    assert packages == sorted(LAYERS)


@pytest.mark.parametrize("path", sorted(ROOT.glob("*/**/*.py")), ids=lambda path: str(path.relative_to(ROOT)))
def test_imports_run_downward_through_public_names(path):
    layer = path.relative_to(ROOT).parts[0]
    assert violations(layer, path.read_text(encoding="utf-8")) == []


def test_the_top_package_reexports_public_names_only():
    for module, names, _ in imports_of((ROOT / "__init__.py").read_text(encoding="utf-8")):
        public = importlib.import_module(module).__all__
        assert module.count(".") == 2 and set(names) <= set(public), module


@pytest.mark.parametrize(
    ("layer", "line", "expected"),
    [
        ("repl", "from trl_verigate.lean_server.service import LeanServer", "not below it"),
        ("core", "from trl_verigate.lean_server.precheck import prepare", "not below it"),
        ("verdict", "from trl_verigate.lean_server.precheck.layout import split_tactics", "instead of the public"),
        ("verdict", "from trl_verigate.lean_server.precheck import parse_proof", "which its __all__ does not list"),
        ("service", "import trl_verigate.lean_server.repl.process", "instead of the public"),
        ("service", "def f():\n    from trl_verigate import lean_server", "the top package"),
        ("cli", "from trl_verigate.lean_server import LeanServer", "the top package"),
    ],
)
def test_the_check_catches_each_kind_of_break(layer, line, expected):
    (problem,) = violations(layer, line)
    assert expected in problem


def test_the_check_allows_public_names_of_lower_layers_and_its_own_modules():
    source = (
        "from trl_verigate.lean_server.precheck import prepare\n"
        "from trl_verigate.lean_server.core import LeanServerConfig\n"
        "from trl_verigate.lean_server.service.wire import request_bytes\n"
        "from trl_verigate.prover_pool.pool import WorkerPool\n"
    )
    assert violations("service", source) == []
