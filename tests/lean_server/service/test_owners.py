"""Owners a client cannot forge: fair prechecks per owner, REPL quotas, and API keys mapped to owners.

Fairness is measured in the order prechecks start, not in wall time, so it holds on a loaded machine: the large
owner's prechecks are held on a gate the test opens one at a time.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import pytest

from tests.fake_repl import read_log, stand_in_config
from tests.launch import serving
from trl_verigate.lean_server import LeanClient, LeanServer, ProofRequest
from trl_verigate.lean_server.service import server as server_module
from trl_verigate.lean_server.service.http import create_app
from trl_verigate.lean_server.service.owners import load_api_keys
from trl_verigate.prover_pool.owner import Owner
from trl_verigate.prover_pool.service import PRECHECK_THREADS

pytestmark = pytest.mark.timeout(180)

IMPORTS = "import Mathlib\nimport Aesop"
WAIT_S = 60.0
# A proof of 63 KiB: one tactic and a long comment, under the 64 KiB request limit.
LARGE_PROOF = "  rfl\n  -- " + "x" * (63 * 1024)


def config(tmp_path: Path, **overrides):
    overrides.setdefault("workers", 2)
    return stand_in_config(tmp_path, header=IMPORTS, **overrides)


class PrecheckLog:
    """Records the order prechecks start in; the large owner's wait on a gate the test opens one at a time."""

    def __init__(self, monkeypatch):
        self.order: list[str] = []
        self.changed = threading.Condition()
        self.gate = threading.Semaphore(0)
        original = server_module.prepare

        def prepare(request, *args, **kwargs):
            kind = "large" if "large_" in request.statement else "small"
            with self.changed:
                self.order.append(kind)
                self.changed.notify_all()
            if kind == "large":
                self.gate.acquire()
            return original(request, *args, **kwargs)

        monkeypatch.setattr(server_module, "prepare", prepare)

    def wait_for(self, predicate, what: str) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: predicate(self.order), WAIT_S), f"{what}; order: {self.order}"


def wait_until(predicate, what: str) -> None:
    event = threading.Event()
    for _ in range(int(WAIT_S / 0.01)):
        if predicate():
            return
        event.wait(0.01)
    raise AssertionError(what)


@pytest.mark.parametrize("split", ["one batch", "eight calls"])
def test_one_owners_eight_large_prechecks_delay_another_owners_small_batch_by_at_most_one(tmp_path, monkeypatch, split):
    """Owner A's 8 x 63 KiB proofs hold every precheck thread; owner B's 8 small proofs queue. When one of A's
    prechecks finishes, all of B's run before any other of A's starts: B waits for one precheck, not for A's batch.
    A's batch sent as 8 separate verify calls gets no more than as one batch: the queues are per owner."""
    log = PrecheckLog(monkeypatch)
    large = [ProofRequest(f"theorem large_{k} : 1 = 1 := by", LARGE_PROOF) for k in range(8)]
    small = [ProofRequest(f"theorem small_{k} : 1 = 1 := by", "  rfl") for k in range(8)]
    with LeanServer(config(tmp_path)) as server:
        server.verify([ProofRequest("theorem small_warm : 1 = 1 := by", "  rfl")], caller="B")
        log.order.clear()
        batches = [large] if split == "one batch" else [[request] for request in large]
        senders = [threading.Thread(target=server.verify, args=(batch,), kwargs={"caller": "A"}) for batch in batches]
        try:
            for sender in senders:
                sender.start()
            log.wait_for(lambda order: len(order) == PRECHECK_THREADS, "A's prechecks did not fill the threads")
            receiver = threading.Thread(target=server.verify, args=(small,), kwargs={"caller": "B"})
            receiver.start()
            wait_until(lambda: server._scheduler.queued("B") == len(small), "B's prechecks were not queued")
            started_before = len(log.order)
            log.gate.release()  # one of A's prechecks finishes
            log.wait_for(lambda order: order.count("small") == len(small), "B's prechecks did not all run")
            after = log.order[started_before:]
        finally:
            for _ in large:
                log.gate.release()
        receiver.join(WAIT_S)
        for sender in senders:
            sender.join(WAIT_S)
    assert started_before == PRECHECK_THREADS
    # Every precheck of B's started before any further precheck of A's.
    assert after[: len(small)] == ["small"] * len(small), after
    assert log.order.count("large") == len(large)


def pids_of(tmp_path: Path, marker: str) -> set[int]:
    return {row["pid"] for row in read_log(tmp_path / "repl.log") if marker in row["request"].get("cmd", "")}


def keys_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"victim-key": "victim", "attacker-key": "attacker"}))
    return path


def test_fresh_caller_ids_cannot_evict_a_warm_owners_repl(tmp_path):
    """An attacker with one API key sends requests under 6 fresh `X-Verigate-Caller` ids (each LeanClient names
    itself anew). The victim's REPL, within its quota, stays warm: its next request runs on the same process."""
    keys = load_api_keys(keys_file(tmp_path))
    with (
        LeanServer(config(tmp_path, max_workers_per_owner=1)) as server,
        serving(create_app(server, keys)) as url,
    ):
        victim = LeanClient([url], api_key="victim-key")
        [first] = victim.verify([ProofRequest("theorem victim_a : 1 = 1 := by", "  rfl")])
        attackers = [LeanClient([url], api_key="attacker-key") for _ in range(6)]
        assert len({client.caller for client in attackers}) == 6
        for index, attacker in enumerate(attackers):
            [result] = attacker.verify([ProofRequest(f"theorem attack_{index} : 1 = 1 := by", "  rfl")])
            assert result.status == "passed", result.reason
        [second] = victim.verify([ProofRequest("theorem victim_b : 1 = 1 := by", "  rfl")])
        started = server.stats()["started"]
    assert first.status == second.status == "passed"
    victim_pids = pids_of(tmp_path, "victim_a")
    assert len(victim_pids) == 1 and pids_of(tmp_path, "victim_b") == victim_pids
    # The attacker's fresh ids took turns on its own single REPL slot: one process per fresh id, none of them the
    # victim's.
    attacker_pids = set().union(*(pids_of(tmp_path, f"attack_{k}") for k in range(6)))
    assert not attacker_pids & victim_pids
    assert started >= 1 + len(attacker_pids)


def test_without_a_quota_fresh_ids_of_one_owner_still_evict_only_its_own_repls(tmp_path):
    """Over HTTP without keys every loopback client is one identity; in process, two identities share 2 workers.
    Once the attacker holds a REPL, its fresh labels take turns on it and the victim's stays."""
    with LeanServer(config(tmp_path)) as server:
        server.verify([ProofRequest("theorem victim_a : 1 = 1 := by", "  rfl")], caller="victim")
        for index in range(4):
            owner = Owner("attacker", label=f"fresh-{index}")
            server.verify([ProofRequest(f"theorem attack_{index} : 1 = 1 := by", "  rfl")], caller=owner)
        server.verify([ProofRequest("theorem victim_b : 1 = 1 := by", "  rfl")], caller="victim")
    assert pids_of(tmp_path, "victim_a") == pids_of(tmp_path, "victim_b")
    attacker_pids = set().union(*(pids_of(tmp_path, f"attack_{k}") for k in range(4)))
    assert not attacker_pids & pids_of(tmp_path, "victim_a")


def test_with_keys_a_request_without_a_known_key_is_refused(tmp_path):
    keys = load_api_keys(keys_file(tmp_path))
    body = {"requests": [{"statement": "theorem t : 1 = 1 := by", "proof": "  rfl"}]}
    with LeanServer(config(tmp_path, workers=1)) as server, serving(create_app(server, keys)) as url:
        missing = httpx.post(f"{url}/check", json=body, timeout=30)
        wrong = httpx.post(f"{url}/check", json=body, headers={"Authorization": "Bearer nope"}, timeout=30)
        right = httpx.post(f"{url}/check", json=body, headers={"Authorization": "Bearer victim-key"}, timeout=30)
    assert missing.status_code == wrong.status_code == 401
    assert "Authorization: Bearer" in missing.json()["detail"]
    assert right.status_code == 200 and right.json()["results"][0]["status"] == "passed"


@pytest.mark.parametrize(
    ("text", "named"),
    [("not json", "is not JSON"), ("[]", "non-empty JSON object"), ('{"k": 3}', "non-empty string")],
)
def test_a_bad_keys_file_is_one_line_naming_the_flag(tmp_path, text, named):
    path = tmp_path / "keys.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="--api-keys") as error:
        load_api_keys(path)
    assert named in str(error.value) and "\n" not in str(error.value)
