"""SAC's policy network: a Gaussian over u, squashed by tanh into actions in [-1, 1]^act_dim."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from surreal.algos.ddpg.networks import mlp

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0
"""The range the policy's log standard deviation is squashed into (CleanRL's)."""


class GaussianActor(nn.Module):
    """pi(.|o): mean and log-std heads on one MLP trunk; the action is tanh(u), u ~ N(mean, std)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.trunk = mlp([obs_dim, *hidden], nn.ReLU()) if hidden else nn.Identity()
        width = hidden[-1] if hidden else obs_dim
        self.mean = nn.Linear(width, act_dim)
        self.log_std = nn.Linear(width, act_dim)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, log_std) of u, each [B, act_dim]; log_std within [LOG_STD_MIN, LOG_STD_MAX]."""
        h = self.trunk(obs)
        log_std = torch.tanh(self.log_std(h))
        return self.mean(h), LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1.0)


class TanhMean(nn.Module):
    """tanh(mean): the greedy action in [-1, 1] of a `GaussianActor` (`surreal export`)."""

    def __init__(self, actor: GaussianActor) -> None:
        super().__init__()
        self.actor = actor

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.actor(obs)[0])


def tanh_log_det(u: torch.Tensor) -> torch.Tensor:
    """log |d tanh(u) / du| = log(1 - tanh(u)^2), per component, in a form that stays finite
    for large |u|: 2 (log 2 - u - softplus(-2u))."""
    return 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))


def squashed_sample(
    mean: torch.Tensor, log_std: torch.Tensor, eps: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The action a = tanh(u), u = mean + std * eps (reparameterized: gradients flow to mean and
    log_std), and its log-density log pi(a|o) [B]: the Gaussian's minus the tanh correction."""
    u = mean + log_std.exp() * eps
    gaussian = -0.5 * eps.pow(2) - log_std - 0.5 * math.log(2.0 * math.pi)
    return torch.tanh(u), (gaussian - tanh_log_det(u)).sum(-1)
