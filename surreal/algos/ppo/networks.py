"""MLP actor-critic: a categorical or diagonal-Gaussian policy head and a value head."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Normal

from surreal.api.registry import load_class
from surreal.api.spaces import EnvInfo

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU}
# Argument validation costs more than the math for these small batches (actors call it per step).
torch.distributions.Distribution.set_default_validate_args(False)


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias: float = 0.0) -> nn.Linear:
    """Orthogonal weights and constant bias (the PPO implementation details)."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


def mlp(sizes: list[int], activation: str, out_std: float) -> nn.Sequential:
    """Linear layers with `activation` between them; the last layer's init scale is `out_std`."""
    if activation not in _ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        last = i == len(sizes) - 2
        layers.append(
            layer_init(nn.Linear(sizes[i], sizes[i + 1]), out_std if last else np.sqrt(2))
        )
        if not last:
            layers.append(_ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


def log_prob(dist: torch.distributions.Distribution, action: torch.Tensor) -> torch.Tensor:
    """log pi(a|s) per sample: summed over action components unless the policy is categorical."""
    if isinstance(dist, Categorical):
        return dist.log_prob(action.long())
    return dist.log_prob(action).sum(-1)


def entropy(dist: torch.distributions.Distribution) -> torch.Tensor:
    """Entropy per sample (summed over action components unless categorical)."""
    ent = dist.entropy()
    return ent if isinstance(dist, Categorical) else ent.sum(-1)


def greedy(dist: torch.distributions.Distribution) -> torch.Tensor:
    """The most likely action (the mean of a Gaussian)."""
    return dist.probs.argmax(-1) if isinstance(dist, Categorical) else dist.mean


def make_model(config: Any, env_info: EnvInfo) -> nn.Module:
    """The network PPO's learner trains and its policy runs.

    `algo.model` empty: `ActorCritic(env_info, algo.hidden_sizes, algo.activation)`. Otherwise a
    class `path/file.py:Class` (or `package.module:Class`), built as `Class(env_info, config)`: an
    `nn.Module` with `distribution(obs) -> torch Distribution` (Categorical for discrete actions)
    and `value(obs) -> [batch]` over batches of (normalized) observations [batch, *obs_shape].
    """
    if not config.model:
        return ActorCritic(env_info, config.hidden_sizes, config.activation, config.log_std_init)
    return load_class(config.model, "algo.model")(env_info, config)


class ActorCritic(nn.Module):
    """Separate policy and value MLPs over a flat observation."""

    def __init__(
        self,
        env_info: EnvInfo,
        hidden_sizes: tuple[int, ...] = (64, 64),
        activation: str = "tanh",
        log_std_init: float = 0.0,
    ) -> None:
        super().__init__()
        obs_dim = int(np.prod(env_info.obs_shape))
        hidden = list(hidden_sizes)
        self.discrete = env_info.discrete
        self.critic = mlp([obs_dim, *hidden, 1], activation, out_std=1.0)
        self.actor = mlp([obs_dim, *hidden, env_info.action_dim], activation, out_std=0.01)
        if not self.discrete:
            self.log_std = nn.Parameter(torch.full((env_info.action_dim,), float(log_std_init)))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(s), shape [batch]."""
        return self.critic(obs.flatten(1)).squeeze(-1)

    def distribution(self, obs: torch.Tensor) -> torch.distributions.Distribution:
        """The action distribution pi(.|s)."""
        out = self.actor(obs.flatten(1))
        if self.discrete:
            return Categorical(logits=out)
        return Normal(out, self.log_std.exp().expand_as(out))

    def log_prob(
        self, dist: torch.distributions.Distribution, action: torch.Tensor
    ) -> torch.Tensor:
        """log pi(a|s), summed over action components for Gaussians."""
        return log_prob(dist, action)

    def entropy(self, dist: torch.distributions.Distribution) -> torch.Tensor:
        """Entropy per sample."""
        return entropy(dist)

    def greedy(self, dist: torch.distributions.Distribution) -> torch.Tensor:
        """The most likely action."""
        return greedy(dist)
