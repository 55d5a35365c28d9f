"""PPO training throughput on HalfCheetah-v5: env steps/s sampled *and* consumed by the learner,
`surreal launch` (actors, buffer, learner as processes) beside a single-process CleanRL-style loop
with the same hyperparameters (2048 steps per update, 10 epochs, 32 minibatches), in one run.

    .venv/bin/python bench/ppo_throughput.py [--seconds 60] [--actors 2]
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

OUT = Path(__file__).resolve().parent / "out"
ENV = "gym:HalfCheetah-v5"
BATCH, EPOCHS, MINIBATCHES = 2048, 10, 32


def single_process(seconds: float) -> dict[str, float]:
    """CleanRL's loop: 1 env, one policy call per step, then the update; same PPO code."""
    import torch

    from surreal.algos.ppo import PPOConfig, PPOLearner
    from surreal.config import EnvConfig
    from surreal.core import Actor
    from surreal.envs import VectorEnv

    torch.set_num_threads(1)
    env_config = EnvConfig(id=ENV, num_envs=1, normalize_reward=True)
    venv = VectorEnv(ENV, env_config, seed=0)
    config = PPOConfig(update_epochs=EPOCHS, num_minibatches=MINIBATCHES)
    learner = PPOLearner(config, venv.info)
    policy = PPOLearner.make_policy(config, venv.info)
    actor = Actor(venv, policy, rollout_length=BATCH)
    sample_s = learn_s = 0.0
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        policy.load_params(learner.params())
        t0 = time.perf_counter()
        segment = actor.rollout()
        t1 = time.perf_counter()
        learner.learn({k: v[None] for k, v in segment.items()})
        learn_s += time.perf_counter() - t1
        sample_s += t1 - t0
        steps += BATCH
    total = time.perf_counter() - start
    return {
        "sps": steps / total,
        "sample_frac": sample_s / total,
        "learn_frac": learn_s / total,
        "passes": steps * EPOCHS / total,
    }


def surreal(
    seconds: float,
    actors: int,
    warmup: float = 20.0,
    rollout: int | None = None,
    overrides: tuple[str, ...] = (),
) -> dict[str, float]:
    """`surreal launch ppo` with the same batch (actors x 8 envs x rollout = 2048 steps), or
    `rollout` steps per segment and extra `--set` `overrides` (e.g. `run.device=cuda`)."""
    rollout = rollout or max(BATCH // (actors * 8), 1)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "runs" / "bench" / "t1"
        cmd = [
            sys.executable,
            "-m",
            "surreal",
            "launch",
            "ppo",
            "--env",
            ENV,
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
            "env.num_envs=8",
            "--set",
            f"actor.rollout_length={rollout}",
            "--set",
            f"algo.update_epochs={EPOCHS}",
            "--set",
            f"algo.num_minibatches={MINIBATCHES}",
            "--set",
            "env.normalize_reward=true",
            "--set",
            "eval.every_s=0",
            *(arg for item in overrides for arg in ("--set", item)),
        ]
        env = dict(os.environ, SYMPHONY_HOME=f"{tmp}/home")
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 180
            while _status(run).get("global_step", 0) == 0 and time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise RuntimeError(f"surreal launch exited with {proc.returncode}: {cmd}")
                time.sleep(0.5)
            time.sleep(warmup)
            s0, a0, t0 = _status(run)["global_step"], _status(run)["actor_steps"], time.monotonic()
            learn0 = _learn_time(run)
            time.sleep(seconds)
            s1, a1, t1 = _status(run)["global_step"], _status(run)["actor_steps"], time.monotonic()
            learn1 = _learn_time(run)
            status = _status(run)
        finally:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=60)
    wall = t1 - t0
    return {
        "sps": (s1 - s0) / wall,
        "actor_sps": (a1 - a0) / wall,
        "learn_frac": (learn1 - learn0) / wall,
        "lag": status.get("charts/policy_lag", 0.0),
        "passes": (s1 - s0) * EPOCHS / wall,
    }


def _status(run: Path) -> dict:
    try:
        return json.loads((run / "status.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _learn_time(run: Path) -> float:
    """Seconds the learner spent in learn() so far (from metrics.jsonl)."""
    total = 0.0
    for line in (run / "metrics.jsonl").read_text().splitlines():
        if '"charts/learn_time"' in line:
            total += json.loads(line)["value"]
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--actors", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    base = single_process(args.seconds)
    ours = surreal(args.seconds, args.actors)
    print(
        f"\nPPO HalfCheetah-v5, {os.cpu_count()} cores, batch {BATCH}, {EPOCHS} epochs x "
        f"{MINIBATCHES} minibatches, {args.seconds:.0f} s windows"
    )
    print(
        f"{'setup':<34} {'train steps/s':>13} {'sample-passes/s':>16} {'ratio':>6}  where the time goes"
    )
    print(
        f"{'single process (CleanRL-style)':<34} {base['sps']:>13,.0f} {base['passes']:>16,.0f} "
        f"{1.0:>5.2f}x  sampling {base['sample_frac']:.0%}, learning {base['learn_frac']:.0%}"
    )
    print(
        f"{f'surreal launch, {args.actors} actors x 8 envs':<34} {ours['sps']:>13,.0f} "
        f"{ours['passes']:>16,.0f} {ours['sps'] / base['sps']:>5.2f}x  learner busy "
        f"{ours['learn_frac']:.0%}, actors sampled {ours['actor_sps']:,.0f}/s, lag {ours['lag']:.2f}"
    )
    _plot(base, ours)


def _plot(base: dict, ours: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    OUT.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.bar(["single process", "surreal launch"], [base["sps"], ours["sps"]], color=["gray", "C0"])
    ax.set_ylabel("training env steps/s")
    ax.set_title("PPO HalfCheetah-v5 throughput")
    fig.tight_layout()
    fig.savefig(OUT / "ppo_throughput.png", dpi=100)
    print(f"plot: {OUT / 'ppo_throughput.png'}")


if __name__ == "__main__":
    main()
