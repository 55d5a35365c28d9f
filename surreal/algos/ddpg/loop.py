"""A single-process DDPG loop: the baseline for benchmarks and the reference for the distributed run."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from surreal.algos.ddpg.config import DDPGConfig
from surreal.algos.ddpg.learning import DDPG
from surreal.algos.ddpg.noise import make_noise
from surreal.algos.ddpg.nstep import NStepWriter, pack_chunk
from surreal.runtime.processes.replay_uniform import UniformSampler, UniformStorage


def make_gym_env(env_id: str, seed: int | None = None):
    """A gymnasium env (ids with or without the `gym:` prefix) with a Box action space."""
    env = gym.make(env_id.removeprefix("gym:"))
    if seed is not None:
        env.reset(seed=seed)
        env.action_space.seed(seed)
    return env


def scale_action(env, action: np.ndarray) -> np.ndarray:
    """Map an action in [-1, 1]^d onto the env's Box bounds: center + a x half-range (on bounds
    [-1, 1] the action itself, bit for bit, as CleanRL's `bias + a * scale`)."""
    low, high = env.action_space.low, env.action_space.high
    return (high + low) / 2.0 + np.clip(action, -1.0, 1.0) * ((high - low) / 2.0)


def evaluate(env, act: Callable[[np.ndarray], np.ndarray], episodes: int, seed: int) -> float:
    """Mean undiscounted return of the greedy policy over `episodes` episodes."""
    total = 0.0
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        done = False
        while not done:
            obs, rew, term, trunc, _ = env.step(scale_action(env, act(obs)))
            total += float(rew)
            done = term or trunc
    return total / episodes


@dataclass
class LoopResult:
    """What a run of the loop produced."""

    evals: list[tuple[int, float]] = field(default_factory=list)  # (env step, mean eval return)
    env_steps: int = 0
    updates: int = 0
    wall_s: float = 0.0


@dataclass
class LoopDraws:
    """Random draws for the loop from elsewhere (None: its own); a test drives the loop with a
    reference program's draws to compare the two step for step (tests/surreal/test_td3_loop)."""

    warmup: Callable[[int], np.ndarray] | None = None
    """step -> a uniformly random action in [-1, 1]^d for a warm-up step."""
    noise: Any = None
    """The exploration noise process (`make_noise`'s interface: a call draws, `reset()`)."""


def _explore(algo: Any, obs: np.ndarray, noise: Any, warmup: Callable[[], np.ndarray] | None):
    """The next action in [-1, 1]: `warmup()` while the replay warms up, else mu(o) + noise."""
    if warmup is not None:
        return warmup()
    return np.clip(algo.act(obs) + noise(), -1.0, 1.0)


def train(
    env_id: str,
    config: DDPGConfig,
    total_steps: int,
    seed: int = 0,
    eval_every: int = 2_000,
    eval_episodes: int = 5,
    stop_at: float | None = None,
    log: Callable[[dict], None] | None = None,
    draws: LoopDraws | None = None,
) -> tuple[object, LoopResult]:
    """Run DDPG in one process; stops early once a mean eval return reaches `stop_at`."""
    torch.set_num_threads(1)
    env, eval_env = make_gym_env(env_id, seed), make_gym_env(env_id, seed + 1000)
    obs_dim, act_dim = env.observation_space.shape[0], env.action_space.shape[0]
    algo = DDPG(obs_dim, act_dim, config, seed)
    storage = UniformStorage(config.replay_capacity, dedup=config.dedup_obs)
    sampler = UniformSampler(config.replay_start, seed)
    writer = NStepWriter(config.n_step, config.gamma)
    draws = draws or LoopDraws()
    noise = draws.noise or make_noise(config.noise, act_dim, config.sigma, config.ou_theta, seed)
    warmup = draws.warmup or (
        lambda step: np.random.default_rng(seed + step).uniform(-1, 1, act_dim).astype(np.float32)
    )
    result, start, debt, metrics = LoopResult(), time.perf_counter(), 0.0, {}
    obs, _ = env.reset(seed=seed)
    for step in range(1, total_steps + 1):
        warming_up = len(storage) < config.replay_start
        action = _explore(algo, obs, noise, partial(warmup, step) if warming_up else None)
        next_obs, rew, term, trunc, _ = env.step(scale_action(env, action))
        done = writer.step(obs, action, rew, next_obs, term, trunc)
        if done:
            storage.add(pack_chunk(done, config.dedup_obs))
        obs = next_obs
        if term or trunc:
            obs, _ = env.reset()
            noise.reset()
        if sampler.ready(storage):
            debt += config.updates_per_step
            while debt >= 1.0:
                metrics = algo.update(sampler.sample(storage, config.batch_size))
                result.updates += 1
                debt -= 1.0
        if step % eval_every == 0:
            ret = evaluate(eval_env, algo.act, eval_episodes, seed + 10_000)
            result.evals.append((step, ret))
            if log is not None:
                log(
                    {"global_step": step, "charts/eval_return": ret}
                    | {k: float(v) for k, v in metrics.items()}
                )
            if stop_at is not None and ret >= stop_at:
                result.env_steps = step
                break
        result.env_steps = step
    result.wall_s = time.perf_counter() - start
    return algo, result
