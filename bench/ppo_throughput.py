"""PPO training throughput on HalfCheetah-v5: env steps/s sampled *and* consumed by the learner,
`surreal launch` (actors, buffer, learner as processes) beside a single-process CleanRL-style loop
with the same hyperparameters (2048 steps per update, 10 epochs, 32 minibatches), in alternating
rounds.

    .venv/bin/python bench/ppo_throughput.py [--seconds 60] [--actors 2] [--rounds 3] [--threads 1]

Both sides are measured the same way (bench/peers/stats.py): from their own learner step counter
(one sample per update: the loop's own, surreal's metrics.jsonl), start-up reported apart, and a
window that starts `--skip` seconds after the first update and lasts `--seconds`. Both learners
run `--threads` torch threads (actors 1). Rounds alternate which side goes first; the table gives
medians and [min-max], ratios paired round by round, and the load average. The single-process
loop is surreal's own PPO code in one process; `bench/peers/run.py` runs CleanRL's file itself.
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

sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
from stats import paired_ratios, spread, steady_rate  # noqa: E402
from systems import _surreal_metrics  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
ENV = "gym:HalfCheetah-v5"
BATCH, EPOCHS, MINIBATCHES = 2048, 10, 32


def single_process(seconds: float, threads: int = 1, skip: float = 20.0) -> dict[str, float]:
    """CleanRL's loop: 1 env, one policy call per step, then the update; same PPO code. Runs for
    `skip` s after its first update plus `seconds`; rates over that window."""
    import torch

    from surreal.algos.ppo import PPOConfig, PPOLearner
    from surreal.api.config import EnvConfig
    from surreal.api.core import Actor
    from surreal.envs import VectorEnv

    launched = time.perf_counter()
    torch.set_num_threads(threads)
    env_config = EnvConfig(id=ENV, num_envs=1, normalize_reward=True)
    venv = VectorEnv(ENV, env_config, seed=0)
    config = PPOConfig(update_epochs=EPOCHS, num_minibatches=MINIBATCHES)
    learner = PPOLearner(config, venv.info)
    policy = PPOLearner.make_policy(config, venv.info)
    actor = Actor(venv, policy, rollout_length=BATCH)
    samples, phases, steps = [(0.0, 0)], [], 0
    while len(samples) < 3 or samples[-1][0] - samples[1][0] < skip + seconds:
        policy.load_params(learner.params())
        t0 = time.perf_counter()
        segment = actor.rollout()
        t1 = time.perf_counter()
        learner.learn({k: v[None] for k, v in segment.items()})
        t2 = time.perf_counter()
        steps += BATCH
        samples.append((t2 - launched, steps))
        phases.append((t2 - launched, t1 - t0, t2 - t1))
    window = steady_rate(samples, skip)
    start = window.startup_s + skip
    inside = [(s, le) for t, s, le in phases if t > start and t - (s + le) >= start - 1e-9]
    return {
        "sps": window.rate,
        "startup_s": window.startup_s,
        "sample_frac": sum(s for s, _ in inside) / window.seconds,
        "learn_frac": sum(le for _, le in inside) / window.seconds,
        "passes": window.rate * EPOCHS,
    }


def surreal(
    seconds: float,
    actors: int,
    warmup: float = 20.0,
    rollout: int | None = None,
    overrides: tuple[str, ...] = (),
    threads: int = 1,
) -> dict[str, float]:
    """`surreal launch ppo` with the same batch (actors x 8 envs x rollout = 2048 steps), or
    `rollout` steps per segment and extra `--set` `overrides` (e.g. `run.device=cuda`); measured
    over `seconds` starting `warmup` s after the learner's first batch, from metrics.jsonl."""
    rollout = rollout or max(BATCH // (actors * 8), 1)
    sets = {
        "run.torch_threads": threads,
        "env.num_envs": 8,
        "actor.rollout_length": rollout,
        "algo.update_epochs": EPOCHS,
        "algo.num_minibatches": MINIBATCHES,
        "env.normalize_reward": "true",
        "eval.every_s": 0,
    }
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "runs" / "bench" / "t1"
        cmd = [
            *(sys.executable, "-m", "surreal", "launch", "ppo", "--env", ENV),
            *("--actors", str(actors), "--steps", str(10**9), "--folder", f"{tmp}/runs"),
            *("--name", "bench", "--trial", "t1", "--quiet"),
            *(a for k, v in sets.items() for a in ("--set", f"{k}={v}")),
            *(arg for item in overrides for arg in ("--set", item)),
        ]
        env = dict(os.environ, SYMPHONY_HOME=f"{tmp}/home")
        launched = time.time()
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            while _status(run).get("global_step", 0) == 0 and time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise RuntimeError(f"surreal launch exited with {proc.returncode}: {cmd}")
                time.sleep(0.5)  # polling the run's status for the learner's first batch
            end = time.monotonic() + warmup + seconds
            while time.monotonic() < end and proc.poll() is None:
                time.sleep(0.5)  # the window's wall budget
            status = _status(run)
        finally:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=90)
        samples = _surreal_metrics(run / "metrics.jsonl", launched).steps
        window = steady_rate(samples, warmup)
        if window is None:
            raise RuntimeError(f"surreal launch measured no window: {len(samples)} samples")
        learn = _learn_time(run, launched, window.startup_s + warmup)
    return {
        "sps": window.rate,
        "startup_s": window.startup_s,
        "learn_frac": learn / window.seconds,
        "lag": status.get("charts/policy_lag", 0.0),
        "passes": window.rate * EPOCHS,
    }


def _status(run: Path) -> dict:
    try:
        return json.loads((run / "status.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _learn_time(run: Path, launched: float, after: float) -> float:
    """Seconds the learner spent in learn() in updates recorded `after` s past launch."""
    total = 0.0
    for line in (run / "metrics.jsonl").read_text().splitlines():
        if '"charts/learn_time"' in line:
            rec = json.loads(line)
            total += rec["value"] if rec["time"] - launched > after else 0.0
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured window per run")
    parser.add_argument("--skip", type=float, default=20.0, help="s after the first update")
    parser.add_argument("--actors", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of both learners")
    args = parser.parse_args()
    base, ours, loads = [], [], [os.getloadavg()[0]]
    for r in range(args.rounds):
        sides = [("base", base), ("ours", ours)]
        for side, results in sides if r % 2 == 0 else sides[::-1]:
            if side == "base":
                results.append(single_process(args.seconds, args.threads, args.skip))
            else:
                results.append(surreal(args.seconds, args.actors, args.skip, threads=args.threads))
            loads.append(os.getloadavg()[0])
        print(f"round {r + 1}: single {base[-1]['sps']:,.0f}, surreal {ours[-1]['sps']:,.0f}")
    ratios = spread(paired_ratios([o["sps"] for o in ours], [b["sps"] for b in base]))
    print(
        f"\nPPO HalfCheetah-v5, {os.cpu_count()} cores, batch {BATCH}, {EPOCHS} epochs x "
        f"{MINIBATCHES} minibatches, {args.rounds} alternating rounds, {args.seconds:.0f} s "
        f"windows from {args.skip:.0f} s after each side's first update, {args.threads} torch "
        f"thread(s) per learner, load average {min(loads):.1f}-{max(loads):.1f}"
    )
    print(
        f"{'setup':<34} {'train steps/s':>20} {'start-up s':>16} {'ratio':>18}  where the time goes"
    )
    col = lambda rows, k: str(spread([row[k] for row in rows]))  # noqa: E731
    frac = lambda rows, k: f"{spread([row[k] for row in rows]).median:.0%}"  # noqa: E731
    print(
        f"{'single process (CleanRL-style)':<34} {col(base, 'sps'):>20} "
        f"{col(base, 'startup_s'):>16} {'1.00x':>18}  sampling {frac(base, 'sample_frac')}, "
        f"learning {frac(base, 'learn_frac')}"
    )
    print(
        f"{f'surreal launch, {args.actors} actors x 8 envs':<34} {col(ours, 'sps'):>20} "
        f"{col(ours, 'startup_s'):>16} {str(ratios) + 'x':>18}  learner busy "
        f"{frac(ours, 'learn_frac')}, lag {spread([o['lag'] for o in ours]).median:.2f}"
    )
    _plot(base, ours)


def _plot(base: list[dict], ours: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    OUT.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=(5, 4))
    for i, rows in enumerate((base, ours)):
        rates = [row["sps"] for row in rows]
        ax.scatter([i] * len(rates), rates, color=["gray", "C0"][i])
        ax.hlines(spread(rates).median, i - 0.3, i + 0.3, color=["gray", "C0"][i])
    ax.set_xticks([0, 1], ["single process", "surreal launch"])
    ax.set_ylabel("training env steps/s (rounds, median bar)")
    ax.set_title("PPO HalfCheetah-v5 throughput")
    fig.tight_layout()
    fig.savefig(OUT / "ppo_throughput.png", dpi=100)
    print(f"plot: {OUT / 'ppo_throughput.png'}")


if __name__ == "__main__":
    main()
