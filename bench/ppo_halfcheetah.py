"""PPO on HalfCheetah-v5 for 1M env steps through `surreal launch`: learning curve, final return
beside CleanRL (1,443) and the tuned SB3 zoo (5,819) at 1M steps, wall time and env steps/s.
The two references are *published* training returns, not run here (other machines, seeds and
evaluation); they are labelled so in the table and the plot. `bench/peers/run.py` runs CleanRL's
file itself, on this machine, beside surreal.

    .venv/bin/python bench/ppo_halfcheetah.py [--actors 2] [--steps 1000000]
    .venv/bin/python bench/ppo_halfcheetah.py --plot-only runs/ppo-halfcheetah/bench   # a finished run

Hyperparameters are CleanRL's ppo_continuous_action (2048 steps per update, 10 epochs,
32 minibatches, lr 3e-4 annealed, reward normalization); not part of CI (it takes ~20-40 min here).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"
REFERENCES = {  # published training returns at 1M steps, not measured here
    "CleanRL PPO (1M, published)": 1443,
    "SB3 zoo PPO, tuned (1M, published)": 5819,
}


def launch(actors: int, steps: int, folder: str) -> tuple[Path, float]:
    rollout = 2048 // (actors * 8)
    cmd = [
        sys.executable,
        "-m",
        "surreal",
        "launch",
        "ppo",
        "--env",
        "gym:HalfCheetah-v5",
        "--actors",
        str(actors),
        "--steps",
        str(steps),
        "--folder",
        folder,
        "--name",
        "ppo-halfcheetah",
        "--trial",
        time.strftime("bench-%Y%m%d-%H%M%S"),
        "--set",
        "env.num_envs=8",
        "--set",
        f"actor.rollout_length={rollout}",
        "--set",
        "algo.update_epochs=10",
        "--set",
        "algo.num_minibatches=32",
        "--set",
        "env.normalize_reward=true",
        "--set",
        "eval.every_s=30",
        "--set",
        "eval.episodes=5",
        "--set",
        "run.checkpoint_every=50",
    ]
    started = time.monotonic()
    subprocess.run(cmd, check=True)
    run = max((Path(folder) / "ppo-halfcheetah").glob("bench-*"), key=lambda p: p.stat().st_mtime)
    return run, time.monotonic() - started


def curves(run: Path) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {
        "charts/episodic_return": [],
        "charts/eval_return": [],
    }
    for line in (run / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["name"] in out:
            out[record["name"]].append((record["step"], record["value"]))
    return out


def report(run: Path, wall: float | None) -> None:
    data = curves(run)
    train = data["charts/episodic_return"]
    last = [v for s, v in train if s >= train[-1][0] - 50_000] if train else []
    final = sum(last) / max(len(last), 1)
    status = json.loads((run / "status.json").read_text())
    print(f"\nPPO HalfCheetah-v5, run {run}")
    print(f"{'training return':<36} {'@1M':>10}")
    print(f"{'surreal, measured (last 50k steps)':<36} {final:>10,.0f}")
    for label, value in REFERENCES.items():
        print(f"{label:<36} {value:>10,}   (not run here: one seed of ours vs their figure)")
    print(
        f"env steps {status['global_step']:,}, learner steps/s {status.get('charts/sps', 0):,.0f}"
        + (f", wall {wall / 60:.1f} min" if wall else "")
    )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    OUT.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4))
    if train:
        ax.plot(*zip(*train, strict=True), ".", ms=2, alpha=0.4, label="episodic return (train)")
    if data["charts/eval_return"]:
        ax.plot(*zip(*data["charts/eval_return"], strict=True), "o-", label="eval return (greedy)")
    for (label, value), color in zip(REFERENCES.items(), ("C2", "C3"), strict=True):
        ax.axhline(value, color=color, ls="--", label=label)
    ax.set_xlabel("env steps")
    ax.set_ylabel("return")
    ax.legend(fontsize=8)
    ax.set_title("PPO HalfCheetah-v5 through surreal launch")
    fig.tight_layout()
    fig.savefig(OUT / "ppo_halfcheetah.png", dpi=100)
    print(f"plot: {OUT / 'ppo_halfcheetah.png'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--folder", default="runs")
    parser.add_argument("--plot-only", type=Path, help="Only report an existing run folder.")
    args = parser.parse_args()
    if args.plot_only:
        report(args.plot_only, None)
        return
    run, wall = launch(args.actors, args.steps, args.folder)
    report(run, wall)


if __name__ == "__main__":
    main()
