"""Exploration noise for DDPG actors: Gaussian or Ornstein-Uhlenbeck, one scale per actor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def actor_sigma(base: float, spread: float, index: int, count: int) -> float:
    """The noise scale of actor `index` of `count`: geometric from base to base * spread.

    A spread of scales (as in Ape-X / the Surreal DDPG actors) lets some actors explore widely
    while others stay close to the greedy policy. With one actor, or spread 1, every actor uses base.
    """
    if count <= 1 or spread == 1.0:
        return float(base)
    return float(base * spread ** (index / (count - 1)))


class GaussianNoise:
    """Independent N(0, sigma^2) per action component, in units of half the action range."""

    def __init__(self, dim: int, sigma: float, seed: int | None = None) -> None:
        self.dim, self.sigma = dim, sigma
        self.rng = np.random.default_rng(seed)

    def __call__(self) -> np.ndarray:
        """Draw one noise vector."""
        return self.rng.normal(0.0, self.sigma, self.dim).astype(np.float32)

    def reset(self) -> None:
        """Gaussian noise has no state between steps."""


class OUNoise:
    """Ornstein-Uhlenbeck process x += theta (mu - x) dt + sigma sqrt(dt) N(0, 1): correlated in time."""

    def __init__(
        self,
        dim: int,
        sigma: float,
        theta: float = 0.15,
        dt: float = 1e-2,
        seed: int | None = None,
    ) -> None:
        self.dim, self.sigma, self.theta, self.dt = dim, sigma, theta, dt
        self.rng = np.random.default_rng(seed)
        self.x = np.zeros(dim, dtype=np.float64)

    def __call__(self) -> np.ndarray:
        """Advance the process one step and return its state."""
        drift = -self.theta * self.x * self.dt
        self.x = self.x + drift + self.sigma * np.sqrt(self.dt) * self.rng.normal(size=self.dim)
        return self.x.astype(np.float32)

    def reset(self) -> None:
        """Restart the process at its mean (call at every episode start)."""
        self.x[:] = 0.0


def make_noise(kind: str, dim: int, sigma: float, theta: float = 0.15, seed: int | None = None):
    """Build the noise named in the config ("gaussian" or "ou")."""
    if kind == "gaussian":
        return GaussianNoise(dim, sigma, seed)
    if kind == "ou":
        return OUNoise(dim, sigma, theta=theta, seed=seed)
    raise ValueError(f"unknown noise {kind!r}; use 'gaussian' or 'ou'")


class NoiseExplorer:
    """DDPG's exploration for one actor (`surreal.api.offpolicy.Explorer`): the policy's `explore`
    with one noise process per env at this actor's scale (`actor_sigma`), uniform random actions
    in [-1, 1] before the first parameters."""

    def __init__(
        self, policy: Any, dim: int, config: Any, num_envs: int, index: int, actors: int, seed: int
    ) -> None:
        self.policy, self.dim = policy, dim
        self.sigma = actor_sigma(config.sigma, config.sigma_spread, index, actors)
        self.noises = [
            make_noise(config.noise, self.dim, self.sigma, config.ou_theta, seed + i)
            for i in range(num_envs)
        ]

    def act(self, unit_action: Callable[..., np.ndarray], obs: np.ndarray, progress: float):
        """mu(o) plus each env's noise (`DDPGPolicy.explore`; SAC samples its policy instead)."""
        return self.policy.explore(unit_action, obs, self.noises)

    def random(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(-1, 1, (n, self.dim)).astype(np.float32)

    def reset(self, done: np.ndarray) -> None:
        for i in np.flatnonzero(done):
            self.noises[i].reset()

    def metrics(self) -> dict[str, float]:
        return {"actor/sigma": self.sigma}
