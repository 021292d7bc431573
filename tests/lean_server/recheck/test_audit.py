"""The audit sample and its escalation: how fast a systematic hack is caught, and what happens once it is.

The catch formula is checked against a simulation that draws passes through the real selection (`Audit.selects`,
a hash of the seed, the pass's number and its content), and end to end through `LeanServer` with the stand-in REPL, which passes a false claim, and the
stand-in checker, which overturns it.
"""

import logging
import math
from pathlib import Path

import pytest

from tests.fake_checker import checker_command
from tests.fake_repl import stand_in_config
from trl_verigate.lean_server import LeanServer, ProofRequest
from trl_verigate.lean_server.recheck.audit import Audit, catch_probability, steps_to_catch

pytestmark = pytest.mark.timeout(180)

HEADER = "import Mathlib"
# The stand-in REPL passes every proof the precheck lets through, a false `(1:ℕ) = 2` too, as a forging payload
# would make the real REPL do; the stand-in checker evaluates the closed equation and refuses it.


def hack(step: int, k: int) -> ProofRequest:
    return ProofRequest(f"theorem hack_{step}_{k} : (1:ℕ) = 2 := by", "  norm_num")


def honest(step: int, k: int) -> ProofRequest:
    return ProofRequest(f"theorem ok_{step}_{k} : {k} + 1 = {k + 1} := by", "  norm_num")


def test_the_catch_probability_by_hand():
    # r = 0.05, f = 0.25: each pass is a sampled hack with probability 0.0125.
    assert catch_probability(0.05, 0.25, 64) == pytest.approx(1 - 0.9875**64)
    assert catch_probability(0.05, 1.0, 1) == pytest.approx(0.05)
    # 1 - 0.95**k >= 0.95 first at k = 59 (0.95**58 = 0.0510, 0.95**59 = 0.0485).
    assert steps_to_catch(0.05, 1.0, 1) == 59
    # One pass a step, hacked half the time, always rechecked: 0.5**4 = 0.0625 > 0.05 >= 0.5**5.
    assert steps_to_catch(1.0, 0.5, 1) == 5
    assert steps_to_catch(1.0, 1.0, 1) == 1


@pytest.mark.parametrize(("rate", "fraction", "passes"), [(0.05, 0.25, 64), (0.05, 0.05, 128), (0.1, 0.5, 8)])
def test_the_formula_matches_a_simulation_of_the_real_selection(rate, fraction, passes):
    """Steps of `passes` distinct passes, a `fraction` of them hacked: the share of steps whose audit sample holds a
    hacked pass, against 1 - (1 - r f)^n, within 4.5 standard errors of the simulated share."""
    audit = Audit("sample", seed=3, rate=rate)
    hacked_per_step = round(fraction * passes)
    steps = 600
    caught = 0
    for step in range(steps):
        hacks = [hack(step, k) for k in range(hacked_per_step)]
        caught += any(audit.selects(request) for request in hacks)
    expected = catch_probability(rate, hacked_per_step / passes, passes)
    error = math.sqrt(expected * (1 - expected) / steps)
    assert abs(caught / steps - expected) <= 4.5 * error + 1e-9, (caught / steps, expected)


def test_a_proof_repeated_word_for_word_is_drawn_again_each_time():
    """A collapsed policy repeats one hacked proof verbatim: each repeat is a fresh draw, so about r of them are
    rechecked. A sample keyed on content alone would pick all 200 or none, and miss this hack forever."""
    audit = Audit("sample", seed=0, rate=0.05)
    same = hack(0, 0)
    picked = sum(audit.selects(same) for _ in range(200))
    # Binomial(200, 0.05): mean 10, standard deviation 3.08; P(none) = 0.95**200 = 3.5e-5.
    assert 0 < picked < 200
    assert abs(picked - 10) <= 4.5 * math.sqrt(200 * 0.05 * 0.95), picked


def test_the_same_seed_and_passes_pick_the_same_passes():
    passes = [hack(step, k) for step in range(20) for k in range(4)]
    first, second = Audit("sample", seed=7, rate=0.3), Audit("sample", seed=7, rate=0.3)
    assert [first.selects(p) for p in passes] == [second.selects(p) for p in passes]


def test_runs_are_caught_within_the_documented_steps_in_about_95_percent_of_seeds():
    rate, fraction, passes = 0.05, 0.25, 32
    bound = steps_to_catch(rate, fraction, passes)
    runs = 300
    within = 0
    for seed in range(runs):
        audit = Audit("sample", seed=seed, rate=rate)
        hacks = (hack(step, k) for step in range(bound) for k in range(round(fraction * passes)))
        within += any(audit.selects(request) for request in hacks)
    # At least 95% by construction of the bound; 4.5 standard errors of slack for the simulation.
    assert within / runs >= 0.95 - 4.5 * math.sqrt(0.95 * 0.05 / runs)


def config(tmp_path: Path, rate: float, seed: int = 0):
    checker = checker_command("--log", str(tmp_path / "checker.log"))
    return stand_in_config(
        tmp_path,
        header=HEADER,
        recheck="sample",
        recheck_command=checker,
        recheck_sample_rate=rate,
        recheck_seed=seed,
        workers=2,
    )


def step_requests(step: int, passes: int, hacked: int) -> list[ProofRequest]:
    return [hack(step, k) for k in range(hacked)] + [honest(step, k) for k in range(passes - hacked)]


def test_a_hack_is_caught_within_the_documented_steps_then_every_pass_is_rechecked(tmp_path, caplog):
    """Training-like steps of 16 passes, a quarter of them a hack the REPL passes and the kernel refuses."""
    rate, passes, hacked = 0.1, 16, 4
    bound = steps_to_catch(rate, hacked / passes, passes)
    # By hand: 1 - 0.975**16 = 0.333 per step; 0.667**7 = 0.059 > 0.05 >= 0.667**8 = 0.039.
    assert bound == 8
    caplog.set_level(logging.WARNING, logger="trl_verigate.lean_server.recheck.audit")
    caught_at = None
    with LeanServer(config(tmp_path, rate)) as server:
        for step in range(bound):
            results = server.verify(step_requests(step, passes, hacked))
            metrics = server.metrics()
            if metrics["lean/recheck_overturned"]:
                caught_at = step
                break
            # The sample missed the hack this step: the REPL's passes stand, and nothing escalated.
            assert [r.status for r in results] == ["passed"] * passes
            assert metrics["lean/recheck_escalated"] == 0 and metrics["lean/rechecked"] < passes * (step + 1)
        assert caught_at is not None, f"not caught within the documented {bound} steps"
        # Escalation rechecks the rest of the catching step too: every hack of it fails, every honest proof stands.
        assert [r.status for r in results] == ["failed"] * hacked + ["passed"] * (passes - hacked)
        assert all(r.reason.startswith("recheck: ") and r.rechecked for r in results[:hacked])
        assert metrics["lean/recheck_overturned"] == hacked and metrics["lean/recheck_escalated"] == 1
        # From then on every pass is rechecked.
        later = server.verify(step_requests(caught_at + 1, passes, hacked))
        after = server.metrics()
    assert [r.status for r in later] == ["failed"] * hacked + ["passed"] * (passes - hacked)
    assert all(r.rechecked for r in later)
    assert after["lean/rechecked"] - metrics["lean/rechecked"] == passes
    assert after["lean/recheck_overturned"] - metrics["lean/recheck_overturned"] == hacked
    warnings = [record.getMessage() for record in caplog.records if "OVERTURNED" in record.getMessage()]
    assert len(warnings) == 1, warnings
    assert f"hack_{caught_at}_" in warnings[0] and "(1:ℕ) = 2" in warnings[0] and "norm_num" in warnings[0]


def test_mode_passed_rechecks_everything_and_none_nothing():
    request = honest(0, 1)
    assert Audit("passed", seed=0, rate=0.0).selects(request)
    assert not Audit("none", seed=0, rate=1.0).selects(request)
    escalated = Audit("sample", seed=0, rate=0.0)
    assert not escalated.selects(request)
    assert escalated.record_overturn(request, "ok_0_1", "false") and not escalated.record_overturn(request, "x", "y")
    assert escalated.selects(request)


class OneProofBackend:
    """Every attempt of every problem completes with `  norm_num`."""

    def set_seed(self, seed):
        pass

    def generate(self, prompts, counts, on_completions=None):
        outputs = [["  norm_num"] * count for count in counts]
        on_completions([(index, text) for index, texts in enumerate(outputs) for text in texts])
        return outputs


def test_evaluate_counts_the_passes_the_recheck_overturned_as_failures(tmp_path):
    from trl_verigate.evaluate.lean_scoring import LeanScorer
    from trl_verigate.evaluate.outputs import format_table, read_samples
    from trl_verigate.evaluate.problems import lean_problems
    from trl_verigate.evaluate.runner import Evaluation, evaluate

    rows = [
        {"name": name, "split": "test", "informal_prefix": "", "formal_statement": statement, "header": HEADER}
        for name, statement in (("true_one", "theorem true_one : 1 + 1 = 2 := by\n"),
                                ("hack_one", "theorem hack_one : (1:ℕ) = 2 := by\n"))
    ]  # fmt: skip
    with LeanServer(config(tmp_path, rate=1.0)) as server:
        scorer = LeanScorer(server, 10.0, concurrency=2)
        evaluation = Evaluation("lean", lean_problems(rows), scorer, 2, [1, 2])
        summary = evaluate(evaluation, OneProofBackend(), str(tmp_path / "out"), progress=False, echo=lambda _: None)
        scorer.close()
    samples = read_samples(tmp_path / "out")
    assert {(r["problem_id"], r["status"]) for r in samples} == {("true_one", "passed"), ("hack_one", "failed")}
    assert summary["statuses"] == {"passed": 2, "failed": 2}
    assert summary["recheck_overturned"] == 2
    assert "passes overturned by the recheck (counted as failed): 2" in format_table(summary)


def test_the_process_trainer_zeroes_an_overturned_pass_and_logs_it(tiny_models, tmp_path):
    """Fixed completions (the trainer tests' harness): two of UNI's completions pass in the stand-in REPL; the
    checker refuses the one that ends in `exact trivial`, as the kernel would a hack. Its reward becomes 0, and the
    step's metrics count it and show the escalation."""
    from tests.trainers.process_verified.test_process_verified_trainer import (
        IMPORTS_ONLY,
        SCRIPT,
        make_trainer,
        score_batch,
    )

    refusing = checker_command("--refuse", "exact trivial")
    config = stand_in_config(
        tmp_path,
        script=SCRIPT,
        workers=2,
        timeout=2.0,
        header=IMPORTS_ONLY,
        recheck="sample",
        recheck_sample_rate=1.0,
        recheck_command=refusing,
    )
    with LeanServer(config) as server:
        trainer = make_trainer(tiny_models, tmp_path, server)
        score_batch(trainer)
    metrics = {name: values[-1] for name, values in trainer._metrics["train"].items()}
    # Without the recheck 2 of the 8 completions pass (the trainer tests' EXPECTED_STATUS); one is overturned.
    assert metrics["lean/pass_rate"] == pytest.approx(1 / 8)
    assert metrics["rewards/lean_proof/mean"] == pytest.approx(1 / 8)
    assert metrics["lean/recheck_overturned"] == 1
    assert metrics["lean/recheck_escalated"] == 1
    assert metrics["lean/rechecked_fraction"] == 1.0


def test_the_catch_table_in_the_soundness_doc_is_the_formula():
    """docs/lean/soundness.md tables P / steps at r = 0.05; each cell must be what the formula gives."""
    import re

    doc = (Path(__file__).parents[3] / "docs" / "lean" / "soundness.md").read_text(encoding="utf-8")
    header = "| passes per step n | f = 0.01 | f = 0.05 | f = 0.25 | f = 1 |"
    fractions = (0.01, 0.05, 0.25, 1.0)
    rows = re.findall(r"^\| (\d+) \| (.+) \|$", doc.split(header, 1)[1].split("\n\n", 1)[0], re.MULTILINE)
    assert [int(n) for n, _ in rows] == [16, 64, 256, 1024]
    for n, cells in rows:
        for fraction, cell in zip(fractions, cells.split(" | "), strict=True):
            probability, steps = cell.split(" / ")
            assert float(probability) == pytest.approx(catch_probability(0.05, fraction, int(n)), abs=0.005), cell
            assert int(steps) == steps_to_catch(0.05, fraction, int(n)), cell
