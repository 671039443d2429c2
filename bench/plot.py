"""PNG of the runtime suite: speedup over eager per workload, one bar per compiled variant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def plot_runtime(results: list[dict[str, Any]], path: Path) -> None:
    """One panel per size; bars = eager time / variant time (log scale; > 1 is faster)."""
    sizes = sorted({r["size"] for r in results}, key=["small", "medium", "large"].index)
    names = {r["variant"] for r in results if r["variant"] != "eager"}
    variants = sorted(names, key=lambda v: (v != "inductor", v))
    fig, axes = plt.subplots(len(sizes), 1, figsize=(13, 3.4 * len(sizes)), squeeze=False)
    for ax, size in zip(axes[:, 0], sizes, strict=True):
        rows = [r for r in results if r["size"] == size]
        names = sorted({r["workload"] for r in rows}, key=[r["workload"] for r in rows].index)
        width = 0.8 / max(1, len(variants))
        for i, variant in enumerate(variants):
            speed = {r["workload"]: r["vs_eager"] for r in rows if r["variant"] == variant}
            xs = [j + i * width for j in range(len(names))]
            ax.bar(xs, [speed.get(n) or 0 for n in names], width, label=variant)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(names))], names, rotation=20)
        ax.set_ylabel("speedup vs eager")
        ax.set_title(f"size {size} (missing bar: variant failed or was not run at this size)")
        ax.grid(axis="y", which="major", linewidth=0.3)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper left", bbox_to_anchor=(0.83, 0.98), fontsize=9)
    fig.tight_layout(rect=(0, 0, 0.83, 1))
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
