"""Design 3's decision rules and their power (experiments/toy_arithmetic/analysis.py, power.py): verdicts on
synthetic results worked out by hand with a printed t table, and the simulated power against closed forms and
numerical integration."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
from scipy import integrate, stats

from experiments.toy_arithmetic import analysis, power

T_95_5 = 2.015  # t(0.95, 5 degrees of freedom), from a printed t table
DESIGN2 = Path(__file__).resolve().parents[2] / "docs/experiments/design2/results.json"
STEADY = [0.03, 0.04, 0.05, 0.03, 0.04, 0.05]  # mean 0.04, s = sqrt(4e-4 / 5)
FLAT = [0.00, 0.01, -0.01, 0.00, 0.01, -0.01]  # mean 0, the same s


def test_bounds_by_hand():
    half = T_95_5 * math.sqrt(4e-4 / 5) / math.sqrt(6)  # 0.00736
    mean, lower, upper = analysis.bounds(STEADY)
    assert (mean, lower, upper) == pytest.approx((0.04, 0.04 - half, 0.04 + half), abs=1e-5)
    with pytest.raises(ValueError, match="at least 2 seeds"):
        analysis.bounds([0.1])


def test_rule_supported_refuted_inconclusive_by_hand():
    # STEADY: lower 0.0326, upper 0.0474. SESOI 0.02: lower > 0 and mean >= 0.02. SESOI 0.05: upper below it.
    # SESOI 0.045: mean below it, upper above it.
    assert analysis.rule([STEADY], 0.02).tolist() == [analysis.SUPPORTED]
    assert analysis.rule([STEADY], 0.05).tolist() == [analysis.REFUTED]
    assert analysis.rule([STEADY], 0.045).tolist() == [analysis.INCONCLUSIVE]
    # Mean 0.025 >= 0.02 but s = 0.0822, lower bound -0.043: not supported; upper 0.093: not refuted.
    wide = [0.1, -0.05, 0.1, -0.05, 0.1, -0.05]
    assert analysis.rule([wide], 0.02).tolist() == [analysis.INCONCLUSIVE]


def test_es_rule_by_hand():
    # ES - GRPO FLAT: lower -0.0074 > -0.03 (non-inferior). ES - warm STEADY: supported at 0.02.
    assert analysis.es_rule([FLAT], [STEADY]).tolist() == [analysis.SUPPORTED]
    # ES - warm FLAT: upper 0.0074 < 0.02: ES does not learn, refuted however it compares with GRPO.
    assert analysis.es_rule([FLAT], [FLAT]).tolist() == [analysis.REFUTED]
    # ES - GRPO mean -0.04, upper -0.0326 < -0.03: refuted.
    assert analysis.es_rule([[-d for d in STEADY]], [STEADY]).tolist() == [analysis.REFUTED]
    # ES - GRPO mean -0.02, lower -0.0274 > -0.03: non-inferior. ES - warm mean 0.015 < 0.02 with upper 0.0224
    # above 0.02: learning inconclusive, so the claim is.
    behind = [d - 0.06 for d in STEADY]
    assert analysis.es_rule([behind], [[d + 0.015 for d in FLAT]]).tolist() == [analysis.INCONCLUSIVE]


END = {"sampled_faithful": 0.40, "hard_sampled_faithful": 0.10}


def synthetic(arms: dict[str, list[dict]], share=0.5, quick=False, start=END) -> dict:
    """Results with one summary row per (arm, seed): END updated by arms[arm][seed]."""
    summary = {
        arm: {str(seed): {**END, **change} for seed, change in enumerate(changes)} for arm, changes in arms.items()
    }
    return {"config": {"quick": quick}, "summary": summary, "start_eval": dict(start),
            "prerun_check": {"differing_share": share}}  # fmt: skip


def shifted(key: str, base: float, deltas: list[float]) -> list[dict]:
    return [{key: base + delta} for delta in deltas]


def verdicts(results: dict) -> dict[str, str]:
    return {row["claim"]: row["verdict"] for row in analysis.decisions(results)}


def test_decisions_on_synthetic_results_by_hand():
    grpo = shifted("sampled_faithful", 0.55, FLAT)  # GRPO - warm start: mean +0.15, lower 0.143: learns
    arms = {
        "grpo": [{**g, "hard_sampled_faithful": 0.20} for g in grpo],
        "process": shifted("sampled_faithful", 0.55, [a + b for a, b in zip(FLAT, STEADY, strict=True)]),  # +0.04
        "process_noprop": shifted("sampled_faithful", 0.55, FLAT),  # process - noprop = STEADY: supported
        "verigate": shifted("hard_sampled_faithful", 0.20, [-d for d in STEADY]),  # -0.04: refuted at 0.03
        "es": shifted("sampled_faithful", 0.40, FLAT),  # ES - warm FLAT: refuted
    }
    results = synthetic(arms)
    assert verdicts(results) == {
        "GRPO learns": "supported",
        "process vs GRPO": "supported",
        "first-error propagation": "supported",
        "VeriGate vs GRPO": "refuted",
        "ES vs GRPO": "refuted",
    }
    rows = {row["claim"]: row for row in analysis.decisions(results)}
    assert rows["process vs GRPO"]["parts"]["difference"]["mean"] == pytest.approx(0.04)
    assert list(rows["ES vs GRPO"]["parts"]) == ["vs GRPO", "vs warm start"]
    assert "**refuted**" in analysis.markdown(analysis.decisions(results))

    low_share = verdicts(synthetic(arms, share=0.1))
    assert low_share["first-error propagation"] == "untestable: pre-run check 0.100 < 0.2"
    assert low_share["process vs GRPO"] == "supported"
    assert verdicts(synthetic(arms, share=None))["first-error propagation"].startswith("untestable")
    no_gain = verdicts(synthetic(arms, start={**END, "sampled_faithful": 0.55}))  # GRPO - warm start = FLAT
    assert no_gain["GRPO learns"] == "refuted"
    assert no_gain["process vs GRPO"] == "untestable: GRPO sanity is refuted"
    assert set(verdicts(synthetic(arms, quick=True)).values()) == {
        "not decided: --quick is a smoke test of the plumbing: it decides nothing"
    }
    three = {arm: changes[:3] for arm, changes in arms.items()}
    assert verdicts(synthetic(three))["GRPO learns"] == "not decided: 3 paired seeds, the design needs 6"


def design2_deltas() -> dict[str, list[float]]:
    """Design 2's per-seed differences as docs/experiments/design2/results.md prints them (3 decimals)."""
    return {
        "process_faithful": [-0.023, 0.016, -0.001],
        "process_spurious": [0.003, -0.006, -0.002],
        "verigate_faithful": [0.051, 0.038, -0.053],
        "verigate_rescue": [-0.118, -0.118, 0.059],
    }


def test_design2_power_matches_the_closed_form():
    """P(3 of 3 seeds beyond the threshold) = product over clauses of P(one seed beyond it)^3 for independent normal
    seeds; the spreads come from the rounded table, hence the tolerance."""
    results = json.loads(DESIGN2.read_text())
    sd = {name: statistics.stdev(values) for name, values in design2_deltas().items()}
    assert power.spread(results, "process", "grpo", "sampled_faithful")[0] == pytest.approx(
        sd["process_faithful"], abs=1e-3
    )
    alone = stats.norm.cdf((0.025 - 0.03) / sd["process_faithful"]) ** 3
    assert alone == pytest.approx(0.065, abs=0.005)  # issue 30's figure
    simulated = power.every_seed_power([power.Clause(0.025, sd["process_faithful"], 0.03)], 3)
    assert simulated == pytest.approx(alone, abs=0.003)
    joint = power.every_seed_power(
        [power.Clause(0.025, sd["process_faithful"], 0.03), power.Clause(0.0, sd["process_spurious"], 0.0, True)], 3
    )
    assert joint == pytest.approx(alone * 0.5**3, abs=0.002)
    clause_holds = stats.norm.cdf(0.02 / sd["verigate_faithful"]) ** 3
    assert 1 - clause_holds == pytest.approx(0.74, abs=0.01)  # issue 30: the clause fails 74% of the time
    assert power.every_seed_power([power.Clause(0.0, sd["verigate_faithful"], -0.02)], 3) == pytest.approx(
        clause_holds, abs=0.004
    )


def integrated_rates(effect: float, sd: float, sesoi: float, n: int = 6) -> tuple[float, float]:
    """P(supported), P(refuted) of the interval rule by integrating over the sample sd s, independent of the mean
    for normal seeds: (n - 1) s^2 / sd^2 is chi-square(n - 1), the mean is normal(effect, sd / sqrt(n))."""
    c, se = T_95_5 / math.sqrt(n), sd / math.sqrt(n)
    density = stats.chi(n - 1, scale=sd / math.sqrt(n - 1)).pdf

    def supported(s):
        return density(s) * stats.norm.sf((max(sesoi, c * s) - effect) / se)

    def refuted(s):
        return density(s) * stats.norm.cdf((sesoi - c * s - effect) / se)

    return integrate.quad(supported, 0, 10 * sd)[0], integrate.quad(refuted, 0, 10 * sd)[0]


@pytest.mark.parametrize(("effect", "sd", "sesoi"), [(0.0, 0.02, 0.02), (0.02, 0.02, 0.02), (0.04, 0.02, 0.02),
                                                     (0.03, 0.057, 0.03), (0.06, 0.057, 0.03)])  # fmt: skip
def test_design3_power_matches_numerical_integration(effect, sd, sesoi):
    rates = power.rule_rates(effect, sd, sesoi, 6, trials=100_000)
    supported, refuted = integrated_rates(effect, sd, sesoi)
    assert rates["supported"] == pytest.approx(supported, abs=0.006)
    assert rates["refuted"] == pytest.approx(refuted, abs=0.006)
    assert sum(rates.values()) == pytest.approx(1.0)
