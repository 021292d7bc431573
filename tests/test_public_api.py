"""The package's public names resolve, lazily, to the objects the README documents."""

import subprocess
import sys

import trl_verigate


def test_every_exported_name_resolves():
    for name in trl_verigate.__all__:
        assert getattr(trl_verigate, name) is not None, name


def test_trainer_and_lean_names_are_the_real_classes():
    from trl import GRPOConfig, GRPOTrainer

    from trl_verigate.lean_server.server import LeanServer

    assert issubclass(trl_verigate.VeriGateGRPOTrainer, GRPOTrainer)
    assert issubclass(trl_verigate.VeriGateConfig, GRPOConfig)
    assert trl_verigate.LeanServer is LeanServer
    assert trl_verigate.accuracy_reward.__name__ == "accuracy_reward"
    assert issubclass(trl_verigate.LeanProcessGRPOTrainer, trl_verigate.ProcessGRPOTrainer)
    assert issubclass(trl_verigate.VeriGateGRPOTrainer, trl_verigate.ProcessGRPOTrainer)
    assert issubclass(trl_verigate.LeanProcessConfig, GRPOConfig)


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
