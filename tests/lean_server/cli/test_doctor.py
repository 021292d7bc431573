"""`trl-verigate lean-doctor` (lean_server.cli.doctor) on a machine without Lean and with the stand-ins."""

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests import cli_helpers
from tests.fake_repl import read_log
from tests.launch import TESTS_DIR
from trl_verigate import cli
from trl_verigate.lean_server.cli import options as cli_options
from trl_verigate.lean_server.core.types import LeanServerConfig

FAKE_REPL = TESTS_DIR / "fake_repl.py"
bare_machine = cli_helpers.bare_machine


def doctor_lines(capsys, *argv) -> tuple[int, dict[str, str], str]:
    code = cli.main(["lean-doctor", *argv])
    out = capsys.readouterr().out
    marks = {}
    for line in out.splitlines():
        if line[:2] in ("✓ ", "✗ ", "- "):
            name = line[2:].split(":", 1)[0]
            marks[name] = line[0]
    return code, marks, out


def test_doctor_with_nothing_installed_fails_cleanly_with_a_fix_per_failure(bare_machine, capsys):
    code, marks, out = doctor_lines(capsys, "--project-dir", str(bare_machine))
    assert code == 1
    assert "Traceback" not in out
    assert [marks[name] for name in ("elan", "lake", "lean", "project", "REPL", "Mathlib")] == ["✗"] * 6
    assert marks["header"] == marks["proof"] == "-"
    assert "elan-init.sh" in out
    assert "lake exe cache get" in out
    assert "git clone https://github.com/leanprover-community/repl" in out
    assert out.count("    fix: ") == 6


def fix_of(out: str, check: str) -> str:
    """The `fix:` line printed under a failed check."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"✗ {check}: "))
    assert lines[at + 1].startswith("    fix: "), lines[at : at + 2]
    return lines[at + 1].removeprefix("    fix: ")


def test_without_a_project_the_repl_fix_says_to_create_it_first(bare_machine, capsys):
    _, marks, out = doctor_lines(capsys, "--project-dir", str(bare_machine))
    assert marks["project"] == marks["REPL"] == "✗"
    repl_fix = fix_of(out, "REPL")
    # No lean-toolchain exists in the project dir, so the fix must not tell the user to copy it from there.
    assert str(bare_machine / "lean-toolchain") not in out
    assert repl_fix.startswith(f"first create the Lean project (see `project`) and export {cli_options.PROJECT_ENV}=")
    assert f'cp "${cli_options.PROJECT_ENV}/lean-toolchain" . && lake build' in repl_fix


def test_with_a_project_the_repl_fix_copies_its_toolchain(bare_machine, capsys):
    write_toolchain(bare_machine, "leanprover/lean4:v4.33.0-rc2")
    _, marks, out = doctor_lines(capsys, "--project-dir", str(bare_machine))
    assert marks["project"] == "✓" and marks["REPL"] == "✗"
    repl_fix = fix_of(out, "REPL")
    assert repl_fix.startswith("git clone https://github.com/leanprover-community/repl && cd repl && ")
    assert f"cp {bare_machine / 'lean-toolchain'} . && lake build" in repl_fix


def write_toolchain(directory: Path, toolchain: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "lean-toolchain").write_text(toolchain + "\n")


def stand_in_args(
    tmp_path: Path, project: Path, header: str = "", script_rows=(), log: Path | None = None
) -> list[str]:
    header_file = tmp_path / "header.lean"
    header_file.write_text(header)
    command = [sys.executable, str(FAKE_REPL)]
    if log is not None:
        command += ["--log", str(log)]
    if script_rows:
        script = tmp_path / "script.jsonl"
        script.write_text("".join(json.dumps(row) + "\n" for row in script_rows))
        command += ["--script", str(script)]
    return ["--project-dir", str(project), "--repl-command", shlex.join(command), "--header-file", str(header_file)]


@pytest.mark.slow
def test_doctor_runs_the_header_and_a_proof_through_the_stand_in(bare_machine, tmp_path, capsys):
    write_toolchain(bare_machine, "leanprover/lean4:v4.33.0-rc2")
    code, marks, out = doctor_lines(capsys, *stand_in_args(tmp_path, bare_machine))
    assert marks["project"] == "✓" and "v4.33.0-rc2" in out
    assert marks["REPL"] == "✓"
    assert marks["Mathlib"] == "-"  # the empty header imports nothing
    assert marks["header"] == "✓"
    assert marks["proof"] == "✓"
    assert code == 1  # elan/lake/lean are still missing on this machine
    assert "failed: elan, lake, lean" in out


@pytest.mark.slow
def test_doctor_reports_a_header_that_does_not_load(bare_machine, tmp_path, capsys):
    write_toolchain(bare_machine, "leanprover/lean4:v4.33.0-rc2")
    missing_module = {
        "match": "import Nonexistent",
        "response": {
            "messages": [
                {
                    "severity": "error",
                    "pos": {"line": 1, "column": 0},
                    "endPos": None,
                    "data": "unknown module prefix 'Nonexistent'",
                }
            ],
            "env": 0,
        },
    }
    args = stand_in_args(tmp_path, bare_machine, header="import Nonexistent", script_rows=[missing_module])
    code, marks, out = doctor_lines(capsys, *args)
    assert code == 1
    assert marks["header"] == "✗"
    assert "unknown module prefix 'Nonexistent'" in out
    assert marks["proof"] == "-"


DECIDE_FAILED = {
    "match": "doctor_check",
    "response": {
        "messages": [
            {
                "severity": "error",
                "pos": {"line": 2, "column": 0},
                "endPos": {"line": 2, "column": 6},
                "data": "decide failed",
            }
        ],
        "env": 0,
    },
}


@pytest.mark.slow
def test_doctor_reports_a_trivial_proof_that_fails(bare_machine, tmp_path, capsys):
    write_toolchain(bare_machine, "leanprover/lean4:v4.33.0-rc2")
    code, marks, out = doctor_lines(capsys, *stand_in_args(tmp_path, bare_machine, script_rows=[DECIDE_FAILED]))
    assert code == 1
    assert marks["header"] == "✓"
    assert marks["proof"] == "✗"
    assert "status=failed" in out and "decide failed" in out


@pytest.mark.slow
@pytest.mark.parametrize(("script_rows", "proof_mark"), [((), "✓"), ((DECIDE_FAILED,), "✗")], ids=["passes", "fails"])
def test_doctor_loads_the_header_once_and_proves_in_that_env(bare_machine, tmp_path, capsys, script_rows, proof_mark):
    # With Mathlib each header load takes minutes, so the proof check must reuse the REPL the header check started.
    write_toolchain(bare_machine, "leanprover/lean4:v4.33.0-rc2")
    header = "import Mathlib\nset_option maxHeartbeats 400000"
    log = tmp_path / "requests.jsonl"
    args = stand_in_args(tmp_path, bare_machine, header=header, script_rows=script_rows, log=log)
    code, marks, out = doctor_lines(capsys, *args)
    assert marks["header"] == "✓"
    assert marks["proof"] == proof_mark
    assert code == 1  # elan/lake/lean are missing on this machine either way
    rows = read_log(log)
    # The REPL loads the imports; the header's other lines run with the proof, as LeanServer sends them.
    header_loads = [row for row in rows if row["request"]["cmd"] == "import Mathlib"]
    assert len(header_loads) == 1, rows
    assert "env" not in header_loads[0]["request"]
    proofs = [row for row in rows if "doctor_check" in row["request"]["cmd"]]
    assert len(proofs) == 1, rows
    assert proofs[0]["request"]["cmd"].startswith("set_option maxHeartbeats 400000\n")
    assert proofs[0]["pid"] == header_loads[0]["pid"]
    assert isinstance(proofs[0]["request"]["env"], int)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("behaviour", "flags", "status", "fix"),
    [
        ("crash", [], "crashed", "raise --memory-limit-mb"),
        ("hang", ["--timeout", "0.5"], "timeout", "raise --timeout"),
    ],
)
def test_doctor_reports_a_repl_that_dies_on_the_proof(bare_machine, tmp_path, capsys, behaviour, flags, status, fix):
    write_toolchain(bare_machine, "leanprover/lean4:v4.33.0-rc2")
    args = stand_in_args(tmp_path, bare_machine, script_rows=[{"match": "doctor_check", "behaviour": behaviour}])
    code, marks, out = doctor_lines(capsys, *args, *flags)
    assert code == 1
    assert marks["header"] == "✓"
    assert marks["proof"] == "✗"
    assert f"status={status}" in out
    assert fix in fix_of(out, "proof")
    assert "Traceback" not in out


@pytest.mark.slow
def test_doctor_runs_the_repl_under_its_memory_limit(bare_machine, tmp_path, capsys):
    # 1 MiB of address space cannot hold an interpreter, so the header check fails only if the limit is applied.
    write_toolchain(bare_machine, "leanprover/lean4:v4.33.0-rc2")
    code, marks, out = doctor_lines(capsys, *stand_in_args(tmp_path, bare_machine), "--memory-limit-mb", "1")
    assert code == 1
    assert marks["header"] == "✗"
    assert marks["proof"] == "-"


def test_doctor_compares_the_repl_toolchain_with_the_project(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    project = tmp_path / "proj"
    repl_dir = tmp_path / "repl"
    write_toolchain(project, "leanprover/lean4:v4.33.0")
    write_toolchain(repl_dir, "leanprover/lean4:v4.20.0")
    binary = repl_dir / cli_options.REPL_BUILD_PATH
    binary.parent.mkdir(parents=True)
    # Exits at once: the doctor must still report the toolchain mismatch and the dead REPL, not crash.
    binary.write_text("#!/bin/sh\nexit 3\n")
    binary.chmod(0o755)
    monkeypatch.delenv(cli_options.REPL_ENV, raising=False)
    empty_header = tmp_path / "header.lean"
    empty_header.write_text("")
    code, marks, out = doctor_lines(capsys, "--project-dir", str(project), "--header-file", str(empty_header))
    assert code == 1
    assert marks["REPL"] == "✓"  # found next to the project without any configuration
    assert marks["REPL toolchain"] == "✗"
    assert "REPL built for leanprover/lean4:v4.20.0, project uses leanprover/lean4:v4.33.0" in out
    assert marks["header"] == "✗"
    assert "Traceback" not in out


def test_doctor_refuses_a_repl_path_that_does_not_exist_without_pointing_at_itself(
    bare_machine, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    code, marks, out = doctor_lines(
        capsys, "--project-dir", str(bare_machine), "--repl-command", f"{shlex.quote(sys.executable)} ./no/repl.py"
    )
    assert code == 1
    assert marks["REPL"] == "✗"
    assert f"{tmp_path / 'no' / 'repl.py'} does not exist" in out
    # Nothing was run, so nothing downstream gets a mark or an unrelated fix.
    assert marks["header"] == marks["proof"] == "-"
    assert "lean-doctor" not in out


@pytest.mark.slow
def test_doctor_runs_a_repl_given_by_a_relative_path_from_another_directory(
    bare_machine, tmp_path, capsys, monkeypatch
):
    # The stand-in sits at a path relative to the cwd; the REPL runs with the project (elsewhere) as its cwd.
    here = tmp_path / "caller"
    (here / "tools").mkdir(parents=True)
    (here / "tools" / "fake_repl.py").write_text(FAKE_REPL.read_text())
    monkeypatch.chdir(here)
    header_file = tmp_path / "header.lean"
    header_file.write_text("")
    code, marks, out = doctor_lines(
        capsys,
        "--project-dir",
        str(bare_machine),
        "--repl-command",
        f"{shlex.quote(sys.executable)} tools/fake_repl.py",
        "--header-file",
        str(header_file),
        "--sandbox",
        "none",
    )
    assert marks["REPL"] == "✓" and marks["header"] == "✓" and marks["proof"] == "✓", out


def test_doctor_says_training_uses_the_repl_alone_without_a_checker(bare_machine, capsys):
    _, marks, out = doctor_lines(capsys, "--project-dir", str(bare_machine))
    assert marks["recheck"] == "-"
    recheck_line = next(line for line in out.splitlines() if line.startswith("- recheck: "))
    assert "REPL verdict alone" in recheck_line and "--recheck-command" in recheck_line
    assert marks["backend replay"] == "-" and "lake and lean not on PATH" in out
    assert marks["backend comparator"] == "-" and "comparator not on PATH" in out


FAKE_CHECKER = TESTS_DIR / "fake_checker.py"


@pytest.mark.parametrize(
    ("flags", "mark", "text"),
    [
        ((), "✓", "confirmed the honest proof and overturned the forged pass"),
        (("--behaviour", "crash"), "✗", "exit status 3"),
        (("--refuse-id", "doctor_check"), "✗", "refused the honest proof"),
        (("--accept-all",), "✗", "confirmed the forged pass"),
    ],
    ids=["verified", "crashes", "refuses-the-honest-proof", "checks-nothing"],
)
def test_doctor_self_tests_the_configured_checker(bare_machine, tmp_path, capsys, flags, mark, text):
    from trl_verigate.lean_server.recheck import self_test

    log = tmp_path / "checker.log"
    argv = [sys.executable, str(FAKE_CHECKER), "--log", str(log), *flags]
    code, marks, out = doctor_lines(capsys, "--project-dir", str(bare_machine), "--recheck-command", shlex.join(argv))
    assert marks["recheck"] == mark and text in out
    [run] = [json.loads(line) for line in log.read_text().splitlines() if "payload" in line]
    items = {item["id"]: item for item in run["payload"]["items"]}
    assert (items["doctor_check"]["statement"], items["doctor_check"]["proof"]) == self_test.HONEST[:2]
    assert (items["doctor_forged"]["statement"], items["doctor_forged"]["proof"]) == self_test.FORGED[:2]
    # Where the server runs it: in the project (LeanServerConfig.project_dir is the checker's cwd).
    assert Path(run["cwd"]) == Path(bare_machine).resolve()
    # Only a verified checker is recorded, so that recheck="auto" turns it on for this project and header.
    key = self_test.checker_key(argv, str(Path(bare_machine).resolve()), "import Mathlib\nimport Aesop")
    assert self_test.is_verified(key) == (mark == "✓")


def write_executable(directory: Path, name: str, body: str = "#!/bin/sh\nexit 0\n") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(body)
    path.chmod(0o755)
    return path


def test_doctor_lists_the_backends_whose_tools_it_finds(bare_machine, tmp_path, capsys):
    tools = tmp_path / "bin"  # the bare machine's PATH
    for name in ("lake", "lean", "comparator", "landrun"):
        write_executable(tools, name)
    _, marks, out = doctor_lines(capsys, "--project-dir", str(bare_machine))
    # Found, but they print no version: the toolchain lines must not claim a working lake/lean.
    assert marks["lake"] == marks["lean"] == "✗" and "printed nothing" in out
    assert marks["backend replay"] == "✓" and f"lake ({tools / 'lake'})" in out
    assert marks["backend comparator"] == "✓"
    assert "landrun found, lean4export NOT on PATH" in out


def test_the_doctor_waits_longer_for_a_first_import_than_the_server():
    doctor = cli.build_parser().parse_args(["lean-doctor"])
    server = cli.build_parser().parse_args(["lean-server"])
    assert doctor.startup_timeout == 600.0
    assert server.startup_timeout == LeanServerConfig().startup_timeout
