"""bench/lean_peers.py at a tiny size, so a broken peer setup (kimina-lean-server, LeanInteract) is caught; the
stand-in options it relies on (latency charged by command kind, echoed names). The pool's header affinity, which
that bench's header-reuse line measures, is tested in test_lean_pool.py."""

import importlib.metadata
import json
import sys
import time
from pathlib import Path

import pytest

from tests.fake_repl import FakeRepl, parse_args, read_log
from tests.launch import REPO_ROOT
from trl_verigate.lean_server.repl.process import ReplProcess
from trl_verigate.prover_pool.pool import WorkerPool

HEADER = "import Mathlib"
OTHER_HEADER = "import Mathlib.Tactic"


def theorem(name: str) -> str:
    return f"theorem {name} : 1 = 1 := by\n  rfl\n\n#print axioms {name}"


async def with_pool(config, body):
    pool = WorkerPool(config, ReplProcess)
    try:
        return await body(pool)
    finally:
        await pool.close()


def latency_of(cmd: str, *flags: str) -> float:
    return FakeRepl(parse_args(["--no-transcripts", *flags])).latency_of(cmd)


def test_latency_is_charged_by_command_kind():
    flags = ("--latency", "0.05", "--housekeeping-latency", "0.001", "--import-latency", "0.5")
    proof = "theorem t : 1 = 1 := by\n  rfl"
    assert latency_of(proof, *flags) == 0.05
    assert latency_of("#eval 1", *flags) == 0.001
    assert latency_of("import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000", *flags) == 0.001 + 0.5
    # A complete file imports and proves: both costs.
    assert latency_of("import Mathlib\n" + proof, *flags) == 0.05 + 0.5
    # Without the new flags every command costs --latency, as before.
    assert latency_of("#eval 1", "--latency", "0.05") == 0.05
    assert latency_of("import Mathlib", "--latency", "0.05") == 0.05


def test_echo_names_tells_whose_answer_it_is(tmp_path):
    import subprocess

    requests = '{"cmd": "theorem alpha : 1 = 1 := by\\n  rfl"}\n\n{"cmd": "#eval 1", "env": 0}\n\n'
    answer = subprocess.run(
        [sys.executable, str(REPO_ROOT / "tests" / "fake_repl.py"), "--no-transcripts", "--echo-names"],
        input=requests,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    first, second = [json.loads(block) for block in answer.split("\n\n") if block.strip()]
    assert [m["data"] for m in first["messages"]] == ["echo: alpha"]
    assert first["env"] == 0
    assert second == {"env": 1}


@pytest.mark.slow
def test_the_peer_bench_runs_at_a_tiny_size(tmp_path, monkeypatch):
    pytest.importorskip("lean_interact")
    try:
        importlib.metadata.version("kimina-ast-server")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("kimina-ast-server is not installed (pip install -r bench/requirements-peers.txt)")
    monkeypatch.syspath_prepend(str(REPO_ROOT / "bench"))
    import lean_peers

    chart, report = tmp_path / "peers.png", tmp_path / "peers.json"
    argv = [
        "--latency", "0.02", "--import-latency", "0.05", "--workers", "2", "--batches", "8,24", "--rounds", "1",
        "--timeout", "2", "--reuse-proofs", "8", "--fault-proofs", "8", "--scale-proofs", "24",
        "--corpus-limit", "30", "--chart", str(chart), "--json", str(report),
    ]  # fmt: skip
    started = time.monotonic()
    assert lean_peers.main(argv) == 0
    results = json.loads(report.read_text())["results"]
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    for name in ("lean_server", "lean_server HTTP", "kimina-lean-server", "LeanInteract"):
        for n in (8, 24):
            row = results[name][f"batch_{n}"]
            # Every proof of the batch came back as its own pass: the peer really ran the stand-in.
            assert row["wrong"] == 0, (name, n, row)
            assert row["proofs_per_s"] > 0 and row["first_result_s"] <= row["p99_s"]
    for name in ("lean_server", "kimina-lean-server", "LeanInteract"):
        reuse = results[name]["header_reuse"]
        # Two headers, two REPLs: at least one load per REPL and per header. kimina counts a header load against the
        # proof's timeout, so on a loaded machine some of its answers may be timeouts; most must be right.
        assert reuse["header_loads"] >= 2 and reuse["wrong"] < reuse["proofs"] // 2, (name, reuse)
        faults = results[name]["faults"]
        assert all(faults[kind] != "passed" for kind in ("hang", "crash", "garbage", "oom")), (name, faults)
    assert results["lean_server"]["header_reuse"]["wrong"] == 0
    ours = results["lean_server"]["faults"]
    assert (ours["correct"], ours["crossed"], ours["lost"]) == (8, 0, 0)
    assert ours == {**ours, "hang": "timeout", "crash": "crashed", "garbage": "crashed", "oom": "crashed"}
    for name in ("lean_server", "lean_server + recheck"):
        verdict = results[name]["verdicts"]
        assert verdict["passed_recorded"] == [] and verdict["passed_stand_in"] == [], (name, verdict)
        assert verdict["attacks"] == 30 + 3
    # A forged answer written from inside the REPL is what both peers read as Lean's answer: each passes at least one
    # of the three forgeries (which also shows each peer ran the verdict jobs at all). Which ones varies with the
    # peer's scheduling: a forgery leaves the REPL's real answer in the pipe for the next command on that REPL to read
    # (LeanInteract passed forge and forge-env in three runs, forge and forge-exit in one).
    forgeries = {"adv_repl_forge", "adv_repl_forge_env", "adv_repl_forge_exit"}
    for name in ("kimina-lean-server", "LeanInteract"):
        passed = results[name]["verdicts"]["passed_recorded"]
        assert forgeries.intersection(passed), (name, passed)
    scale = results["lean_server HTTP"]["scale_out"]
    assert scale["one_per_s"] > 0 and scale["two_per_s"] > 0
    print(f"tiny peer bench: {time.monotonic() - started:.0f} s")


def header_loads(log_path: Path) -> int:
    return sum("env" not in row["request"] for row in read_log(log_path))
