"""LeanServerConfig refuses bad settings at construction, naming the field and what to write instead."""

import os

import pytest

from trl_verigate.lean_server.core.types import LeanServerConfig


@pytest.mark.parametrize(
    "overrides, error, words",
    [
        ({"repl_command": "lake env repl"}, ValueError, ["repl_command", "['lake', 'env', 'repl']"]),
        ({"repl_command": []}, ValueError, ["repl_command", "non-empty"]),
        ({"repl_command": ["lake", 3]}, ValueError, ["repl_command", "argv strings"]),
        ({"header": None}, TypeError, ["LeanServerConfig.header", "MINIF2F_HEADER"]),
        ({"workers": 0}, ValueError, ["workers", ">= 1"]),
        ({"workers": 2.5}, TypeError, ["workers", "whole number"]),
        ({"workers": "4"}, TypeError, ["workers", "whole number"]),
        ({"timeout": 0}, ValueError, ["timeout", "> 0"]),
        ({"timeout": float("nan")}, ValueError, ["timeout", "finite"]),
        ({"timeout": float("inf")}, ValueError, ["timeout", "finite"]),
        ({"timeout": "15"}, TypeError, ["timeout", "number"]),
        ({"startup_timeout": -1}, ValueError, ["startup_timeout", "> 0"]),
        ({"recheck_timeout": None}, TypeError, ["recheck_timeout", "number"]),
        ({"memory_limit_mb": -5}, ValueError, ["memory_limit_mb", ">= 1"]),
        ({"max_uses_per_worker": 0}, ValueError, ["max_uses_per_worker", ">= 1"]),
        ({"max_request_bytes": True}, TypeError, ["max_request_bytes", "whole number"]),
        ({"max_batch_bytes": 0}, ValueError, ["max_batch_bytes", ">= 1"]),
        ({"recheck_sample_rate": 0}, ValueError, ["recheck_sample_rate"]),
        ({"recheck_sample_rate": 1.5}, ValueError, ["recheck_sample_rate", "(0, 1]"]),
        ({"recheck": "all"}, ValueError, ["recheck", "'passed'"]),
        ({"recheck": "passed"}, ValueError, ["recheck_command", "recheck='none'"]),
        ({"recheck_command": "trl-verigate lean-recheck"}, ValueError, ["recheck_command", "argv"]),
        ({"recheck_command": [1]}, ValueError, ["recheck_command", "argv strings"]),
        ({"recheck_seed": "0"}, TypeError, ["recheck_seed", "int"]),
        ({"sandbox": "docker"}, ValueError, ["sandbox", "'bwrap'"]),
        ({"tactic_granularity": "inner"}, ValueError, ["tactic_granularity", "'outermost'"]),
        ({"allow_native_decide": "no"}, TypeError, ["allow_native_decide", "True or False"]),
        ({"axiom_whitelist": "propext"}, TypeError, ["axiom_whitelist", "list of axiom names"]),
        ({"axiom_whitelist": ["propext", None]}, TypeError, ["axiom_whitelist"]),
        ({"project_dir": 3}, TypeError, ["project_dir", "path"]),
    ],
)
def test_bad_settings_are_refused_naming_the_field(overrides, error, words):
    with pytest.raises(error) as raised:
        LeanServerConfig(**overrides)
    for word in words:
        assert word in str(raised.value), (word, str(raised.value))


def test_relative_paths_are_read_from_the_callers_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = LeanServerConfig(
        repl_command=["bin/repl", "--flag"],
        project_dir="proj",
        recheck_command=["./check", "--x"],
    )
    assert config.repl_command == [str(tmp_path / "bin" / "repl"), "--flag"]
    assert config.project_dir == str(tmp_path / "proj")
    assert config.recheck_command == [str(tmp_path / "check"), "--x"]
    # A bare program name is looked up on PATH, as a shell would.
    assert LeanServerConfig(repl_command=["lake", "env", "repl"]).repl_command[0] == "lake"
    assert LeanServerConfig(repl_command=["~/repl"]).repl_command[0] == os.path.expanduser("~/repl")


def test_recheck_defaults_to_auto_and_an_explicit_mode_needs_a_checker():
    from trl_verigate.lean_server.recheck.self_test import effective_recheck

    assert LeanServerConfig().recheck == "auto" and effective_recheck(LeanServerConfig())[0] == "none"
    # A checker lean-doctor has not verified stays off under "auto", and says why.
    mode, why = effective_recheck(LeanServerConfig(recheck_command=["checker"]))
    assert mode == "none" and "lean-doctor" in why
    assert LeanServerConfig(recheck_command=["checker"], recheck="passed").recheck == "passed"
    with pytest.raises(ValueError, match="needs recheck_command"):
        LeanServerConfig(recheck="passed")
    assert LeanServerConfig(recheck_command=["checker"], recheck="sample").recheck == "sample"
    assert LeanServerConfig(recheck_command=["checker"], recheck="none").recheck == "none"


def test_good_settings_are_kept():
    config = LeanServerConfig(workers=3, timeout=2, memory_limit_mb=None, axiom_whitelist=["propext"])
    assert (config.workers, config.timeout, config.memory_limit_mb) == (3, 2, None)
    assert config.axiom_whitelist == ("propext",)
