"""`trl-verigate coq-doctor` on this machine's Coq, and with a program missing."""

import argparse

from trl_verigate.cli import main
from trl_verigate.coq import doctor


def test_the_doctor_passes_on_a_working_setup(capsys):
    assert main(["coq-doctor"]) == 0
    out = capsys.readouterr().out
    for line in ("✓ coqidetop", "✓ coqc", "✓ coqchk", "✓ header", "✓ honest proof", "✓ forged proof"):
        assert line in out
    assert "all checks passed" in out


def test_the_doctor_fails_naming_the_fix_for_a_header_coq_cannot_load(capsys):
    assert main(["coq-doctor", "--header", "Require Import NoSuchLibrary."]) == 1
    out = capsys.readouterr().out
    assert "✗ header" in out and "NoSuchLibrary" in out and "failed: header, honest proof" in out


def test_the_doctor_refuses_a_bad_header_in_one_line(capsys):
    args = argparse.Namespace(header="Axiom x : False.", sandbox="auto", recheck="coqchk")
    assert doctor._run_coq_doctor(args) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert "CoqServerConfig.header" in line
