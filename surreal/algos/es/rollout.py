"""ES rollouts: one episode of a (perturbed) policy, and one antithetic pair."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from surreal.algos.es.noise_table import SharedNoiseTable
from surreal.algos.es.policy import ESPolicy


@dataclass
class PairResult:
    """Returns of theta + sigma eps and theta - sigma eps, and what the rollouts observed."""

    r_pos: float
    r_neg: float
    steps: int
    obs_sum: np.ndarray
    obs_sumsq: np.ndarray
    obs_count: int


def rollout(
    env,
    policy: ESPolicy,
    theta: np.ndarray,
    obs_mean: np.ndarray,
    obs_std: np.ndarray,
    rng: np.random.Generator | None,
    max_steps: int = 0,
    seed: int | None = None,
) -> tuple[float, int, np.ndarray, np.ndarray]:
    """One episode: (return, steps, sum of raw observations, sum of their squares)."""
    layers = policy.unflatten(theta)
    obs, _ = env.reset(seed=seed)
    obs = np.asarray(obs, np.float64)
    total, steps = 0.0, 0
    s, sq = np.zeros_like(obs), np.zeros_like(obs)
    while True:
        s += obs
        sq += obs * obs
        action = policy.act(layers, ((obs - obs_mean) / obs_std).astype(np.float32), rng)
        obs, rew, term, trunc, _ = env.step(action)
        obs = np.asarray(obs, np.float64)
        total += float(rew)
        steps += 1
        if term or trunc or (max_steps and steps >= max_steps):
            return total, steps, s, sq


def evaluate_pair(
    env,
    policy: ESPolicy,
    theta: np.ndarray,
    obs_mean: np.ndarray,
    obs_std: np.ndarray,
    noise: SharedNoiseTable,
    index: int,
    sigma: float,
    seed: int,
    max_steps: int = 0,
) -> PairResult:
    """Run theta + sigma eps and theta - sigma eps from the same env seed (antithetic sampling)."""
    eps = noise.get(index, theta.size)
    rng = np.random.default_rng(seed)
    r_pos, n_pos, s1, q1 = rollout(
        env, policy, theta + sigma * eps, obs_mean, obs_std, rng, max_steps, seed
    )
    r_neg, n_neg, s2, q2 = rollout(
        env, policy, theta - sigma * eps, obs_mean, obs_std, rng, max_steps, seed
    )
    return PairResult(r_pos, r_neg, n_pos + n_neg, s1 + s2, q1 + q2, n_pos + n_neg)
