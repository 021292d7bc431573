"""A compromised REPL cannot answer for another caller (fair prechecks and quotas per owner: test_owners).

The stand-in's `forge-park` attack models the hijack a second review built: a thread of the REPL writes a
well-formed passing answer with the right env, and the main thread parks in read(0), so every later request is read
where the REPL's own loop would read it and answered with a forged pass. No framing check sees it (the right env,
the request read by the REPL's stdin thread, no extra byte, no process left). What holds is ownership: a REPL
serves one caller, and is killed, never handed over, when another caller needs its slot.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.fake_repl import read_log, stand_in_config
from tests.launch import serving
from trl_verigate.lean_server import LeanClient, LeanServer, ProofRequest
from trl_verigate.lean_server.service.http import create_app

IMPORTS = "import Mathlib\nimport Aesop"
HIJACK = ProofRequest("theorem hijack : (1 : ℕ) = 2 := by", "  norm_num")
# What honest Lean answers to the victims' false claims: an error at the proof (REPL line 2).
VICTIM_FAILS = {
    "match": "victim_",
    "response": {
        "env": 0,
        "messages": [
            {"severity": "error", "pos": {"line": 2, "column": 2}, "endPos": {"line": 2, "column": 10}, "data": "x"}
        ],
    },
}


def victim(index: int) -> ProofRequest:
    return ProofRequest(f"theorem victim_{index} : (1 : ℕ) = {index + 2} := by", "  norm_num")


def config(tmp_path: Path, **overrides):
    script = [{"match": "hijack", "behaviour": "forge-park"}, VICTIM_FAILS]
    overrides.setdefault("workers", 1)
    return stand_in_config(tmp_path, script=script, header=IMPORTS, **overrides)


def pids_of(tmp_path: Path, marker: str) -> set[int]:
    return {row["pid"] for row in read_log(tmp_path / "repl.log") if marker in row["request"].get("cmd", "")}


def alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status


def test_a_parked_repl_forges_its_own_callers_answers_but_never_another_callers(tmp_path):
    with LeanServer(config(tmp_path)) as server:
        [hijack] = server.verify([HIJACK], caller="attacker")
        # The forgery fools the REPL's verdict (what the recheck tier exists for) and every framing check.
        assert hijack.status == "passed" and server.stats()["compromised"] == 0
        [same_caller] = server.verify([victim(0)], caller="attacker")
        # What ownership does not stop: the hijacked REPL answers its own caller's next request with a forgery.
        assert same_caller.status == "passed"
        hijacked = pids_of(tmp_path, "hijack")
        victims = server.verify([victim(k) for k in range(1, 5)], caller="victim")
    assert [r.status for r in victims] == ["failed"] * 4, [r.reason for r in victims]
    assert len(hijacked) == 1
    # The victim's requests ran on another process, and the hijacked one was killed to make room: retired.
    served_victims = set().union(*(pids_of(tmp_path, f"victim_{k}") for k in range(1, 5)))
    assert served_victims and not served_victims & hijacked
    [hijacked_pid] = hijacked
    assert not alive(hijacked_pid)


def test_two_lean_clients_get_repls_of_their_own_from_one_server(tmp_path):
    with LeanServer(config(tmp_path)) as server, serving(create_app(server)) as url:
        attacker, victim_client = LeanClient([url]), LeanClient([url])
        assert attacker.caller != victim_client.caller
        [hijack] = attacker.verify([HIJACK])
        results = victim_client.verify([victim(k) for k in range(1, 4)])
        # A kimina-style client that names itself nothing is known by its address.
        health = httpx.get(f"{url}/health", timeout=10).json()
    assert hijack.status == "passed"
    assert [r.status for r in results] == ["failed"] * 3
    assert health["status"] in ("ok", "degraded")
    assert not pids_of(tmp_path, "victim_1") & pids_of(tmp_path, "hijack")
