"""Runs' scalars as PNGs (matplotlib, of the `rl` extra), read from their `metrics.jsonl`:
`surreal plot RUN [RUN ...] -o curves.png` (`plot_runs`: returns against steps and wall time,
runs overlaid) and `python -m surreal.monitoring.plot RUN_DIR OUT.png` (`plot_run`: every panel
of one run).

For a quick look without a TensorBoard or Grafana server (and the picture in docs/monitoring.md).
"""

from __future__ import annotations

import itertools
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


RETURNS = (("training return", "charts/episodic_return"), ("eval return", "charts/eval_return"))
"""(title, scalar) of each row of `plot_runs`."""
SMOOTH = 20
"""`plot_runs` draws the training return as the mean of the last SMOOTH episodes."""


def series(run_path: Path, times: bool = False) -> dict[str, tuple[list, ...]]:
    """scalar name -> (steps, values) from `RUN/metrics.jsonl`; with `times`, (steps, values,
    seconds since the file's first record)."""
    found: dict[str, tuple[list, ...]] = {}
    start = None
    for line in (run_path / "metrics.jsonl").read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        start = rec.get("time", 0.0) if start is None else start
        columns = found.setdefault(rec["name"], ([], [], []) if times else ([], []))
        columns[0].append(rec["step"])
        columns[1].append(rec["value"])
        if times:
            columns[2].append(rec.get("time", start) - start)
    return found


def _smoothed(values: list[float], n: int) -> list[float]:
    """The running mean of the last `n` values at each point."""
    sums = [0.0, *itertools.accumulate(values)]
    return [(sums[i + 1] - sums[max(0, i + 1 - n)]) / min(i + 1, n) for i in range(len(values))]


def plot_runs(run_paths: list[Path], out: Path, labels: list[str] | None = None) -> list[str]:
    """Write `returns_figure` to `out` (PNG); returns the labels of the runs that had returns."""
    plt = pyplot()
    fig, drawn = returns_figure(run_paths, labels)
    fig.savefig(out, dpi=80)
    plt.close(fig)
    return drawn


def returns_figure(run_paths: list[Path], labels: list[str] | None = None) -> tuple[Any, list]:
    """The training and eval returns of `run_paths`, overlaid, against the global step (left)
    and wall time in minutes (right); (the figure, the labels of the runs that had returns)."""
    fig, axes = pyplot().subplots(2, 2, figsize=(12, 7.5))
    drawn = []
    for run_path, label in zip(run_paths, labels or [_label(p) for p in run_paths], strict=True):
        data, color = series(run_path, times=True), None
        for row, (_, name) in enumerate(RETURNS):
            if name not in data:
                continue
            steps, values, seconds = data[name]
            values = _smoothed(values, SMOOTH) if row == 0 else values
            for ax, xs in ((axes[row][0], steps), (axes[row][1], [s / 60 for s in seconds])):
                (line,) = ax.plot(xs, values, ".-", label=label, lw=1.2, ms=3, color=color)
                color = line.get_color()  # one color per run on every panel
            drawn += [] if label in drawn else [label]
    for row, (title, _) in enumerate(RETURNS):
        for col, xlabel in enumerate(("global step (env steps)", "wall time (minutes)")):
            ax = axes[row][col]
            ax.set_title(title + (f" (mean of the last {SMOOTH} episodes)" if row == 0 else ""))
            ax.set_xlabel(xlabel)
            ax.grid(alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=8)
    fig.tight_layout()
    return fig, drawn


def _label(run_path: Path) -> str:
    return f"{run_path.parent.name}/{run_path.name}"


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
