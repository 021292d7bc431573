"""Plots (PNG) and the markdown table of a results JSON written by `launch`.

``python -m experiments.toy_arithmetic.report RESULTS.json`` rewrites both next to the JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

ZERO_STD_KEYS = {
    "grpo": "frac_reward_zero_std",
    "verigate": "verigate/frac_zero_std_outcome",
    "process": "lean/frac_zero_std_outcome",
    "process_coef0": "lean/frac_zero_std_outcome",
}

# The outcome pass rate of the completions each method generated while training (the samples it learned from):
# times the completions generated, the verified answers it produced.
TRAIN_PASS_KEYS = {
    "grpo": "reward",
    "verigate": "reward",
    "process": "lean/pass_rate",
    "process_coef0": "lean/pass_rate",
    "es": "es/reward_mean",
}


SMOOTHING = 8  # steps in the trailing mean of the per-step zero-std / gate-rate curves (one step: 4 groups)


def _style(method: str) -> dict:
    """process_coef0 dashed and thicker underneath: it must coincide with GRPO, which would otherwise hide it."""
    return {"linestyle": "--", "linewidth": 3, "zorder": 1} if method == "process_coef0" else {"zorder": 2}


def _spread(values: list[float]) -> tuple[float, float]:
    values = [v for v in values if v == v]
    if not values:
        return float("nan"), float("nan")
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def _metric_mean(run: dict, key: str) -> float:
    values = [entry[key] for entry in run["metrics"] if key in entry]
    return statistics.mean(values) if values else float("nan")


def summarize(results: dict) -> dict:
    """Per method: final held-out pass rates, the pass rate of its training samples, mean zero-std fraction and
    gate rate over training, wall time; each as (mean, std across seeds)."""
    summary = {}
    for method in results["config"]["methods"]:
        runs = [run for run in results["runs"] if run["method"] == method]
        if not runs:
            continue
        summary[method] = {
            "seeds": len(runs),
            "completions": runs[0]["completions"],
            "final_easy": _spread([run["eval"][-1]["easy"] for run in runs]),
            "final_hard": _spread([run["eval"][-1]["hard"] for run in runs]),
            "train_pass_rate": _spread([_metric_mean(run, TRAIN_PASS_KEYS[method]) for run in runs]),
            "frac_zero_std": _spread([_metric_mean(run, ZERO_STD_KEYS.get(method, "")) for run in runs]),
            "gate_rate": _spread([_metric_mean(run, "verigate/gate_rate") for run in runs]),
            "wall_seconds": _spread([run["wall_seconds"] for run in runs]),
        }
    return summary


def _cell(pair) -> str:
    mean, std = pair
    return "n/a" if mean != mean else f"{mean:.3f} ± {std:.3f}"


def markdown_table(results: dict) -> str:
    start = results["warm_start_eval"]
    lines = [
        f"Warm start (greedy, held-out): easy {start['easy']:.3f}, hard {start['hard']:.3f}. "
        f"Sampled on the hard training prompts: pass rate {results['starting_point']['pass_rate']:.3f}, "
        f"zero-std groups {results['starting_point']['frac_zero_std']:.3f}, "
        f"right steps {results['starting_point']['step_right_rate']:.3f}"
        + (
            f", first steps starting from the prompt's whole chain "
            f"{results['starting_point']['first_step_copies_prompt']:.3f}."
            if "first_step_copies_prompt" in results["starting_point"]
            else "."
        ),
        "",
        "| method | seeds | completions | held-out easy | held-out hard | train pass rate | frac zero-std | gate rate "
        "| wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for method, row in summarize(results).items():
        lines.append(
            f"| {method} | {row['seeds']} | {row['completions']} | {_cell(row['final_easy'])} | "
            f"{_cell(row['final_hard'])} | {_cell(row['train_pass_rate'])} | {_cell(row['frac_zero_std'])} | "
            f"{_cell(row['gate_rate'])} | "
            f"{_cell(row['wall_seconds'])} |"
        )
    lines.append("")
    lines.append(
        "Mean ± std across seeds. Held-out: greedy pass@1 after the last step. Train pass rate: the fraction of the "
        "completions generated during training (sampled, temperature 1) whose answer verified, averaged over steps."
    )
    return "\n".join(lines) + "\n"


def _curves(runs: list[dict], key: str):
    """x (completions) and mean/std of ``key`` across runs at each evaluation point they share."""
    points = min(len(run["eval"]) for run in runs)
    xs = [runs[0]["eval"][i]["completions"] for i in range(points)]
    pairs = [_spread([run["eval"][i][key] for run in runs]) for i in range(points)]
    return xs, [p[0] for p in pairs], [p[1] for p in pairs]


def plot(results: dict, directory: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    methods = [m for m in results["config"]["methods"] if any(r["method"] == m for r in results["runs"])]
    figure, axes = plt.subplots(1, 3, figsize=(16, 4))
    for axis, key in zip(axes[:2], ("easy", "hard"), strict=True):
        for method in methods:
            runs = [run for run in results["runs"] if run["method"] == method]
            xs, means, stds = _curves(runs, key)
            xs = [0, *xs]
            means = [results["warm_start_eval"][key], *means]
            stds = [0.0, *stds]
            axis.plot(xs, means, marker="o", label=method, **_style(method))
            axis.fill_between(
                xs,
                [m - s for m, s in zip(means, stds, strict=True)],
                [m + s for m, s in zip(means, stds, strict=True)],
                alpha=0.15,
            )
        axis.set_title(f"held-out {key} pass rate (greedy)")
        axis.set_xlabel("completions generated")
        axis.set_ylim(-0.02, 1.02)
    for method in methods:
        runs = [run for run in results["runs"] if run["method"] == method]
        curves = []
        for run in runs:
            rates = [e[TRAIN_PASS_KEYS[method]] for e in run["metrics"] if TRAIN_PASS_KEYS[method] in e]
            total, curve = 0.0, []
            for rate in rates:
                total += rate * run["completions_per_step"]
                curve.append(total)
            curves.append(curve)
        points = min(len(c) for c in curves)
        xs = [(i + 1) * runs[0]["completions_per_step"] for i in range(points)]
        mean_curve = [statistics.mean(c[i] for c in curves) for i in range(points)]
        axes[2].plot(xs, mean_curve, label=method, **_style(method))
    axes[2].set_title("verified answers among training samples (cumulative)")
    axes[2].set_xlabel("completions generated")
    axes[0].legend()
    figure.tight_layout()
    pass_path = directory / "pass_rate.png"
    figure.savefig(pass_path, dpi=100)
    plt.close(figure)

    figure, axis = plt.subplots(figsize=(6, 4))
    series = [(m, ZERO_STD_KEYS[m], "zero-std") for m in methods if m in ZERO_STD_KEYS]
    series += [("verigate", "verigate/gate_rate", "gate rate")] if "verigate" in methods else []
    for method, key, what in series:
        runs = [run for run in results["runs"] if run["method"] == method]
        steps = sorted({e["step"] for run in runs for e in run["metrics"] if key in e})
        means = [
            _spread([e[key] for run in runs for e in run["metrics"] if e["step"] == s and key in e])[0] for s in steps
        ]
        smoothed = [statistics.mean(means[max(0, i - SMOOTHING + 1) : i + 1]) for i in range(len(means))]
        style = {"linestyle": ":"} if what == "gate rate" else _style(method)
        axis.plot(steps, smoothed, label=f"{method} {what}", **style)
    axis.set_xlabel("optimizer step")
    axis.set_ylabel("fraction of groups")
    axis.set_title(f"zero-std groups vs VeriGate gate rate (seed mean, trailing {SMOOTHING}-step mean)", fontsize=9)
    axis.set_ylim(-0.02, 1.02)
    axis.legend()
    figure.tight_layout()
    gate_path = directory / "zero_std_vs_gate.png"
    figure.savefig(gate_path, dpi=100)
    plt.close(figure)
    return [pass_path, gate_path]


def write_report(results_path: Path) -> list[Path]:
    results = json.loads(results_path.read_text())
    table = results_path.parent / "results.md"
    table.write_text(markdown_table(results))
    return [table, *plot(results, results_path.parent)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="results.json written by experiments.toy_arithmetic.launch")
    for path in write_report(parser.parse_args(argv).results):
        print(path)


if __name__ == "__main__":
    main()
