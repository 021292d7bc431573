"""The Lean flags (lean_server.cli.options): how they resolve the REPL and reach `LeanServerConfig`."""

import pytest

from trl_verigate import cli
from trl_verigate.lean_server.cli import options as cli_options


def test_resolve_repl_command_wraps_a_binary_in_lake_env_only_when_lake_exists(tmp_path, monkeypatch):
    binary = tmp_path / "repl"
    binary.write_text("")
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert cli_options.resolve_repl_command(str(binary), tmp_path) == [str(binary)]
    lake_dir = tmp_path / "lakebin"
    lake_dir.mkdir()
    (lake_dir / "lake").write_text("#!/bin/sh\n")
    (lake_dir / "lake").chmod(0o755)
    monkeypatch.setenv("PATH", str(lake_dir))
    assert cli_options.resolve_repl_command(str(binary), tmp_path) == ["lake", "env", str(binary)]
    assert cli_options.resolve_repl_command("lake env 'my repl' --flag", tmp_path) == [
        "lake",
        "env",
        "my repl",
        "--flag",
    ]
    monkeypatch.setenv(cli_options.REPL_ENV, "python3 fake.py")
    assert cli_options.resolve_repl_command(None, tmp_path) == ["python3", "fake.py"]


def test_relative_repl_paths_are_read_from_the_callers_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "repl").write_text("")
    project = tmp_path / "elsewhere"
    # A lone path, and a path inside an argv: both from the cwd, not from the project the REPL runs in.
    assert cli_options.resolve_repl_command("bin/repl", project)[-1] == str(tmp_path / "bin" / "repl")
    argv = cli_options.resolve_repl_command("python3 ./scripts/run.py --log out/log.jsonl --flag", project)
    assert argv == [
        "python3",
        str(tmp_path / "scripts" / "run.py"),
        "--log",
        str(tmp_path / "out" / "log.jsonl"),
        "--flag",
    ]


def test_lean_server_flags_reach_the_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = cli.build_parser().parse_args(
        [
            "lean-server",
            "--repl-command",
            "python3 repl.py",
            "--project-dir",
            str(tmp_path),
            "--sandbox",
            "none",
            "--recheck-command",
            "./check --fast",
            "--recheck",
            "sample",
            "--recheck-sample-rate",
            "0.5",
            "--max-request-bytes",
            "1000",
            "--max-batch-bytes",
            "5000",
            "--startup-timeout",
            "42",
            "--recheck-timeout",
            "77",
            "--recheck-seed",
            "9",
        ]
    )
    config = cli_options.config_from_args(args, workers=1)
    assert (config.startup_timeout, config.recheck_timeout, config.recheck_seed) == (42.0, 77.0, 9)
    assert config.sandbox == "none"
    assert config.recheck == "sample" and config.recheck_sample_rate == 0.5
    assert config.recheck_command == [str(tmp_path / "check"), "--fast"]
    assert config.max_request_bytes == 1000 and config.max_batch_bytes == 5000
    repl = ["--repl-command", "python3 repl.py"]
    defaults = cli_options.config_from_args(cli.build_parser().parse_args(["lean-server", *repl]), 1)
    assert defaults.recheck == "auto" and defaults.recheck_command is None
    with_checker = cli.build_parser().parse_args(["lean-server", *repl, "--recheck-command", "c"])
    assert cli_options.config_from_args(with_checker, 1).recheck == "auto"
    bad = cli.build_parser().parse_args(["lean-server", *repl, "--recheck", "passed"])
    with pytest.raises(ValueError, match="needs recheck_command"):
        cli_options.config_from_args(bad, 1)
