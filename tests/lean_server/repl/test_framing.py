"""Framing integrity: the server never takes a forged or stray REPL answer for the real one.

The stand-in's attacks (tests/fake_repl.py) write complete passing answers to the REPL's own stdout the way code
running inside Lean could; the real answer each time is "unsolved goals", so a `passed` verdict can only come
from a forgery. The control test shows each forgery is one the verdict would pass without the checks.
"""

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from tests.fake_repl import CHILD_MARKER, read_log, stand_in_config
from tests.machine import processes_with
from trl_verigate.lean_server.core.types import ProofRequest
from trl_verigate.lean_server.repl.process import ReplProcess
from trl_verigate.lean_server.service.server import LeanServer
from trl_verigate.prover_pool import procfs
from trl_verigate.prover_pool.procfs import ProcessWatch

pytestmark = pytest.mark.timeout(120)

UNSOLVED = {
    "messages": [
        {
            "severity": "error",
            "pos": {"line": 1, "column": 40},
            "endPos": {"line": 2, "column": 10},
            "data": "unsolved goals\n⊢ False",
        }
    ],
    "env": 0,
}


def false_theorem(name: str) -> ProofRequest:
    return ProofRequest(statement=f"theorem {name} : (1:ℕ) = 2 := by", proof="  norm_num")


def true_theorem(name: str) -> ProofRequest:
    return ProofRequest(statement=f"theorem {name} : (1:ℕ) + 1 = 2 := by", proof="  norm_num")


def attack(name: str, behaviour: str) -> dict:
    """A script row: `behaviour` runs for the theorem `name`, whose real answer is then UNSOLVED."""
    return {"match": name, "behaviour": behaviour, "response": UNSOLVED}


INNOCENT_FALSE = {"match": "innocent_false", "response": UNSOLVED}

FORGERIES = [
    # A forged answer with the env the request named (a stale id), then the real answer.
    ("forge", "its answer has env 0 where this REPL's next env is 1"),
    # The right next env, then the real answer right behind it.
    ("forge-env", "wrote to stdout when no answer was due"),
    # The right next env, then the REPL exits instead of answering.
    ("forge-exit", "exited right after answering"),
]


@pytest.mark.parametrize(("behaviour", "why"), FORGERIES, ids=[b for b, _ in FORGERIES])
def test_a_forged_answer_is_an_error_and_concurrent_requests_get_their_own_answers(tmp_path, behaviour, why):
    script = [attack("forged_theorem", behaviour), INNOCENT_FALSE]
    config = stand_in_config(tmp_path, script=script, workers=2)
    with LeanServer(config) as server:
        results = server.verify(
            [false_theorem("forged_theorem"), true_theorem("innocent_true"), false_theorem("innocent_false")]
        )
        stats = server.stats()
    assert [r.status for r in results] == ["error", "passed", "failed"], [r.reason for r in results]
    assert "the REPL is compromised" in results[0].reason and why in results[0].reason
    assert stats["compromised"] == 1


@pytest.mark.parametrize("behaviour", [b for b, _ in FORGERIES])
def test_without_the_framing_checks_each_forgery_would_pass(tmp_path, monkeypatch, behaviour):
    async def reading_at_once(self):
        return None

    monkeypatch.setattr(ReplProcess, "_wait_until_reading", reading_at_once)
    monkeypatch.setattr(ReplProcess, "_answer_breach", lambda self, *args: None)
    config = stand_in_config(tmp_path, script=[attack("forged_theorem", behaviour)])
    with LeanServer(config) as server:
        (result,) = server.verify([false_theorem("forged_theorem")])
    assert result.status == "passed", result.reason


def leftover_children(script: Path) -> list[int]:
    return processes_with(CHILD_MARKER + str(script))


NO_BWRAP = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@pytest.mark.parametrize("sandbox", [pytest.param("bwrap", marks=NO_BWRAP), "none"])
def test_a_child_left_to_answer_the_next_request_is_caught_and_killed(tmp_path, sandbox):
    script = [attack("forged_child", "forge-child"), INNOCENT_FALSE]
    config = stand_in_config(tmp_path, script=script, sandbox=sandbox)
    with LeanServer(config) as server:
        (first,) = server.verify([false_theorem("forged_child")])
        (second,) = server.verify([false_theorem("innocent_false")])
        stats = server.stats()
    assert first.status == "error" and "process(es) it started are still running" in first.reason, first.reason
    # The child would have answered this one with a pass; it runs on a fresh REPL and gets its own answer.
    assert second.status == "failed", second.reason
    assert stats["compromised"] == 1
    deadline = time.monotonic() + 5
    while leftover_children(tmp_path / "script.jsonl") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert leftover_children(tmp_path / "script.jsonl") == []


def test_a_request_taken_from_stdin_by_someone_else_is_an_error_even_unseen_by_the_process_check(tmp_path, monkeypatch):
    # Blinded, the process check misses the child; the REPL's own reading thread then never gets the next request.
    monkeypatch.setattr(ProcessWatch, "joined", lambda self: set())
    script = [attack("forged_child", "forge-child"), INNOCENT_FALSE]
    with LeanServer(stand_in_config(tmp_path, script=script)) as server:
        (first,) = server.verify([false_theorem("forged_child")])
        (second,) = server.verify([false_theorem("innocent_false")])
        (third,) = server.verify([false_theorem("innocent_false")])
    assert first.status == "failed", first.reason
    assert second.status == "error" and "someone else read the request" in second.reason, second.reason
    assert third.status == "failed", third.reason


def test_without_the_checks_the_child_answers_the_next_request_with_a_pass(tmp_path, monkeypatch):
    async def reading_at_once(self):
        return None

    monkeypatch.setattr(ProcessWatch, "joined", lambda self: set())
    monkeypatch.setattr(ReplProcess, "_wait_until_reading", reading_at_once)
    monkeypatch.setattr(ReplProcess, "_answer_breach", lambda self, *args: None)
    script = [attack("forged_child", "forge-child"), INNOCENT_FALSE]
    with LeanServer(stand_in_config(tmp_path, script=script)) as server:
        (first,) = server.verify([false_theorem("forged_child")])
        (second,) = server.verify([false_theorem("innocent_false")])
    assert first.status == "failed", first.reason
    assert second.status == "passed", second.reason


def test_an_answer_written_while_idle_compromises_the_repl_and_the_next_request_runs_on_a_fresh_one(tmp_path):
    # A thread (not a process) of the REPL writes a forged answer 0.3 s after answering, while it is idle.
    script = [attack("forged_later", "forge-later:0.3"), INNOCENT_FALSE]
    config = stand_in_config(tmp_path, script=script)
    with LeanServer(config) as server:
        (first,) = server.verify([false_theorem("forged_later")])
        time.sleep(1.0)
        (second,) = server.verify([false_theorem("innocent_false")])
        stats = server.stats()
    assert first.status == "failed", first.reason
    assert second.status == "failed", second.reason
    assert stats["compromised"] == 1
    proofs = [row for row in read_log(tmp_path / "repl.log") if "env" in row["request"]]
    assert [("forged_later" in row["request"]["cmd"], "innocent_false" in row["request"]["cmd"]) for row in proofs] == [
        (True, False),
        (False, True),
    ]
    assert proofs[0]["pid"] != proofs[1]["pid"]


def run_raw(config, commands: list[dict]) -> list:
    """Each command's response (or the exception it raised) from one ReplProcess after the header load."""

    async def main():
        process = ReplProcess(config)
        await process.start(config.header)
        out = []
        try:
            for command in commands:
                try:
                    out.append(await process.run(command, 5.0))
                except Exception as error:  # noqa: BLE001 - the test inspects it
                    out.append(error)
        finally:
            await process.close()
        return out

    return asyncio.run(main())


def test_error_objects_without_an_env_create_none_and_keep_the_env_sequence(tmp_path):
    config = stand_in_config(tmp_path, "--no-transcripts")
    # The header load gets env 0; an unknown env is answered without one, so the next command gets env 1, then 2.
    commands = [{"cmd": "example : 1 = 1 := rfl", "env": 99}] + [{"cmd": "example : 1 = 1 := rfl", "env": 0}] * 2
    unknown, first, second = run_raw(config, commands)
    assert unknown == {"message": "Unknown environment."}
    assert first == {"env": 1} and second == {"env": 2}


def test_an_answer_with_neither_env_nor_error_message_is_a_breach(tmp_path):
    config = stand_in_config(tmp_path, "--no-transcripts", script=[{"match": "no_env", "response": {"messages": []}}])
    (error,) = run_raw(config, [{"cmd": "theorem no_env : 1 = 1 := rfl", "env": 0}])
    assert error.status == "error" and "neither an env nor an error message" in str(error)


@pytest.mark.parametrize("behaviour", ["forge-env", "forge-exit"])
def test_without_a_known_stdin_thread_the_fixed_grace_still_catches_a_forgery_right_before_the_answer(
    tmp_path, monkeypatch, behaviour
):
    # As on an architecture whose read() number is not known: no thread checks, only the grace after each answer.
    monkeypatch.setattr(procfs, "READ_SYSCALL", None)
    config = stand_in_config(tmp_path, script=[attack("forged_theorem", behaviour)])
    with LeanServer(config) as server:
        (result,) = server.verify([false_theorem("forged_theorem")])
    assert result.status == "error" and "the REPL is compromised" in result.reason, result.reason
