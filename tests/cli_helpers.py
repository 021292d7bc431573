"""Helpers of the CLI tests: a machine without Lean, and the one-line usage error every bad flag must give."""

import pytest

from trl_verigate import cli
from trl_verigate.lean_server.cli import options as cli_options


@pytest.fixture
def bare_machine(tmp_path, monkeypatch):
    """No Lean anywhere: PATH holds nothing, no REPL or project configured."""
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    monkeypatch.setenv("PATH", str(empty_bin))
    monkeypatch.delenv(cli_options.REPL_ENV, raising=False)
    monkeypatch.delenv(cli_options.PROJECT_ENV, raising=False)
    project = tmp_path / "proj"
    project.mkdir()
    return project


def one_line_usage_error(capsys, argv: list[str]) -> str:
    """`trl-verigate ARGV` must exit 2 with one line on stderr and no traceback; returns the line."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    return lines[0]
