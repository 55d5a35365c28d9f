"""The centralized-value actor-critic of MAPPO: the policy sees an agent's own observation, the
value network its observation and the global state."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from surreal.algos.ppo.networks import ActorCritic, mlp
from surreal.api.spaces import EnvInfo


class CentralValueActorCritic(ActorCritic):
    """Input [own observation (`config.actor_obs_dim`), global state]: the actor MLP reads the
    first part, the critic all of it (with `actor_obs_dim` 0, both read all)."""

    def __init__(self, env_info: EnvInfo, config: Any) -> None:
        super().__init__(env_info, config.hidden_sizes, config.activation)
        total = int(np.prod(env_info.obs_shape))
        self.own = config.actor_obs_dim if 0 < config.actor_obs_dim <= total else total
        hidden = list(config.hidden_sizes)
        self.actor = mlp([self.own, *hidden, env_info.action_dim], config.activation, 0.01)

    def distribution(self, obs: torch.Tensor) -> torch.distributions.Distribution:
        """pi(.|own observation)."""
        return super().distribution(obs.flatten(1)[:, : self.own])
