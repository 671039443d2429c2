"""PNG of the model suite: speedup over eager per model, forward and training, one bar per
compiled variant (log scale; a missing bar is a failed or untimed variant)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def plot_models(doc: dict[str, Any], path: Path) -> None:
    from bench.models_report import speedups

    rows = doc["rows"]
    models = list(dict.fromkeys(r["model"] for r in rows))
    variants = [v for v in doc["meta"]["variants"] if v != "eager"]
    checks = [("time-forward", "forward (eval, no grad)"), ("time-train", "training step")]
    fig, axes = plt.subplots(2, 1, figsize=(14, 7.5), squeeze=False)
    width = 0.8 / max(1, len(variants))
    for ax, (check, title) in zip(axes[:, 0], checks, strict=True):
        for i, variant in enumerate(variants):
            speed = speedups(rows, variant, "eager", check)
            xs = [j + i * width for j in range(len(models))]
            ax.bar(xs, [speed.get(m, 0) for m in models], width, label=variant)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(models))], models, rotation=40)
        ax.set_ylabel("speedup vs eager")
        ax.set_title(
            f"{title}: {doc['meta']['device']}, {doc['meta']['dtype']}, "
            f"{doc['meta']['threads']} threads"
        )
        ax.grid(axis="y", which="major", linewidth=0.3)
    axes[0, 0].legend(fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
