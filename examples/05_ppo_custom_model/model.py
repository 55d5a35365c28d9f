"""A network of your own for the built-in PPO, swapped in with one flag, no subclassing:

    surreal launch ppo --env gym:CartPole-v1 --set algo.model=examples/05_ppo_custom_model/model.py:SharedTrunk

PPO builds `Class(env_info, config)` in the learner and in every actor and evaluator
(`Learner.make_model`), trains it, and ships its weights; the class needs only two methods:
`distribution(obs)` (the action distribution for a batch of normalized observations) and
`value(obs)` (V(s), one number per observation).
"""

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Normal


def layer(n_in: int, n_out: int, std: float = np.sqrt(2)) -> nn.Linear:
    """A linear layer with orthogonal weights (the PPO implementation details)."""
    linear = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(linear.weight, std)
    nn.init.zeros_(linear.bias)
    return linear


class SharedTrunk(nn.Module):
    """One trunk shared by the policy and value heads (PPO's default uses two separate MLPs)."""

    def __init__(self, env_info, config) -> None:
        super().__init__()
        obs_dim, width = int(np.prod(env_info.obs_shape)), 64
        self.discrete = env_info.discrete
        self.trunk = nn.Sequential(layer(obs_dim, width), nn.Tanh(), layer(width, width), nn.Tanh())
        self.policy_head = layer(width, env_info.action_dim, std=0.01)
        self.value_head = layer(width, 1, std=1.0)
        if not self.discrete:
            self.log_std = nn.Parameter(torch.zeros(env_info.action_dim))

    def distribution(self, obs: torch.Tensor) -> torch.distributions.Distribution:
        out = self.policy_head(self.trunk(obs.flatten(1)))
        if self.discrete:
            return Categorical(logits=out)
        return Normal(out, self.log_std.exp().expand_as(out))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.value_head(self.trunk(obs.flatten(1))).squeeze(-1)
