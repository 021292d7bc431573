"""gc_pause.gc_paused: the collector is off inside, back on after the last (nested or concurrent) pause ends, and left
off when it was off before."""

from __future__ import annotations

import gc
import threading

import pytest

from trl_verigate.lean_server import gc_pause
from trl_verigate.lean_server.gc_pause import gc_paused
from trl_verigate.lean_server.lexer import lex
from trl_verigate.lean_server.tactics import split_proof


@pytest.fixture(autouse=True)
def _collector_restored():
    enabled = gc.isenabled()
    yield
    gc.enable() if enabled else gc.disable()


def test_nested_pauses_restore_the_collector_after_the_outermost():
    gc.enable()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the outer pause is still on
    assert gc.isenabled()


def test_a_disabled_collector_stays_disabled():
    gc.disable()
    with gc_paused():
        pass
    assert not gc.isenabled()


def test_an_exception_still_ends_the_pause():
    gc.enable()
    with pytest.raises(ValueError), gc_paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_overlapping_pauses_in_threads():
    # Thread A pauses, thread B pauses, A ends: B's pause must hold until B ends.
    gc.enable()
    a_paused, b_paused, a_done = threading.Event(), threading.Event(), threading.Event()
    seen = []

    def a():
        with gc_paused():
            a_paused.set()
            b_paused.wait()
        a_done.set()

    def b():
        a_paused.wait()
        with gc_paused():
            b_paused.set()
            a_done.wait()
            seen.append(gc.isenabled())

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [False]
    assert gc.isenabled()


def _collections_during(run) -> int:
    collections = []

    def count(phase, info):
        if phase == "start":
            collections.append(info["generation"])

    gc.callbacks.append(count)
    try:
        run()
    finally:
        gc.callbacks.remove(count)
    return len(collections)


def test_lexing_and_splitting_a_large_proof_run_no_collection():
    gc.enable()
    proof = "  rw [h]\n  simp\n" * 20_000  # 80,000 tokens: thousands of allocations per default collection threshold
    # As many containers as tokens, built with the collector on, set off dozens of collections (700 allocations each).
    assert _collections_during(lambda: [tuple([k]) for k in range(len(proof) // 4)]) > 20
    # Paused: at most the one that runs when the collector comes back.
    assert _collections_during(lambda: lex(proof)) <= 1
    assert _collections_during(lambda: split_proof(proof)) <= 1
    assert gc.isenabled()


def test_overlapping_pauses_still_collect_every_max_pause_seconds(monkeypatch):
    # Pauses that overlap without end (a busy server) must not keep the collector off for good: a pause ending while
    # another goes on collects once the collector has been off for MAX_PAUSE_SECONDS.
    gc.enable()
    now = [1000.0]
    monkeypatch.setattr(gc_pause.time, "monotonic", lambda: now[0])
    collections = []
    monkeypatch.setattr(gc_pause.gc, "collect", lambda *args: collections.append(now[0]) or 0)
    with gc_paused():
        with gc_paused():
            now[0] += gc_pause.MAX_PAUSE_SECONDS / 2
        assert collections == []  # off for half the limit: nothing yet
        with gc_paused():
            now[0] += gc_pause.MAX_PAUSE_SECONDS  # off for 1.5 times the limit when this one ends
        assert collections == [now[0]]
        with gc_paused():
            now[0] += gc_pause.MAX_PAUSE_SECONDS / 2  # the clock restarted at that collection
        assert collections == [now[0] - gc_pause.MAX_PAUSE_SECONDS / 2]
        assert not gc.isenabled()
    assert gc.isenabled()
