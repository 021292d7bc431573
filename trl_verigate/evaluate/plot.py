"""``pass_at_k.png``: pass@k (and maj@k, for math) against k, with the bootstrap intervals as error bars."""

from __future__ import annotations

import os


def check_matplotlib() -> None:
    """Fail early (before any model loads) when the plot could not be drawn."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as error:
        raise ValueError(f"--output: pass_at_k.png needs matplotlib ({error}); `pip install matplotlib`") from error


def plot_pass_at_k(metrics: dict, path: str | os.PathLike, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a cluster node
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for family in ("pass", "maj"):
        points = sorted((int(name.split("@")[1]), value) for name, value in metrics.items() if name.startswith(family))
        if not points:
            continue
        ks = [k for k, _ in points]
        values = [value["value"] for _, value in points]
        errors = [
            [value["value"] - value["ci_low"] for _, value in points],
            [value["ci_high"] - value["value"] for _, value in points],
        ]
        axes.errorbar(ks, values, yerr=errors, marker="o", capsize=3, label=f"{family}@k")
    axes.set_xscale("log", base=2)
    axes.set_xlabel("k")
    axes.set_ylabel("fraction of problems")
    axes.set_ylim(-0.02, 1.02)
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
