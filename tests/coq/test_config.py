"""CoqServerConfig: every bad setting is refused at construction in one line naming the field and the fix."""

import pytest

from trl_verigate.coq.config import CoqServerConfig


@pytest.mark.parametrize(
    "overrides, error, words",
    [
        ({"coqidetop_command": "coqidetop.opt -main-channel stdfds"}, ValueError, ["coqidetop_command", "argv"]),
        ({"header": "Axiom x : False."}, ValueError, ["CoqServerConfig.header", "Require Import"]),
        ({"header": "Require Import Arith"}, ValueError, ["CoqServerConfig.header", "ending in '.'"]),
        ({"header": ""}, ValueError, ["CoqServerConfig.header", "empty"]),
        ({"header": 3}, ValueError, ["CoqServerConfig.header", "str"]),
        ({"print_assumptions": "sometimes"}, ValueError, ["print_assumptions", "'always'"]),
        ({"print_assumptions_fraction": 1.5}, ValueError, ["print_assumptions_fraction", "(0, 1]"]),
        ({"recheck": "lean"}, ValueError, ["CoqServerConfig.recheck", "'coqchk'"]),
        ({"sandbox": "docker"}, ValueError, ["CoqServerConfig.sandbox", "'bwrap'"]),
        ({"workers": 0}, ValueError, ["CoqServerConfig.workers", ">= 1"]),
        ({"timeout": -1}, ValueError, ["CoqServerConfig.timeout", "> 0"]),
        ({"memory_limit_mb": 0}, ValueError, ["memory_limit_mb", ">= 1"]),
        ({"spare_workers": -1}, ValueError, ["spare_workers", ">= 0"]),
        ({"axiom_whitelist": "classic"}, TypeError, ["axiom_whitelist", "list of axiom names"]),
        ({"extra_tactics": "my_tac"}, TypeError, ["extra_tactics", "list of tactic names"]),
        ({"seed": "0"}, TypeError, ["CoqServerConfig.seed", "int"]),
        ({"max_request_bytes": 0}, ValueError, ["max_request_bytes", ">= 1"]),
    ],
)
def test_bad_settings_are_refused_naming_the_field(overrides, error, words):
    with pytest.raises(error) as raised:
        CoqServerConfig(**overrides)
    message = str(raised.value)
    assert "\n" not in message and all(word in message for word in words), message


def test_a_header_of_requires_imports_and_scopes_is_accepted():
    header = "From Coq Require Import Arith.\nRequire Export Lia.\nImport Nat.\nOpen Scope nat_scope."
    assert CoqServerConfig(header=header).header == header
