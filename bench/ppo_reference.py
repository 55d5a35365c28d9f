"""A single-process PPO loop built from surreal's own pieces, to tell runtime effects from math.

It uses the same `PPOLearner`, `PPOPolicy`, `Actor` and `VectorEnv` that `surreal launch ppo`
runs, with the same config (`--set` overrides, defaults per task family), but in one process and
synchronously: every simulated actor collects one segment with the newest parameters (or, with
`--lag N`, with the parameters of N versions ago), the learner learns on the stacked segments,
and the policies get the new parameters. Comparing its curve with the distributed run's on the
same machine shows what the runtime (policy lag, parameter shipping, batch composition) changes.

    python bench/ppo_reference.py --env gym:CartPole-v1 --actors 4 --steps 100000 --seeds 1 2 3

Prints one line per seed: the steps at which greedy evaluation first reached the goal, the best
and last evaluation, and the training return's best and its last-third minimum.
"""

from __future__ import annotations

import argparse
import collections
import time

import numpy as np


def run(
    env_id: str,
    actors: int,
    steps: int,
    seed: int,
    overrides: list[str],
    lag: int = 0,
    eval_every: int = 10_000,
    goal: float | None = None,
) -> dict:
    """One synchronous run; returns its curves (train: (step, mean return), eval: (step, mean))."""
    import torch

    from surreal.algos.families import apply_family_defaults
    from surreal.algos.ppo import PPOLearner
    from surreal.api.config import Config, apply_overrides
    from surreal.api.core import Actor
    from surreal.envs import VectorEnv, env_info
    from surreal.runtime.processes.evaluator import evaluate

    torch.set_num_threads(1)
    cfg = Config(algo=PPOLearner.config_class())
    cfg.env.id, cfg.run.actors, cfg.run.steps, cfg.run.seed = env_id, actors, steps, seed
    apply_family_defaults(cfg)
    apply_overrides(cfg, overrides)
    torch.manual_seed(seed)
    np.random.seed(seed)
    info = env_info(env_id, cfg.env)
    learner = PPOLearner.create(cfg, info)
    policies, workers = [], []
    for i in range(actors):
        policy = PPOLearner.make_policy(cfg.algo, info)
        env = VectorEnv(env_id, cfg.env, seed=seed + 1000 * (i + 1))
        policies.append(policy)
        workers.append(Actor(env, policy, cfg.actor.rollout_length))
    eval_policy = PPOLearner.make_policy(cfg.algo, info)
    eval_env = VectorEnv(env_id, cfg.env, seed=seed + 999, num_envs=10)
    history = collections.deque([learner.params()], maxlen=lag + 1)
    for p in policies:
        p.load_params(history[0])
    step, next_eval = 0, 0
    train, evals, recent = [], [], []
    while step < steps:
        segments = [w.rollout() for w in workers]
        batch = {k: np.stack([s[k] for s in segments]) for k in segments[0]}
        learner.progress = step / steps
        learner.learn(batch)
        step += int(np.prod(batch["reward"].shape))
        history.append(learner.params())
        for p in policies:
            p.load_params(history[0])
        for w in workers:
            recent.extend(w.pop_episodes()[0])
        if len(recent) >= 10:
            train.append((step, float(np.mean(recent))))
            recent = []
        if step >= next_eval:
            eval_policy.load_params(history[-1])
            evals.append((step, float(np.mean(evaluate(eval_policy, eval_env, 10)))))
            next_eval = step + eval_every
            if goal is not None and evals[-1][1] >= goal:
                break
    return {"train": train, "eval": evals}


def summarize(curves: dict, goal: float) -> str:
    """first goal step, best/last eval, best train return and the last third's minimum."""
    evals, train = curves["eval"], curves["train"]
    first = next((s for s, v in evals if v >= goal), None)
    vals = [v for _, v in train] or [float("nan")]
    third = vals[2 * len(vals) // 3 :] or vals
    best = max(vals) if vals else float("nan")
    return (
        f"goal@{first} best_eval={max(v for _, v in evals):.0f} last_eval={evals[-1][1]:.0f} "
        f"best_train={best:.0f} last_third_min={min(third):.0f} "
        f"last_train={vals[-1] if vals else float('nan'):.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="gym:CartPole-v1")
    parser.add_argument("--actors", type=int, default=4)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--lag", type=int, default=0, help="policy lag in versions (0: sync)")
    parser.add_argument("--goal", type=float, default=475.0)
    parser.add_argument("--stop-at-goal", action="store_true")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    args = parser.parse_args()
    for seed in args.seeds:
        t0 = time.monotonic()
        curves = run(
            args.env,
            args.actors,
            args.steps,
            seed,
            args.overrides,
            lag=args.lag,
            goal=args.goal if args.stop_at_goal else None,
        )
        wall = time.monotonic() - t0
        print(
            f"seed={seed} lag={args.lag} {' '.join(args.overrides)} "
            f"{summarize(curves, args.goal)} wall={wall:.0f}s",
            flush=True,
        )
        print("  eval:", [(s // 1000, round(v)) for s, v in curves["eval"]], flush=True)


if __name__ == "__main__":
    main()
