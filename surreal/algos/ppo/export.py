"""PPO's greedy action as one module for `surreal export`: the MLP's, and ppo-vision's with its
LSTM state as input and output (docs/export.md)."""

from __future__ import annotations

import torch
from torch import nn

from surreal.algos.ppo.networks import greedy
from surreal.api.exporting import Exportable, ObsNormalizer


class GreedyActorCritic(Exportable):
    """obs [B, *obs_shape] -> the most likely action: [B] int64 (discrete) or the Gaussian's
    mean [B, action_dim] float32, as `PPOPolicy.act(obs, deterministic=True)`."""

    def __init__(self, model: nn.Module, normalizer: ObsNormalizer, discrete: bool) -> None:
        super().__init__(tuple(normalizer.mean.shape))
        self.model, self.normalizer, self.discrete = model, normalizer, discrete

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        action = greedy(self.model.distribution(self.normalizer(obs)))
        return action.to(torch.int64) if self.discrete else action.to(torch.float32)


class GreedyRecurrent(Exportable):
    """(obs [B, D], lstm_h [B, L], lstm_c [B, L]) -> (action, lstm_h, lstm_c): ppo-vision's
    greedy action and the LSTM state for the next step, as `VisionPolicy.act(obs,
    deterministic=True)`. Start each episode with zeros for both states."""

    input_names = ("obs", "lstm_h", "lstm_c")
    output_names = ("action", "lstm_h_out", "lstm_c_out")

    def __init__(
        self, model: nn.Module, normalizer: ObsNormalizer, obs_dim: int, image_size: int
    ) -> None:
        super().__init__((obs_dim,))
        self.model, self.normalizer, self.image_size = model, normalizer, image_size
        self.discrete = bool(model.discrete)

    def example_inputs(self, batch: int) -> tuple[torch.Tensor, ...]:
        """Images of 0-255 noise and N(0, 1) proprioception, states from N(0, 1)."""
        pixels = self.image_size * self.image_size * 3
        obs = torch.randn(batch, *self.obs_shape)
        obs[:, :pixels] = torch.randint(0, 256, (batch, pixels)).float()
        state = torch.randn(2, batch, self.model.lstm_size)
        return obs, state[0], state[1]

    def forward(
        self, obs: torch.Tensor, lstm_h: torch.Tensor, lstm_c: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        obs = obs.to(torch.float32)
        pixels = self.image_size * self.image_size * 3
        image = obs[:, :pixels].reshape(-1, self.image_size, self.image_size, 3)
        features, (h, c) = self.model.step(
            image, self.normalizer(obs[:, pixels:]), (lstm_h, lstm_c)
        )
        action = self.model.greedy(self.model.distribution(features))
        action = action.to(torch.int64) if self.discrete else action.to(torch.float32)
        return action, h, c
