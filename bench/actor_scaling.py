"""Actor throughput: total env frames/s with 1, 2, 4, 8 surreal actors on HalfCheetah-v5, beside a
single-process gymnasium loop and a SyncVectorEnv (both with the same policy inference), as ratios
to linear scaling over the cores present (the paper's Fig. 4).

    .venv/bin/python bench/actor_scaling.py [--seconds 20] [--actors 1,2,4,8] [--rounds 3]

Rounds alternate the order of all setups. surreal's frames are exact counts: the learner's global
step as it receives each batch (metrics.jsonl), over a window that starts 8 s after its first
batch (the peers' windowing, bench/peers/stats.py). "of linear" is each round's rate over that
round's 1-actor rate times min(actors, cores available to this process).

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

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from stats import paired_ratios, spread, steady_rate  # noqa: E402
from systems import _surreal_metrics  # noqa: E402

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


def surreal_actors(actors: int, seconds: float, skip: float = 8.0) -> tuple[float | None, float]:
    """Total env frames/s of a `surreal launch` with `actors` actor processes, and the frames the
    buffer dropped: exact counts, not the actors' 2-second reports. With the update switched off
    the learner takes every batch the buffer assembles; metrics.jsonl stamps each of its records
    with the learner's global step (frames received and consumed) and the time, and the rate is
    measured between two such records (`bench/peers/stats.py`, the peers' windowing)."""
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
        launched = time.time()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while _learner_step(run) == 0 and time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise RuntimeError(f"surreal launch exited with {proc.returncode}: {cmd}")
                time.sleep(0.5)  # polling the run's status for its first step
            end = time.monotonic() + skip + seconds
            while time.monotonic() < end and proc.poll() is None:
                time.sleep(0.5)  # the measured window's wall budget
        finally:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=60)
        samples = _surreal_metrics(run / "metrics.jsonl", launched).steps
        dropped = float(_status(run).get("buffer/dropped", 0.0))
    window = steady_rate(samples, skip)
    return (window.rate if window else None), dropped


def _status(run: Path) -> dict:
    try:
        return json.loads((run / "status.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _learner_step(run: Path) -> int:
    return int(_status(run).get("global_step", 0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--actors", default="1,2,4,8")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    counts = [int(a) for a in args.actors.split(",")]
    if 1 not in counts:
        parser.error("--actors must include 1: 'of linear' is measured against 1 actor")
    labels = ["gymnasium loop (1 env)", "SyncVectorEnv (8 envs)"]
    labels += [f"surreal, {n} actor(s) x 8 envs" for n in counts]
    rates: dict[str, list] = {label: [] for label in labels}
    dropped, loads = 0.0, [os.getloadavg()[0]]
    for r in range(args.rounds):
        order = labels if r % 2 == 0 else labels[::-1]  # alternate, so drift hits both ends
        for label in order:
            if label.startswith("gymnasium"):
                rates[label].append(single_loop(args.seconds))
            elif label.startswith("SyncVectorEnv"):
                rates[label].append(sync_vector(args.seconds))
            else:
                fps, lost = surreal_actors(int(label.split()[1]), args.seconds)
                rates[label].append(fps)
                dropped += lost
            loads.append(os.getloadavg()[0])
            print(f"round {r + 1} {label}: {rates[label][-1] or float('nan'):,.0f}", flush=True)
    one = rates[labels[2]]
    print(
        f"\nHalfCheetah-v5 env frames/s, {cores} cores available, {args.rounds} alternating rounds, "
        f"{args.seconds:.0f} s windows, 1 torch thread per actor, load average "
        f"{min(loads):.1f}-{max(loads):.1f}; median [min-max] over rounds"
    )
    print(f"{'setup':<32} {'frames/s':>22} {'vs loop':>7} {'of linear':>18}")
    above = False
    for label in labels:
        n = int(label.split()[1]) if label.startswith("surreal") else 0
        vs_loop = spread(paired_ratios(rates[label], rates[labels[0]])).median
        of_linear = "-"
        if n:
            # linear: the same round's 1-actor rate times the actors that can run at once
            linear = [o * min(n, cores) if o else None for o in one]
            share = spread(paired_ratios(rates[label], linear))
            above = above or share.high > 1.0
            of_linear = f"{share.median:.0%} [{share.low:.0%}-{share.high:.0%}]"
        print(f"{label:<32} {str(spread(rates[label])):>22} {vs_loop:>6.2f}x {of_linear:>18}")
    print(f"(frames counted as the learner received them; the buffer dropped {dropped:,.0f})")
    if None in one:
        print(f"{one.count(None)} 1-actor round(s) measured no window (too few learner records)")
    if above:
        print(
            "of linear above 100%: the 1-actor run shares the cores with its buffer, learner "
            "and parameter server, which take a smaller share per actor as actors are added"
        )
    _plot(labels, rates, cores)


def _plot(labels: list[str], rates: dict[str, list], cores: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    OUT.mkdir(exist_ok=True)
    ours = [label for label in labels if label.startswith("surreal")]
    xs = [int(label.split()[1]) for label in ours]
    med = [spread(rates[label]).median for label in ours]
    fig, ax = plt.subplots(figsize=(6, 4))
    for x, label in zip(xs, ours, strict=True):
        measured = [v for v in rates[label] if v]
        ax.scatter([x] * len(measured), measured, color="C0", s=10)
    ax.plot(xs, med, "o-", label="surreal actors (total, median)")
    ax.plot(xs, [med[0] * min(n, cores) for n in xs], "k--", label=f"linear over {cores} cores")
    ax.axhline(spread(rates[labels[0]]).median, color="gray", ls=":", label="gymnasium loop")
    ax.axhline(spread(rates[labels[1]]).median, color="green", ls=":", label="SyncVectorEnv x8")
    ax.set_xlabel("actors")
    ax.set_ylabel("env frames/s")
    ax.set_title("HalfCheetah-v5 actor throughput")
    ax.legend()
    fig.tight_layout()
    fig.savefig(OUT / "actor_scaling.png", dpi=100)
    print(f"plot: {OUT / 'actor_scaling.png'}")


if __name__ == "__main__":
    main()
