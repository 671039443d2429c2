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
    variants = sorted({r["variant"] for r in results if r["variant"] != "eager"})
    fig, axes = plt.subplots(len(sizes), 1, figsize=(11, 3.2 * len(sizes)), squeeze=False)
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
        ax.set_title(f"size {size} (missing bar: variant failed or was not timed)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
