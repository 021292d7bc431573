"""`trl-verigate` CLI: argument handling, one-line errors, and the lean-server and es-export subcommands."""

import socket
import sys
from urllib.parse import urlsplit

import httpx
import pytest

from tests import cli_helpers
from tests.launch import TESTS_DIR, lean_server_processes
from trl_verigate import cli
from trl_verigate.lean_server import LeanClient, ProofRequest
from trl_verigate.lean_server.service.wire import SERVICE_NAME

bare_machine = cli_helpers.bare_machine


def test_lean_server_without_a_repl_exits_with_the_fix(bare_machine, capsys):
    line = cli_helpers.one_line_usage_error(capsys, ["lean-server", "--project-dir", str(bare_machine), "--port", "0"])
    assert line.startswith("trl-verigate lean-server: error: no Lean REPL configured: ")
    assert "TRL_VERIGATE_LEAN_REPL" in line and line.endswith("(`trl-verigate lean-server --help` lists every flag)")


def test_lean_server_refuses_a_repl_it_cannot_run_before_serving(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("trl_verigate.lean_server.service.http.serve", lambda *a, **k: pytest.fail("it served"))
    base = ["lean-server", "--project-dir", str(tmp_path), "--port", "0"]
    line = cli_helpers.one_line_usage_error(capsys, [*base, "--repl-command", "/nonexistent/repl"])
    assert "--repl-command /nonexistent/repl runs /nonexistent/repl, which does not exist; give a built REPL" in line
    script = tmp_path / "repl"
    script.write_text("#!/bin/sh\n")  # not executable
    line = cli_helpers.one_line_usage_error(capsys, [*base, "--repl-command", str(script)])
    assert f"runs {script}, which is not an executable file" in line
    line = cli_helpers.one_line_usage_error(capsys, [*base, "--repl-command", "lake env /nonexistent/repl"])
    assert "runs lake, which is not on PATH" in line or "runs /nonexistent/repl, which does not exist" in line


def test_bad_files_and_values_of_the_subcommands_are_one_line(tmp_path, capsys):
    line = cli_helpers.one_line_usage_error(capsys, ["lean-doctor", "--header-file", str(tmp_path / "none.lean")])
    assert line.startswith(f"trl-verigate lean-doctor: error: --header-file {tmp_path / 'none.lean'}: no such file")
    line = cli_helpers.one_line_usage_error(capsys, ["lean-server", "--timeout", "soon"])
    assert "argument --timeout: invalid float value: 'soon'" in line
    line = cli_helpers.one_line_usage_error(capsys, ["coq-doctor", "--header", "Axiom cheat : False."])
    assert line.startswith("trl-verigate coq-doctor: error: --header: CoqServerConfig.header may hold only")
    line = cli_helpers.one_line_usage_error(capsys, ["es-export", "--output", str(tmp_path)])
    assert "the following arguments are required: --state" in line


def test_es_export_of_a_missing_state_is_one_line(tmp_path, capsys):
    missing = tmp_path / "run" / "es_state.json"
    assert cli.main(["es-export", "--state", str(missing), "--output", str(tmp_path / "out")]) == 2
    captured = capsys.readouterr()
    expected = f"es-export: --state {missing}: {missing} does not exist; give an es_state.json or the checkpoint "
    assert captured.err == expected + "directory holding one\n"
    assert not (tmp_path / "out").exists()


def test_es_export_onto_a_missing_base_model_is_one_line(tmp_path, capsys):
    from trl_verigate.es.noise import NOISE_VERSION
    from trl_verigate.es.state import STATE_FILENAME, STATE_FORMAT, STATE_FORMAT_VERSION, write_state

    header = {"format": STATE_FORMAT, "format_version": STATE_FORMAT_VERSION, "noise_version": NOISE_VERSION}
    base_model = {"name_or_path": str(tmp_path / "gone"), "dtype": "float32", "parameters_sha256": "0"}
    write_state({**header, "base_model": base_model, "parameters": [], "history": []}, str(tmp_path / STATE_FILENAME))
    base = str(tmp_path / "no-such-base")
    assert cli.main(["es-export", "--state", str(tmp_path), "--base-model", base, "--output", str(tmp_path / "o")]) == 2
    assert (
        capsys.readouterr().err
        == f"es-export: --base-model {base}: no such directory; give the base model ES trained from\n"
    )


@pytest.mark.slow
def test_two_lean_servers_started_together_on_port_0_report_different_ports_that_both_answer(tmp_path):
    proof = ProofRequest(statement="theorem zero_add_one : 1 + 0 = 1 := by", proof="  simp")
    with lean_server_processes(tmp_path, 2) as servers:
        ports = [urlsplit(server.url).port for server in servers]
        assert ports[0] != ports[1] and 0 not in ports, ports
        for server in servers:
            # The same port on stdout, first thing, in the form a launcher without --port-file can parse.
            assert server.stdout.read_text().splitlines()[0] == f"listening on {server.url}"
            assert httpx.get(f"{server.url}/health", timeout=30).json()["service"] == SERVICE_NAME
            [result] = LeanClient(urls=[server.url], retries=0).verify([proof], progress=False)
            assert result.status == "passed", result
    for server in servers:
        # Stopped (SIGTERM): the file is gone, so no launcher reads the port of a server that is not there.
        assert server.process.returncode is not None and not server.port_file.exists()


@pytest.mark.slow
def test_a_lean_server_whose_port_is_taken_is_reported_as_exited_not_waited_for(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(AssertionError, match=r"(?s)exited with status 3 .*Address already in use"):
            with lean_server_processes(tmp_path, 1, "--port", str(taken.getsockname()[1])):
                pass


def test_unknown_subcommand_is_an_argparse_error(capsys):
    assert "unknown command 'no-such-command'; the commands are" in cli_helpers.one_line_usage_error(
        capsys, ["no-such-command"]
    )


@pytest.mark.parametrize("command", ["lean-server", "lean-doctor", "lean-recheck", "es-export"])
def test_every_subcommand_help_starts_with_what_it_does(command, capsys):
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    usage_and_description = capsys.readouterr().out.split("\n\n")
    assert len(usage_and_description) > 2 and not usage_and_description[1].lstrip().startswith("options"), (
        usage_and_description[:2]
    )


def test_lean_server_owner_flags_reach_the_server_or_fail_in_one_line(tmp_path, capsys, monkeypatch):
    served = {}
    monkeypatch.setattr(
        "trl_verigate.lean_server.service.http.serve", lambda config, **kwargs: served.update(config=config, **kwargs)
    )
    repl = f"{sys.executable} {TESTS_DIR / 'fake_repl.py'}"
    base = ["lean-server", "--project-dir", str(tmp_path), "--port", "0", "--repl-command", repl]
    line = cli_helpers.one_line_usage_error(capsys, [*base, "--api-keys", str(tmp_path / "missing.json")])
    assert "--api-keys: cannot read" in line and "missing.json" in line
    line = cli_helpers.one_line_usage_error(capsys, [*base, "--max-workers-per-owner", "0"])
    assert "max_workers_per_owner must be >= 1" in line
    keys = tmp_path / "keys.json"
    keys.write_text('{"k1": "team-a"}')
    assert cli.main([*base, "--api-keys", str(keys), "--max-workers-per-owner", "2"]) == 0
    assert served["api_keys"] == {"k1": "team-a"} and served["config"].max_workers_per_owner == 2
