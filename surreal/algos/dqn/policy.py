"""DQNPolicy: greedy over Q(o, .), epsilon-greedy on the actors (`EpsilonGreedy`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from surreal.algos.dqn.config import DQNConfig
from surreal.api import EnvInfo, Policy
from surreal.api.exporting import Exportable


def q_network(env_info: EnvInfo, config: DQNConfig) -> nn.Module:
    """Q(o, .): an MLP from the flat observation to one value per action."""
    sizes = [int(np.prod(env_info.obs_shape)), *config.hidden]
    layers: list[nn.Module] = []
    for a, b in zip(sizes, sizes[1:], strict=False):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(nn.Flatten(), *layers, nn.Linear(sizes[-1], env_info.num_actions))


class DQNPolicy(Policy):
    """argmax_a Q(o, a); replay stores the action index (`unit_action`), the env takes it as is."""

    remote_methods = ("act", "value", "unit_action")

    def __init__(self, config: DQNConfig, env_info: EnvInfo) -> None:
        self.config, self.num_actions = config, env_info.num_actions
        self.obs_shape = tuple(env_info.obs_shape)
        self.model = q_network(env_info, config).requires_grad_(False)

    def unit_action(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        """The greedy action index per observation (int64)."""
        with torch.no_grad():
            q = self.model(torch.as_tensor(obs, dtype=torch.float32))
        return q.argmax(-1).numpy()

    def act(self, obs: np.ndarray, deterministic: bool = False) -> tuple[np.ndarray, dict]:
        actions = self.unit_action(obs)
        return actions, {"unit_action": actions}

    def scale(self, units: np.ndarray) -> np.ndarray:
        """Replay's action indices are the env's actions."""
        return units

    def explorer(self, num_envs: int, index: int, actors: int, seed: int) -> EpsilonGreedy:
        return EpsilonGreedy(self.config, self.num_actions, seed)

    def export_module(self) -> GreedyQ:
        """argmax_a Q(o, a) as one module (`surreal export`)."""
        return GreedyQ(self.model, self.obs_shape)


class GreedyQ(Exportable):
    """obs [B, *obs_shape] -> the greedy action index [B] int64, as `DQNPolicy.act(obs,
    deterministic=True)`."""

    def __init__(self, model: nn.Module, obs_shape: tuple[int, ...]) -> None:
        super().__init__(obs_shape)
        self.model = model

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.model(obs.to(torch.float32)).argmax(-1)


class EpsilonGreedy:
    """An actor's exploration (`surreal.api.offpolicy.Explorer`): with probability epsilon
    (`DQNConfig.epsilon` of the run's progress) a uniformly random action, else the greedy one."""

    def __init__(self, config: DQNConfig, num_actions: int, seed: int) -> None:
        self.config, self.num_actions = config, num_actions
        self.rng = np.random.default_rng(seed)
        self.eps = config.start_e

    def act(
        self, unit_action: Callable[..., np.ndarray], obs: np.ndarray, progress: float
    ) -> np.ndarray:
        self.eps = self.config.epsilon(progress)
        greedy = np.asarray(unit_action(obs, deterministic=True), np.int64)
        explore = self.rng.random(len(greedy)) < self.eps
        return np.where(explore, self.rng.integers(self.num_actions, size=len(greedy)), greedy)

    def random(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(self.num_actions, size=n)

    def reset(self, done: np.ndarray) -> None:
        return None  # no state between steps

    def metrics(self) -> dict[str, Any]:
        return {"actor/epsilon": self.eps}
