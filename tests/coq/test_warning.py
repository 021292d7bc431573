"""The startup warning for a configuration where an axiom could pass unchecked: `print_assumptions` "never" or
"sample" with `recheck="none"` while the header's libraries hold an axiom. Coq itself says which headers load one."""

import logging

import pytest

from trl_verigate.coq.config import CoqServerConfig
from trl_verigate.coq.server import CoqServer

pytestmark = pytest.mark.timeout(300)
UNGUARDED = {"print_assumptions": "never", "recheck": "none"}


def start_warnings(caplog, **settings) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="trl_verigate.coq.server"):
        with CoqServer(CoqServerConfig(workers=1, spare_workers=0, **settings)):
            pass
    return [record.getMessage() for record in caplog.records if record.name == "trl_verigate.coq.server"]


def test_an_axiom_in_the_header_with_nothing_to_catch_it_warns_once_naming_the_settings(caplog):
    (warning,) = start_warnings(caplog, header="Require Import Classical.", **UNGUARDED)
    assert "print_assumptions='never'" in warning and "recheck='none'" in warning
    # `Classical` holds one axiom, excluded middle.
    assert "loads the axioms classic;" in warning


def test_sampled_print_assumptions_with_no_recheck_warns_naming_the_settings(caplog):
    settings = {"print_assumptions": "sample", "print_assumptions_fraction": 0.1, "recheck": "none"}
    (warning,) = start_warnings(caplog, header="Require Import Classical.", **settings)
    assert "print_assumptions='sample'" in warning and "recheck='none'" in warning
    assert "print_assumptions_fraction=0.1" in warning and "loads the axioms classic;" in warning


@pytest.mark.parametrize(
    "settings",
    [
        {"header": "Require Import Arith Lia.", **UNGUARDED},  # no axiom in Arith or Lia
        {"header": "Require Import Arith Lia.", "print_assumptions": "sample", "recheck": "none"},
        {"header": "Require Import Classical.", "print_assumptions": "sample"},  # coqchk rechecks
        {"header": "Require Import Classical.", "print_assumptions": "never"},  # coqchk rechecks
        {"header": "Require Import Classical.", "recheck": "none"},  # Print Assumptions runs
    ],
)
def test_no_warning_when_something_catches_an_axiom_or_there_is_none(caplog, settings):
    assert start_warnings(caplog, **settings) == []
