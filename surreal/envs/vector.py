"""VectorEnv: several environments stepped in one process, reset in the same step they end."""

from __future__ import annotations

from typing import Any

import numpy as np

from surreal.api.config import EnvConfig
from surreal.envs.base import info_from_spaces, make_env


class VectorEnv:
    """Steps `num_envs` wrapped environments in lockstep for batched policy inference.

    An environment that ends is reset within the same `step`: the returned observation is the
    first of the next episode, and `info["final_obs"]` holds the last one (for bootstrapping).

    Args:
        env_id: e.g. "gym:CartPole-v1".
        config: wrapper settings; `config.num_envs` environments unless `num_envs` is given.
        seed: environment i is seeded with `seed + i`.
    """

    def __init__(
        self, env_id: str, config: EnvConfig, seed: int = 0, num_envs: int | None = None
    ) -> None:
        self.num_envs = num_envs or config.num_envs
        self.envs = [make_env(env_id, config, seed=seed + i) for i in range(self.num_envs)]
        self.info = info_from_spaces(self.envs[0].observation_space, self.envs[0].action_space)
        self._first_obs: list[np.ndarray] | None = None

    def reset(self) -> np.ndarray:
        """Reset every environment; returns observations [num_envs, *obs_shape]."""
        return np.stack([np.asarray(env.reset()[0], np.float32) for env in self.envs])

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every environment with its action.

        Returns:
            obs, reward (float32), terminated (bool), truncated (bool), info with `final_obs`
            (None when no episode ended), `episode_returns` and `episode_lengths` (lists).
        """
        n = self.num_envs
        obs = [None] * n
        rewards = np.zeros(n, np.float32)
        terminated = np.zeros(n, bool)
        truncated = np.zeros(n, bool)
        final_obs = None
        returns, lengths = [], []
        for i, env in enumerate(self.envs):
            o, r, term, trunc, info = env.step(actions[i])
            rewards[i], terminated[i], truncated[i] = r, term, trunc
            if term or trunc:
                if final_obs is None:
                    final_obs = np.zeros((n, *np.shape(o)), np.float32)
                final_obs[i] = o
                if "episode" in info:
                    returns.append(info["episode"]["r"])
                    lengths.append(info["episode"]["l"])
                o, _ = env.reset()
            obs[i] = o
        info = {"final_obs": final_obs, "episode_returns": returns, "episode_lengths": lengths}
        return np.stack(obs).astype(np.float32, copy=False), rewards, terminated, truncated, info

    def close(self) -> None:
        """Close every environment."""
        for env in self.envs:
            env.close()
