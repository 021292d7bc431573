"""`trl-verigate --help` is complete: every option of every subcommand has help that states its default, each
subcommand lists only the flags it reads, a bad port is refused while parsing, and an unknown subcommand is
answered with the closest one."""

import argparse

import pytest

from trl_verigate.cli import build_parser, main

# Flags only a serving pool reads (precheck allow-list additions, size limits, the audit sample): lean-doctor checks
# a setup and takes none of them.
SERVER_ONLY = {
    "--allow-tactic",
    "--allow-namespace",
    "--max-heartbeats",
    "--max-request-bytes",
    "--max-batch-bytes",
    "--recheck-sample-rate",
    "--recheck-seed",
}


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]


@pytest.mark.parametrize("command", sorted(subcommands()))
def test_every_option_has_help_that_states_its_default(command):
    parser = subcommands()[command]
    formatter = parser._get_formatter()
    missing = []
    for action in options(parser):
        assert action.help, f"{command} {action.option_strings[0]} has no help"
        switch = isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction))
        if action.required or switch or action.default is argparse.SUPPRESS:
            continue
        # As --help prints it (a DefaultsHelpFormatter adds the default itself).
        if "default" not in formatter._expand_help(action):
            missing.append(action.option_strings[-1])
    assert missing == [], f"{command}: no default stated for {missing}"


def test_coq_doctor_sandbox_and_recheck_say_what_they_do_and_their_default():
    parser = subcommands()["coq-doctor"]
    helps = {a.option_strings[0]: a.help for a in options(parser)}
    assert "bubblewrap" in helps["--sandbox"] and "(default: auto)" in helps["--sandbox"]
    assert "coqchk" in helps["--recheck"] and "(default: coqchk)" in helps["--recheck"]


def test_lean_doctor_lists_no_server_only_flag_and_lean_server_lists_them_all():
    flags = {command: {f for a in options(p) for f in a.option_strings} for command, p in subcommands().items()}
    assert not SERVER_ONLY & flags["lean-doctor"]
    assert SERVER_ONLY <= flags["lean-server"]
    assert {"--repl-command", "--project-dir", "--sandbox", "--recheck", "--recheck-timeout"} <= flags["lean-doctor"]


@pytest.mark.parametrize("port", ["99999", "-5", "65536", "eighty"])
def test_lean_server_refuses_a_port_outside_0_to_65535_while_parsing(port, capsys, monkeypatch):
    # No REPL is configured: a check past parsing would complain about the REPL instead, and no pool starts.
    monkeypatch.delenv("LEAN_REPL", raising=False)
    with pytest.raises(SystemExit) as exit_info:
        main(["lean-server", "--port", port])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"argument --port: '{port}' is not a port; give a whole number from 0 to 65535" in err


@pytest.mark.parametrize(
    "typed, expected",
    [
        ("lean-docter", "did you mean lean-doctor?"),
        ("evalute", "did you mean evaluate?"),
        ("coq_doctor", "did you mean coq-doctor?"),
        ("zzz", "the commands are lean-server, lean-doctor, coq-doctor"),
    ],
)
def test_an_unknown_subcommand_names_the_closest(typed, expected, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([typed])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"trl-verigate: error: unknown command '{typed}'; {expected}" in err
