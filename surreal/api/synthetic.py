"""SyntheticEnv: random observations and rewards in short random episodes, for the launch check."""

from __future__ import annotations

import numpy as np

from surreal.api.spaces import EnvInfo


class SyntheticEnv:
    """A VectorEnv look-alike with random observations and rewards and short random episodes."""

    def __init__(self, env_info: EnvInfo, num_envs: int = 2, seed: int = 0) -> None:
        self.info, self.num_envs = env_info, num_envs
        self.rng = np.random.default_rng(seed)
        self.t = np.zeros(num_envs, int)
        self.length = self.rng.integers(3, 12, num_envs)
        self.returns = np.zeros(num_envs)

    def _obs(self, n: int) -> np.ndarray:
        return self.rng.normal(size=(n, *self.info.obs_shape)).astype(np.float32)

    def reset(self) -> np.ndarray:
        self.t[:] = 0
        self.returns[:] = 0
        return self._obs(self.num_envs)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, ...]:
        if len(actions) != self.num_envs:
            raise ValueError(f"act(obs) returned {len(actions)} actions for {self.num_envs} obs")
        self.t += 1
        reward = self.rng.normal(size=self.num_envs).astype(np.float32)
        self.returns += reward
        ended = self.t >= self.length
        terminated = ended & (self.rng.random(self.num_envs) < 0.5)
        truncated = ended & ~terminated
        info = {
            "final_obs": self._obs(self.num_envs) if ended.any() else None,
            "episode_returns": [float(r) for r in self.returns[ended]],
            "episode_lengths": [int(t) for t in self.t[ended]],
        }
        self.t[ended], self.returns[ended] = 0, 0.0
        self.length[ended] = self.rng.integers(3, 12, int(ended.sum()))
        return self._obs(self.num_envs), reward, terminated, truncated, info
