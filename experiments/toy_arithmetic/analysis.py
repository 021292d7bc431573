"""Design 3's decision rules (docs/experiments/design3.md), applied to the results JSON that `launch` writes.

Every claim is a difference per seed (one arm's seed s against GRPO's seed s, or against the warm start) of an
end-of-run held-out metric. With n seeds, mean m and sample standard deviation s of the differences, the one-sided
95% bounds are m - t(0.95, n-1)·s/√n (lower) and m + t(0.95, n-1)·s/√n (upper). Against the claim's smallest effect
of interest (SESOI), fixed before any run:

- **supported** when the lower bound is above 0 and m >= SESOI;
- **refuted** when the upper bound is below SESOI;
- **inconclusive** otherwise.

ES's claim is a non-inferiority claim (ES - GRPO at equal completions, lower bound above -0.03) joined with "ES above
the warm start" (the rule above, SESOI 0.02): supported when both parts are, refuted when either part is.
The same functions decide the real results and the simulated ones in `power`, so the power is that of this code.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy import stats

CONFIDENCE = 0.95
MIN_SEEDS = 6  # the design's seeds per arm; fewer paired seeds decide nothing
# SESOIs, fixed before any run of design 3.
SANITY_SESOI = 0.02  # GRPO - warm start, held-out faithful
PROCESS_SESOI = 0.02  # process - GRPO, held-out faithful
PROPAGATION_SESOI = 0.02  # process - process without propagation, held-out faithful
VERIGATE_SESOI = 0.03  # VeriGate - GRPO, faithful on the hard held-out set
ES_MARGIN = 0.03  # ES - GRPO must have its lower bound above -ES_MARGIN
ES_LEARNING_SESOI = 0.02  # ES - warm start, held-out faithful
# The pre-run check: propagation on/off must score at least this share of the warm start's failed completions
# differently, or the propagation claim is untestable.
MIN_PROPAGATION_DIFFERENCE = 0.20

QUICK_NOTICE = "--quick is a smoke test of the plumbing: it decides nothing"
SUPPORTED, INCONCLUSIVE, REFUTED = 1, 0, -1
VERDICTS = {SUPPORTED: "supported", INCONCLUSIVE: "inconclusive", REFUTED: "refuted"}
HELD_OUT, HARD = "sampled_faithful", "hard_sampled_faithful"


def bounds(differences) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, lower, upper) over the last axis of ``differences`` (n >= 2 seeds): one-sided 95% t bounds."""
    values = np.asarray(differences, dtype=float)
    n = values.shape[-1]
    if n < 2:
        raise ValueError(f"{n} seed difference(s): a one-sided interval needs at least 2 seeds")
    mean = values.mean(axis=-1)
    half = stats.t.ppf(CONFIDENCE, n - 1) * values.std(axis=-1, ddof=1) / np.sqrt(n)
    return mean, mean - half, mean + half


def rule(differences, sesoi: float, floor: float = 0.0) -> np.ndarray:
    """SUPPORTED / REFUTED / INCONCLUSIVE per row of ``differences``: supported when the lower bound is above
    ``floor`` (0) and the mean is at least ``sesoi``; refuted when the upper bound is below ``sesoi``."""
    mean, lower, upper = bounds(differences)
    return np.where((lower > floor) & (mean >= sesoi), SUPPORTED, np.where(upper < sesoi, REFUTED, INCONCLUSIVE))


def es_rule(es_minus_grpo, es_minus_warm) -> np.ndarray:
    """ES's two-part verdict: non-inferior to GRPO (lower bound above -ES_MARGIN; refuted when the upper bound is
    below it) and above the warm start (`rule` with ES_LEARNING_SESOI)."""
    noninferior = rule(es_minus_grpo, -ES_MARGIN, floor=-ES_MARGIN)
    learns = rule(es_minus_warm, ES_LEARNING_SESOI)
    both = (noninferior == SUPPORTED) & (learns == SUPPORTED)
    either_refuted = (noninferior == REFUTED) | (learns == REFUTED)
    return np.where(both, SUPPORTED, np.where(either_refuted, REFUTED, INCONCLUSIVE))


def paired(summary: dict, first: str, second: str | None, key: str, start: dict | None = None) -> dict[str, float]:
    """Per seed, ``first``'s ``key`` minus ``second``'s (seeds both have), or minus the warm start's ``start[key]``."""
    if first not in summary or (second is not None and second not in summary):
        return {}
    seeds = set(summary[first]) & (set(summary[second]) if second else set(summary[first]))
    return {
        seed: summary[first][seed][key] - (summary[second][seed][key] if second else start[key])
        for seed in sorted(seeds, key=int)
    }


def _row(claim: str, metric: str, sesoi: float, parts: dict[str, dict[str, float]]) -> dict:
    row = {"claim": claim, "metric": metric, "sesoi": sesoi, "parts": {}}
    for name, deltas in parts.items():
        part = {"deltas": deltas}
        if len(deltas) >= 2:
            mean, lower, upper = (float(x) for x in bounds(list(deltas.values())))
            part |= {"mean": mean, "lower": lower, "upper": upper}
        row["parts"][name] = part
    return row


def _decide(row: dict, verdict_of, blocked: str | None) -> None:
    """Set ``row["verdict"]``: ``blocked`` (why the claim cannot be decided) when given, else the rule's verdict."""
    counts = {len(part["deltas"]) for part in row["parts"].values()}
    if blocked is None and min(counts) < MIN_SEEDS:
        blocked = f"not decided: {min(counts)} paired seeds, the design needs {MIN_SEEDS}"
    if blocked is not None:
        row["verdict"] = blocked
        return
    values = [list(part["deltas"].values()) for part in row["parts"].values()]
    row["verdict"] = VERDICTS[int(verdict_of(*values))]


def decisions(results: dict) -> list[dict]:
    """Design 3's five decisions, each with its per-seed differences, bounds and verdict."""
    summary, start = results["summary"], results["start_eval"]
    quick = f"not decided: {QUICK_NOTICE}" if results["config"].get("quick") else None
    sanity = _row("GRPO learns", "held-out faithful, GRPO - warm start", SANITY_SESOI,
                  {"gain": paired(summary, "grpo", None, HELD_OUT, start)})  # fmt: skip
    _decide(sanity, lambda d: rule(d, SANITY_SESOI), quick)
    untestable = None if sanity["verdict"] == "supported" else f"untestable: GRPO sanity is {sanity['verdict']}"
    blocked = quick or untestable
    process = _row("process vs GRPO", "held-out faithful, process - GRPO", PROCESS_SESOI,
                   {"difference": paired(summary, "process", "grpo", HELD_OUT)})  # fmt: skip
    _decide(process, lambda d: rule(d, PROCESS_SESOI), blocked)
    propagation = _row("first-error propagation", "held-out faithful, process - process without propagation",
                       PROPAGATION_SESOI, {"difference": paired(summary, "process", "process_noprop", HELD_OUT)})  # fmt: skip
    share = (results.get("prerun_check") or {}).get("differing_share")
    if share is None or share < MIN_PROPAGATION_DIFFERENCE:
        shown = "missing" if share is None else f"{share:.3f}"
        propagation_block = f"untestable: pre-run check {shown} < {MIN_PROPAGATION_DIFFERENCE}"
    else:
        propagation_block = None
    _decide(propagation, lambda d: rule(d, PROPAGATION_SESOI), quick or propagation_block or untestable)
    verigate = _row("VeriGate vs GRPO", "hard-set faithful, VeriGate - GRPO", VERIGATE_SESOI,
                    {"difference": paired(summary, "verigate", "grpo", HARD)})  # fmt: skip
    _decide(verigate, lambda d: rule(d, VERIGATE_SESOI), blocked)
    es = _row("ES vs GRPO", "held-out faithful, ES - GRPO (margin) and ES - warm start", ES_LEARNING_SESOI,
              {"vs GRPO": paired(summary, "es", "grpo", HELD_OUT),
               "vs warm start": paired(summary, "es", None, HELD_OUT, start)})  # fmt: skip
    _decide(es, es_rule, blocked)
    return [sanity, process, propagation, verigate, es]


def descriptive(results: dict) -> list[dict]:
    """Differences reported with their bounds and no verdict: the PRM-as-reward control against GRPO and VeriGate."""
    summary = results["summary"]
    return [
        _row("PRM as reward - GRPO", f"{name}", 0.0, {"difference": paired(summary, "prm_outcome", "grpo", key)})
        for key, name in ((HELD_OUT, "held-out faithful"), (HARD, "hard-set faithful"))
    ] + [_row("VeriGate - PRM as reward", "hard-set faithful", 0.0,
              {"difference": paired(summary, "verigate", "prm_outcome", HARD)})]  # fmt: skip


def markdown(rows: list[dict]) -> str:
    lines = ["| claim | metric | SESOI | per-seed differences | mean [lower, upper] | verdict |"]
    lines.append("|---|---|---|---|---|---|")
    for row in rows:
        cells = []
        for name, part in row["parts"].items():
            deltas = ", ".join(f"{value:+.3f}" for value in part["deltas"].values()) or "n/a"
            interval = f"{part['mean']:+.3f} [{part['lower']:+.3f}, {part['upper']:+.3f}]" if "mean" in part else "n/a"
            cells.append((f"{name}: {deltas}", f"{name}: {interval}"))
        verdict = f"**{row['verdict']}**" if "verdict" in row else "(no verdict)"
        lines.append(
            f"| {row['claim']} | {row['metric']} | {row['sesoi']:g} | {'; '.join(c[0] for c in cells)} | "
            f"{'; '.join(c[1] for c in cells)} | {verdict} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="results.json written by experiments.toy_arithmetic.launch")
    results = json.loads(parser.parse_args(argv).results.read_text())
    print(markdown(decisions(results)))
    print(markdown(descriptive(results)))


if __name__ == "__main__":
    main()
