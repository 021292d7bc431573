"""coq.process: one coqidetop, for real: header loaded once, failing sentence and goals, SIGINT on timeout, a
protocol breach, a memory blow-up under RLIMIT_AS, a protocol version it does not speak."""

import asyncio
import os

import pytest

from trl_verigate.coq import process as process_module
from trl_verigate.coq.config import CoqServerConfig
from trl_verigate.coq.process import CoqProcess
from trl_verigate.prover_pool.worker import WorkerCompromised, WorkerCrashed, WorkerStartError

from .helpers import job

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def coq(loop):
    process = CoqProcess(CoqServerConfig(workers=1))
    loop.run_until_complete(process.start("Require Import Arith Lia."))
    yield lambda coroutine: loop.run_until_complete(coroutine), process
    loop.run_until_complete(process.close())


def test_the_header_loads_once_and_each_proof_starts_from_it(coq):
    run, process = coq
    # The same theorem name twice: the second would clash had the first not been undone by Edit_at.
    first = run(process.run_code(job(["intros n.", "lia."]), 10))
    second = run(process.run_code(job(["induction n as [|n IH].", "-", "reflexivity.", "-", "simpl.", "auto."]), 10))
    assert "failure" not in first and "failure" not in second
    assert first["check"] == "t\n     : forall n : nat, n + 0 = n"
    assert process.header_loads == 1 and process.coq_version == "8.16.1"


def test_the_first_failing_sentence_its_message_and_the_goals_before_it(coq):
    run, process = coq
    response = run(process.run_code(job(["intros n.", "simpl.", "reflexivity.", "lia."]), 10))
    # Sentence 2 fails: `simpl` does not reduce n + 0 (recursion is on the first argument).
    assert response["failure"]["index"] == 2
    assert 'Unable to unify "n" with "n + 0"' in response["failure"]["text"]
    assert response["goals_before"] == ["n : nat\n====================\nn + 0 = n"]


def test_an_incomplete_proof_fails_at_qed_with_the_goals_left(coq):
    run, process = coq
    response = run(process.run_code(job(["intros n.", "destruct n."]), 10))
    assert response["failure"]["index"] == 2  # Qed, after the two sentences
    assert "incomplete proof" in response["failure"]["text"]
    assert len(response["goals_before"]) == 2


def test_an_unterminated_sentence_is_a_syntax_error_at_its_index(coq):
    run, process = coq
    response = run(process.run_code(job(["intros n.", "lia"]), 10))
    assert response["failure"]["index"] == 1 and response["failure"].get("syntax")
    assert "Syntax error" in response["failure"]["text"]


def test_a_timeout_interrupts_coq_and_the_process_stays(coq):
    run, process = coq
    pid = process.pid
    response = run(process.run_code(job(["intros n.", "repeat (assert True by auto)."]), 1.0))
    assert response["timeout"] is True
    assert process.alive and process.pid == pid
    assert "failure" not in run(process.run_code(job(["intros n.", "lia."]), 10))


def test_an_answer_nobody_asked_for_is_a_breach(loop):
    async def main():
        process = CoqProcess(CoqServerConfig(workers=1))
        await process.start("Require Import Arith.")
        try:
            # A second answer coqidetop writes while no call waits (as a forged one would arrive).
            process._process.stdin.write(b'<call val="Goal"><unit/></call>\n')
            await process._process.stdin.drain()
            await asyncio.sleep(0.5)
            with pytest.raises(WorkerCompromised) as error:
                await process.run_code(job(["intros n.", "auto."]), 10)
            assert not error.value.request_sent
        finally:
            await process.close()

    loop.run_until_complete(main())


def test_a_memory_blow_up_under_rlimit_as_crashes_only_that_worker(loop):
    async def main():
        process = CoqProcess(CoqServerConfig(workers=1, memory_limit_mb=1024))
        await process.start("Require Import Arith.")
        try:
            blow_up = "let x := eval vm_compute in (List.length (List.repeat 0 200000000)) in idtac x."
            with pytest.raises(WorkerCrashed) as error:
                await process.run_code(job(["intros n.", blow_up]), 60)
            assert "out of memory" in str(error.value)
        finally:
            await process.close()

    loop.run_until_complete(main())


def test_a_protocol_version_it_does_not_speak_is_refused(loop, monkeypatch):
    monkeypatch.setattr(process_module, "SUPPORTED_PROTOCOLS", ("19990101",))
    process = CoqProcess(CoqServerConfig(workers=1))
    with pytest.raises(WorkerStartError) as error:
        loop.run_until_complete(process.start("Require Import Arith."))
    message = str(error.value)
    assert "Coq 8.16.1 speaking XML protocol 20220205" in message and "19990101" in message
    assert not process.alive


def test_a_missing_coqidetop_names_the_install_command(loop):
    process = CoqProcess(CoqServerConfig(workers=1, coqidetop_command=["no-such-coqidetop"]))
    with pytest.raises(WorkerStartError) as error:
        loop.run_until_complete(process.start("Require Import Arith."))
    assert "apt-get install -y --no-install-recommends coq" in str(error.value)


def test_a_header_coq_cannot_load_is_a_start_error(loop):
    process = CoqProcess(CoqServerConfig(workers=1))
    with pytest.raises(WorkerStartError) as error:
        loop.run_until_complete(process.start("Require Import NoSuchLibrary."))
    assert "NoSuchLibrary" in str(error.value) and "CoqServerConfig.header" in str(error.value)


def test_workers_run_sandboxed_when_bubblewrap_works(coq):
    _, process = coq
    if CoqServerConfig().sandbox == "auto" and not process.sandboxed:
        pytest.skip("bubblewrap does not work here")
    # Inside bubblewrap's PID namespace coqidetop is not the launcher's pid.
    assert process.sandboxed and os.path.exists(f"/proc/{process.pid}")


def test_a_proof_that_exhausts_memory_retires_its_worker_and_the_next_proofs_pass():
    from trl_verigate.coq import CoqProofRequest
    from trl_verigate.coq.server import CoqServer

    # 3^9 * 3^9 in unary nat exhausts 2 GiB: Coq answers "Out of memory." and keeps the process at its ceiling.
    heavy = CoqProofRequest("Theorem t : Nat.pow 3 9 * Nat.pow 3 9 = Nat.pow 9 9.", "vm_compute. reflexivity.")
    honest = CoqProofRequest("Theorem t : forall n : nat, n + 0 = n.", "intros n. lia.")
    config = CoqServerConfig(workers=1, spare_workers=0, timeout=60.0, memory_limit_mb=2048, recheck="none")
    with CoqServer(config) as server:
        first = server.verify([heavy, honest, honest])
        later = server.verify([honest, honest])
        stats = server.stats()
    assert first[0].status == "failed" and "Out of memory." in first[0].reason
    assert [result.status for result in first[1:] + later] == ["passed"] * 4, [r.reason for r in first + later]
    assert stats["recycled"] == 1
