"""Actor throughput: total env frames/s with 1, 2, 4, 8 surreal actors on HalfCheetah-v5, beside a
single-process gymnasium loop and a SyncVectorEnv (both with the same policy inference), as ratios
to linear scaling over the cores present (the paper's Fig. 4).

    .venv/bin/python bench/actor_scaling.py [--seconds 20] [--actors 1,2,4,8]

Actors run the full `surreal launch` stack (buffer, learner, parameter server, metrics) with the
learner's update switched off (algo.update_epochs=0) and no lag bound, so the actors are the work.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ENV = "HalfCheetah-v5"
OUT = Path(__file__).resolve().parent / "out"


def policy_forward():
    """The PPO MLP (64x64 tanh) that actors run, as a numpy-in/numpy-out function."""
    import torch

    from surreal.algos.ppo import PPOConfig, PPOLearner
    from surreal.envs import env_info

    torch.set_num_threads(1)
    policy = PPOLearner.make_policy(PPOConfig(), env_info(f"gym:{ENV}"))
    return lambda obs: policy.act(np.asarray(obs, np.float32))[0]


def single_loop(seconds: float) -> float:
    """CleanRL-style: one env, one policy call per step."""
    import gymnasium

    act = policy_forward()
    env = gymnasium.make(ENV)
    obs, _ = env.reset(seed=0)
    frames, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        obs, _, term, trunc, _ = env.step(act(obs[None])[0])
        frames += 1
        if term or trunc:
            obs, _ = env.reset()
    return frames / (time.perf_counter() - start)


def sync_vector(seconds: float, num_envs: int = 8) -> float:
    """gymnasium's SyncVectorEnv with batched policy calls."""
    import gymnasium

    act = policy_forward()
    envs = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make(ENV)] * num_envs)
    obs, _ = envs.reset(seed=0)
    frames, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        obs, *_ = envs.step(act(obs))
        frames += num_envs
    return frames / (time.perf_counter() - start)


def surreal_actors(actors: int, seconds: float, warmup: float = 8.0) -> float:
    """Total actor frames/s of a `surreal launch` with `actors` actor processes."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "runs" / "bench" / "t1"
        cmd = [
            sys.executable,
            "-m",
            "surreal",
            "launch",
            "ppo",
            "--env",
            f"gym:{ENV}",
            "--actors",
            str(actors),
            "--steps",
            str(10**9),
            "--folder",
            f"{tmp}/runs",
            "--name",
            "bench",
            "--trial",
            "t1",
            "--quiet",
            "--set",
            "algo.update_epochs=0",
            "--set",
            "actor.max_ahead=none",
            "--set",
            "eval.every_s=0",
            "--set",
            "env.num_envs=8",
            "--set",
            "actor.rollout_length=64",
        ]
        env = dict(os.environ, SYMPHONY_HOME=f"{tmp}/home")
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while _actor_steps(run) == 0 and time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise RuntimeError(f"surreal launch exited with {proc.returncode}: {cmd}")
                time.sleep(0.5)
            time.sleep(warmup)
            s0, t0 = _actor_steps(run), time.monotonic()
            time.sleep(seconds)
            s1, t1 = _actor_steps(run), time.monotonic()
        finally:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=60)
    return (s1 - s0) / (t1 - t0)


def _actor_steps(run: Path) -> int:
    try:
        return int(json.loads((run / "status.json").read_text()).get("actor_steps", 0))
    except (FileNotFoundError, json.JSONDecodeError):
        return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--actors", default="1,2,4,8")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    rows = [
        ("gymnasium loop (1 env)", 1, single_loop(args.seconds)),
        ("SyncVectorEnv (8 envs)", 1, sync_vector(args.seconds)),
    ]
    for n in (int(a) for a in args.actors.split(",")):
        rows.append((f"surreal, {n} actor(s) x 8 envs", n, surreal_actors(n, args.seconds)))
    base = rows[2][2]
    print(f"\nHalfCheetah-v5 env frames/s on {cores} cores ({args.seconds:.0f} s windows)")
    print(f"{'setup':<32} {'frames/s':>10} {'vs loop':>8} {'vs 1 actor':>10} {'of linear':>10}")
    for label, n, fps in rows:
        linear = base * min(n, cores)
        print(
            f"{label:<32} {fps:>10,.0f} {fps / rows[0][2]:>7.2f}x {fps / base:>9.2f}x "
            f"{fps / linear if label.startswith('surreal') else float('nan'):>9.0%}"
        )
    _plot(rows, cores)


def _plot(rows, cores) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    OUT.mkdir(exist_ok=True)
    actors = [(n, fps) for label, n, fps in rows if label.startswith("surreal")]
    xs = [n for n, _ in actors]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(xs, [f for _, f in actors], "o-", label="surreal actors (total)")
    ax.plot(
        xs, [actors[0][1] * min(n, cores) for n in xs], "k--", label=f"linear over {cores} cores"
    )
    ax.axhline(rows[0][2], color="gray", ls=":", label="gymnasium loop")
    ax.axhline(rows[1][2], color="green", ls=":", label="SyncVectorEnv x8")
    ax.set_xlabel("actors")
    ax.set_ylabel("env frames/s")
    ax.set_title("HalfCheetah-v5 actor throughput")
    ax.legend()
    fig.tight_layout()
    fig.savefig(OUT / "actor_scaling.png", dpi=100)
    print(f"plot: {OUT / 'actor_scaling.png'}")


if __name__ == "__main__":
    main()
