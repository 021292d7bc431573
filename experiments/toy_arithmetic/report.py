"""Tables, the decisions and the plots of a results JSON written by `launch`.

``python -m experiments.toy_arithmetic.report RESULTS.json`` rewrites results.md and the PNGs next to the JSON.
The decisions are `analysis`'s (design 3's rules, docs/experiments/design3.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from experiments.toy_arithmetic import analysis
from experiments.toy_arithmetic.evaluation import rescue_rate

ZERO_STD_KEYS = {
    "grpo": "frac_reward_zero_std",
    "verigate": "verigate/frac_zero_std_outcome",
    "prm_outcome": "frac_reward_zero_std",
    "process": "lean/frac_zero_std_outcome",
    "process_noprop": "lean/frac_zero_std_outcome",
}
END_KEYS = ("sampled_faithful", "sampled_pass", "greedy_pass", "greedy_faithful", "sampled_spurious_share",
            "sampled_valid_prefix", "easy_greedy_pass")  # fmt: skip
HARD_KEYS = ("hard_sampled_faithful", "hard_sampled_pass")


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
        **{key: end.get(key, float("nan")) for key in HARD_KEYS},
        "hard_rescue_rate": (
            rescue_rate(start["hard_sampled_faithful_counts"], end["hard_sampled_faithful_counts"])
            if "hard_sampled_faithful_counts" in end and "hard_sampled_faithful_counts" in start
            else float("nan")
        ),
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
        "setting": run.get("setting"),
    }


def summarize(results: dict) -> dict:
    """{method: {seed: run_summary}} for every finished run (grid points other than the chosen ones excluded)."""
    summary: dict = {}
    for run in results["runs"]:
        summary.setdefault(run["method"], {})[str(run["seed"])] = run_summary(run, results["start_eval"])
    return summary


NAN = float("nan")


def _fmt(value: float) -> str:
    return "n/a" if value != value else f"{value:.3f}"


def _warm_start_lines(results: dict) -> list[str]:
    warm, screening, check = results["warm_start"], results["screening"], results["prerun_check"]
    lines = ["## Warm-start checkpoints (calibration prompts, sampled G per prompt)", ""]
    lines += ["| checkpoint | faithful | all-zero groups | spurious share | pass |", "|---|---|---|---|---|"]
    for name, row in warm["calibration"].items():
        mark = " (picked)" if name == warm["picked"] else ""
        lines.append(
            f"| {name}{mark} | {_fmt(row['faithful'])} | {_fmt(row['all_zero_groups'])} | "
            f"{_fmt(row['spurious_share'])} | {_fmt(row['pass'])} |"
        )
    pool, hard = screening["pool"], screening["hard"]
    prm = check["prm"]
    return lines + [
        "",
        f"Rule: {warm['rule']}. Rule met: {warm['rule_met']}.",
        "",
        "## Hard prompts and the pre-run check",
        "",
        f"- RL pool: {len(pool['indices'])} of {len(screening['pool_counts'])} prompts kept (faithful at most the "
        "threshold of the screening samples).",
        f"- Hard set: {len(hard['indices'])} prompts; {hard['qualifying']} candidates qualified (rule met: "
        f"{hard['rule_met']}).",
        f"- Pre-run check: propagation on/off score {check['differing']} of {check['failed']} failed completions "
        f"differently ({_fmt(check['differing_share'])}; needed {analysis.MIN_PROPAGATION_DIFFERENCE}).",
        f"- VeriGate's PRM, measured on that batch ({prm['lines']} lines): accuracy {_fmt(prm['accuracy_vs_line_check'])}"
        f" against the line-by-line check, {_fmt(prm['accuracy_vs_goal_tracking'])} against goal tracking.",
        "",
    ]


def _held_out_lines(summary: dict, start: dict) -> list[str]:
    lines = ["## Held-out metrics at the end (per seed)", ""]
    header = ("| method | seed | faithful | hard-set faithful | sampled pass | greedy pass | greedy faithful | spurious "
              "share | valid prefix | easy greedy | hard rescue | zero-std | gate rate | zero-grad steps | wall s |")  # fmt: skip
    lines += [header, "|" + "---|" * 15]
    lines.append(
        f"| warm start | - | {_fmt(start['sampled_faithful'])} | {_fmt(start.get('hard_sampled_faithful', NAN))} | "
        f"{_fmt(start['sampled_pass'])} | {_fmt(start['greedy_pass'])} | {_fmt(start['greedy_faithful'])} | "
        f"{_fmt(start['sampled_spurious_share'])} | {_fmt(start['sampled_valid_prefix'])} | "
        f"{_fmt(start['easy_greedy_pass'])} | - | - | - | - | - |"
    )
    for method, seeds in summary.items():
        for seed, row in sorted(seeds.items(), key=lambda item: int(item[0])):
            lines.append(
                f"| {method} | {seed} | {_fmt(row['sampled_faithful'])} | {_fmt(row['hard_sampled_faithful'])} | "
                f"{_fmt(row['sampled_pass'])} | {_fmt(row['greedy_pass'])} | {_fmt(row['greedy_faithful'])} | "
                f"{_fmt(row['sampled_spurious_share'])} | {_fmt(row['sampled_valid_prefix'])} | "
                f"{_fmt(row['easy_greedy_pass'])} | {_fmt(row['hard_rescue_rate'])} | "
                f"{_fmt(row['zero_std_fraction'])} | {_fmt(row['gate_rate'])} | {_fmt(row['zero_gradient_steps'])} | "
                f"{row['wall_seconds']:.0f} |"
            )
    return lines


def _training_lines(summary: dict) -> list[str]:
    lines = ["", "## Training logs (per seed)", ""]
    lines += ["| method | seed | tactics per proof | empty fraction | gated concordance | ES reward std | ES zero "
              "updates / iterations |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for method, seeds in summary.items():
        for seed, row in sorted(seeds.items(), key=lambda item: int(item[0])):
            iterations = row["es_iterations"]
            zero = "n/a" if iterations != iterations else f"{row['es_zero_updates']} / {iterations}"
            lines.append(
                f"| {method} | {seed} | {_fmt(row['tactics_per_proof'])} | {_fmt(row['empty_fraction'])} | "
                f"{_fmt(row['gated_concordance'])} | {_fmt(row['es_reward_std'])} | {zero} |"
            )
    return lines


def _grid_lines(results: dict) -> list[str]:
    lines = []
    for method, points in results.get("grids", {}).items():
        keys = [key for key in points[0] if key != "train_reward"]
        lines += ["", f"## {method} grid (first seed, training reward over the second half of the steps)", ""]
        lines += [f"| {' | '.join(keys)} | training reward |", "|" + "---|" * (len(keys) + 1)]
        for point in points:
            chosen = results["chosen"].get(method) == {key: point[key] for key in keys}
            values = " | ".join(f"{point[key]:g}" for key in keys)
            lines.append(f"| {values} | {point['train_reward']:.4f}{' (chosen)' if chosen else ''} |")
    return lines


def _record_lines(results: dict) -> list[str]:
    lines = []
    check = results.get("coef0_check")
    if check:
        lines += [
            "",
            f"Coefficient-0 check (first batch, seed 0, {check['num_completions']} completions): same completions "
            f"{check['same_completions']}, max |A_coef0 - A_GRPO| = {check['max_abs_diff_coef0_vs_grpo']:g}, "
            f"max |A_coef1 - A_GRPO| = {check['max_abs_diff_coef1_vs_grpo']:g}.",
        ]
    lines += ["", "## Runs on record", "", "| method | seed | started (UTC) | ended (UTC) | git commit | code hash |"]
    lines.append("|---|---|---|---|---|---|")
    for run in results["runs"]:
        commit = (run.get("git_commit") or "none")[:10] + (" (dirty)" if run.get("git_dirty") else "")
        lines.append(
            f"| {run['method']} | {run['seed']} | {run.get('started_at', 'n/a')} | {run.get('ended_at', 'n/a')} | "
            f"{commit} | {run.get('code_hash', 'n/a')[:12]} |"
        )
    return lines


def markdown(results: dict) -> str:
    summary = summarize(results)
    lines = [f"**{analysis.QUICK_NOTICE}.**", ""] if results["config"].get("quick") else []
    lines += _warm_start_lines(results) + _held_out_lines(summary, results["start_eval"]) + _training_lines(summary)
    lines += _grid_lines(results)
    lines += ["", "## Decisions (design 3's rules, paired by seed)", "", analysis.markdown(analysis.decisions(results))]
    lines += ["Reported without a verdict:", "", analysis.markdown(analysis.descriptive(results))]
    return "\n".join(lines + _record_lines(results)) + "\n"


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

    return [held_out, training, _plot_decisions(results, directory, plt)]


def panel_title(row: dict, part: str) -> str:
    """A decision panel's title. A claim of two parts has one verdict, so the title says that it is the claim's."""
    if len(row["parts"]) == 1:
        return f"{row['claim']}:\n{row['verdict']}"
    return f"{row['claim']}, part '{part}'\n(claim: {row['verdict']})"


def _plot_decisions(results: dict, directory: Path, plt) -> Path:
    """decisions.png: per claim and part, the per-seed differences, their mean and bounds, and the SESOI."""
    panels = [(row, name, part) for row in analysis.decisions(results) for name, part in row["parts"].items()]
    figure, axes = plt.subplots(1, len(panels), figsize=(3.2 * len(panels), 4.4), squeeze=False)
    for axis, (row, name, part) in zip(axes[0], panels, strict=True):
        seeds = list(part["deltas"])
        axis.scatter(range(len(seeds)), list(part["deltas"].values()), color="C0", zorder=3, label="seed difference")
        if "mean" in part:
            low, high = part["mean"] - part["lower"], part["upper"] - part["mean"]
            axis.errorbar([len(seeds)], [part["mean"]], yerr=[[low], [high]], color="C1", marker="s", capsize=4,
                          label="mean, one-sided 95% bounds")  # fmt: skip
        line = -analysis.ES_MARGIN if name == "vs GRPO" else row["sesoi"]
        axis.axhline(line, color="C3", linestyle="--", label="SESOI (ES: margin)")
        axis.axhline(0.0, color="grey", linewidth=0.8)
        axis.set_xticks(range(len(seeds) + 1), [f"s{seed}" for seed in seeds] + ["mean"])
        axis.set_title(panel_title(row, name), fontsize=8)
        axis.set_ylabel("difference")
    figure.suptitle("Decisions: per-seed differences, their mean and bounds, against the SESOI")
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=3, frameon=False)
    figure.tight_layout(rect=(0, 0.08, 1, 0.93))
    decision_path = directory / "decisions.png"
    figure.savefig(decision_path, dpi=100)
    plt.close(figure)
    return decision_path


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
