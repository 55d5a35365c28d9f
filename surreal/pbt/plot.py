"""A population's learning curves: each member's eval return over its env steps, copies marked.

python -m surreal.pbt.plot RUN_DIR OUT.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import surreal.pbt.store as store
from surreal.monitoring.plot import pyplot
from surreal.pbt.config import from_dict, init_overrides
from surreal.runtime.runfolder.rundir import read_json


def curves(run_path: Path) -> dict[str, list[tuple[int, float]]]:
    """member -> [(step, eval return)] from its `metrics.jsonl`."""
    pbt = from_dict(read_json(Path(run_path) / store.PBT_FILE))
    out = {}
    for name in store.member_names(pbt.members):
        path = Path(run_path) / name / "metrics.jsonl"
        lines = path.read_text().splitlines() if path.is_file() else []
        records = (json.loads(line) for line in lines if line.strip())
        out[name] = [(r["step"], r["value"]) for r in records if r["name"] == "charts/eval_return"]
    return out


def plot(run_path: Path, out: Path, title: str | None = None) -> None:
    """Write the curves to `out` (PNG); a triangle marks each copy at the recipient's step and
    the score it was replaced with."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    colors = {}
    inits = init_overrides(from_dict(read_json(Path(run_path) / store.PBT_FILE)))
    for i, (name, points) in enumerate(curves(run_path).items()):
        label = name + (f" (start {', '.join(inits[i])})" if i in inits else "")
        steps, values = ([p[0] for p in points], [p[1] for p in points])
        (line,) = ax.plot(steps, values, label=label)
        colors[name] = line.get_color()
    for record in store.read_log(run_path):
        if record.get("event") == "copy":
            at = (record.get("recipient_step", record["step"]), record["recipient_score"])
            ax.plot(*at, "v", color=colors[record["recipient"]])
            ax.annotate(
                f"{record['donor']}->{record['recipient']}",
                at,
                textcoords="offset points",
                xytext=(4, 6),
                fontsize=7,
            )
    ax.set_xlabel("env steps (each member's own)")
    ax.set_ylabel("eval return (greedy)")
    ax.set_title(title or f"population {Path(run_path).name}: eval return per member")
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    plot(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
