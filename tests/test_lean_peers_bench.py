"""bench/lean_peers.py at a tiny size, so a broken peer setup (kimina-lean-server, LeanInteract) is caught; the
stand-in options it relies on (latency charged by command kind, echoed names); and the pool's header affinity, the
line of that bench where lean_server re-imported far more often than LeanInteract."""

import asyncio
import importlib.metadata
import json
import sys
import time
from pathlib import Path

import pytest
from fake_repl import FakeRepl, parse_args, read_log, stand_in_config

from trl_verigate.lean_server.pool import ReplPool

REPO = Path(__file__).resolve().parent.parent
HEADER = "import Mathlib"
OTHER_HEADER = "import Mathlib.Tactic"


def theorem(name: str) -> str:
    return f"theorem {name} : 1 = 1 := by\n  rfl\n\n#print axioms {name}"


async def with_pool(config, body):
    pool = ReplPool(config)
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
        [sys.executable, str(REPO / "tests" / "fake_repl.py"), "--no-transcripts", "--echo-names"],
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
    monkeypatch.syspath_prepend(str(REPO / "bench"))
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
    # A forged answer with the right env, written from inside the REPL, is what both peers read as Lean's answer:
    # they pass it (which also shows each peer ran the verdict jobs at all).
    for name in ("kimina-lean-server", "LeanInteract"):
        assert "adv_repl_forge_env" in results[name]["verdicts"]["passed_recorded"], name
    scale = results["lean_server HTTP"]["scale_out"]
    assert scale["one_per_s"] > 0 and scale["two_per_s"] > 0
    print(f"tiny peer bench: {time.monotonic() - started:.0f} s")


def header_loads(log_path: Path) -> int:
    return sum("env" not in row["request"] for row in read_log(log_path))


def test_interleaved_headers_settle_on_their_own_processes_instead_of_reimporting(tmp_path):
    """The peers bench's header-reuse line: 64 requests alternating two headers on 4 workers."""
    config = stand_in_config(tmp_path, "--latency", "0.01", "--import-latency", "1.0", workers=4, timeout=10.0)

    async def body(pool):
        headers = [HEADER if i % 2 == 0 else OTHER_HEADER for i in range(64)]
        results = await asyncio.gather(*(pool.run(h, theorem(f"t{i}"), 10.0) for i, h in enumerate(headers)))
        return [r["messages"][-1]["data"] for r, _ in results]

    texts = asyncio.run(with_pool(config, body))
    assert texts == [f"'t{i}' depends on axioms: [propext]" for i in range(64)]
    # The first four requests (A, B, A, B) open the four slots, one header load (1 s) each. From then on a freed slot
    # mostly finds a waiter of its own header; when one header's queue runs dry first, the other's few remaining
    # requests (at most 30 waiting x 10 ms per proof / 2 processes: 0.15 s) wait less than a 1 s load, so nothing
    # is evicted and nothing re-imports.
    assert header_loads(tmp_path / "repl.log") == 4


def test_a_header_without_a_process_still_gets_one_while_another_header_has_waiters(tmp_path):
    config = stand_in_config(tmp_path, "--latency", "0.2", "--import-latency", "4.0", workers=2, timeout=10.0)

    async def body(pool):
        names = [f"a{i}" for i in range(10)] + ["b"] + [f"a{i}" for i in range(10, 20)]
        await asyncio.gather(*(pool.run(OTHER_HEADER if n == "b" else HEADER, theorem(n), 10.0) for n in names))

    asyncio.run(with_pool(config, body))
    cmds = [row["request"]["cmd"] for row in read_log(tmp_path / "repl.log")]
    # b, with no process of its header, takes the first slot freed after a9 started (one eviction), while a10..a19
    # still wait for the other process: its header reaches a REPL (a process start away) before a16 does (6 x 0.2 s
    # of A's work later).
    assert cmds.index(OTHER_HEADER) < cmds.index(theorem("a16"))
    # A's one process then serves the rest (at most 9 waiting x 0.2 s < a 4 s load), so A is not loaded again.
    assert header_loads(tmp_path / "repl.log") == 3
