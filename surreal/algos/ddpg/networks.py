"""DDPG networks: a deterministic actor mu(o) in [-1, 1]^d and a critic Q(o, a)."""

from __future__ import annotations

import torch
from torch import nn


def mlp(sizes: list[int], out_act: nn.Module | None = None) -> nn.Sequential:
    """Linear layers with ReLU between them (and `out_act` after the last one, if given)."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    if out_act is not None:
        layers.append(out_act)
    return nn.Sequential(*layers)


class Actor(nn.Module):
    """mu(o): observation -> action in [-1, 1]^act_dim (the env wrapper rescales to its bounds)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.net = mlp([obs_dim, *hidden, act_dim], nn.Tanh())

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)


class Critic(nn.Module):
    """Q(o, a) -> scalar, on the concatenation of observation and action."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.net = mlp([obs_dim + act_dim, *hidden, 1])

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, act], dim=-1)).squeeze(-1)


def hard_update(target: nn.Module, source: nn.Module) -> None:
    """theta' <- theta."""
    target.load_state_dict(source.state_dict())


@torch.no_grad()
def soft_update(target: nn.Module, source: nn.Module, tau: float) -> None:
    """theta' <- tau theta + (1 - tau) theta' (Polyak averaging)."""
    for tp, sp in zip(target.parameters(), source.parameters(), strict=True):
        tp.mul_(1.0 - tau).add_(sp, alpha=tau)
