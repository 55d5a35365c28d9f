"""DDPG's, TD3's and SAC's greedy action as one module for `surreal export` (docs/export.md)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from surreal.api.exporting import Exportable


class ClippedActor(nn.Module):
    """mu(o) clipped to [-1, 1]: `DDPGPolicy.unit_action(obs, deterministic=True)`."""

    def __init__(self, actor: nn.Module) -> None:
        super().__init__()
        self.actor = actor

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.actor(obs).clamp(-1.0, 1.0)


class GreedyScaled(Exportable):
    """obs [B, *obs_shape] -> the greedy action in [-1, 1] (`unit`) scaled to the env's bounds
    [low, high]: [B, action_dim] float32, as `DDPGPolicy.act(obs, deterministic=True)`."""

    def __init__(
        self, unit: nn.Module, low: np.ndarray, high: np.ndarray, obs_shape: tuple[int, ...]
    ) -> None:
        super().__init__(obs_shape)
        self.unit = unit
        self.register_buffer("low", torch.as_tensor(np.asarray(low, np.float32)))
        self.register_buffer("span", torch.as_tensor(np.asarray(high - low, np.float32)))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        unit = self.unit(obs.to(torch.float32))
        return self.low + (unit + 1.0) * 0.5 * self.span
