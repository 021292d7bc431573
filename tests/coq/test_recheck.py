"""coq.recheck: coqc + coqchk confirm honest passes and overturn forged ones, attributed to the right candidate; a
checker that cannot run fails its candidates closed."""

import asyncio

import pytest

from trl_verigate.coq.config import CoqProofRequest, CoqServerConfig
from trl_verigate.coq.precheck import Prepared
from trl_verigate.coq.recheck import Candidate, CheckerFailure, CoqRechecker, summary_problems
from trl_verigate.prover_pool.results import VerificationResult

from .helpers import STATEMENT, job

pytestmark = pytest.mark.timeout(300)
HEADER = "Require Import Arith Lia."
CHECK = "t\n     : forall n : nat, n + 0 = n"


def candidate(sentences, statement=STATEMENT, check=CHECK) -> Candidate:
    prepared = Prepared(HEADER, job(sentences, statement), (), CoqProofRequest(statement, " ".join(sentences)))
    return Candidate(prepared, VerificationResult(status="passed"), check)


def recheck(candidates, **config):
    rechecker = CoqRechecker(CoqServerConfig(workers=1, **config))
    return asyncio.run(rechecker.recheck(candidates)), rechecker.metrics()


def test_honest_passes_are_confirmed_and_forged_ones_overturned_each_on_its_own():
    honest = candidate(["intros n.", "lia."])
    # What the precheck refuses, sent here past it: the recheck must stop each alone.
    axiom = candidate(["Axiom cheat : forall n, n + 0 = n.", "exact cheat."])
    guard = candidate(["Unset Guard Checking.", "exact (fix f (n : nat) : n + 0 = n := f n)."])
    swapped = candidate(["Abort.", "Theorem t : True.", "exact I."])
    results, metrics = recheck([honest, axiom, guard, swapped, honest])
    assert [r.status for r in results] == ["passed", "failed", "failed", "failed", "passed"]
    assert all(r.rechecked for r in results)
    assert "axiom VG.Pass.cheat" in results[1].reason
    assert "unsafe (co)fixpoints" in results[2].reason
    assert results[3].reason.startswith("recheck: ")
    assert metrics["coq/rechecked"] == 5 and metrics["coq/recheck_overturned"] == 3


def test_a_compiled_theorem_that_is_not_the_statement_is_overturned():
    (result,), _ = recheck([candidate(["intros n.", "lia."], check="t\n     : True")])
    assert result.status == "failed" and "not the trusted statement" in result.reason


def test_a_checker_that_cannot_run_fails_closed():
    (result,), metrics = recheck([candidate(["intros n.", "lia."])], coqchk_command=["true"])
    assert result.status == "error" and result.reason.startswith("recheck: checker failed")
    assert metrics["coq/recheck_checker_failures"] == 1


def test_a_summary_is_required_and_read():
    with pytest.raises(CheckerFailure):
        summary_problems("")
    summary = (
        "CONTEXT SUMMARY\n===============\n\n* Theory: Set is predicative\n\n* Axioms:\n    Coq.Logic.Classical_Prop.classic\n"
        "    VG.Batch.VG_1.cheat\n\n* Constants/Inductives relying on type-in-type: <none>\n\n"
        "* Constants/Inductives relying on unsafe (co)fixpoints:\n    VG.Batch.VG_0.t\n\n"
        "* Inductives whose positivity is assumed: <none>\n"
    )
    assert summary_problems(summary) == [
        "axiom VG.Batch.VG_1.cheat",
        "VG.Batch.VG_0.t (constants/inductives relying on unsafe (co)fixpoints)",
    ]


# coqchk has no VM: a `vm_compute` step coqidetop runs in a moment costs coqchk seconds (minutes at 2^24 steps).
COSTLY_FOR_COQCHK = [
    "assert (BinPos.Pos.iter negb true (BinPos.Pos.pow (BinNums.xO BinNums.xH) (BinPos.Pos.of_nat 23)) = true)"
    " by (vm_compute; reflexivity).",
    "clear H.",
    "intros n.",
    "lia.",
]


@pytest.mark.slow
def test_a_pass_too_costly_to_recheck_fails_alone_and_the_batch_keeps_its_passes():
    honest = candidate(["intros n.", "lia."])
    results, metrics = recheck([honest, candidate(COSTLY_FOR_COQCHK), honest], recheck_timeout=10.0, recheck_workers=2)
    assert [r.status for r in results] == ["passed", "failed", "passed"], [r.reason for r in results]
    assert results[1].reason.startswith("recheck: too costly to recheck within CoqServerConfig.recheck_timeout=10 s")
    assert metrics["coq/recheck_checker_failures"] == 0


def test_the_whitelist_holds_for_a_pass_whose_print_assumptions_was_skipped():
    classic = Candidate(
        Prepared(
            "Require Import Classical.",
            job(["exact (classic True)."], "Theorem t : True \\/ ~ True.", print_assumptions=False),
            (),
            CoqProofRequest("Theorem t : True \\/ ~ True.", "exact (classic True)."),
        ),
        VerificationResult(status="passed"),
        "t\n     : True \\/ ~ True",
    )
    (result,), _ = recheck([classic])
    assert result.status == "failed" and "axiom classic" in result.reason
    (allowed,), _ = recheck([classic], axiom_whitelist=("classic",))
    assert allowed.status == "passed", allowed.reason


@pytest.mark.slow
def test_a_pass_over_the_recheck_memory_limit_fails_and_is_not_a_checker_failure():
    # 800 MiB of address space holds coqc and coqchk on an honest pass; coqchk's reduction of 2^23 steps outgrows it.
    (result,), metrics = recheck([candidate(COSTLY_FOR_COQCHK)], recheck_timeout=120.0, recheck_memory_limit_mb=800)
    assert result.status == "failed", result.reason
    assert "recheck_memory_limit_mb=800" in result.reason and "ran out of its memory" in result.reason
    assert metrics["coq/recheck_checker_failures"] == 0


@pytest.mark.parametrize("slots", [1, 3])
def test_rechecks_run_side_by_side_up_to_recheck_workers(monkeypatch, slots):
    in_flight, most = 0, 0
    check = CoqRechecker._check

    async def counted(self, candidate):
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        try:
            return await check(self, candidate)
        finally:
            in_flight -= 1

    monkeypatch.setattr(CoqRechecker, "_check", counted)
    results, _ = recheck([candidate(["intros n.", "lia."])] * 3, recheck_workers=slots)
    assert [r.status for r in results] == ["passed"] * 3
    assert most == slots
