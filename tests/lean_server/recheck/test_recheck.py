"""The recheck tier against stand-ins: a REPL that forges passes (fake_repl) and a checker (fake_checker).

Covers the contract as `lean_server.recheck` documents it: what the checker receives, verdict mapping, fail-closed
on every way a checker can break the contract, one run per verify() batch, seeded sampling and the metrics.
"""

import json
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.adversarial import load_corpus, request_of
from tests.fake_checker import checker_command, read_runs, spawned_pids
from tests.fake_repl import stand_in_config
from tests.launch import TESTS_DIR
from tests.lean_helpers import prepare
from trl_verigate.lean_server import FileRequest, LeanServer, ProofRequest
from trl_verigate.lean_server.precheck.prepared import EXAMPLE_NAME, Prepared
from trl_verigate.lean_server.recheck import backends as recheck_backends
from trl_verigate.lean_server.recheck import compile as recheck_compile
from trl_verigate.lean_server.recheck import contract as recheck_module
from trl_verigate.lean_server.recheck import replay as recheck_replay
from trl_verigate.lean_server.recheck.contract import CheckerFailure, parse_verdicts
from trl_verigate.prover_pool import sandbox

pytestmark = pytest.mark.timeout(120)

HEADER = "import Mathlib"
FALSE_STATEMENT = "theorem forged : (1:ℕ) = 2 := by"
# What the forging payload writes to fd 1: a clean answer at our `#print axioms` line. The REPL's command is the
# statement (line 1), the proof (line 2), a blank line, then `#print axioms forged` on line 4.
FORGED_ANSWER = {
    "match": "(1:ℕ) = 2",
    "response": {
        "messages": [
            {
                "severity": "info",
                "pos": {"line": 4, "column": 0},
                "endPos": {"line": 4, "column": 6},
                "data": "'forged' does not depend on any axioms",
            }
        ],
        "env": 0,
    },
}
# The precheck refuses the known payloads, so the stand-in REPL plays one that got through: whatever the proof, it
# answers with FORGED_ANSWER, as a payload writing to fd 1 makes the real REPL do.
FORGING_PROOF = "  norm_num"
LINARITH_FAILS = {
    "match": "linarith",
    "response": {
        "messages": [
            {
                "severity": "error",
                "pos": {"line": 2, "column": 2},
                "endPos": {"line": 2, "column": 10},
                "data": "linarith failed",
            }
        ],
        "env": 0,
    },
}


def true_proof(index: int) -> ProofRequest:
    return ProofRequest(f"theorem t{index} : {index} + 1 = {index + 1} := by", "  norm_num")


def config_with_checker(tmp_path: Path, *checker_flags: str, script=(), **overrides):
    log = tmp_path / "checker.log"
    overrides.setdefault("header", HEADER)
    overrides.setdefault("recheck_command", checker_command("--log", str(log), *checker_flags))
    # The checker's mechanics, whether or not lean-doctor verified it (recheck="auto" is tested on its own).
    overrides.setdefault("recheck", "passed")
    return stand_in_config(tmp_path, script=script, **overrides)


def checker_runs(tmp_path: Path) -> list[dict]:
    return read_runs(tmp_path / "checker.log")


def test_a_forged_pass_fools_the_repl_alone_and_the_checker_overturns_it(tmp_path):
    forged = ProofRequest(FALSE_STATEMENT, FORGING_PROOF)
    # Without a checker the forged answer is taken: this is the hole the recheck tier closes.
    with LeanServer(stand_in_config(tmp_path, script=[FORGED_ANSWER], header=HEADER)) as alone:
        [fooled] = alone.verify([forged])
    assert fooled.status == "passed"

    with LeanServer(config_with_checker(tmp_path, script=[FORGED_ANSWER])) as server:
        assert server.recheck_mode == "passed"
        forged_result, honest = server.verify([forged, true_proof(1)])
        metrics = server.metrics()
        stats = server.stats()
    assert forged_result.status == "failed" and not forged_result.passed
    assert forged_result.reason.startswith("recheck: ") and "1 = 2" in forged_result.reason
    assert forged_result.first_error_tactic == 0
    assert honest.status == "passed"
    assert metrics["lean/rechecked"] == 2
    assert metrics["lean/recheck_overturned"] == 1
    assert metrics["lean/recheck_checker_failures"] == 0
    assert metrics["lean/recheck_seconds"] > 0
    assert stats["recheck_overturned"] == 1 and stats["rechecked"] == 2


def test_the_checker_gets_the_trusted_statement_and_the_submission(tmp_path):
    file_text = f"{HEADER}\n\ntheorem from_file : 2 + 2 = 4 := by\n  norm_num"
    held = FileRequest(f"{HEADER}\n\ntheorem held : 3 = 3 := by\n  rfl", statement="theorem held : 3 = 3 := by")
    example = ProofRequest("example : 5 = 5 := by", "  rfl")
    with LeanServer(config_with_checker(tmp_path)) as server:
        results = server.verify([true_proof(7), file_text, held, example])
    assert [r.status for r in results] == ["passed"] * 4
    [run] = checker_runs(tmp_path)
    assert run["payload"]["version"] == 1
    proof_item, file_item, held_item, example_item = run["payload"]["items"]
    assert proof_item == {
        "id": proof_item["id"],
        "header": HEADER,
        "statement": "theorem t7 : 7 + 1 = 8 := by",
        "theorem": "t7",
        "proof": "  norm_num",
        "file": None,
        "axiom_whitelist": ["propext", "Classical.choice", "Quot.sound"],
    }
    # A plain file has no trusted statement: its own is sent, and the file as the REPL ran it.
    assert file_item["statement"] == "theorem from_file : 2 + 2 = 4 := by" and file_item["theorem"] == "from_file"
    assert file_item["proof"] is None and file_item["file"].startswith(HEADER)
    assert file_item["file"].rstrip().endswith("norm_num")
    assert held_item["statement"] == "theorem held : 3 = 3 := by" and held_item["theorem"] == "held"
    # The REPL ran the example as a named theorem; the checker is told the same name.
    assert example_item["theorem"] == EXAMPLE_NAME
    assert example_item["statement"].split() == ["theorem", example_item["theorem"], ":", "5", "=", "5", ":=", "by"]
    assert len({item["id"] for item in run["payload"]["items"]}) == 4


def test_one_checker_run_per_verify_batch_with_only_the_passes(tmp_path):
    requests = [true_proof(i) for i in range(10)]
    requests += [
        ProofRequest("theorem bad : 1 = 1 := by", "  linarith"),
        ProofRequest("theorem r : 1 = 1 := by", "  sorry"),
    ]
    with LeanServer(config_with_checker(tmp_path, script=[LINARITH_FAILS], workers=3)) as server:
        first = server.verify(requests)
        second = server.verify([true_proof(20), true_proof(21)])
    assert [r.status for r in first] == ["passed"] * 10 + ["failed", "rejected"]
    assert [r.status for r in second] == ["passed"] * 2
    runs = checker_runs(tmp_path)
    assert [len(run["payload"]["items"]) for run in runs] == [10, 2]
    assert [item["theorem"] for item in runs[0]["payload"]["items"]] == [f"t{i}" for i in range(10)]


def test_a_huge_batch_is_split_into_several_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(recheck_module, "MAX_ITEMS_PER_RUN", 3)
    with LeanServer(config_with_checker(tmp_path, workers=2)) as server:
        results = server.verify([true_proof(i) for i in range(7)])
    assert [r.status for r in results] == ["passed"] * 7
    # ceil(7 / 3) runs, in order.
    assert [len(run["payload"]["items"]) for run in checker_runs(tmp_path)] == [3, 3, 1]


def test_refusals_by_id_pattern_and_axioms_map_to_failed(tmp_path):
    requests = [true_proof(1), ProofRequest("theorem uses_cheat : 2 = 2 := by", "  exact cheat_lemma"), true_proof(3)]
    with LeanServer(config_with_checker(tmp_path, "--refuse", "cheat_lemma")) as server:
        fine, refused, also_fine = server.verify(requests)
    assert fine.passed and also_fine.passed
    assert refused.status == "failed" and refused.reason == "recheck: kernel rejects: matched 'cheat_lemma'"

    # ok=true with an axiom outside the whitelist is still no pass.
    other = tmp_path / "other"
    other.mkdir()
    with LeanServer(config_with_checker(other, "--axioms", "propext,sorryAx")) as server:
        [result] = server.verify([true_proof(1)])
        assert server.metrics()["lean/recheck_overturned"] == 1
    assert result.status == "failed" and "sorryAx" in result.reason and result.reason.startswith("recheck: ")


@pytest.mark.parametrize(
    ("behaviour", "reason_part"),
    [
        ("crash", "exit status 3"),
        ("garbage", "not JSON"),
        ("missing", "no verdict for 1 of 3"),
        ("extra", "'not-sent', which was not sent"),
        ("duplicate", "a second time"),
        ("exit-nonzero", "exit status 1"),
    ],
)
def test_a_checker_that_breaks_the_contract_fails_closed(tmp_path, behaviour, reason_part):
    with LeanServer(config_with_checker(tmp_path, "--behaviour", behaviour)) as server:
        results = server.verify([true_proof(i) for i in range(3)])
        metrics = server.metrics()
    for result in results:
        assert result.status == "error" and not result.passed
        assert result.reason.startswith("recheck: checker failed: ") and reason_part in result.reason
    assert metrics["lean/recheck_checker_failures"] == 3 and metrics["lean/recheck_overturned"] == 0


@pytest.mark.parametrize("behaviour", ["hang", "spawn-hang"])
def test_a_hanging_checker_is_killed_at_recheck_timeout_and_fails_closed(tmp_path, behaviour):
    config = config_with_checker(tmp_path, "--behaviour", behaviour, recheck_timeout=1.5)
    with LeanServer(config) as server:
        started = time.monotonic()
        results = server.verify([true_proof(1), true_proof(2)])
        elapsed = time.monotonic() - started
        assert server.metrics()["lean/recheck_seconds"] >= 1.5
    assert [r.status for r in results] == ["error", "error"]
    assert "recheck_timeout=1.5 s" in results[0].reason
    assert elapsed < 1.5 + 5
    [run] = checker_runs(tmp_path)
    # The whole process group is gone, the checker and anything it started.
    deadline = time.monotonic() + 5
    pids = [run["pid"], *spawned_pids(tmp_path / "checker.log")]
    while any(Path(f"/proc/{pid}").exists() for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)
    if behaviour == "spawn-hang":
        assert len(pids) == 2


def test_a_missing_checker_executable_fails_closed(tmp_path):
    config = config_with_checker(tmp_path, recheck_command=[str(tmp_path / "no-such-checker")])
    with LeanServer(config) as server:
        [result] = server.verify([true_proof(1)])
    assert result.status == "error" and "cannot start recheck_command" in result.reason


def sampled_theorems(tmp_path: Path, requests, seed: int) -> set[str]:
    config = config_with_checker(tmp_path, recheck="sample", recheck_sample_rate=0.25, recheck_seed=seed, workers=2)
    with LeanServer(config) as server:
        results = server.verify(requests)
        rechecked = server.metrics()["lean/rechecked"]
    assert [r.status for r in results] == ["passed"] * len(requests)
    runs = checker_runs(tmp_path)
    (tmp_path / "checker.log").unlink(missing_ok=True)
    names = {item["theorem"] for run in runs for item in run["payload"]["items"]}
    assert rechecked == len(names)
    return names


def test_sample_mode_is_reproducible_and_near_the_fraction(tmp_path):
    # A pass's draw is (seed, its number in the run, its content): the same passes in the same order, the same pick.
    requests = [true_proof(i) for i in range(200)]
    first = sampled_theorems(tmp_path, requests, seed=7)
    again = sampled_theorems(tmp_path, requests, seed=7)
    other_seed = sampled_theorems(tmp_path, requests, seed=8)
    assert first == again
    assert first != other_seed
    # Binomial(200, 0.25): mean 50, sd 6.1; these bounds are 4 sd out.
    for picked in (first, other_seed):
        assert 25 <= len(picked) <= 75, len(picked)


def test_recheck_none_logs_one_warning_at_start_and_runs_no_checker(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="trl_verigate.lean_server.service.server")
    with LeanServer(stand_in_config(tmp_path, header=HEADER)) as server:
        server.verify([true_proof(1)])
        server.verify([true_proof(2)])
        assert server.metrics()["lean/rechecked"] == 0
    warnings = [r.getMessage() for r in caplog.records if "REPL's alone" in r.getMessage()]
    assert len(warnings) == 1 and "recheck_command" in warnings[0]

    caplog.clear()
    checked = tmp_path / "checked"
    checked.mkdir()
    with LeanServer(config_with_checker(checked)) as server:
        server.verify([true_proof(3)])
    assert not [r for r in caplog.records if "REPL's alone" in r.getMessage()]


def verdict_line(item_id: str, ok: bool = True, **extra) -> str:
    return json.dumps({"id": item_id, "ok": ok, "axioms": ["propext"], "message": "m", **extra})


def test_parse_verdicts_takes_exactly_one_line_per_id_in_any_order():
    verdicts = parse_verdicts(f"{verdict_line('1', ok=False)}\n\n{verdict_line('0')}\n", ["0", "1"])
    assert verdicts["0"].ok and not verdicts["1"].ok and verdicts["0"].axioms == ["propext"]
    no_axioms = parse_verdicts(json.dumps({"id": "0", "ok": True, "axioms": None, "message": ""}), ["0"])
    assert no_axioms["0"].axioms is None


@pytest.mark.parametrize(
    "stdout",
    [
        "",
        "[1, 2]",
        json.dumps({"id": 0, "ok": True, "message": ""}),
        json.dumps({"id": "0", "ok": "yes", "message": ""}),
        json.dumps({"id": "0", "ok": True, "message": "", "axioms": "propext"}),
        json.dumps({"id": "0", "ok": True}),
    ],
    ids=["empty", "not-an-object", "int-id", "string-ok", "axioms-not-a-list", "no-message"],
)
def test_parse_verdicts_refuses_malformed_output(stdout):
    with pytest.raises(CheckerFailure):
        parse_verdicts(stdout, ["0"])


# ---------------------------------------------------------------- the lean-recheck backends, with stand-in tools

FAKE_TOOLS = TESTS_DIR / "fake_lean_tools.py"
WHITELIST = ["propext", "Classical.choice", "Quot.sound"]


def bubblewrap_or_skip() -> None:
    bwrap = shutil.which("bwrap")
    problem = "bwrap not on PATH" if bwrap is None else sandbox.probe(bwrap)
    if problem is not None:
        pytest.skip(f"bubblewrap cannot run here: {problem}")


def contract_item(item_id: str, statement: str, proof: str | None = None, file: str | None = None) -> dict:
    theorem = statement.split()[1]
    return {
        "id": item_id,
        "header": HEADER,
        "statement": statement,
        "theorem": theorem,
        "proof": proof,
        "file": file,
        "axiom_whitelist": WHITELIST,
    }


def lean_recheck_argv(project: Path, *flags: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "trl_verigate.cli",
        "lean-recheck",
        "--project-dir",
        str(project),
        "--lean-command",
        shlex.join([sys.executable, str(FAKE_TOOLS), "lean"]),
        "--comparator-command",
        shlex.join([sys.executable, str(FAKE_TOOLS), "comparator"]),
        *flags,
    ]


def lean_project(directory: Path) -> Path:
    """A stand-in Lean project: a directory with a lakefile, as `--project-dir` requires."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "lakefile.lean").write_text("-- stand-in project\n")
    return directory


def run_lean_recheck(tmp_path: Path, items: list[dict], *flags: str) -> tuple[int, dict[str, dict], str]:
    project = lean_project(tmp_path / "project")
    done = subprocess.run(
        lean_recheck_argv(project, *flags),
        input=json.dumps({"version": 1, "items": items}),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LEAN_FAKE_LOG": str(tmp_path / "tools.log")},
    )
    verdicts = {row["id"]: row for row in map(json.loads, done.stdout.splitlines())} if done.returncode == 0 else {}
    return done.returncode, verdicts, done.stderr


def tool_runs(tmp_path: Path, tool: str | None = None) -> list[dict]:
    """The stand-in tools' log rows (those of `tool` only, when given)."""
    log = tmp_path / "tools.log"
    rows = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [row for row in rows if tool is None or row["tool"] == tool]


def test_replay_compiles_each_module_in_a_sandbox_then_replays_the_batch_in_one_process(tmp_path):
    bubblewrap_or_skip()
    project = lean_project(tmp_path / "project")
    items = [
        contract_item("good", "theorem good : 2 + 2 = 4 := by", proof="  norm_num"),
        contract_item("forged", "theorem forged : (1:ℕ) = 2 := by", proof="  norm_num"),
        contract_item("sorry", "theorem uses_sorry : 3 = 3 := by", proof="  sorry"),
        # A file claiming another statement than the trusted one, and one whose compile tries to escape.
        contract_item("other", "theorem other : 5 = 5 := by", file=f"{HEADER}\n\ntheorem other : 6 = 6 := by\n  rfl"),
        contract_item(
            "escape",
            "theorem escape : 7 = 7 := by",
            proof=f"  rfl\n-- ESCAPE_WRITE {project / 'pwned'}\n-- ESCAPE_WRITE {tmp_path / 'outside'}",
        ),
        contract_item("broken", "theorem broken : 8 = 8 := by", proof="  exact COMPILE_ERROR"),
    ]
    rc, verdicts, stderr = run_lean_recheck(tmp_path, items, "--backend", "replay", "--sandbox", "bwrap")
    assert rc == 0, stderr
    assert {item_id: row["ok"] for item_id, row in verdicts.items()} == {
        "good": True,
        "forged": False,
        "sorry": False,
        "other": False,
        "escape": True,
        "broken": False,
    }
    assert verdicts["good"]["axioms"] == ["propext"]
    assert "1 = 2, which is false" in verdicts["forged"]["message"]
    assert "does not state the trusted statement" in verdicts["other"]["message"]
    assert "does not compile" in verdicts["broken"]["message"] and "COMPILE_ERROR" in verdicts["broken"]["message"]
    # The compile ran sandboxed: the project and everything outside its output directory were read-only.
    assert not (project / "pwned").exists() and not (tmp_path / "outside").exists()
    # One replay process for the whole batch, given every item that compiled, with the shipped program.
    [replay] = tool_runs(tmp_path)
    assert replay["tool"] == "lean --run" and Path(replay["program"]) == recheck_replay.REPLAY_PROGRAM
    assert replay["ids"] == ["good", "forged", "sorry", "other", "escape"]


def test_without_the_sandbox_the_same_escape_succeeds(tmp_path):
    # The control for the test above: it is bubblewrap that stops the write, not the stand-in.
    project = lean_project(tmp_path / "project")
    item = contract_item("escape", "theorem escape : 7 = 7 := by", proof=f"  rfl\n-- ESCAPE_WRITE {project / 'pwned'}")
    rc, verdicts, stderr = run_lean_recheck(tmp_path, [item], "--backend", "replay", "--sandbox", "none")
    assert rc == 0 and verdicts["escape"]["ok"]
    assert (project / "pwned").exists()
    assert "WITHOUT a sandbox" in stderr


def test_every_challenge_is_compiled_before_any_submission(tmp_path, monkeypatch):
    project = lean_project(tmp_path / "project")
    compiled = []
    real_compile = recheck_replay.compile_module

    def recording(options, bwrap, source, olean):
        problem = real_compile(options, bwrap, source, olean)
        compiled.append(json.loads(olean.read_text())["time_ns"] if problem is None else None)
        compiled[-1] = (source.name, compiled[-1])
        return problem

    monkeypatch.setattr(recheck_replay, "compile_module", recording)
    items = [contract_item(f"i{n}", f"theorem t{n} : {n} = {n} := by", proof="  rfl") for n in range(4)]
    items.append(contract_item("f", "theorem f : 4 = 4 := by", file=f"{HEADER}\n\ntheorem f : 4 = 4 := by\n  rfl"))
    options = recheck_backends.options_from(
        recheck_backends_parser().parse_args(lean_recheck_argv(project, "--backend", "replay", "--sandbox", "none")[4:])
    )
    monkeypatch.setenv("LEAN_FAKE_LOG", str(tmp_path / "tools.log"))
    lines = recheck_replay.check_replay(options, items)
    assert [json.loads(line)["ok"] for line in lines] == [True] * 5
    challenge_times = [t for name, t in compiled if "Challenge" in name]
    submission_times = [t for name, t in compiled if "Submission" in name]
    # The four proof items share one challenge module; the file's challenge is built alone.
    assert len(challenge_times) == 2 and len(submission_times) == 5
    assert max(challenge_times) < min(submission_times)


def recheck_backends_parser():
    import argparse

    parser = argparse.ArgumentParser()
    recheck_backends.add_arguments(parser)
    return parser


def test_a_replay_that_dies_is_retried_item_by_item_so_only_the_culprit_is_refused(tmp_path):
    # An id is any string, a path separator included.
    items = [
        contract_item("dir/a", "theorem a : 1 = 1 := by", proof="  rfl"),
        contract_item("crafted", "theorem crafted : 2 = 2 := by", proof="  rfl -- CRASH_REPLAY"),
        contract_item("c", "theorem c : 3 = 3 := by", proof="  rfl"),
    ]
    rc, verdicts, stderr = run_lean_recheck(tmp_path, items, "--backend", "replay", "--sandbox", "none")
    assert rc == 0, stderr
    assert verdicts["dir/a"]["ok"] and verdicts["c"]["ok"]
    assert not verdicts["crafted"]["ok"] and "replay failed on this submission alone" in verdicts["crafted"]["message"]
    replays = [run["ids"] for run in tool_runs(tmp_path, "lean --run")]
    # The batch, a control item (the replay program works), then each item alone.
    assert replays[0] == ["dir/a", "crafted", "c"] and replays[2:] == [["dir/a"], ["crafted"], ["c"]]
    assert len(replays[1]) == 1 and replays[1][0].startswith("verigate-control-")


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        ("not json", "stdin is not JSON"),
        (json.dumps({"version": 2, "items": []}), "version 1"),
        (json.dumps({"version": 1, "items": [{"id": "x"}]}), "items[0] needs"),
    ],
)
def test_lean_recheck_refuses_a_malformed_batch_with_a_non_zero_exit(tmp_path, stdin, message):
    done = subprocess.run(
        lean_recheck_argv(lean_project(tmp_path), "--backend", "replay"),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and message in done.stderr and done.stdout == ""


def test_comparator_gets_one_run_per_item_with_its_config_and_the_modules_are_removed(tmp_path):
    project = lean_project(tmp_path / "project")
    (project / "VerigateRecheck").mkdir()
    items = [
        contract_item("good", "theorem good : 2 + 2 = 4 := by", proof="  norm_num"),
        contract_item(
            "forged", "theorem forged : (1:ℕ) = 2 := by", file=f"{HEADER}\n\ntheorem forged : (1:ℕ) = 2 := by\n  simp"
        ),
    ]
    rc, verdicts, stderr = run_lean_recheck(tmp_path, items, "--backend", "comparator")
    assert rc == 0, stderr
    assert verdicts["good"] == {"id": "good", "ok": True, "axioms": None, "message": "comparator accepts the solution"}
    assert not verdicts["forged"]["ok"] and "1 = 2, which is false" in verdicts["forged"]["message"]
    runs = tool_runs(tmp_path, "comparator")
    # One run per item, then (as one was refused) the control item, which comparator accepts.
    assert len(runs) == 3 and runs[2]["config"]["theorem_names"] == [recheck_compile.CONTROL_THEOREM]
    config = runs[0]["config"]
    assert config["theorem_names"] == ["good"] and config["permitted_axioms"] == WHITELIST
    assert config["challenge_module"].startswith("VerigateRecheck.Challenge_")
    assert config["solution_module"].startswith("VerigateRecheck.Solution_")
    assert runs[0]["cwd"] == str(project)
    # Fresh module names per item, and nothing left in the project afterwards.
    assert runs[0]["config"]["solution_module"] != runs[1]["config"]["solution_module"]
    assert list((project / "VerigateRecheck").iterdir()) == []


def test_comparator_without_its_lean_lib_says_what_to_add(tmp_path):
    rc, _, stderr = run_lean_recheck(
        tmp_path, [contract_item("a", "theorem a : 1 = 1 := by", proof="  rfl")], "--backend", "comparator"
    )
    assert rc == 1 and "lean_lib VerigateRecheck" in stderr


def test_lean_server_with_the_replay_backend_overturns_a_forged_pass(tmp_path, monkeypatch):
    """recheck="auto" (the default) turns the audit sample on once the self-test has verified the checker."""
    import asyncio

    from trl_verigate.lean_server.recheck.self_test import checker_key, record_verified, run_self_test

    bubblewrap_or_skip()
    monkeypatch.setenv("TRL_VERIGATE_CACHE", str(tmp_path / "cache"))
    project = lean_project(tmp_path / "project")
    checker = lean_recheck_argv(project, "--backend", "replay", "--sandbox", "bwrap")
    # Every pass in the audit sample, so the forged one is rechecked whatever its hash (the sampling: test_audit).
    config = stand_in_config(
        tmp_path, script=[FORGED_ANSWER], header=HEADER, recheck_command=checker, recheck_sample_rate=1.0
    )
    assert config.recheck == "auto" and LeanServer(config).recheck_mode == "none"
    test = asyncio.run(run_self_test(checker, HEADER, config.axiom_whitelist, 60.0, config.project_dir))
    assert test.ok, test.detail
    record_verified(checker_key(checker, config.project_dir, HEADER))
    with LeanServer(config) as server:
        assert server.recheck_mode == "sample"
        forged, honest = server.verify([ProofRequest(FALSE_STATEMENT, FORGING_PROOF), true_proof(4)])
        metrics = server.metrics()
    assert forged.status == "failed" and forged.reason.startswith("recheck: the kernel rejects the submission")
    assert honest.status == "passed"
    assert metrics["lean/recheck_overturned"] == 1 and metrics["lean/rechecked"] == 2


def test_concurrent_batches_each_get_their_run_and_a_restarted_server_still_rechecks(tmp_path):
    import threading

    server = LeanServer(config_with_checker(tmp_path, "--latency", "0.3", workers=2))
    for start in range(2):
        server.start()
        results = {}

        def verify(k: int, first: int = 10 * start, into: dict = results) -> None:
            into[k] = server.verify([true_proof(first + k)])

        threads = [threading.Thread(target=verify, args=(k,)) for k in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert [results[k][0].status for k in range(2)] == ["passed", "passed"]
        # Two batches, two runs, each at least the checker's latency long.
        assert server.metrics()["lean/recheck_seconds"] >= 0.6 * (start + 1)
        server.close()
    assert len(checker_runs(tmp_path)) == 4


def test_the_adversarial_corpus_forged_clean_by_the_repl_is_overturned_by_the_checker(tmp_path):
    # Every corpus row that gets past the precheck reaches a stand-in REPL that answers it with a forged clean
    # pass, as a payload writing to fd 1 would; a checker that knows these are no proofs refuses them all.
    rows = load_corpus()
    forging_script, reaching = [], []
    for row in rows:
        prepared = prepare(request_of(row), HEADER)
        if isinstance(prepared, Prepared):
            clean = {
                "severity": "info",
                "pos": {"line": prepared.print_line, "column": 0},
                "endPos": {"line": prepared.print_line, "column": 6},
                "data": f"'{prepared.theorem_name}' does not depend on any axioms",
            }
            forging_script.append({"match": prepared.code, "response": {"messages": [clean], "env": 0}})
            reaching.append(prepared.theorem_name)
    assert len(reaching) >= 10, "the corpus should have rows that reach Lean"
    refused = tmp_path / "refused.txt"
    refused.write_text("\n".join(reaching))
    requests = [request_of(row) for row in rows]

    with LeanServer(stand_in_config(tmp_path, script=forging_script, header=HEADER, workers=4)) as alone:
        fooled = alone.verify(requests)
    assert sum(result.passed for result in fooled) == len(reaching)

    config = config_with_checker(tmp_path, "--refuse-theorems", str(refused), script=forging_script, workers=4)
    with LeanServer(config) as server:
        results = server.verify(requests)
        metrics = server.metrics()
    assert not [row["id"] for row, result in zip(rows, results, strict=True) if result.passed]
    overturned = [result for result in results if result.reason and result.reason.startswith("recheck: ")]
    assert len(overturned) == len(reaching) and {r.status for r in overturned} == {"failed"}
    assert metrics["lean/recheck_overturned"] == len(reaching)
    [run] = checker_runs(tmp_path)
    assert sorted(item["theorem"] for item in run["payload"]["items"]) == sorted(reaching)


EXAMPLE_STATEMENTS = [
    "example : 5 = 5 := by",
    "/-- A doc comment. -/\nexample : 5 = 5 := by",
    "-- a comment\nexample : 5 = 5 := by",
    "open Nat in\nexample : 5 = 5 := by",
    "@[simp] example : 5 = 5 := by",
]
EXAMPLE_FILES = [
    f"{HEADER}\n\ntheorem helper : 5 = 5 := rfl\n\nexample : 5 = 5 := by\n  exact helper",
    f"{HEADER}\n\n/-- doc -/\nexample : 5 = 5 := by\n  rfl",
]


def test_an_example_anywhere_in_its_statement_is_checked_under_the_name_the_repl_ran_it_with(tmp_path):
    # The checker (lean-recheck with the stand-in tools) looks up `theorem <theorem>` in the challenge and the
    # submission: an `example` sent unrenamed would be refused although the REPL ran it renamed and passed it.
    project = lean_project(tmp_path / "project")
    checker = lean_recheck_argv(project, "--backend", "replay", "--sandbox", "none")
    requests = [ProofRequest(statement, "  rfl") for statement in EXAMPLE_STATEMENTS] + EXAMPLE_FILES
    config = config_with_checker(tmp_path, recheck_command=checker)
    with LeanServer(config) as server:
        results = server.verify(requests)
        metrics = server.metrics()
    assert [(r.status, r.reason) for r in results] == [("passed", None)] * len(requests)
    assert metrics["lean/rechecked"] == len(requests) and metrics["lean/recheck_overturned"] == 0


def test_the_checker_runs_in_the_project_dir(tmp_path, monkeypatch):
    # stand_in_config makes tmp_path the project_dir; the server's own cwd is elsewhere.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = config_with_checker(tmp_path)
    assert config.project_dir == str(tmp_path)
    with LeanServer(config) as server:
        [result] = server.verify([true_proof(1)])
    assert result.passed
    [run] = checker_runs(tmp_path)
    assert run["cwd"] == str(tmp_path)


def lean_recheck_cli(cwd: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trl_verigate.cli", "lean-recheck", *flags],
        input=json.dumps({"version": 1, "items": []}),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def test_project_dir_defaults_to_the_cwd_and_must_hold_a_lakefile(tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    for flags in (("--backend", "replay"), ("--backend", "replay", "--project-dir", str(bare))):
        done = lean_recheck_cli(bare, *flags)
        assert done.returncode == 2 and done.stdout == ""
        assert "--project-dir" in done.stderr and "lakefile.lean or lakefile.toml" in done.stderr
    missing = lean_recheck_cli(bare, "--backend", "replay", "--project-dir", str(tmp_path / "absent"))
    assert missing.returncode == 2 and "is not a directory" in missing.stderr
    # The same cwd once it is a project: the default is accepted (an empty batch has no verdicts).
    lean_project(bare)
    done = lean_recheck_cli(bare, "--backend", "replay")
    assert (done.returncode, done.stdout) == (0, ""), done.stderr


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--compile-timeout", "-1"),
        ("--compile-timeout", "0"),
        ("--compile-timeout", "soon"),
        ("--replay-timeout", "0"),
        ("--jobs", "0"),
        ("--jobs", "1.5"),
    ],
)
def test_numeric_flags_must_be_above_zero(tmp_path, flag, value):
    done = lean_recheck_cli(lean_project(tmp_path), "--backend", "replay", flag, value)
    assert done.returncode == 2 and done.stdout == ""
    assert f"argument {flag}" in done.stderr


def test_lean_recheck_help_says_what_it_does():
    done = subprocess.run(
        [sys.executable, "-m", "trl_verigate.cli", "lean-recheck", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    description = " ".join(done.stdout.split("options:")[0].split())
    assert "verdict line per item" in description and "Lean kernel" in description


# ---------------------------------------------------------------- no tool outlives the checker


def processes_mentioning(marker: str) -> list[str]:
    """The command lines of live processes (other than this one) whose argv contains `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in argv and state != "Z":
            found.append(f"{name}: {argv}")
    return found


def wait_until_gone(marker: str, within_s: float = 5.0) -> list[str]:
    deadline = time.monotonic() + within_s
    while (left := processes_mentioning(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def wait_until_running(marker: str, count: int, within_s: float = 30.0) -> None:
    deadline = time.monotonic() + within_s
    while len(processes_mentioning(marker)) < count and time.monotonic() < deadline:
        time.sleep(0.05)


@pytest.fixture
def slow_tools(tmp_path, monkeypatch):
    """Stand-in tools that start their work as a child (as `lake env lean` does) and hang in one step; every path
    the checker hands them lies under the returned marker directory."""
    marker = tmp_path / "checker-tmp"
    marker.mkdir()
    monkeypatch.setenv("TMPDIR", str(marker))
    monkeypatch.setenv("LEAN_FAKE_VIA_CHILD", "1")
    return marker


@pytest.mark.parametrize(
    ("step", "flags"),
    [
        ("compile", ("--backend", "replay", "--sandbox", "none")),
        ("compile", ("--backend", "replay", "--sandbox", "bwrap")),
        ("replay", ("--backend", "replay", "--sandbox", "none")),
        ("comparator", ("--backend", "comparator")),
    ],
    ids=["compile", "compile-bwrap", "replay", "comparator"],
)
def test_no_tool_outlives_a_checker_killed_at_recheck_timeout(tmp_path, slow_tools, monkeypatch, step, flags):
    import asyncio

    if "bwrap" in flags:
        bubblewrap_or_skip()
    monkeypatch.setenv("LEAN_FAKE_SLEEP", step)
    project = lean_project(tmp_path / "project")
    (project / "VerigateRecheck").mkdir()
    item = recheck_module.RecheckItem("0", HEADER, "theorem t : 1 = 1 := by", "t", tuple(WHITELIST), proof="  rfl")

    async def checker_run_watching_its_tools() -> int:
        run = asyncio.ensure_future(recheck_module.run_checker(lean_recheck_argv(project, *flags), [item], timeout=6))
        most = 0
        while not run.done():
            most = max(most, len(processes_mentioning(str(slow_tools))))
            await asyncio.sleep(0.1)
        with pytest.raises(CheckerFailure, match="recheck_timeout"):
            run.result()
        return most

    # The hanging tool and the child it started were running when the checker was killed ...
    assert asyncio.run(checker_run_watching_its_tools()) >= 2
    # ... and are gone with it.
    assert wait_until_gone(str(slow_tools)) == []


def test_a_compile_timeout_kills_the_whole_compile_and_the_checker_goes_on(tmp_path, slow_tools, monkeypatch):
    monkeypatch.setenv("LEAN_FAKE_SLEEP", "compile")
    items = [contract_item("a", "theorem a : 1 = 1 := by", proof="  rfl")]
    started = time.monotonic()
    rc, _, stderr = run_lean_recheck(
        tmp_path, items, "--backend", "replay", "--sandbox", "none", "--compile-timeout", "1"
    )
    # The compile's child held the output pipe: killing only the process started would wait for it an hour.
    assert time.monotonic() - started < 30
    assert "took longer than 1 s" in stderr or rc == 0, stderr
    assert wait_until_gone(str(slow_tools)) == []


def test_sigterm_to_the_checker_alone_takes_its_tools_down(tmp_path, slow_tools, monkeypatch):
    monkeypatch.setenv("LEAN_FAKE_SLEEP", "compile")
    project = lean_project(tmp_path / "project")
    item = contract_item("a", "theorem a : 1 = 1 := by", proof="  rfl")
    checker = subprocess.Popen(
        lean_recheck_argv(project, "--backend", "replay", "--sandbox", "none"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        checker.stdin.write(json.dumps({"version": 1, "items": [item]}))
        checker.stdin.close()
        wait_until_running(str(slow_tools), 2)
        assert len(processes_mentioning(str(slow_tools))) >= 2  # the tool and the child it started
        checker.send_signal(15)
        assert checker.wait(timeout=30) == 128 + 15
        assert wait_until_gone(str(slow_tools)) == []
    finally:
        # Whatever the outcome, nothing of this test keeps running (the checker got its own process group).
        if checker.poll() is None:
            os.killpg(checker.pid, 9)
        checker.wait()


# ---------------------------------------------------------------- a broken checker fails closed, never overturns


def test_a_project_that_compiles_nothing_is_a_checker_failure_not_a_refusal(tmp_path, monkeypatch):
    # Before: every item came back ok:false "the trusted statement does not compile" with exit 0, as if the policy
    # had fooled the REPL on every pass.
    monkeypatch.setenv("LEAN_FAKE_BROKEN", "compile")
    items = [
        contract_item("a", "theorem a : 1 = 1 := by", proof="  rfl"),
        contract_item("b", "theorem b : 2 = 2 := by", proof="  rfl"),
        contract_item("f", "theorem f : 3 = 3 := by", file=f"{HEADER}\n\ntheorem f : 3 = 3 := by\n  rfl"),
    ]
    rc, verdicts, stderr = run_lean_recheck(tmp_path, items, "--backend", "replay", "--sandbox", "none")
    assert rc == 1 and verdicts == {}
    assert "cannot compile a trivial challenge" in stderr and "unknown package 'Mathlib'" in stderr


def test_a_lean_command_missing_inside_the_sandbox_is_a_checker_failure(tmp_path):
    # The review's case: bubblewrap starts, but cannot exec the tool (`bwrap: execvp lake`).
    bubblewrap_or_skip()
    project = lean_project(tmp_path / "project")
    items = [contract_item(k, f"theorem {k} : 1 = 1 := by", proof="  rfl") for k in ("a", "b")]
    argv = lean_recheck_argv(project, "--backend", "replay", "--sandbox", "bwrap")
    argv[argv.index("--lean-command") + 1] = "no-such-lake env lean"
    done = subprocess.run(
        argv, input=json.dumps({"version": 1, "items": items}), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1 and done.stdout == ""
    assert "cannot compile a trivial challenge" in done.stderr and "no-such-lake" in done.stderr


def test_a_trusted_statement_that_does_not_compile_is_the_checkers_failure_a_files_is_a_refusal(tmp_path):
    # The control compiles, so the checker works; a trusted statement the REPL elaborated but the checker cannot
    # means the checker's project differs from the REPL's: no verdict about the submission can come of it.
    good = contract_item("good", "theorem good : 1 = 1 := by", proof="  rfl")
    bad_statement = contract_item("bad", "theorem bad : COMPILE_ERROR = 1 := by", proof="  rfl")
    rc, _, stderr = run_lean_recheck(tmp_path, [good, bad_statement], "--backend", "replay", "--sandbox", "none")
    assert rc == 1 and "trusted statement of item 'bad'" in stderr and "differs from the REPL's" in stderr

    # A file's statement is the file's own text (its helpers included): that one not compiling is about it.
    bad_file = contract_item(
        "file", "theorem f : COMPILE_ERROR = 1 := by", file=f"{HEADER}\n\ntheorem f : COMPILE_ERROR = 1 := by\n  rfl"
    )
    rc, verdicts, stderr = run_lean_recheck(tmp_path, [good, bad_file], "--backend", "replay", "--sandbox", "none")
    assert rc == 0, stderr
    assert verdicts["good"]["ok"] and not verdicts["file"]["ok"]
    assert verdicts["file"]["message"].startswith("the file's statement (header + statement + sorry) does not compile")


@pytest.mark.parametrize("count", [1, 3])
def test_a_broken_replay_program_is_a_checker_failure_whatever_the_batch_size(tmp_path, monkeypatch, count):
    # Before: with 2 or more items each was replayed alone, each failed, and all came back ok:false with exit 0.
    monkeypatch.setenv("LEAN_FAKE_BROKEN", "replay")
    items = [contract_item(f"i{n}", f"theorem t{n} : {n} = {n} := by", proof="  rfl") for n in range(count)]
    rc, verdicts, stderr = run_lean_recheck(tmp_path, items, "--backend", "replay", "--sandbox", "none")
    assert rc == 1 and verdicts == {}
    assert "fails on a known-good control item" in stderr and "unknown constant" in stderr
    # No item was replayed alone: the control showed the program itself is broken.
    assert [len(run["ids"]) for run in tool_runs(tmp_path, "lean --run")] == [count, 1]


def test_a_single_submission_that_crashes_the_replay_is_refused_not_a_checker_failure(tmp_path):
    item = contract_item("crafted", "theorem crafted : 2 = 2 := by", proof="  rfl -- CRASH_REPLAY")
    rc, verdicts, stderr = run_lean_recheck(tmp_path, [item], "--backend", "replay", "--sandbox", "none")
    assert rc == 0, stderr
    assert not verdicts["crafted"]["ok"] and "replay failed on this submission alone" in verdicts["crafted"]["message"]


def test_lean_server_counts_a_broken_checker_as_checker_failures_not_overturns(tmp_path, monkeypatch):
    monkeypatch.setenv("LEAN_FAKE_BROKEN", "compile")
    project = lean_project(tmp_path / "project")
    checker = lean_recheck_argv(project, "--backend", "replay", "--sandbox", "none")
    with LeanServer(config_with_checker(tmp_path, recheck_command=checker)) as server:
        results = server.verify([true_proof(1), true_proof(2)])
        metrics = server.metrics()
    assert [r.status for r in results] == ["error", "error"]
    assert "cannot compile a trivial challenge" in results[0].reason
    assert metrics["lean/recheck_checker_failures"] == 2 and metrics["lean/recheck_overturned"] == 0


# ---------------------------------------------------------------- imports per batch


def test_a_batch_costs_one_challenge_compile_per_header_one_compile_per_submission_and_one_replay(tmp_path):
    # A GRPO group: the same problem four times with different proofs, one of them false, plus another problem.
    same = "theorem group_problem : (2:ℕ) + 2 = 4 := by"
    items = [contract_item(f"g{n}", same, proof=f"  norm_num -- attempt {n}") for n in range(4)]
    items.append(contract_item("forged", "theorem forged : (1:ℕ) = 2 := by", proof="  norm_num"))
    items.append(contract_item("other", "theorem other : 3 = 3 := by", proof="  rfl"))
    rc, verdicts, stderr = run_lean_recheck(tmp_path, items, "--backend", "replay", "--sandbox", "none")
    assert rc == 0, stderr
    assert {k: v["ok"] for k, v in verdicts.items()} == {
        **{f"g{n}": True for n in range(4)},
        "forged": False,
        "other": True,
    }
    compiles = [run["source"] for run in tool_runs(tmp_path, "lean -o")]
    replays = tool_runs(tmp_path, "lean --run")
    # 6 items under one header: 1 challenge module + 6 submissions + 1 replay = 8 Mathlib imports (not 2 * 6 + 1).
    assert len(compiles) + len(replays) == 1 + 6 + 1
    [challenges] = [source for source in compiles if source.count("sorry") == 6]
    assert challenges.count("import Mathlib") == 1
    # Each challenge under its own name, even the four of the same problem.
    names = set(re.findall(r"theorem (\w+)", challenges))
    assert len(names) == 6 and all(name.startswith(("group_problem_", "forged_", "other_")) for name in names)
    submissions = [source for source in compiles if "sorry" not in source]
    # No submission is compiled together with another: each holds exactly one proof.
    assert len(submissions) == 6 and all(source.count(":= by") == 1 for source in submissions)


def test_statements_that_could_touch_other_challenges_and_other_headers_are_compiled_apart(tmp_path):
    other_header = "import Mathlib\nset_option maxHeartbeats 100000"
    items = [
        contract_item("a", "theorem a : 1 = 1 := by", proof="  rfl"),
        contract_item("b", "theorem b : 2 = 2 := by", proof="  rfl"),
        {**contract_item("c", "theorem c : 3 = 3 := by", proof="  rfl"), "header": other_header},
        # An attribute could change how the next challenges elaborate: its challenge is built alone.
        {
            **contract_item("d", "theorem d : 4 = 4 := by", proof="  rfl"),
            "statement": "@[simp] theorem d : 4 = 4 := by",
        },
        contract_item("f", "theorem f : 5 = 5 := by", file=f"{HEADER}\n\ntheorem f : 5 = 5 := by\n  rfl"),
    ]
    rc, verdicts, stderr = run_lean_recheck(tmp_path, items, "--backend", "replay", "--sandbox", "none")
    assert rc == 0 and all(v["ok"] for v in verdicts.values()), (stderr, verdicts)
    challenges = [run["source"] for run in tool_runs(tmp_path, "lean -o") if "sorry" in run["source"]]
    # {a, b} share HEADER's module; c (its own header), d (attribute) and f (a file) each get one.
    assert sorted(source.count("sorry") for source in challenges) == [1, 1, 1, 2]


def test_a_comparator_that_refuses_everything_is_a_checker_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("LEAN_FAKE_BROKEN", "comparator")
    project = lean_project(tmp_path / "project")
    (project / "VerigateRecheck").mkdir()
    items = [contract_item(k, f"theorem {k} : 1 = 1 := by", proof="  rfl") for k in ("a", "b")]
    rc, verdicts, stderr = run_lean_recheck(tmp_path, items, "--backend", "comparator")
    assert rc == 1 and verdicts == {}
    assert "comparator refuses a known-good control item" in stderr and "landrun" in stderr


def test_run_inside_another_program_leaves_that_programs_other_children_alone(tmp_path, monkeypatch):
    import ctypes
    import io

    monkeypatch.setenv("LEAN_FAKE_LOG", str(tmp_path / "tools.log"))
    project = lean_project(tmp_path / "project")
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        args = recheck_backends_parser().parse_args(
            lean_recheck_argv(project, "--backend", "replay", "--sandbox", "none")[4:]
        )
        batch = json.dumps({"version": 1, "items": [contract_item("a", "theorem a : 1 = 1 := by", proof="  rfl")]})
        out = io.StringIO()
        assert recheck_backends.run(args, stdin=io.StringIO(batch), stdout=out) == 0
        assert json.loads(out.getvalue())["ok"]
        assert bystander.poll() is None  # only the command-line entry kills every descendant
        flag = ctypes.c_int(0)
        ctypes.CDLL(None, use_errno=True).prctl(37, ctypes.byref(flag))  # PR_GET_CHILD_SUBREAPER
        assert flag.value == 0
    finally:
        bystander.kill()
        bystander.wait()


def test_the_self_test_refuses_a_checker_that_checks_nothing_and_one_that_refuses_everything(tmp_path, monkeypatch):
    import asyncio

    from trl_verigate.lean_server.recheck.self_test import checker_key, is_verified, run_self_test

    monkeypatch.setenv("TRL_VERIGATE_CACHE", str(tmp_path / "cache"))
    whitelist = ("propext",)
    accepts_all = checker_command("--log", str(tmp_path / "a.log"), "--accept-all")
    test = asyncio.run(run_self_test(accepts_all, HEADER, whitelist, 30.0, str(tmp_path)))
    assert not test.ok and "confirmed the forged pass" in test.detail
    refuses_all = checker_command("--log", str(tmp_path / "b.log"), "--refuse", "theorem")
    test = asyncio.run(run_self_test(refuses_all, HEADER, whitelist, 30.0, str(tmp_path)))
    assert not test.ok and "refused the honest proof" in test.detail
    discerning = checker_command("--log", str(tmp_path / "c.log"))  # its toy kernel refuses the false claim
    test = asyncio.run(run_self_test(discerning, HEADER, whitelist, 30.0, str(tmp_path)))
    assert test.ok, test.detail
    # Nothing is recorded by the test itself: lean-doctor records a checker that passed it.
    assert not is_verified(checker_key(discerning, str(tmp_path), HEADER))
