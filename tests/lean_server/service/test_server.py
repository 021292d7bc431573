"""LeanServer end to end against the stand-in REPL: verdicts, failures, order, concurrency, isolation."""

import asyncio
import io
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.adversarial import fake_repl_script, load_corpus, request_of
from tests.fake_repl import read_log, repl_command, stand_in_config
from tests.launch import REPO_ROOT
from trl_verigate.lean_server import FileRequest, LeanServer, LeanServerConfig, ProofRequest, VerificationResult
from trl_verigate.prover_pool.service import PROGRESS_MIN_REQUESTS, progress_bar

pytestmark = pytest.mark.timeout(120)

# Imports only: no preamble lines before the statement, so the stand-in's scripted lines are the submitted ones.
HEADER = "import Mathlib\nimport Aesop"


def proof(name: str, body: str = "rfl", header=None) -> ProofRequest:
    return ProofRequest(f"theorem {name} : 1 + 1 = 2 := by", f"  {body}", header=header)


def fake_config(tmp_path: Path, *flags: str, script=(), **overrides) -> LeanServerConfig:
    overrides.setdefault("header", HEADER)
    return stand_in_config(tmp_path, *flags, script=script, **overrides)


def log_rows(tmp_path: Path) -> list[dict]:
    return read_log(tmp_path / "repl.log")


def headers_sent(tmp_path: Path) -> list[tuple[int, str]]:
    return [(row["pid"], row["request"]["cmd"]) for row in log_rows(tmp_path) if "env" not in row["request"]]


def proof_pids(tmp_path: Path) -> Counter:
    return Counter(row["pid"] for row in log_rows(tmp_path) if "env" in row["request"])


# What real Lean answers when `linarith` on line 3 of the submitted source fails.
LINARITH_FAILS = {
    "match": "linarith",
    "response": {
        "messages": [
            {
                "severity": "error",
                "pos": {"line": 3, "column": 2},
                "endPos": {"line": 3, "column": 10},
                "data": "linarith failed to find a contradiction",
            }
        ],
        "env": 0,
    },
}


def numbered(index: int, closing: str = "rfl") -> ProofRequest:
    """A proof whose first tactic names `index`, so results can be matched to requests."""
    return ProofRequest(
        f"theorem n{index} : 1 + 1 = 2 := by", f"  have h{index} : {index} = {index} := rfl\n  {closing}"
    )


def test_a_correct_proof_passes_and_a_failing_one_fails_at_its_tactic(tmp_path):
    with LeanServer(fake_config(tmp_path, script=[LINARITH_FAILS])) as server:
        good, wrong = server.verify([numbered(1), numbered(2, "linarith")])
    assert good.status == "passed" and good.passed and good.axioms == ["propext"]
    assert [t.text for t in good.tactics] == ["have h1 : 1 = 1 := rfl", "rfl"] and good.first_error_tactic == 2
    assert wrong.status == "failed" and not wrong.passed
    assert [(m.severity, m.line, m.column) for m in wrong.messages] == [("error", 3, 2)]
    assert wrong.first_error_tactic == 1
    assert good.time_s >= 0 and wrong.time_s >= 0


def test_each_proof_runs_in_the_header_env_and_the_header_is_sent_once_per_process(tmp_path):
    with LeanServer(fake_config(tmp_path, workers=2)) as server:
        results = server.verify([proof(f"t{i}") for i in range(20)])
    assert [r.status for r in results] == ["passed"] * 20
    sent = headers_sent(tmp_path)
    assert {cmd for _, cmd in sent} == {HEADER}
    assert sorted(Counter(pid for pid, _ in sent).values()) == [1, 1]
    assert all(row["request"]["env"] == 0 for row in log_rows(tmp_path) if "env" in row["request"])


def test_a_hanging_proof_times_out_within_the_timeout_plus_two_seconds(tmp_path):
    config = fake_config(tmp_path, script=[{"match": "HANG", "behaviour": "hang"}])
    with LeanServer(config) as server:
        server.verify([proof("warmup")])
        started = time.monotonic()
        (result,) = server.verify([proof("HANG")], timeout=1)
        elapsed = time.monotonic() - started
        (after,) = server.verify([proof("after")])
    assert result.status == "timeout" and not result.passed
    assert "1 s" in result.reason and result.time_s >= 1
    assert elapsed <= 1 + 2
    assert after.status == "passed"


@pytest.mark.parametrize("behaviour", ["crash", "garbage", "truncate"])
def test_a_broken_repl_gives_crashed_and_the_next_request_passes(tmp_path, behaviour):
    config = fake_config(tmp_path, script=[{"match": "BREAK", "behaviour": behaviour}])
    with LeanServer(config) as server:
        broken, after = server.verify([proof("BREAK"), proof("after")])
    assert broken.status == "crashed" and not broken.passed and broken.reason
    assert after.status == "passed"


def test_an_early_exit_gives_crashed_and_only_that_request_is_affected(tmp_path):
    # The header counts as a command: each process answers the header and one proof, then dies.
    with LeanServer(fake_config(tmp_path, "--exit-after", "2")) as server:
        results = server.verify([proof(f"t{i}") for i in range(4)])
    assert [r.status for r in results] == ["passed", "crashed", "passed", "crashed"]
    assert "exit status 1" in results[1].reason


def test_recycling_after_max_uses_shows_fresh_processes_each_loading_the_header_once(tmp_path):
    with LeanServer(fake_config(tmp_path, max_uses_per_worker=3)) as server:
        results = [server.verify([proof(f"t{i}")])[0] for i in range(10)]
    assert [r.status for r in results] == ["passed"] * 10
    per_pid = Counter(pid for pid, _ in headers_sent(tmp_path))
    assert len(per_pid) >= 4 and set(per_pid.values()) == {1}
    assert max(proof_pids(tmp_path).values()) <= 3


def test_256_requests_over_4_workers_come_back_in_order_and_use_every_worker(tmp_path):
    # Failing requests spread through the batch must stay in place too.
    failing = {i for i in range(256) if i % 50 == 7}
    requests = [numbered(i, "linarith" if i in failing else "rfl") for i in range(256)]
    config = fake_config(tmp_path, "--latency", "0.002", script=[LINARITH_FAILS], workers=4)
    with LeanServer(config) as server:
        results = server.verify(requests, progress=False)
    assert len(results) == 256
    for i, result in enumerate(results):
        assert result.tactics[0].text == f"have h{i} : {i} = {i} := rfl"
        assert result.status == ("failed" if i in failing else "passed"), i
    assert len(proof_pids(tmp_path)) == 4


def test_a_missing_executable_gives_error_verdicts_that_say_what_to_fix(tmp_path):
    config = LeanServerConfig(repl_command=["no-such-lean-repl"], project_dir=str(tmp_path), workers=2, header=HEADER)
    with LeanServer(config) as server:
        results = server.verify([proof("a"), proof("b"), proof("c")])
    for result in results:
        assert result.status == "error" and not result.passed
        assert "no-such-lean-repl" in result.reason and "repl_command" in result.reason


def test_a_start_slower_than_startup_timeout_gives_error_verdicts(tmp_path):
    config = fake_config(tmp_path, "--startup-delay", "30", startup_timeout=0.5)
    with LeanServer(config) as server:
        results = server.verify([proof("a"), proof("b"), proof("c")])
    assert [r.status for r in results] == ["error"] * 3
    assert all("startup_timeout" in r.reason for r in results)


def test_a_runaway_allocation_is_stopped_by_rlimit_as_and_gives_crashed(tmp_path):
    config = fake_config(tmp_path, script=[{"match": "OOM", "behaviour": "oom"}], memory_limit_mb=512)
    with LeanServer(config) as server:
        oom, after = server.verify([proof("OOM"), proof("after")], timeout=30)
    assert oom.status == "crashed" and "out of memory" in oom.reason
    assert after.status == "passed"


def test_averify_lets_the_callers_event_loop_keep_working(tmp_path):
    config = fake_config(tmp_path, "--latency", "0.05", workers=2)

    async def main(server):
        ticks = 0
        done = asyncio.Event()

        async def generate():
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.005)

        generator = asyncio.ensure_future(generate())
        results = await server.averify([proof(f"t{i}") for i in range(10)])
        ticks_during = ticks
        done.set()
        await generator
        return results, ticks_during

    with LeanServer(config) as server:
        results, ticks_during = asyncio.run(main(server))
    assert [r.status for r in results] == ["passed"] * 10
    # verify() would have blocked the loop: the generator would not have run at all.
    assert ticks_during > 1


def test_verify_works_from_several_threads_at_once(tmp_path):
    results = {}
    with LeanServer(fake_config(tmp_path, workers=2)) as server:

        def call(thread_index):
            results[thread_index] = server.verify([numbered(100 * thread_index + i) for i in range(5)])

        threads = [threading.Thread(target=call, args=(i,)) for i in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    for thread_index in range(3):
        assert [r.status for r in results[thread_index]] == ["passed"] * 5
        assert [r.tactics[0].text.split()[1] for r in results[thread_index]] == [
            f"h{100 * thread_index + i}" for i in range(5)
        ]


def test_one_repl_per_import_set_and_opens_and_options_travel_with_the_command(tmp_path):
    opens_real = HEADER + "\nopen Real"
    other_imports = "import Mathlib"
    file_a = f"{HEADER}\nset_option maxHeartbeats 123\n\ntheorem file_a : 2 = 2 := by\n  rfl"
    file_b = f"{HEADER}\nopen Real\n\ntheorem file_b : 3 = 3 := by\n  rfl"
    with LeanServer(fake_config(tmp_path, workers=2)) as server:
        first = server.verify([file_a, proof("p1")])
        second = server.verify([file_b, proof("p2", header=opens_real), proof("p3", header=other_imports)])
    assert [r.status for r in first + second] == ["passed"] * 5
    sent = headers_sent(tmp_path)
    header_of = dict(sent)
    proof_rows = [(row["pid"], row["request"]["cmd"]) for row in log_rows(tmp_path) if "env" in row["request"]]
    pid_of = {name: pid for pid, cmd in proof_rows for name in ("file_a", "file_b", "p1", "p2", "p3") if name in cmd}
    cmd_of = {name: cmd for _, cmd in proof_rows for name in ("file_a", "file_b", "p2") if name in cmd}
    # The REPL loads imports only, once per process; no import is re-elaborated per proof.
    assert set(Counter(pid for pid, _ in sent).values()) == {1}
    assert not any("import" in cmd for _, cmd in proof_rows)
    # An option value or an `open` costs no REPL: they run with the command.
    assert {header_of[pid_of[name]] for name in ("file_a", "file_b", "p1", "p2")} == {HEADER}
    assert cmd_of["file_a"].startswith("set_option maxHeartbeats 123\n")
    assert cmd_of["file_b"].startswith("open Real\n") and cmd_of["p2"].startswith("open Real\n")
    # Other imports get a REPL of their own.
    assert header_of[pid_of["p3"]] == other_imports


def test_a_rejected_request_never_reaches_lean(tmp_path):
    with LeanServer(fake_config(tmp_path)) as server:
        rejected, fine = server.verify([proof("native", "native_decide"), proof("fine")])
    assert rejected.status == "rejected" and rejected.reason
    assert fine.status == "passed"
    assert not any("native_decide" in row["request"]["cmd"] for row in log_rows(tmp_path))


def test_a_repl_error_object_gives_an_error_verdict(tmp_path):
    config = fake_config(tmp_path, script=[{"match": "LOST", "response": {"message": "Unknown environment."}}])
    with LeanServer(config) as server:
        lost, after = server.verify([proof("LOST"), proof("after")])
    assert lost.status == "error" and "Unknown environment" in lost.reason
    assert after.status == "passed"


def test_close_kills_every_repl_and_the_server_refuses_work_afterwards(tmp_path):
    config = fake_config(tmp_path, workers=3)
    server = LeanServer(config).start()
    server.verify([proof(f"t{i}") for i in range(6)])
    live = server.stats()["live_pids"]
    server.close()
    assert len(live) == 3
    assert not any(Path(f"/proc/{pid}").exists() for pid in live)
    with pytest.raises(RuntimeError, match="not started"):
        server.verify([proof("late")])


def test_bad_arguments_name_the_fix(tmp_path):
    with LeanServer(fake_config(tmp_path)) as server:
        with pytest.raises(TypeError, match="wrap a single request in a list"):
            server.verify(proof("single"))
        with pytest.raises(ValueError, match="timeout"):
            server.verify([proof("ok")], timeout=0)
        assert server.verify([]) == []


# Each bad item with what its reason must name; derived from the inputs by hand, not from the server's output.
UNRUNNABLE = [
    (
        ProofRequest("theorem s : 1 + 1 = 2 := by", "  rfl \ud800"),
        "the proof holds U+D800 at offset 6, a lone surrogate",
    ),
    (ProofRequest("theorem s\udfff : 1 + 1 = 2 := by", "  rfl"), "the statement holds U+DFFF at offset 9"),
    (ProofRequest("theorem s : 1 + 1 = 2 := by", "  rfl", header="import Mathlib\ud800"), "the header holds U+D800"),
    (FileRequest(f"{HEADER}\ntheorem s : 1 = 1 := by rfl\ud800"), "the file holds U+D800"),
    ("theorem s : 1 = 1 := by\n  rfl " + b"\xff".decode("utf-8", "surrogateescape"), "the file holds U+DCFF"),
    (ProofRequest("theorem s : 1 + 1 = 2 := by", "  rfl\x00"), "U+0000"),
    # 32768 combining acute accents are 65536 UTF-8 bytes: with the statement, over the 64 KiB request limit.
    (ProofRequest("theorem s : 1 + 1 = 2 := by", "  rfl " + "\u0301" * 32768), "request too large"),
    (ProofRequest("theorem s : 1 + 1 = 2 := by", None), "the proof must be a str, got NoneType"),
    (FileRequest(b"theorem s : 1 = 1 := by rfl"), "the file must be a str, got bytes"),
    (42, "a int is not a request"),
    ({"statement": "x", "proof": "y"}, "a dict is not a request"),
]


@pytest.mark.parametrize(("bad", "named"), UNRUNNABLE, ids=[named[:30] for _, named in UNRUNNABLE])
def test_no_input_costs_another_request_its_result(tmp_path, bad, named):
    with LeanServer(fake_config(tmp_path)) as server:
        results = server.verify([proof("before"), bad, proof("after")])
    assert [result.status for result in results] == ["passed", "rejected", "passed"]
    assert named in results[1].reason


def test_every_unrunnable_item_of_one_batch_gets_its_own_reason(tmp_path):
    with LeanServer(fake_config(tmp_path)) as server:
        results = server.verify([proof("first"), *[bad for bad, _ in UNRUNNABLE], proof("last")])
    assert [result.status for result in results] == ["passed"] + ["rejected"] * len(UNRUNNABLE) + ["passed"]
    for (_, named), result in zip(UNRUNNABLE, results[1:-1], strict=True):
        assert named in result.reason


def position(line: int, column: int) -> dict:
    return {"line": line, "column": column}


def repl_message(severity: str, start: tuple[int, int], end: tuple[int, int], data: str) -> dict:
    return {"severity": severity, "pos": position(*start), "endPos": position(*end), "data": data}


# Complete files: FILE_HEADER is 3 lines (imports and a comment: nothing travels with the command), so each REPL line
# (the file without its header, then a blank line and our `#print axioms`) is the file's line + 3.
FILE_HEADER = HEADER + "\n-- the file's header"
SNEAKY_FILE = FILE_HEADER + "\ntheorem sneaky_file : 2 + 2 = 5 := by\n  exact sneaky_marker"
WRONG_FILE = (
    FILE_HEADER + "\ntheorem wrong_file (a : Nat) (h : a = 1) : a + 1 = 2 := by\n  subst h\n  linarith [wrong_marker]"
)
EXAMPLE_FILE = FILE_HEADER + "\nexample : 2 + 2 = 5 := by\n  exact example_marker"
UNCLOSED_FILE = FILE_HEADER + "\ntheorem unclosed : 2 + 2 = 4 := by\n  exact (unclosed_marker"
# What Lean answers for each, in the coordinates of the command the server sends.
SNEAKY_SORRY = {
    "proofState": 0,
    "pos": position(2, 8),
    "goal": "⊢ 2 + 2 = 5",
    "endPos": position(2, 21),
}
RAW_RESPONSES = [
    {
        "match": "sneaky_marker",
        "response": {
            "sorries": [SNEAKY_SORRY],
            "messages": [
                repl_message("warning", (1, 8), (1, 19), "declaration uses `sorry`"),
                repl_message("info", (4, 0), (4, 6), "'sneaky_file' depends on axioms: [sorryAx]"),
            ],
            "env": 0,
        },
    },
    {
        "match": "wrong_marker",
        "response": {
            "messages": [
                repl_message("error", (3, 2), (3, 25), "linarith failed to find a contradiction"),
                repl_message("info", (5, 0), (5, 6), "'wrong_file' depends on axioms: [propext, sorryAx]"),
            ],
            "env": 0,
        },
    },
    {
        # `example` is sent as `theorem verigate_example` so it can be named in `#print axioms`, followed by
        # a line break and indentation that keep the rest of the line at its column; Lean reports the
        # unsolved goal at that command's `by`, line 2, column 23.
        "match": "example_marker",
        "response": {
            "messages": [
                repl_message("error", (2, 23), (2, 25), "unsolved goals\n⊢ 2 + 2 = 5"),
                repl_message("info", (5, 0), (5, 6), "'verigate_example' depends on axioms: [sorryAx]"),
            ],
            "env": 0,
        },
    },
    {
        # An unclosed bracket: Lean's parser stops at the next command, our appended `#print`.
        "match": "unclosed_marker",
        "response": {
            "messages": [repl_message("error", (4, 0), (4, 6), "unexpected token '#print'; expected ')'")],
            "env": 0,
        },
    },
    {"match": "BREAK", "behaviour": "crash"},
]


def test_verify_with_responses_gives_leans_own_response_in_the_submitted_files_coordinates(tmp_path):
    requests = [SNEAKY_FILE, WRONG_FILE, EXAMPLE_FILE, UNCLOSED_FILE, proof("clean"), proof("no", "sorry")]
    with LeanServer(fake_config(tmp_path, script=RAW_RESPONSES)) as server:
        pairs = server.verify_with_responses(requests)
        # Same verdicts as verify(), which still returns them alone.
        assert [result.status for result in server.verify(requests)] == [result.status for result, _ in pairs]
    (sneaky, sneaky_raw), (wrong, wrong_raw), (_, example_raw), (unclosed, unclosed_raw) = pairs[:4]
    (clean, clean_raw), (refused, refused_raw) = pairs[4:]
    assert [result.status for result, _ in pairs] == ["failed"] * 4 + ["passed", "rejected"]

    # Lean's `sorries` (which a verdict has no field for) come back, with `goal` and `proofState` as sent.
    assert sneaky.reason == "uses sorry"
    assert sneaky_raw["sorries"] == [{**SNEAKY_SORRY, "pos": position(5, 8), "endPos": position(5, 21)}]
    assert SNEAKY_FILE.split("\n")[4][8:21] == "sneaky_marker"
    # Our `#print axioms` answer is gone; the sorry warning sits on the theorem's name in the file.
    assert sneaky_raw["messages"] == [repl_message("warning", (4, 8), (4, 19), "declaration uses `sorry`")]
    assert SNEAKY_FILE.split("\n")[3][8:19] == "sneaky_file"

    assert wrong_raw["messages"] == [repl_message("error", (6, 2), (6, 25), "linarith failed to find a contradiction")]
    assert WRONG_FILE.split("\n")[5][2:25] == "linarith [wrong_marker]"
    assert [(m.line, m.column) for m in wrong.messages] == [(6, 2)]

    # The renamed `example` gets its own columns back: `by` is at column 23 of the file's line 4.
    assert example_raw["messages"] == [repl_message("error", (4, 23), (4, 25), "unsolved goals\n⊢ 2 + 2 = 5")]
    assert EXAMPLE_FILE.split("\n")[3][23:25] == "by"

    # An error Lean put on our appended command lands at the end of the proof, where the file ends.
    assert unclosed_raw["messages"] == [
        repl_message("error", (5, 24), (5, 24), "unexpected token '#print'; expected ')'")
    ]
    assert len(UNCLOSED_FILE.split("\n")[4]) == 24 and [(m.line, m.column) for m in unclosed.messages] == [(5, 24)]

    # A clean proof's only message was our axioms answer: the REPL's shape for it is `{"env": N}`.
    assert clean.passed and set(clean_raw) == {"env"}
    # Env indices are the REPL's own: every proof got a fresh one after the header's env 0.
    envs = [raw["env"] for _, raw in pairs if raw is not None]
    assert len(set(envs)) == len(envs) == 5 and min(envs) >= 1
    # Lean never ran on a rejected request, so there is nothing to show.
    assert refused.status == "rejected" and refused_raw is None


def test_a_crashed_repl_has_no_response_and_the_recorded_one_is_not_modified(tmp_path):
    config = fake_config(tmp_path, script=RAW_RESPONSES)

    async def main():
        with LeanServer(config) as server:
            return await server.averify_with_responses([proof("BREAK"), SNEAKY_FILE, SNEAKY_FILE])

    (crashed, crashed_raw), (_, first), (_, second) = asyncio.run(main())
    assert crashed.status == "crashed" and crashed_raw is None
    # Each response is its own copy, not one shared and shifted twice.
    assert first["sorries"][0]["pos"] == second["sorries"][0]["pos"] == position(5, 8)
    assert first is not second and first["sorries"] is not second["sorries"]


def test_the_adversarial_corpus_gets_its_expected_verdicts_through_the_server(tmp_path):
    rows = load_corpus()
    config = fake_config(tmp_path, script=fake_repl_script(rows, HEADER), workers=4, memory_limit_mb=1024)
    with LeanServer(config) as server:
        results = server.verify([request_of(row) for row in rows], timeout=1)
    assert len(results) == len(rows)
    for row, result in zip(rows, results, strict=True):
        # An "oom" row's `expect` is what real Lean answers when heartbeats stop it first; when the
        # stand-in acts out the allocation instead, RLIMIT_AS kills the REPL and the verdict is "crashed".
        expected = {"oom": "crashed"}.get(row["behaviour"], row["expect"])
        assert result.status == expected, (row["id"], result.reason)
        assert not result.passed


@pytest.mark.slow
def test_a_3840_proof_iteration_in_batches_of_64(tmp_path):
    # One GRPO iteration's worth of proofs; the log would grow to MBs, so this run keeps none.
    config = LeanServerConfig(repl_command=repl_command(), project_dir=str(tmp_path), workers=4, header=HEADER)
    with LeanServer(config) as server:
        statuses = Counter()
        for batch in range(60):
            results = server.verify([proof(f"b{batch}_{i}") for i in range(64)])
            assert len(results) == 64
            statuses.update(r.status for r in results)
    assert statuses == Counter({"passed": 3840})


def test_verify_results_are_plain_verification_results(tmp_path):
    with LeanServer(fake_config(tmp_path)) as server:
        (result,) = server.verify([proof("roundtrip")])
    assert isinstance(result, VerificationResult)
    assert VerificationResult.from_dict(result.to_dict()) == result


def test_an_abandoned_server_kills_its_repls_at_interpreter_exit(tmp_path):
    script = f"""
import sys
sys.path.insert(0, {str(REPO_ROOT)!r})
from tests.fake_repl import repl_command
from trl_verigate.lean_server import LeanServer, LeanServerConfig, ProofRequest
server = LeanServer(LeanServerConfig(repl_command=repl_command(), project_dir={str(tmp_path)!r}, workers=2)).start()
server.verify([ProofRequest("theorem t : 1 = 1 := by", "  rfl")])
print(" ".join(map(str, server.stats()["live_pids"])))
"""
    scratch_root = tmp_path / "scratch"
    scratch_root.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch_root)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    pids = [int(pid) for pid in done.stdout.split()]
    assert len(pids) == 2
    # Killed at exit; their new parent (init) reaps them a moment later.
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)
    assert not list(scratch_root.glob("lean-repl-*"))


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    "progress,total,tty,shown",
    [
        (True, 1, False, True),
        (False, 1000, True, False),
        (None, PROGRESS_MIN_REQUESTS, True, True),
        (None, PROGRESS_MIN_REQUESTS - 1, True, False),
        (None, 1000, False, False),
    ],
)
def test_a_progress_bar_shows_when_asked_or_for_a_big_batch_on_a_terminal(monkeypatch, progress, total, tty, shown):
    stderr = _Terminal() if tty else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    bar = progress_bar(progress, total, "Lean verify")
    assert (bar is not None) == shown
    if bar is not None:
        bar.update(total)
        bar.close()
        assert "Lean verify: 100%" in stderr.getvalue() and f"{total}/{total}" in stderr.getvalue()


def test_verify_draws_its_progress_bar_on_request(tmp_path, capsys):
    with LeanServer(fake_config(tmp_path)) as server:
        server.verify([numbered(1), numbered(2)], progress=True)
        assert "Lean verify: 100%" in capsys.readouterr().err
        server.verify([numbered(i) for i in range(PROGRESS_MIN_REQUESTS)])  # stderr is no terminal here
        assert "Lean verify" not in capsys.readouterr().err


def test_a_request_over_max_request_bytes_is_rejected_unrun_naming_the_limit(tmp_path):
    limit = 200
    big_proof = "  norm_num" + " " * 300  # statement + proof: 33 + 310 = 343 bytes
    big = ProofRequest("theorem big_one : 1 + 1 = 2 := by", big_proof)
    # Multi-byte characters count as bytes: 34 (statement) + 5 + 60 × 3 ("ℕ" is 3 bytes) + 6 = 225, though 105 characters.
    wide = ProofRequest("theorem wide_one : 1 + 1 = 2 := by", "  -- " + "ℕ" * 60 + "\n  rfl")
    with LeanServer(fake_config(tmp_path, max_request_bytes=limit)) as server:
        rejected, wide_rejected, fine = server.verify([big, wide, proof("small")])
    expected_size = len(big.statement) + len(big_proof)
    assert expected_size == 343
    assert rejected.status == "rejected"
    assert f"max_request_bytes={limit}" in rejected.reason and f"{expected_size} bytes" in rejected.reason
    assert wide_rejected.status == "rejected" and "225 bytes" in wide_rejected.reason
    assert fine.status == "passed"
    assert not any(
        "big_one" in row["request"]["cmd"] or "wide_one" in row["request"]["cmd"] for row in log_rows(tmp_path)
    )


def test_a_batch_over_max_batch_bytes_raises_before_anything_runs(tmp_path):
    requests = [proof(f"batch{i}") for i in range(4)]
    size = sum(len(r.statement) + len(r.proof) for r in requests)
    with LeanServer(fake_config(tmp_path, max_batch_bytes=size - 1)) as server:
        with pytest.raises(ValueError, match=rf"{size} bytes, over LeanServerConfig.max_batch_bytes={size - 1}"):
            server.verify(requests)
        assert not [row for row in log_rows(tmp_path) if "env" in row["request"]]
        assert [r.status for r in server.verify(requests[:3])] == ["passed"] * 3


def _slow_prepare(original, seconds: float):
    """The precheck's `prepare`, made to spin for `seconds` (holding the GIL as CPU work does) on requests naming SLOW."""

    def prepare(request, *args, **kwargs):
        if isinstance(request, ProofRequest) and "SLOW" in request.statement:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                pass
        return original(request, *args, **kwargs)

    return prepare


class HeldPrecheck:
    """The precheck's `prepare`, made to spin (holding the GIL as CPU work does) on requests naming SLOW until the
    test releases it: what a slow precheck holds back is then read from the order of events, not from wall time."""

    def __init__(self, original):
        self.original = original
        self.started = threading.Event()
        self.release = threading.Event()
        self.finished = threading.Event()

    def __call__(self, request, *args, **kwargs):
        if isinstance(request, ProofRequest) and "SLOW" in request.statement:
            self.started.set()
            deadline = time.monotonic() + 60  # a safety net only: the test releases it
            while not self.release.is_set() and time.monotonic() < deadline:
                pass
            self.finished.set()
        return self.original(request, *args, **kwargs)


def test_a_slow_precheck_does_not_stall_other_requests(tmp_path, monkeypatch):
    from trl_verigate.lean_server.service import server as server_module

    held = HeldPrecheck(server_module.prepare)
    monkeypatch.setattr(server_module, "prepare", held)
    with LeanServer(fake_config(tmp_path, workers=2)) as server:
        server.verify([proof("warmup")])
        slow_results = {}
        slow = threading.Thread(target=lambda: slow_results.update(r=server.verify([proof("SLOW")], timeout=30)))
        slow.start()
        assert held.started.wait(30), "the slow precheck never started"
        [fast] = server.verify([proof("fast")])
        # On the event loop, the slow precheck would have held `fast` back until the test released it.
        slow_still_prechecking = not held.finished.is_set()
        held.release.set()
        slow.join()
    assert fast.status == "passed"
    assert slow_still_prechecking
    assert slow_results["r"][0].status == "passed"


def test_the_per_proof_timeout_covers_the_precheck(tmp_path, monkeypatch):
    from trl_verigate.lean_server.service import server as server_module

    held = HeldPrecheck(server_module.prepare)
    monkeypatch.setattr(server_module, "prepare", held)
    with LeanServer(fake_config(tmp_path)) as server:
        try:
            slow, fine = server.verify([proof("SLOW"), proof("fine")], timeout=1)
            # verify() answered at the timeout, without waiting for the precheck to end.
            answered_while_prechecking = not held.finished.is_set()
        finally:
            held.release.set()
    assert slow.status == "timeout" and "precheck" in slow.reason and "1 s" in slow.reason
    assert fine.status == "passed"
    assert answered_while_prechecking
    assert not any("SLOW" in row["request"]["cmd"] for row in log_rows(tmp_path))


def test_file_requests_reach_prepare_whole_and_are_verified(tmp_path, monkeypatch):
    from trl_verigate.lean_server.service import server as server_module

    seen = []
    original = server_module.prepare

    def spy(request, *args, **kwargs):
        seen.append(request)
        return original(request, *args, **kwargs)

    monkeypatch.setattr(server_module, "prepare", spy)
    file_text = f"{HEADER}\n\ntheorem held_file : 2 = 2 := by\n  rfl"
    held = FileRequest(file_text, statement="theorem held_file : 2 = 2 := by", header=HEADER)
    with LeanServer(fake_config(tmp_path)) as server:
        [result] = server.verify([held])
        with pytest.raises(TypeError, match="wrap a single request"):
            server.verify(held)
    assert result.status == "passed"
    # The trusted statement and header travel with the file to the precheck, which holds the file to them.
    assert seen == [held]
    assert sum("held_file" in row["request"]["cmd"] for row in log_rows(tmp_path)) == 1


def test_requests_enter_the_pool_in_request_order_even_behind_a_slow_precheck(tmp_path, monkeypatch):
    from trl_verigate.lean_server.service import server as server_module

    monkeypatch.setattr(server_module, "prepare", _slow_prepare(server_module.prepare, 1.0))
    requests = [proof("SLOW"), proof("second"), proof("third", "native_decide"), proof("fourth")]
    with LeanServer(fake_config(tmp_path)) as server:
        results = server.verify(requests)
    assert [r.status for r in results] == ["passed", "passed", "rejected", "passed"]
    sent = [row["request"]["cmd"].split()[1] for row in log_rows(tmp_path) if "env" in row["request"]]
    assert sent == ["SLOW", "second", "fourth"]


def test_judging_runs_off_the_event_loop(tmp_path, monkeypatch):
    # Reading Lean's answer costs time proportional to it (messages, a re-split for tactic_granularity "all"), which
    # a proof controls: judge and submitted_response must run in the worker threads, never on the loop.
    from trl_verigate.lean_server.service import server as server_module

    threads = []

    def recording(function):
        def run(*args, **kwargs):
            threads.append((function.__name__, threading.current_thread().name))
            return function(*args, **kwargs)

        return run

    monkeypatch.setattr(server_module, "judge", recording(server_module.judge))
    monkeypatch.setattr(server_module, "submitted_response", recording(server_module.submitted_response))
    with LeanServer(fake_config(tmp_path, tactic_granularity="all")) as server:
        [(result, response)] = server.verify_with_responses([proof("judged")])
    assert result.status == "passed" and response is not None
    assert sorted(name for name, _ in threads) == ["judge", "submitted_response"]
    assert all("precheck" in thread for _, thread in threads), threads
