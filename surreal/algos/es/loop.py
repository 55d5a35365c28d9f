"""A single-process ES loop: the baseline beside the master + workers, and the math end to end."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from surreal.algos.es.config import ESConfig
from surreal.algos.es.generation import Generation
from surreal.algos.es.noise_table import SharedNoiseTable
from surreal.algos.es.policy import ESPolicy
from surreal.algos.es.rollout import evaluate_pair, rollout
from surreal.algos.es.state import ESState


def make_env(env_id: str):
    """A gymnasium env from `gym:<id>` or `<id>`."""
    import gymnasium as gym

    return gym.make(env_id.removeprefix("gym:"))


def build(env_id: str, config: ESConfig, seed: int, noise_dir: str | None = None):
    """The env, policy, initial state and noise table that master and workers all start from."""
    env = make_env(env_id)
    obs_dim = int(np.prod(env.observation_space.shape))
    policy = ESPolicy(
        obs_dim, env.action_space, config.hidden, config.action_std, config.discretize
    )
    state = ESState(policy.init_params(seed), obs_dim, config)
    noise = SharedNoiseTable(config.noise_seed, config.noise_size, noise_dir)
    return env, policy, state, noise


def eval_policy(
    env, policy: ESPolicy, state: ESState, episodes: int, seed: int, max_steps: int = 0
) -> float:
    """Mean return of the unperturbed, noiseless policy."""
    rets = [
        rollout(env, policy, state.theta, state.obs_mean, state.obs_std, None, max_steps, seed + i)[
            0
        ]
        for i in range(episodes)
    ]
    return float(np.mean(rets))


@dataclass
class ESResult:
    """What an ES run produced."""

    evals: list[tuple[int, int, float, float]] = field(
        default_factory=list
    )  # gen, steps, wall, return
    env_steps: int = 0
    generations: int = 0
    wall_s: float = 0.0


def train(
    env_id: str,
    config: ESConfig,
    generations: int,
    seed: int = 0,
    stop_at: float | None = None,
    noise_dir: str | None = None,
    log: Callable[[dict], None] | None = None,
) -> tuple[ESState, ESResult]:
    """Run ES in one process for `generations` generations (or until an eval reaches stop_at)."""
    env, policy, state, noise = build(env_id, config, seed, noise_dir)
    rng, result, start = np.random.default_rng(seed), ESResult(), time.perf_counter()
    for g in range(generations):
        indices = np.array(
            [noise.sample_index(rng, policy.num_params) for _ in range(config.population)]
        )
        gen = Generation(g, indices, config.task_timeout)
        while (task := gen.next_task(0.0)) is not None:
            gen.submit(
                task,
                evaluate_pair(
                    env,
                    policy,
                    state.theta,
                    state.obs_mean,
                    state.obs_std,
                    noise,
                    int(indices[task]),
                    config.noise_std,
                    seed * 1_000_003 + g * 1000 + task,
                    config.max_episode_steps,
                ),
            )
        result.env_steps += gen.steps
        state.apply(gen.record(), noise)
        result.generations = g + 1
        metrics = {
            "global_step": result.env_steps,
            "es/generation": g,
            "charts/population_return": gen.mean_return(),
        }
        if config.eval_every and (g + 1) % config.eval_every == 0:
            ret = eval_policy(
                env, policy, state, config.eval_episodes, seed + 7919, config.max_episode_steps
            )
            result.evals.append((g + 1, result.env_steps, time.perf_counter() - start, ret))
            metrics["charts/eval_return"] = ret
            if stop_at is not None and ret >= stop_at:
                break
        if log is not None:
            log(metrics)
    result.wall_s = time.perf_counter() - start
    return state, result
