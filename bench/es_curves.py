"""ES learning curves against wall time with 1 and 2 workers, through `surreal launch es`.

Runs `surreal launch es --env ENV --actors N --steps STEPS` for each env and worker count, reads
each run's `metrics.jsonl` (evaluator returns with their wall-clock time) and plots eval return
against seconds since the run's first record, 1 and 2 workers side by side; prints a table of the
best and final eval return and the wall time.

    .venv/bin/python bench/es_curves.py [--envs gym:HalfCheetah-v5,gym:Hopper-v5] [--steps 300000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTRA = {"gym:Hopper-v5": ["--set", "algo.discretize=10"]}  # the paper's option for Hopper


def run(
    env_id: str, workers: int, steps: int, folder: Path
) -> tuple[list[tuple[float, float]], float]:
    """Launch one ES run; returns [(seconds, eval return)] and the launch's wall time."""
    name = f"{env_id.split(':')[-1].lower()}-w{workers}"
    shutil.rmtree(folder / name, ignore_errors=True)
    cmd = [
        sys.executable,
        "-m",
        "surreal",
        "launch",
        "es",
        "--env",
        env_id,
        "--actors",
        str(workers),
        "--steps",
        str(steps),
        "--folder",
        str(folder),
        "--name",
        name,
        "--trial",
        "t1",
        "--quiet",
        "--set",
        "eval.every_s=5",
        *EXTRA.get(env_id, []),
    ]
    started = time.monotonic()
    subprocess.run(
        cmd, check=True, cwd=ROOT, env=dict(os.environ, SYMPHONY_HOME=str(folder / ".home"))
    )
    wall = time.monotonic() - started
    records = [
        json.loads(line)
        for line in (folder / name / "t1" / "metrics.jsonl").read_text().splitlines()
    ]
    t0 = min(r["time"] for r in records)
    return [
        (r["time"] - t0, r["value"]) for r in records if r["name"] == "charts/eval_return"
    ], wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", default="gym:HalfCheetah-v5,gym:Hopper-v5")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "es_curves.png"))
    args = parser.parse_args()
    folder = ROOT / "bench" / "out" / "es_runs"
    envs, counts = args.envs.split(","), [int(w) for w in args.workers.split(",")]
    results = {(e, n): run(e, n, args.steps, folder) for e in envs for n in counts}
    print(f"\nES, {args.steps:,} env steps per run, {os.cpu_count()} cores")
    print(f"{'env':>22} {'workers':>8} {'best eval':>10} {'final eval':>11} {'wall s':>7}")
    for (env_id, n), (curve, wall) in results.items():
        best = max((v for _, v in curve), default=float("nan"))
        final = curve[-1][1] if curve else float("nan")
        print(f"{env_id:>22} {n:>8} {best:>10.1f} {final:>11.1f} {wall:>7.0f}")
    _plot(results, envs, args.out)


def _plot(results, envs, out_path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, len(envs), figsize=(5 * len(envs), 3.6), squeeze=False)
    for ax, env_id in zip(axes[0], envs, strict=True):
        for (e, n), (curve, _) in results.items():
            if e == env_id and curve:
                ax.plot([t for t, _ in curve], [v for _, v in curve], label=f"{n} worker(s)")
        ax.set_title(env_id)
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel("eval return")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"plot: {out}")


if __name__ == "__main__":
    main()
