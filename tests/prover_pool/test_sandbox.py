"""The bubblewrap sandbox, for real: what a REPL sees inside it, and the stand-in's escapes, each failing under bwrap.

Every escape is also run with sandbox="none", where it succeeds against the stand-in: that shows the attack is
real and the sandbox is what stops it.
"""

import asyncio
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.fake_repl import CHILD_MARKER, DEFAULT_TRANSCRIPTS, stand_in_config, write_script
from tests.launch import REPO_ROOT, TESTS_DIR
from tests.machine import processes_with
from trl_verigate.lean_server.core.types import LeanServerConfig
from trl_verigate.lean_server.repl import process as process_module
from trl_verigate.lean_server.repl.process import ReplProcess, WorkerStartError
from trl_verigate.prover_pool import procfs, sandbox
from trl_verigate.prover_pool.pool import WorkerPool

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(
        shutil.which("bwrap") is None, reason="bubblewrap is not installed (apt-get install bubblewrap)"
    ),
]

HEADER = "import Mathlib"
FAKE_REPL = TESTS_DIR / "fake_repl.py"


def reports(response: dict) -> list[str]:
    return [m["data"] for m in response.get("messages", []) if m.get("data", "").startswith("attack ")]


async def started(config: LeanServerConfig) -> ReplProcess:
    process = ReplProcess(config)
    await process.start(HEADER)
    return process


def run_one(config: LeanServerConfig, cmd: str) -> dict:
    async def main():
        process = await started(config)
        try:
            return await process.run({"cmd": cmd, "env": process.header_env}, 10.0)
        finally:
            await process.close()

    return asyncio.run(main())


PROBE = r"""
import json, os, resource, sys
def writable(path):
    try:
        with open(os.path.join(path, ".probe"), "w"):
            pass
        return True
    except OSError:
        return False
for line in sys.stdin:
    if not line.strip():
        continue
    request = json.loads(line)
    pids = [name for name in os.listdir("/proc") if name.isdigit()]
    report = {
        "env": 0 if "env" not in request else 1,
        "pids": pids, "ppid_environ": open(f"/proc/{os.getppid()}/environ", "rb").read().decode(errors="replace"),
        "keys": sorted(os.environ), "rlimit_as": resource.getrlimit(resource.RLIMIT_AS)[0],
        "home": os.environ["HOME"], "cwd": os.getcwd(), "uid": os.getuid(),
        "writable": {p: writable(p) for p in [os.environ["HOME"], os.environ["TMPDIR"], os.getcwd(), "/", "/tmp", "/usr", "/dev", "/etc"]},
        "visible": {p: os.path.exists(p) for p in request["cmd"].split(",")},
        "caps": [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0],
        "interfaces": sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else [],
    }
    sys.stdout.write(json.dumps(report) + "\n\n")
    sys.stdout.flush()
"""


def test_inside_the_sandbox_the_repl_sees_only_its_own_processes_files_and_scratch(tmp_path, monkeypatch):
    monkeypatch.setenv("LEAN_PATH", "/opt/lean/lib")
    monkeypatch.setenv("SECRET_API_TOKEN", "do-not-leak")
    config = LeanServerConfig(
        repl_command=[sys.executable, "-c", PROBE], project_dir=str(tmp_path), memory_limit_mb=1024, sandbox="bwrap"
    )
    # Paths of this machine the REPL has no business seeing; /usr/bin it needs.
    hidden = [
        p for p in ("/etc/shadow", "/etc/hosts", "/var", "/home", str(TESTS_DIR.parent / ".git")) if os.path.exists(p)
    ]
    assert len(hidden) >= 3
    report = run_one(config, ",".join([*hidden, "/usr/bin"]))
    # Its own PID namespace: bubblewrap's init, the REPL; not this test process nor any other worker.
    assert len(report["pids"]) <= 3 and str(os.getpid()) not in report["pids"]
    assert report["rlimit_as"] == 1024 << 20
    assert report["cwd"] == str(tmp_path)
    assert "LEAN_PATH" in report["keys"] and "SECRET_API_TOKEN" not in report["keys"]
    assert "do-not-leak" not in report["ppid_environ"]
    # Exactly one writable place: the private scratch HOME (TMPDIR is inside it).
    assert {path for path, ok in report["writable"].items() if ok} == {report["home"], report["home"] + "/tmp"}
    assert report["visible"] == {**dict.fromkeys(hidden, False), "/usr/bin": True}
    assert int(report["caps"], 16) == 0
    assert report["interfaces"] in ([], ["lo"])


def test_the_argv_binds_the_repl_paths_read_only_and_only_the_scratch_writable(tmp_path):
    env = {"PATH": "/usr/bin", "HOME": str(tmp_path / "scratch"), "LEAN_PATH": "/usr/lib:relative/ignored"}
    program = sys.executable
    read_only = sandbox.read_only_paths(
        [program, str(FAKE_REPL), "--flag", "relative.txt"], program, str(tmp_path), env
    )
    # The project, the stand-in's file (inside tests/), the interpreter and its installation above bin/; /usr/lib is
    # inside /usr, which the system binds cover, so it is listed but never a child of another listed path.
    assert str(tmp_path) in read_only and str(FAKE_REPL) in read_only
    assert os.path.dirname(os.path.dirname(os.path.realpath(program))) in read_only
    assert all(not a.startswith(b + "/") for a in read_only for b in read_only)
    # System programs are visible through the /usr bind already.
    assert sandbox.read_only_paths(["/usr/bin/env", "lake"], "/usr/bin/env", str(tmp_path), env) == [str(tmp_path)]
    argv = sandbox.bwrap_argv(
        "/usr/bin/bwrap", ["repl"], read_only=read_only, writable=str(tmp_path / "scratch"), cwd=str(tmp_path), env=env
    )
    assert argv[argv.index("--") + 1 :] == ["repl"]
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--disable-userns"):
        assert flag in argv
    assert argv[argv.index("--bind") + 1] == str(tmp_path / "scratch")
    assert argv.count("--bind") == 1


class Listener:
    """A TCP listener on 127.0.0.1 that records every connection it accepts."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.accepted = 0
        self.stop = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.stop:
            try:
                connection, _ = self.server.accept()
            except OSError:
                continue
            self.accepted += 1
            connection.close()

    def close(self):
        self.stop = True
        self.thread.join()
        self.server.close()


@pytest.mark.parametrize(("mode", "connects"), [("bwrap", False), ("none", True)])
def test_no_connection_leaves_the_sandbox(tmp_path, mode, connects):
    listener = Listener()
    try:
        config = stand_in_config(tmp_path, script=[{"match": "escape_net", "behaviour": "escape:net"}], sandbox=mode)
        response = run_one(config, f"theorem escape_net : 1 = 1 := rfl -- port={listener.port}")
        time.sleep(0.3)
    finally:
        listener.close()
    (report,) = reports(response)
    assert listener.accepted == (1 if connects else 0), report
    assert report.endswith(": connected") == connects


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(("mode", "changed"), [("bwrap", False), ("none", True)])
def test_the_project_its_oleans_and_the_repl_program_are_read_only(tmp_path, mode, changed):
    project = tmp_path / "project"
    olean = project / ".lake" / "build" / "lib" / "Mathlib.olean"
    olean.parent.mkdir(parents=True)
    olean.write_bytes(b"olean bytes")
    program = project / "repl.py"
    shutil.copy(FAKE_REPL, program)
    before = {path: digest(path) for path in (olean, program)}
    script = write_script(tmp_path / "script.jsonl", [{"match": "escape_write", "behaviour": "escape:write"}])
    config = LeanServerConfig(
        repl_command=[sys.executable, str(program), "--transcripts", str(DEFAULT_TRANSCRIPTS), "--script", script],
        project_dir=str(project),
        startup_timeout=10.0,
        sandbox=mode,
    )
    (report,) = reports(run_one(config, "theorem escape_write : 1 = 1 := rfl"))
    # It tried all three: a new file in the project, the .olean, its own program.
    assert all(str(path) in report for path in (project / "escape-written.txt", olean, program)), report
    after = {path: digest(path) for path in (olean, program)}
    assert (after != before) == changed, report
    assert (project / "escape-written.txt").exists() == changed
    if not changed:
        assert report.count("Read-only file system") == 3, report


def victim_and_attacker(tmp_path: Path, mode: str) -> tuple[dict, dict | Exception]:
    """A victim REPL sleeping on its request while a second REPL writes a forged answer into its fd 1."""
    (tmp_path / "victim").mkdir()
    (tmp_path / "attacker").mkdir()
    victim_config = stand_in_config(
        tmp_path / "victim", script=[{"match": "victim", "behaviour": "sleep:1.0"}], sandbox=mode
    )
    attacker_config = stand_in_config(
        tmp_path / "attacker", script=[{"match": "escape_fd", "behaviour": "escape:fd"}], sandbox=mode
    )

    async def main():
        victim, attacker = await asyncio.gather(started(victim_config), started(attacker_config))
        try:
            waiting = asyncio.ensure_future(
                victim.run({"cmd": "theorem victim : 1 = 1 := rfl\n\n#print axioms victim", "env": 0}, 10.0)
            )
            await asyncio.sleep(0.3)
            attack = await attacker.run({"cmd": f"theorem escape_fd -- target_pid={victim.pid}", "env": 0}, 10.0)
            try:
                victim_response = await waiting
            except Exception as error:  # noqa: BLE001 - the test inspects it
                victim_response = error
            return attack, victim_response
        finally:
            await asyncio.gather(victim.close(), attacker.close())

    return asyncio.run(main())


def test_another_workers_stdout_is_out_of_reach(tmp_path):
    attack, victim = victim_and_attacker(tmp_path, "bwrap")
    (report,) = reports(attack)
    assert "failed" in report and "No such file" in report, report
    # The victim gets its own answer: the stand-in's axioms line for `victim` (env 1: the header took 0).
    assert victim["env"] == 1
    assert victim["messages"][-1]["data"] == "'victim' depends on axioms: [propext]"


def test_without_the_sandbox_another_workers_stdout_is_written(tmp_path):
    attack, victim = victim_and_attacker(tmp_path, "none")
    (report,) = reports(attack)
    assert report.startswith("attack escape:fd: wrote") and "bytes" in report, report
    # The forged bytes landed in the victim's pipe; the framing checks then refuse the victim's answer.
    assert isinstance(victim, process_module.WorkerCompromised), victim


SECRET = "verigate-secret-4f1c"
ENVIRON_SERVER = """
import asyncio, json, sys
sys.path.insert(0, {repo!r})
from tests.fake_repl import stand_in_config
from trl_verigate.lean_server.repl.process import ReplProcess
from trl_verigate.prover_pool.pool import WorkerPool

config = stand_in_config({tmp!r}, script=[{{"match": "escape_env", "behaviour": "escape:environ"}}], sandbox={mode!r})

async def main():
    pool = WorkerPool(config, ReplProcess)
    try:
        response, _ = await pool.run(config.header, "theorem escape_env : 1 = 1 := rfl", 10.0)
    finally:
        await pool.close()
    print(json.dumps(response))

asyncio.run(main())
"""


@pytest.mark.parametrize(("mode", "leaks"), [("bwrap", False), ("none", True)])
def test_the_servers_environment_is_out_of_reach(tmp_path, mode, leaks):
    # The server process starts with the secret in its environment, as a trainer holding API tokens would.
    code = ENVIRON_SERVER.format(repo=str(REPO_ROOT), tmp=str(tmp_path), mode=mode)
    env = {**os.environ, "VERIGATE_TEST_SECRET": SECRET}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    response = json.loads(done.stdout)
    (report,) = reports(response)
    assert "/proc/self/environ" in report  # the attempt ran and read what it could
    assert (SECRET in json.dumps(response)) == leaks


@pytest.mark.parametrize(("mode", "survives"), [("bwrap", False), ("none", True)])
def test_a_child_in_its_own_session_dies_with_the_sandbox(tmp_path, monkeypatch, mode, survives):
    # The process-tree check and the kill of every descendant are blinded, so only the sandbox can stop the child:
    # it was double-forked into its own session, out of reach of the kill of the REPL's process group.
    monkeypatch.setattr(procfs, "process_tree", lambda root: {root})
    monkeypatch.setattr(procfs.ProcessWatch, "joined", lambda self: set())
    config = stand_in_config(tmp_path, script=[{"match": "escape_child", "behaviour": "forge-child"}], sandbox=mode)
    script = str(tmp_path / "script.jsonl")

    async def main():
        process = await started(config)
        response = await process.run({"cmd": "theorem escape_child : 1 = 1 := rfl", "env": process.header_env}, 10.0)
        await process.close()
        deadline = time.monotonic() + 5
        while processes_with(CHILD_MARKER + script) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        children = processes_with(CHILD_MARKER + script)
        others = [pid for pid in processes_with(script) if pid not in children]
        for pid in children:
            os.kill(pid, signal.SIGKILL)
        # Let the loop see the pipes the killed child held close, before it is closed.
        await asyncio.sleep(0.2)
        return response, children, others

    response, children, others = asyncio.run(main())
    assert reports(response) == ["attack forge-child: left a child to answer the next request"]
    assert bool(children) == survives
    # Nor is the stand-in itself left behind in the sandbox's other session.
    assert others == []


def test_sandbox_bwrap_without_bubblewrap_fails_the_start_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    config = stand_in_config(tmp_path, sandbox="bwrap")
    with pytest.raises(WorkerStartError) as failed:
        asyncio.run(started(config))
    assert "apt-get install bubblewrap" in str(failed.value) and "sandbox='none'" in str(failed.value)


def test_sandbox_bwrap_with_a_bubblewrap_that_cannot_run_names_its_error(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "bwrap"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(WorkerStartError) as failed:
        asyncio.run(started(stand_in_config(tmp_path, sandbox="bwrap")))
    assert "No permissions to create new namespace" in str(failed.value)
    assert "apt-get install bubblewrap" in str(failed.value)


def test_sandbox_auto_without_bubblewrap_runs_unsandboxed_and_says_so_once(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(sandbox, "_fallback_logged", False)
    config = stand_in_config(tmp_path, sandbox="auto", workers=2)

    async def body():
        pool = WorkerPool(config, ReplProcess)
        try:
            await asyncio.gather(*(pool.run(HEADER, f"theorem t{i} : 1 = 1 := rfl", 5.0) for i in range(4)))
            return [p.sandboxed for p in pool._processes]
        finally:
            await pool.close()

    with caplog.at_level("WARNING", logger=sandbox.__name__):
        sandboxed = asyncio.run(body())
    assert sandboxed and not any(sandboxed)
    warnings = [r.getMessage() for r in caplog.records if r.name == sandbox.__name__]
    assert len(warnings) == 1 and "apt-get install bubblewrap" in warnings[0]


def test_sandbox_auto_uses_bubblewrap_where_it_works(tmp_path):
    async def body():
        process = await started(stand_in_config(tmp_path, sandbox="auto"))
        await process.close()
        return process.sandboxed

    assert asyncio.run(body())
