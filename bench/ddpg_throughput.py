"""DDPG/TD3 env steps/s at 1 update per env step: `surreal launch` beside a single-process loop.

The baseline is a CleanRL-style TD3 loop in this process: one env, act, store, one update per env
step (surreal's own `DDPG` update and uniform replay, 1 torch thread). The other side is
`surreal launch td3 --actors N` (actors, replay, learner, parameter server as processes, paced at
`algo.updates_per_step=1`). Both use the same network, batch and replay warm-up; each measures env
steps stored per second over the same window after the warm-up. Rounds alternate (baseline,
surreal, baseline, ...); the table gives medians and ranges, thread counts and the load average.

    .venv/bin/python bench/ddpg_throughput.py [--rounds 3] [--seconds 30] [--actors 2]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV = "gym:Pendulum-v1"
SETTINGS = {"hidden": (256, 256), "batch_size": 256, "replay_start": 1000}


def single_process(seconds: float, algo: str = "td3") -> float:
    """Env steps/s of the one-process loop (1 update per step) over `seconds` after warm-up."""
    import numpy as np
    import torch

    from surreal.algos.ddpg.config import DDPGConfig
    from surreal.algos.ddpg.learning import DDPG
    from surreal.algos.ddpg.loop import make_gym_env, scale_action
    from surreal.algos.ddpg.noise import make_noise
    from surreal.algos.ddpg.nstep import NStepWriter, pack_chunk
    from surreal.runtime.processes.replay_uniform import UniformSampler, UniformStorage

    torch.set_num_threads(1)
    config = DDPGConfig.td3(**SETTINGS) if algo == "td3" else DDPGConfig(**SETTINGS)
    env = make_gym_env(ENV, 0)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    learner = DDPG(obs_dim, act_dim, config)
    storage = UniformStorage(config.replay_capacity)
    sampler = UniformSampler(config.replay_start, 0)
    writer = NStepWriter(config.n_step, config.gamma)
    noise = make_noise("gaussian", act_dim, config.sigma, config.ou_theta, 0)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    steps, start = 0, None
    while start is None or time.perf_counter() - start < seconds:
        if len(storage) < config.replay_start:
            action = rng.uniform(-1, 1, act_dim).astype(np.float32)
        else:
            action = np.clip(learner.act(obs) + noise(), -1.0, 1.0)
        next_obs, rew, term, trunc, _ = env.step(scale_action(env, action))
        done = writer.step(obs, action, rew, next_obs, term, trunc)
        if done:
            storage.add(pack_chunk(done, False))
        obs = next_obs
        if term or trunc:
            obs, _ = env.reset()
        if sampler.ready(storage):
            learner.update(sampler.sample(storage, config.batch_size))
            if start is None:  # warm-up over: replay_start transitions stored
                start = time.perf_counter()
            steps += 1
    return steps / (time.perf_counter() - start)


def surreal(seconds: float, actors: int, algo: str = "td3", warmup: float = 10.0) -> dict:
    """Env steps/s stored by `surreal launch ALGO --actors N` over `seconds` after the replay's
    warm-up and `warmup` more seconds; also the learner's updates/s."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "runs" / "bench" / "t1"
        sets = {
            "env.num_envs": 1,
            "algo.hidden": "256,256",
            "algo.batch_size": SETTINGS["batch_size"],
            "algo.replay_start": SETTINGS["replay_start"],
            "eval.every_s": 0,
        }
        cmd = [
            sys.executable,
            "-m",
            "surreal",
            "launch",
            algo,
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
            *(a for k, v in sets.items() for a in ("--set", f"{k}={v}")),
        ]
        env = dict(os.environ, SYMPHONY_HOME=f"{tmp}/home")
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while _status(run).get("global_step", 0) <= SETTINGS["replay_start"]:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"surreal launch did not start learning: {cmd}")
                time.sleep(0.5)
            time.sleep(warmup)
            s0, i0, t0 = _counters(run), _iterations(run), time.monotonic()
            time.sleep(seconds)
            s1, i1, t1 = _counters(run), _iterations(run), time.monotonic()
        finally:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=120)
    return {"sps": (s1 - s0) / (t1 - t0), "updates": (i1 - i0) / (t1 - t0)}


def _status(run: Path) -> dict:
    try:
        return json.loads((run / "status.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _counters(run: Path) -> int:
    return int(_status(run).get("global_step", 0))


def _iterations(run: Path) -> int:
    """Learner updates so far: parameter versions x `algo.publish_every` (20)."""
    return 20 * int(_status(run).get("version", 0))


def _fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs):>7.1f} [{min(xs):.1f}-{max(xs):.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--algo", default="td3", choices=["td3", "ddpg"])
    args = parser.parse_args()
    base, ours, loads = [], [], [os.getloadavg()[0]]
    for r in range(args.rounds):
        base.append(single_process(args.seconds, args.algo))
        loads.append(os.getloadavg()[0])
        run = surreal(args.seconds, args.actors, args.algo)
        ours.append(run["sps"])
        loads.append(os.getloadavg()[0])
        print(
            f"round {r + 1}: single {base[-1]:.1f} env steps/s, surreal {ours[-1]:.1f} env "
            f"steps/s ({run['updates']:.0f} updates/s)",
            flush=True,
        )
    ratios = [o / b for o, b in zip(ours, base, strict=True)]
    print(
        f"\n{args.algo.upper()} {ENV}, 1 update per env step, hidden 256x256, batch 256, "
        f"{args.seconds:.0f} s windows, {args.rounds} alternating rounds, {os.cpu_count()} cores, "
        f"load average {min(loads):.1f}-{max(loads):.1f}"
    )
    print(f"{'setup':<46} {'env steps/s median [range]':>28}")
    print(f"{'single process (1 torch thread)':<46} {_fmt(base):>28}")
    print(
        f"{f'surreal launch {args.algo}, {args.actors} actors x 1 env':<46} {_fmt(ours):>28}  "
        f"ratio {statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]"
    )


if __name__ == "__main__":
    main()
