"""ReplProcess and ReplPool driven with raw REPL commands against the stand-in REPL."""

import asyncio
import os
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from fake_repl import read_log, stand_in_config

from trl_verigate.lean_server.pool import ReplPool
from trl_verigate.lean_server.process import ReplCrashed, ReplProcess, ReplStartError, ReplTimeout
from trl_verigate.lean_server.types import LeanServerConfig

pytestmark = pytest.mark.timeout(60)

HEADER = "import Mathlib"
OTHER_HEADER = "import Mathlib.Tactic"


def theorem(name: str) -> str:
    return f"theorem {name} : 1 = 1 := by\n  rfl\n\n#print axioms {name}"


def axioms_text(response: dict) -> str:
    return response["messages"][-1]["data"]


def headers_per_pid(tmp_path: Path) -> Counter:
    return Counter(row["pid"] for row in read_log(tmp_path / "repl.log") if "env" not in row["request"])


def pids(tmp_path: Path) -> set:
    return {row["pid"] for row in read_log(tmp_path / "repl.log")}


async def with_pool(config: LeanServerConfig, body):
    pool = ReplPool(config)
    try:
        return await body(pool)
    finally:
        await pool.close()


def test_commands_run_in_the_header_env_and_the_header_is_sent_once(tmp_path):
    async def body(pool):
        return [await pool.run(HEADER, theorem(f"t{i}"), 5.0) for i in range(5)]

    results = asyncio.run(with_pool(stand_in_config(tmp_path), body))
    assert [axioms_text(r) for r, _ in results] == [f"'t{i}' depends on axioms: [propext]" for i in range(5)]
    assert all(seconds >= 0 for _, seconds in results)
    log = read_log(tmp_path / "repl.log")
    assert [row["request"] for row in log[:2]] == [{"cmd": HEADER}, {"cmd": theorem("t0"), "env": 0}]
    assert list(headers_per_pid(tmp_path).values()) == [1]


def test_recycling_after_max_uses_starts_fresh_processes_each_loading_the_header_once(tmp_path):
    async def body(pool):
        for i in range(10):
            response, _ = await pool.run(HEADER, theorem(f"t{i}"), 5.0)
            assert axioms_text(response) == f"'t{i}' depends on axioms: [propext]"
        return dict(pool.counters)

    counters = asyncio.run(with_pool(stand_in_config(tmp_path, max_uses_per_repl=3), body))
    per_pid = headers_per_pid(tmp_path)
    assert len(per_pid) >= 4
    assert set(per_pid.values()) == {1}
    commands_per_pid = Counter(row["pid"] for row in read_log(tmp_path / "repl.log") if "env" in row["request"])
    assert max(commands_per_pid.values()) == 3
    assert counters["recycled"] == 3


@pytest.mark.parametrize("behaviour", ["crash", "garbage", "truncate"])
def test_a_broken_repl_fails_only_its_request_and_is_replaced(tmp_path, behaviour):
    async def body(pool):
        first, _ = await pool.run(HEADER, theorem("before"), 5.0)
        with pytest.raises(ReplCrashed) as crashed:
            await pool.run(HEADER, "theorem BREAK : 1 = 1 := by rfl", 5.0)
        after, _ = await pool.run(HEADER, theorem("after"), 5.0)
        return first, crashed.value, after

    config = stand_in_config(tmp_path, script=[{"match": "BREAK", "behaviour": behaviour}])
    first, crashed, after = asyncio.run(with_pool(config, body))
    assert crashed.status == "crashed"
    assert axioms_text(after) == "'after' depends on axioms: [propext]"
    assert len(pids(tmp_path)) == 2


def test_early_exit_is_a_crash_with_the_exit_status_and_stderr_in_the_reason(tmp_path):
    async def body(pool):
        await pool.run(HEADER, theorem("one"), 5.0)
        with pytest.raises(ReplCrashed) as crashed:
            await pool.run(HEADER, theorem("two"), 5.0)
        response, _ = await pool.run(HEADER, theorem("three"), 5.0)
        return str(crashed.value), response

    # The header counts as a command: the second proof finds the REPL gone.
    reason, response = asyncio.run(with_pool(stand_in_config(tmp_path, "--exit-after", "2"), body))
    assert "exit status 1" in reason and "exiting after 2 commands" in reason
    assert axioms_text(response) == "'three' depends on axioms: [propext]"


def test_a_hanging_command_times_out_and_its_process_group_is_killed(tmp_path):
    async def body(pool):
        with pytest.raises(ReplTimeout) as timed_out:
            await pool.run(HEADER, "theorem HANG : 1 = 1 := by rfl", 0.5)
        response, _ = await pool.run(HEADER, theorem("after"), 5.0)
        return timed_out.value, response

    config = stand_in_config(tmp_path, script=[{"match": "HANG", "behaviour": "hang"}])
    timed_out, response = asyncio.run(with_pool(config, body))
    assert timed_out.status == "timeout" and timed_out.time_s >= 0.5
    assert axioms_text(response) == "'after' depends on axioms: [propext]"
    hung_pid = read_log(tmp_path / "repl.log")[0]["pid"]
    assert not Path(f"/proc/{hung_pid}").exists()


def test_rlimit_as_stops_a_runaway_allocation(tmp_path):
    async def body(pool):
        with pytest.raises(ReplCrashed) as crashed:
            await pool.run(HEADER, "theorem OOM : 1 = 1 := by rfl", 20.0)
        return str(crashed.value)

    config = stand_in_config(tmp_path, script=[{"match": "OOM", "behaviour": "oom"}], memory_limit_mb=512)
    reason = asyncio.run(with_pool(config, body))
    assert "out of memory" in reason


PROBE_REPL = """
import json, os, resource, subprocess, sys
child = subprocess.Popen(["sleep", "600"])
lines = []
for line in sys.stdin:
    if line.strip():
        lines.append(line)
        continue
    if not lines:
        continue
    request = json.loads("".join(lines))
    lines = []
    report = {
        "env": 0 if "env" not in request else 1,
        "home": os.environ["HOME"], "tmpdir": os.environ["TMPDIR"], "cwd": os.getcwd(),
        "keys": sorted(os.environ), "rlimit_as": resource.getrlimit(resource.RLIMIT_AS)[0],
        "pid": os.getpid(), "sid": os.getsid(0), "child": child.pid,
    }
    sys.stdout.write(json.dumps(report) + "\\n\\n")
    sys.stdout.flush()
"""


def test_the_repl_runs_isolated_in_its_own_session_with_a_private_home_and_a_memory_limit(tmp_path, monkeypatch):
    # Without the sandbox, so the pids it reports are this machine's (tests/test_sandbox.py checks the sandbox).
    monkeypatch.setenv("LEAN_PATH", "/opt/lean/lib")
    monkeypatch.setenv("SECRET_API_TOKEN", "do-not-leak")
    config = LeanServerConfig(
        repl_command=[sys.executable, "-c", PROBE_REPL],
        project_dir=str(tmp_path),
        memory_limit_mb=1024,
        sandbox="none",
    )

    async def main():
        process = ReplProcess(config)
        await process.start(HEADER)
        report = await process.run({"cmd": "probe", "env": process.header_env}, 5.0)
        await process.close()
        return report

    report = asyncio.run(main())
    assert report["rlimit_as"] == 1024 << 20
    assert report["sid"] == report["pid"]
    assert report["cwd"] == str(tmp_path)
    assert report["tmpdir"].startswith(report["home"])
    assert report["home"] != os.environ.get("HOME")
    assert "LEAN_PATH" in report["keys"] and "SECRET_API_TOKEN" not in report["keys"]
    assert not Path(report["home"]).exists()
    # The REPL's own child was in the killed process group too.
    deadline = time.monotonic() + 5
    while Path(f"/proc/{report['child']}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{report['child']}").exists()


def test_a_missing_executable_is_a_start_error_that_says_what_to_configure(tmp_path):
    config = LeanServerConfig(repl_command=["no-such-lean-repl-binary"], project_dir=str(tmp_path))

    async def body(pool):
        with pytest.raises(ReplStartError) as failed:
            await pool.run(HEADER, theorem("t"), 5.0)
        return failed.value

    error = asyncio.run(with_pool(config, body))
    assert error.status == "error"
    assert "not found" in str(error) and "repl_command" in str(error)


def test_a_slow_start_is_bounded_by_startup_timeout_and_then_fails_fast(tmp_path):
    # The stand-in would take 30 s to start; the pool must give up after startup_timeout. The slack covers
    # spawning and killing a process on a loaded 2-core machine and stays far below the 30 s.
    startup_delay, startup_timeout, slack = 30.0, 2.0, 10.0
    config = stand_in_config(tmp_path, "--startup-delay", str(startup_delay), startup_timeout=startup_timeout)

    async def body(pool):
        errors, times = [], []
        for i in range(4):
            started = time.monotonic()
            with pytest.raises(ReplStartError) as failed:
                await pool.run(HEADER, theorem(f"t{i}"), 5.0)
            times.append(time.monotonic() - started)
            errors.append(str(failed.value))
        return errors, times, dict(pool.counters)

    errors, times, counters = asyncio.run(with_pool(config, body))
    assert all("startup_timeout=2 s" in e for e in errors)
    # Two failed starts, each waited for the whole startup_timeout and no longer (not for the REPL's 30 s)...
    assert counters["start_failures"] == 2
    assert all(startup_timeout <= t < startup_timeout + slack < startup_delay for t in times[:2]), times
    # ...then the back-off (4 s after two failures) answers without starting anything: well within startup_timeout.
    assert "not retried for another" in errors[2] and "not retried for another" in errors[3]
    assert all(t < startup_timeout / 2 for t in times[2:]), times


def test_a_header_with_errors_is_a_start_error(tmp_path):
    bad_header = "import Mathlib.DoesNotExist"
    response = {"messages": [{"severity": "error", "data": "unknown module prefix 'DoesNotExist'"}], "env": 0}
    config = stand_in_config(tmp_path, script=[{"match": "DoesNotExist", "response": response}])

    async def body(pool):
        with pytest.raises(ReplStartError) as failed:
            await pool.run(bad_header, theorem("t"), 5.0)
        good, _ = await pool.run(HEADER, theorem("t"), 5.0)
        return str(failed.value), good

    reason, good = asyncio.run(with_pool(config, body))
    assert "unknown module prefix" in reason and "header" in reason
    assert axioms_text(good) == "'t' depends on axioms: [propext]"


def test_a_batch_spreads_over_all_workers_and_never_exceeds_them(tmp_path):
    config = stand_in_config(tmp_path, "--latency", "0.01", workers=4)

    async def body(pool):
        results = await asyncio.gather(*(pool.run(HEADER, theorem(f"t{i}"), 5.0) for i in range(64)))
        return [axioms_text(r) for r, _ in results]

    texts = asyncio.run(with_pool(config, body))
    assert texts == [f"'t{i}' depends on axioms: [propext]" for i in range(64)]
    per_pid = Counter(row["pid"] for row in read_log(tmp_path / "repl.log") if "env" in row["request"])
    assert len(per_pid) == 4
    assert min(per_pid.values()) >= 4


def test_headers_get_their_own_workers_and_idle_ones_are_evicted_at_capacity(tmp_path):
    config = stand_in_config(tmp_path, workers=1)

    async def body(pool):
        for header in (HEADER, HEADER, OTHER_HEADER, OTHER_HEADER, HEADER):
            await pool.run(header, theorem("t"), 5.0)
            assert len(pool.live_pids()) <= 1

    asyncio.run(with_pool(config, body))
    log = read_log(tmp_path / "repl.log")
    sequence = [(row["pid"], row["request"].get("cmd") if "env" not in row["request"] else "proof") for row in log]
    first, second, third = sorted(pids(tmp_path), key=lambda pid: [p for p, _ in sequence].index(pid))
    assert sequence == [
        (first, HEADER),
        (first, "proof"),
        (first, "proof"),
        (second, OTHER_HEADER),
        (second, "proof"),
        (second, "proof"),
        (third, HEADER),
        (third, "proof"),
    ]


def test_cancelling_a_request_kills_its_process_and_the_pool_recovers(tmp_path):
    config = stand_in_config(tmp_path, script=[{"match": "SLOW", "behaviour": "sleep:30"}])

    async def body(pool):
        slow = asyncio.ensure_future(pool.run(HEADER, "theorem SLOW : 1 = 1 := by rfl", 60.0))
        await asyncio.sleep(0.5)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        response, _ = await pool.run(HEADER, theorem("after"), 5.0)
        return response

    response = asyncio.run(with_pool(config, body))
    assert axioms_text(response) == "'after' depends on axioms: [propext]"
    first_pid = read_log(tmp_path / "repl.log")[0]["pid"]
    assert not Path(f"/proc/{first_pid}").exists()


def test_close_kills_every_process_even_mid_request(tmp_path):
    config = stand_in_config(tmp_path, script=[{"match": "HANG", "behaviour": "hang"}], workers=2)

    async def main():
        pool = ReplPool(config)
        hanging = asyncio.ensure_future(pool.run(HEADER, "theorem HANG : 1 = 1 := by rfl", 60.0))
        await pool.run(HEADER, theorem("t"), 5.0)
        while not any("HANG" in row["request"].get("cmd", "") for row in read_log(tmp_path / "repl.log")):
            await asyncio.sleep(0.02)
        live = pool.live_pids()
        await pool.close()
        with pytest.raises(ReplCrashed):
            await hanging
        with pytest.raises(RuntimeError, match="closed"):
            await pool.run(HEADER, theorem("t"), 5.0)
        return live

    live = asyncio.run(main())
    assert len(live) == 2
    assert not any(Path(f"/proc/{pid}").exists() for pid in live)
