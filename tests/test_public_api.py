"""The package's public names resolve, lazily, to the objects the README documents."""

import importlib
import inspect
import re
import subprocess
import sys

import trl_verigate
from tests.launch import REPO_ROOT


def test_every_exported_name_is_what_a_trl_verigate_module_defines_under_that_name():
    for name in trl_verigate.__all__:
        exported = getattr(trl_verigate, name)
        if inspect.isclass(exported) or inspect.isfunction(exported):
            # Defined in the package under this name, not a re-export of TRL's or an alias of another name.
            home = exported.__module__
            assert home.startswith("trl_verigate.") and exported.__name__ == name, (name, home, exported.__name__)
            assert getattr(sys.modules[home], name) is exported, name
        else:
            # A ready-made reward function (accuracy_reward): an instance of a package class that TRL can call
            # and log under its __name__.
            assert type(exported).__module__.startswith("trl_verigate."), (name, type(exported))
            assert callable(exported) and exported.__name__ == name, name


def documented_imports() -> dict[str, list[str]]:
    """{module: names} of every `from trl_verigate... import ...` in the README and docs/."""
    imports: dict[str, list[str]] = {}
    for document in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        text = document.read_text(encoding="utf-8")
        for module, names in re.findall(r"^\s*from (trl_verigate[\w.]*) import (\([^)]*\)|[^\n]*)", text, re.M):
            for name in names.strip("()").split(","):
                if name.strip():
                    imports.setdefault(module, []).append(name.split(" as ")[0].strip())
    return imports


def test_every_name_the_docs_import_from_trl_verigate_exists_and_top_level_ones_are_exported():
    imports = documented_imports()
    # The quickstart's import is among them: the parse found the code blocks.
    assert {"VeriGateConfig", "VeriGateGRPOTrainer", "accuracy_reward"} <= set(imports["trl_verigate"])
    assert set(imports["trl_verigate"]) <= set(trl_verigate.__all__)
    for module, names in imports.items():
        for name in names:
            assert hasattr(importlib.import_module(module), name), f"the docs import {name} from {module}"


def test_every_dotted_trl_verigate_name_in_the_readme_resolves():
    references = set(re.findall(r"\btrl_verigate(?:\.\w+)+", (REPO_ROOT / "README.md").read_text(encoding="utf-8")))
    assert "trl_verigate.tactic_scores" in references  # the parse found them
    for reference in references:
        parts = reference.split(".")
        # The longest importable module prefix, then attributes.
        for cut in range(len(parts), 0, -1):
            try:
                target = importlib.import_module(".".join(parts[:cut]))
                break
            except ModuleNotFoundError:
                continue
        for attribute in parts[cut:]:
            assert hasattr(target, attribute), f"README names {reference}, which does not exist"
            target = getattr(target, attribute)


def test_trainer_and_lean_names_are_the_real_classes():
    from trl import GRPOConfig, GRPOTrainer

    from trl_verigate.lean_server.service.server import LeanServer

    assert issubclass(trl_verigate.VeriGateGRPOTrainer, GRPOTrainer)
    assert issubclass(trl_verigate.VeriGateConfig, GRPOConfig)
    assert trl_verigate.LeanServer is LeanServer
    assert trl_verigate.accuracy_reward.__name__ == "accuracy_reward"
    assert issubclass(trl_verigate.VeriGateGRPOTrainer, trl_verigate.ProcessGRPOTrainer)
    # The design card's Lean trainer and its Coq twin are the generic process trainer with the prover fixed.
    for prover in ("Lean", "Coq"):
        trainer = getattr(trl_verigate, f"{prover}ProcessGRPOTrainer")
        config = getattr(trl_verigate, f"{prover}ProcessConfig")
        assert issubclass(trainer, trl_verigate.ProcessVerifiedGRPOTrainer) and trainer.config_class is config
        assert issubclass(config, trl_verigate.ProcessVerifiedConfig) and issubclass(config, GRPOConfig)


def test_each_trainer_has_its_config_and_trainer_module_as_in_trl():
    folders = {
        "verigate": ("VeriGateConfig", "VeriGateGRPOTrainer"),
        "process_verified": ("ProcessVerifiedConfig", "ProcessVerifiedGRPOTrainer"),
        "lean_process": ("LeanProcessConfig", "LeanProcessGRPOTrainer"),
        "coq_process": ("CoqProcessConfig", "CoqProcessGRPOTrainer"),
        "es": ("ESConfig", "ESTrainer"),
    }
    for folder, (config_name, trainer_name) in folders.items():
        config, trainer = getattr(trl_verigate, config_name), getattr(trl_verigate, trainer_name)
        assert config.__module__ == f"trl_verigate.trainers.{folder}.{folder}_config", config.__module__
        assert trainer.__module__ == f"trl_verigate.trainers.{folder}.{folder}_trainer", trainer.__module__
        assert "Parameters:" in config.__doc__, config_name


def test_lean_server_and_client_share_the_verifier_protocol():
    import inspect

    from trl_verigate.lean_server import LeanClient, LeanServerConfig

    assert isinstance(trl_verigate.LeanServer(LeanServerConfig(repl_command=["repl"])), trl_verigate.Verifier)
    assert isinstance(LeanClient(["http://127.0.0.1:1"]), trl_verigate.Verifier)
    for method in ("verify", "averify"):
        protocol = inspect.signature(getattr(trl_verigate.Verifier, method)).parameters
        for implementation in (trl_verigate.LeanServer, LeanClient):
            assert list(inspect.signature(getattr(implementation, method)).parameters) == list(protocol), method


def test_unknown_name_raises_attribute_error():
    try:
        trl_verigate.no_such_name  # noqa: B018
    except AttributeError as error:
        assert "no_such_name" in str(error)
    else:
        raise AssertionError("expected AttributeError")


def test_import_is_cheap():
    # `import trl_verigate` must not pull in TRL or torch: the Lean tools and CLI start fast without them.
    code = "import sys, trl_verigate, trl_verigate.lean_server; print('trl' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]
