"""robosuite: camera-mode steps/s per actor process (surreal's offscreen settings beside robosuite's
defaults, 1 and N processes at once) and a PPO-on-Lift-from-state learning curve through
`surreal launch` with one actor per core, beside a random policy's return.

    .venv/bin/python bench/robosuite_bench.py [--steps 30000] [--actors N] [--skip-learning]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "out"
CAMERA = ["agentview_image", "robot0_proprio-state"]
HORIZON = 200


def _stepper(mode: str, steps: int, queue: mp.Queue) -> None:
    """In a fresh (spawned) process with its own GL context: time `steps` random steps."""
    from surreal.api.config import EnvConfig
    from surreal.envs import make_env
    from surreal.envs.robosuite import _suite

    if mode == "camera, robosuite defaults":  # 4x multisampling, reflections, 640x480 buffer
        env = _suite().make(
            "Lift",
            robots="Panda",
            has_renderer=False,
            use_camera_obs=True,
            has_offscreen_renderer=True,
            camera_names="agentview",
            camera_heights=84,
            camera_widths=84,
            reward_shaping=True,
            hard_reset=False,
            horizon=HORIZON,
        )
        env.reset()
        low, high = env.action_spec
        step = lambda: env.step(np.random.uniform(low, high))  # noqa: E731
    else:
        keys = CAMERA if mode.startswith("camera") else None
        env = make_env(
            "robosuite:Lift",
            EnvConfig(id="robosuite:Lift", obs_keys=keys, max_episode_steps=HORIZON),
            seed=0,
        )
        env.reset(seed=0)
        step = lambda: env.step(env.action_space.sample())  # noqa: E731
    step()
    start = time.perf_counter()
    for _ in range(steps):
        step()  # episodes are HORIZON long; steps < HORIZON keeps resets out of the timing
    queue.put(steps / (time.perf_counter() - start))


def steps_per_second(mode: str, procs: int, steps: int) -> list[float]:
    """Steps/s of each of `procs` processes stepping at the same time."""
    ctx = mp.get_context("spawn")  # never fork a process that holds a GL context
    queue = ctx.Queue()
    workers = [ctx.Process(target=_stepper, args=(mode, steps, queue)) for _ in range(procs)]
    for w in workers:
        w.start()
    rates = [queue.get(timeout=900) for _ in workers]
    for w in workers:
        w.join()
    return rates


def random_return(episodes: int = 3) -> float:
    """Mean return of uniform random actions over HORIZON-step episodes (the baseline)."""
    from surreal.api.config import EnvConfig
    from surreal.envs import make_env

    env = make_env(
        "robosuite:Lift", EnvConfig(id="robosuite:Lift", max_episode_steps=HORIZON), seed=7
    )
    returns = []
    for _ in range(episodes):
        env.reset()
        done, info = False, {}
        while not done:
            _, _, terminated, truncated, info = env.step(env.action_space.sample())
            done = terminated or truncated
        returns.append(info["episode"]["r"])
    env.close()
    return float(np.mean(returns))


def learning_curve(steps: int, actors: int, folder: Path) -> list[dict]:
    """`surreal launch ppo --env robosuite:Lift` from state; returns metrics.jsonl records."""
    cmd = [
        sys.executable,
        "-m",
        "surreal",
        "launch",
        "ppo",
        "--env",
        "robosuite:Lift",
        "--actors",
        str(actors),
        "--steps",
        str(steps),
        "--folder",
        str(folder),
        "--name",
        "lift",
        "--trial",
        "bench",
        "--quiet",
        "--set",
        "env.num_envs=2",
        "--set",
        f"env.max_episode_steps={HORIZON}",
        "--set",
        "env.normalize_reward=true",
        "--set",
        "actor.rollout_length=128",
        "--set",
        "algo.update_epochs=10",
        "--set",
        "algo.num_minibatches=8",
        "--set",
        "eval.every_s=0",
    ]
    env = dict(os.environ, SYMPHONY_HOME=str(folder / "home"))
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    lines = (folder / "lift" / "bench" / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def curve(records: list[dict], name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(env steps, seconds since the first record, value) of one metric."""
    rows = [r for r in records if r["name"] == name]
    t0 = min(r["time"] for r in records)
    return (
        np.array([r["step"] for r in rows]),
        np.array([r["time"] - t0 for r in rows]),
        np.array([r["value"] for r in rows]),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30_000, help="PPO env steps")
    parser.add_argument("--actors", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--render-steps", type=int, default=150)
    parser.add_argument("--skip-learning", action="store_true")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    modes = ["state", "camera, robosuite defaults", "camera, surreal settings"]
    rows = []
    for procs in sorted({1, args.actors}):
        for mode in modes:
            rates = steps_per_second(mode, procs, args.render_steps)
            rows.append(
                {
                    "mode": mode,
                    "procs": procs,
                    "per_proc": float(np.mean(rates)),
                    "total": float(np.sum(rates)),
                }
            )
    print(
        f"\nLift, random actions, {args.render_steps} steps per process "
        f"({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})"
    )
    print(f"{'mode':<28}{'procs':>6}{'steps/s/proc':>14}{'total':>9}{'vs defaults':>13}")
    for row in rows:
        base = next(
            r
            for r in rows
            if r["procs"] == row["procs"] and r["mode"] == "camera, robosuite defaults"
        )
        print(
            f"{row['mode']:<28}{row['procs']:>6}{row['per_proc']:>14.1f}{row['total']:>9.1f}"
            f"{row['per_proc'] / base['per_proc']:>12.2f}x"
        )
    result = {"render": rows, "cores": os.cpu_count()}
    if not args.skip_learning:
        baseline = random_return()
        started = time.monotonic()
        with tempfile.TemporaryDirectory() as tmp:
            records = learning_curve(args.steps, args.actors, Path(tmp))
        wall = time.monotonic() - started
        steps, seconds, returns = curve(records, "charts/episodic_return")
        first, last = float(np.mean(returns[:10])), float(np.mean(returns[-10:]))
        print(
            f"\nPPO on robosuite:Lift from state, {args.actors} actors x 2 envs, "
            f"{args.steps} steps in {wall:.0f} s ({args.steps / wall:.0f} steps/s)"
        )
        print(f"{'policy':<26}{'return (' + str(HORIZON) + ' steps)':>22}{'vs random':>11}")
        for label, value in (
            ("random actions", baseline),
            ("PPO, first 10 episodes", first),
            ("PPO, last 10 episodes", last),
        ):
            print(f"{label:<26}{value:>22.1f}{value / baseline:>10.2f}x")
        result.update(
            random_return=baseline,
            first=first,
            last=last,
            wall_s=wall,
            curve={
                "steps": steps.tolist(),
                "seconds": seconds.tolist(),
                "returns": returns.tolist(),
            },
        )
    (OUT / "robosuite_bench.json").write_text(json.dumps(result, indent=1))
    plot(result)


def plot(result: dict) -> None:
    """Bars of steps/s per process; return against env steps and against wall time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    rows = result["render"]
    labels = [f"{r['mode']}\n{r['procs']} proc" for r in rows]
    axes[0].barh(labels, [r["per_proc"] for r in rows])
    axes[0].set_xlabel("steps/s per process")
    axes[0].tick_params(axis="y", labelsize=7)
    if "curve" in result:
        c = result["curve"]
        for ax, key, label in (
            (axes[1], "steps", "env steps"),
            (axes[2], "seconds", "wall time (s)"),
        ):
            ax.plot(c[key], c["returns"], ".", alpha=0.4, label="PPO episodes")
            ax.axhline(result["random_return"], color="gray", ls="--", label="random actions")
            ax.set_xlabel(label)
            ax.set_ylabel("episodic return")
            ax.legend()
        axes[1].set_title("PPO on robosuite:Lift (state)")
    fig.tight_layout()
    fig.savefig(OUT / "robosuite_bench.png", dpi=100)
    print(f"plot: {OUT / 'robosuite_bench.png'}")


if __name__ == "__main__":
    main()
