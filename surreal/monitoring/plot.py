"""A run's TensorBoard scalars as one PNG (matplotlib, the `bench` extra), read from its
`metrics.jsonl`: `python -m surreal.monitoring.plot RUN_DIR OUT.png`.

For a quick look without a TensorBoard or Grafana server (and the picture in docs/monitoring.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

PANELS = (
    ("returns", ("charts/episodic_return", "charts/eval_return")),
    ("learner steps/s", ("charts/sps",)),
    ("policy lag (versions)", ("charts/policy_lag",)),
    ("learn time per iteration (s)", ("charts/learn_time",)),
    ("buffer fill (segments)", ("charts/buffer_fill",)),
    ("losses", ("losses/policy_loss", "losses/value_loss")),
)
"""(title, scalar names) of each panel, against the global step."""


def series(run_path: Path) -> dict[str, tuple[list[int], list[float]]]:
    """scalar name -> (steps, values) from `RUN/metrics.jsonl`."""
    found: dict[str, tuple[list[int], list[float]]] = {}
    for line in (run_path / "metrics.jsonl").read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        steps, values = found.setdefault(rec["name"], ([], []))
        steps.append(rec["step"])
        values.append(rec["value"])
    return found


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend (matplotlib is of the `bench` extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_run(run_path: Path, out: Path) -> list[str]:
    """Write the panels of the run's scalars to `out`; returns the scalar names drawn."""
    plt = pyplot()
    data = series(run_path)
    fig, axes = plt.subplots(2, 3, figsize=(15, 7.5))
    drawn = []
    for ax, (title, names) in zip(axes.flat, PANELS, strict=True):
        for name in names:
            if name in data:
                steps, values = data[name]
                ax.plot(steps, values, label=name, linewidth=1)
                drawn.append(name)
        ax.set_title(title)
        ax.set_xlabel("global step")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    fig.suptitle(f"{run_path.parent.name}/{run_path.name}: scalars from metrics.jsonl")
    fig.tight_layout()
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return drawn


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python -m surreal.monitoring.plot RUN_DIR OUT.png")
    print(", ".join(plot_run(Path(sys.argv[1]), Path(sys.argv[2]))))
