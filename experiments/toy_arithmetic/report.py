"""Tables, the pre-registered decisions and the plots of a results JSON written by `launch`.

``python -m experiments.toy_arithmetic.report RESULTS.json`` rewrites results.md and the PNGs next to the JSON.
The decision rules are those of docs/experiments.md ("Decision rules"), written there before the runs; the
thresholds below are those numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from experiments.toy_arithmetic.evaluation import rescue_rate

ZERO_STD_KEYS = {
    "grpo": "frac_reward_zero_std",
    "verigate": "verigate/frac_zero_std_outcome",
    "verigate_arith": "verigate/frac_zero_std_outcome",
    "process": "lean/frac_zero_std_outcome",
    "process_noprop": "lean/frac_zero_std_outcome",
}
# Pre-registered thresholds (docs/experiments.md, "Decision rules").
GRPO_SANITY_GAIN = 0.04  # GRPO's held-out faithful minus the warm start's
VERIGATE_RESCUE_GAIN = 0.05  # VeriGate's rescue rate minus GRPO's
VERIGATE_FAITHFUL_LOSS = 0.02  # the most VeriGate's held-out faithful may fall below GRPO's
VERIGATE_MIN_GATE_RATE = 0.10
VERIGATE_MIN_CONCORDANCE = 0.75
PROCESS_FAITHFUL_GAIN = 0.03  # process's held-out faithful minus GRPO's
ES_GREEDY_GAIN = 0.04  # ES's held-out greedy pass minus the warm start's
ES_EASY_LOSS = 0.05  # the most ES's easy greedy pass may fall below the warm start's
END_KEYS = ("sampled_faithful", "sampled_pass", "greedy_pass", "greedy_faithful", "sampled_spurious_share",
            "sampled_valid_prefix", "easy_greedy_pass")  # fmt: skip


def _mean(values) -> float:
    values = [v for v in values if v == v]
    return statistics.mean(values) if values else float("nan")


def _steps(run: dict, key: str) -> list[float]:
    return [entry[key] for entry in run["metrics"] if key in entry]


def run_summary(run: dict, start: dict) -> dict:
    """One run's end (and middle) held-out metrics, rescue rate and training-log aggregates."""
    end, middle = run["eval"][-1], run["eval"][0]
    grad_norms = _steps(run, "grad_norm")
    updates = _steps(run, "es/update_norm")
    pairs = sum(_steps(run, "mechanism/gated_pairs"))
    return {
        **{key: end[key] for key in END_KEYS},
        **{f"middle_{key}": middle[key] for key in END_KEYS},
        "rescue_rate": rescue_rate(start["sampled_faithful_counts"], end["sampled_faithful_counts"]),
        "zero_std_fraction": _mean(_steps(run, ZERO_STD_KEYS.get(run["method"], ""))),
        "gate_rate": _mean(_steps(run, "verigate/gate_rate")),
        # ES never backpropagates (TRL logs its grad_norm as 0), so only the gradient methods have zero-gradient steps.
        "zero_gradient_steps": (
            _mean(float(norm == 0.0) for norm in grad_norms) if grad_norms and run["method"] != "es" else float("nan")
        ),
        "tactics_per_proof": _mean(_steps(run, "lean/tactics_per_proof")),
        "empty_fraction": _mean(_steps(run, "lean/empty_fraction")),
        "gated_concordance": sum(_steps(run, "mechanism/gated_concordant")) / pairs if pairs else float("nan"),
        "es_reward_std": _mean(_steps(run, "es/reward_std")),
        "es_zero_updates": sum(norm == 0.0 for norm in updates) if updates else float("nan"),
        "es_iterations": len(updates) if updates else float("nan"),
        "wall_seconds": run["wall_seconds"],
        "completions": run["completions"],
    }


def summarize(results: dict) -> dict:
    """{method: {seed: run_summary}} for every finished run (ES grid points other than the chosen one excluded)."""
    summary: dict = {}
    for run in results["runs"]:
        summary.setdefault(run["method"], {})[str(run["seed"])] = run_summary(run, results["start_eval"])
    return summary


def _paired(summary: dict, first: str, second: str | None, key: str, start: dict | None = None) -> dict[str, float]:
    """Per seed, ``first``'s ``key`` minus ``second``'s (or minus the warm start's ``start[key]``)."""
    if first not in summary or (second is not None and second not in summary):
        return {}
    seeds = sorted(set(summary[first]) & (set(summary[second]) if second else set(summary[first])), key=int)
    return {seed: summary[first][seed][key] - (summary[second][seed][key] if second else start[key]) for seed in seeds}


def _holds(deltas: dict[str, float], test) -> bool:
    return bool(deltas) and all(value == value and test(value) for value in deltas.values())


def decisions(results: dict) -> list[dict]:
    """The four pre-registered decisions, paired by seed: each with its per-seed differences and verdict
    ("supported", "not supported", or "untestable" when the GRPO sanity check fails)."""
    summary = summarize(results)
    start = {key: results["start_eval"][key] for key in END_KEYS}
    seeds = len(results["config"]["seeds"])

    def complete(deltas: dict) -> bool:
        return len(deltas) == seeds

    grpo_gain = _paired(summary, "grpo", None, "sampled_faithful", start)
    sane = complete(grpo_gain) and _holds(grpo_gain, lambda d: d >= GRPO_SANITY_GAIN)
    rows = [
        {
            "claim": "GRPO sanity",
            "rule": f"GRPO held-out faithful - warm start >= {GRPO_SANITY_GAIN} in every seed",
            "deltas": {"faithful": grpo_gain},
            "verdict": "supported" if sane else "not supported",
        }
    ]
    rescue = _paired(summary, "verigate", "grpo", "rescue_rate")
    faithful = _paired(summary, "verigate", "grpo", "sampled_faithful")
    gate_rates = [row["gate_rate"] for row in summary.get("verigate", {}).values()]
    concordance = [row["gated_concordance"] for row in summary.get("verigate", {}).values()]
    mechanism = (
        bool(gate_rates)
        and all(rate >= VERIGATE_MIN_GATE_RATE for rate in gate_rates)
        and all(value >= VERIGATE_MIN_CONCORDANCE for value in concordance)
    )
    verigate = complete(rescue) and _holds(rescue, lambda d: d >= VERIGATE_RESCUE_GAIN)
    verigate = verigate and _holds(faithful, lambda d: d >= -VERIGATE_FAITHFUL_LOSS)
    rows.append(
        {
            "claim": "VeriGate vs GRPO",
            "rule": f"rescue rate +{VERIGATE_RESCUE_GAIN} and faithful no more than {VERIGATE_FAITHFUL_LOSS} lower, "
            f"every seed; mechanism: gate rate >= {VERIGATE_MIN_GATE_RATE}, concordance >= "
            f"{VERIGATE_MIN_CONCORDANCE}",
            "deltas": {"rescue": rescue, "faithful": faithful},
            "mechanism": {"gate_rate": gate_rates, "concordance": concordance, "present": mechanism},
            "verdict": "supported" if verigate else "not supported",
        }
    )
    gain = _paired(summary, "process", "grpo", "sampled_faithful")
    spurious = _paired(summary, "process", "grpo", "sampled_spurious_share")
    process = complete(gain) and _holds(gain, lambda d: d >= PROCESS_FAITHFUL_GAIN)
    process = process and _holds(spurious, lambda d: d <= 0.0)
    rows.append(
        {
            "claim": "process vs outcome-only",
            "rule": f"faithful +{PROCESS_FAITHFUL_GAIN} over GRPO and spurious share not higher, every seed",
            "deltas": {"faithful": gain, "spurious": spurious},
            "verdict": "supported" if process else "not supported",
        }
    )
    greedy = _paired(summary, "es", None, "greedy_pass", start)
    easy = _paired(summary, "es", None, "easy_greedy_pass", start)
    es = complete(greedy) and _holds(greedy, lambda d: d >= ES_GREEDY_GAIN)
    es = es and _holds(easy, lambda d: d >= -ES_EASY_LOSS)
    rows.append(
        {
            "claim": "ES",
            "rule": f"held-out greedy pass +{ES_GREEDY_GAIN} over the warm start, easy down by no more than "
            f"{ES_EASY_LOSS}, every seed",
            "deltas": {"greedy": greedy, "easy": easy},
            "verdict": "supported" if es else "not supported",
        }
    )
    if not sane:
        for row in rows[1:]:
            row["verdict"] = f"untestable (GRPO sanity failed; {row['verdict']} as measured)"
    return rows


def _fmt(value: float) -> str:
    return "n/a" if value != value else f"{value:.3f}"


def _deltas(deltas: dict[str, float]) -> str:
    return ", ".join(f"{value:+.3f}" for _, value in sorted(deltas.items(), key=lambda item: int(item[0]))) or "n/a"


def markdown(results: dict) -> str:
    start, warm = results["start_eval"], results["warm_start"]
    lines = ["## Warm-start checkpoints (calibration prompts, sampled G per prompt)", ""]
    lines += ["| checkpoint | faithful | all-zero groups | spurious share | pass |", "|---|---|---|---|---|"]
    for name, row in warm["calibration"].items():
        mark = " (picked)" if name == warm["picked"] else ""
        lines.append(
            f"| {name}{mark} | {_fmt(row['faithful'])} | {_fmt(row['all_zero_groups'])} | "
            f"{_fmt(row['spurious_share'])} | {_fmt(row['pass'])} |"
        )
    lines += ["", f"Rule: {warm['rule']}. Rule met: {warm['rule_met']}.", ""]
    summary = summarize(results)
    lines += ["## Held-out metrics at the end (per seed)", ""]
    header = ("| method | seed | faithful | sampled pass | greedy pass | greedy faithful | spurious share | valid prefix "
              "| easy greedy | rescue | zero-std | gate rate | zero-grad steps | wall s |")  # fmt: skip
    lines += [header, "|" + "---|" * 14]
    lines.append(
        f"| warm start | - | {_fmt(start['sampled_faithful'])} | {_fmt(start['sampled_pass'])} | "
        f"{_fmt(start['greedy_pass'])} | {_fmt(start['greedy_faithful'])} | {_fmt(start['sampled_spurious_share'])} "
        f"| {_fmt(start['sampled_valid_prefix'])} | {_fmt(start['easy_greedy_pass'])} | - | - | - | - | - |"
    )
    for method, seeds in summary.items():
        for seed, row in sorted(seeds.items(), key=lambda item: int(item[0])):
            lines.append(
                f"| {method} | {seed} | {_fmt(row['sampled_faithful'])} | {_fmt(row['sampled_pass'])} | "
                f"{_fmt(row['greedy_pass'])} | {_fmt(row['greedy_faithful'])} | {_fmt(row['sampled_spurious_share'])} "
                f"| {_fmt(row['sampled_valid_prefix'])} | {_fmt(row['easy_greedy_pass'])} | "
                f"{_fmt(row['rescue_rate'])} | {_fmt(row['zero_std_fraction'])} | {_fmt(row['gate_rate'])} | "
                f"{_fmt(row['zero_gradient_steps'])} | {row['wall_seconds']:.0f} |"
            )
    lines += ["", "## Training logs (per seed)", ""]
    lines += ["| method | seed | tactics per proof | empty fraction | gated concordance | ES reward std | ES zero "
              "updates / iterations |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for method, seeds in summary.items():
        for seed, row in sorted(seeds.items(), key=lambda item: int(item[0])):
            zero = "n/a" if row["es_iterations"] != row["es_iterations"] else f"{row['es_zero_updates']} / "
            zero += "" if row["es_iterations"] != row["es_iterations"] else f"{row['es_iterations']}"
            lines.append(
                f"| {method} | {seed} | {_fmt(row['tactics_per_proof'])} | {_fmt(row['empty_fraction'])} | "
                f"{_fmt(row['gated_concordance'])} | {_fmt(row['es_reward_std'])} | {zero} |"
            )
    if results.get("es_grid"):
        lines += ["", "## ES grid (seed 0, training reward over the second half of the iterations)", ""]
        lines += ["| σ | α | training reward |", "|---|---|---|"]
        for point in results["es_grid"]:
            chosen = results.get("es_chosen") == {"sigma": point["sigma"], "learning_rate": point["learning_rate"]}
            lines.append(
                f"| {point['sigma']:g} | {point['learning_rate']:g} | {point['train_reward']:.4f}"
                f"{' (chosen)' if chosen else ''} |"
            )
    lines += ["", "## Decisions (pre-registered rules, paired by seed)", ""]
    lines += ["| claim | rule | per-seed differences (seed 0, 1, 2) | verdict |", "|---|---|---|---|"]
    for row in decisions(results):
        cells = "; ".join(f"{name} {_deltas(values)}" for name, values in row["deltas"].items())
        if "mechanism" in row:
            mech = row["mechanism"]
            cells += (
                f"; gate rate {', '.join(_fmt(v) for v in mech['gate_rate'])}, concordance "
                f"{', '.join(_fmt(v) for v in mech['concordance'])} (mechanism "
                f"{'present' if mech['present'] else 'absent'})"
            )
        lines.append(f"| {row['claim']} | {row['rule']} | {cells} | **{row['verdict']}** |")
    check = results.get("coef0_check")
    if check:
        lines += [
            "",
            f"Coefficient-0 check (first batch, seed 0, {check['num_completions']} completions): same completions "
            f"{check['same_completions']}, max |A_coef0 - A_GRPO| = {check['max_abs_diff_coef0_vs_grpo']:g}, "
            f"max |A_coef1 - A_GRPO| = {check['max_abs_diff_coef1_vs_grpo']:g}.",
        ]
    return "\n".join(lines) + "\n"


def _by_method(results: dict) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {}
    for run in results["runs"]:
        runs.setdefault(run["method"], []).append(run)
    return runs


HELD_OUT_PANELS = (
    ("sampled_faithful", "held-out faithful pass (sampled)"),
    ("greedy_pass", "held-out greedy pass"),
    ("sampled_spurious_share", "spurious share of passes (sampled)"),
    ("easy_greedy_pass", "easy greedy pass (forgetting)"),
)


def plot(results: dict, directory: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    runs = _by_method(results)
    start = results["start_eval"]
    colors = {method: f"C{index}" for index, method in enumerate(runs)}

    figure, axes = plt.subplots(1, 4, figsize=(18, 4.4))
    for axis, (key, title) in zip(axes, HELD_OUT_PANELS, strict=True):
        for method, method_runs in runs.items():
            for index, run in enumerate(method_runs):
                xs = [0, *(point["completions"] for point in run["eval"])]
                ys = [start[key], *(point[key] for point in run["eval"])]
                axis.plot(xs, ys, marker="o", color=colors[method], alpha=0.8, label=method if index == 0 else None)
        axis.set_title(title)
        axis.set_xlabel("completions generated")
        axis.set_ylabel("rate")
    handles, labels = axes[0].get_legend_handles_labels()
    figure.suptitle("Held-out metrics at start, middle and end of training (one line per seed)")
    figure.legend(handles, labels, loc="lower center", ncol=len(labels), frameon=False)
    figure.tight_layout(rect=(0, 0.08, 1, 0.95))
    held_out = directory / "held_out.png"
    figure.savefig(held_out, dpi=100)
    plt.close(figure)

    figure, axes = plt.subplots(1, 3, figsize=(18, 4.4))
    window = 10
    for method, method_runs in runs.items():
        key = ZERO_STD_KEYS.get(method)
        if key is None:
            continue
        for index, run in enumerate(method_runs):
            values = _steps(run, key)
            smoothed = [_mean(values[max(0, i - window + 1) : i + 1]) for i in range(len(values))]
            axes[0].plot(
                range(1, len(values) + 1), smoothed, color=colors[method], label=method if index == 0 else None
            )
            norms = _steps(run, "grad_norm")
            cumulative = [sum(n == 0.0 for n in norms[: i + 1]) / (i + 1) for i in range(len(norms))]
            axes[1].plot(
                range(1, len(norms) + 1), cumulative, color=colors[method], label=method if index == 0 else None
            )
    for method in ("verigate", "verigate_arith"):
        for index, run in enumerate(runs.get(method, [])):
            values = _steps(run, "verigate/gate_rate")
            smoothed = [_mean(values[max(0, i - window + 1) : i + 1]) for i in range(len(values))]
            axes[0].plot(
                range(1, len(values) + 1),
                smoothed,
                color=colors[method],
                linestyle=":",
                label=f"{method} gate rate" if index == 0 else None,
            )
    for index, run in enumerate(runs.get("es", [])):
        stds = _steps(run, "es/reward_std")
        axes[2].plot(range(1, len(stds) + 1), stds, color=colors["es"], marker=".", label="es" if index == 0 else None)
    axes[0].set_title(f"zero-std groups (solid) and gate rate (dotted), {window}-step mean")
    axes[0].set_ylabel("fraction of groups")
    axes[1].set_title("steps with zero gradient norm (cumulative share)")
    axes[1].set_ylabel("share of steps so far")
    axes[2].set_title("ES: std of member rewards per iteration")
    axes[2].set_ylabel("reward std")
    for axis in axes[:2]:
        axis.set_xlabel("optimizer step")
    axes[2].set_xlabel("ES iteration")
    handles, labels = [], []
    for axis in axes:
        for handle, label in zip(*axis.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    figure.suptitle("Training logs (one line per seed)")
    figure.legend(handles, labels, loc="lower center", ncol=min(len(labels), 8), frameon=False)
    figure.tight_layout(rect=(0, 0.08, 1, 0.95))
    training = directory / "training.png"
    figure.savefig(training, dpi=100)
    plt.close(figure)

    rows = decisions(results)
    panels = [(row["claim"], name, deltas) for row in rows for name, deltas in row["deltas"].items()]
    thresholds = {
        ("GRPO sanity", "faithful"): GRPO_SANITY_GAIN,
        ("VeriGate vs GRPO", "rescue"): VERIGATE_RESCUE_GAIN,
        ("VeriGate vs GRPO", "faithful"): -VERIGATE_FAITHFUL_LOSS,
        ("process vs outcome-only", "faithful"): PROCESS_FAITHFUL_GAIN,
        ("process vs outcome-only", "spurious"): 0.0,
        ("ES", "greedy"): ES_GREEDY_GAIN,
        ("ES", "easy"): -ES_EASY_LOSS,
    }
    figure, axes = plt.subplots(1, len(panels), figsize=(2.6 * len(panels), 4.2), sharey=False)
    for axis, (claim, name, deltas) in zip(axes, panels, strict=True):
        seeds = sorted(deltas, key=int)
        axis.scatter(range(len(seeds)), [deltas[s] for s in seeds], color="C0", zorder=3, label="seed difference")
        axis.axhline(thresholds[(claim, name)], color="C3", linestyle="--", label="threshold")
        axis.axhline(0.0, color="grey", linewidth=0.8)
        axis.set_xticks(range(len(seeds)), [f"seed {s}" for s in seeds])
        axis.set_xlim(-0.5, max(len(seeds), 1) - 0.5)
        sign = "≤" if (claim, name) == ("process vs outcome-only", "spurious") else "≥"
        axis.set_title(f"{claim}:\n{name} (needs {sign} {thresholds[(claim, name)]:g})", fontsize=9)
        axis.set_ylabel("difference")
    figure.suptitle("Pre-registered decisions: per-seed differences against their thresholds")
    handles, labels = axes[0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=2, frameon=False)
    figure.tight_layout(rect=(0, 0.08, 1, 0.93))
    decision_path = directory / "decisions.png"
    figure.savefig(decision_path, dpi=100)
    plt.close(figure)
    return [held_out, training, decision_path]


def write_report(results_path: Path) -> list[Path]:
    results = json.loads(results_path.read_text())
    table = results_path.parent / "results.md"
    table.write_text(markdown(results))
    return [table, *plot(results, results_path.parent)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="results.json written by experiments.toy_arithmetic.launch")
    for path in write_report(parser.parse_args(argv).results):
        print(path)


if __name__ == "__main__":
    main()
