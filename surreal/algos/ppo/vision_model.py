"""The paper's vision model: conv encoder on the image, concat proprioception, LSTM, actor/critic."""

from __future__ import annotations

import torch
from torch import nn

from surreal.algos.ppo.networks import ActorCritic, layer_init, mlp
from surreal.algos.ppo.vision_layout import proprio_dim
from surreal.api.spaces import EnvInfo

State = tuple[torch.Tensor, torch.Tensor]
"""The LSTM state (h, c), each [batch, lstm_size]."""


class ConvLSTMActorCritic(ActorCritic):
    """Image -> conv encoder -> flatten, concat proprio -> LSTM(lstm_size) -> policy and value heads.

    The heads are ActorCritic's MLPs applied to the LSTM output, so `distribution`, `value`,
    `log_prob`, `entropy` and `greedy` take LSTM features instead of observations.
    """

    def __init__(
        self,
        env_info: EnvInfo,
        image_size: int = 84,
        lstm_size: int = 100,
        hidden_sizes: tuple[int, ...] = (64, 64),
        activation: str = "tanh",
    ) -> None:
        nn.Module.__init__(self)
        self.image_size, self.lstm_size = image_size, lstm_size
        self.discrete = env_info.discrete
        self.encoder = nn.Sequential(
            layer_init(nn.Conv2d(3, 16, 8, stride=4)),
            nn.ReLU(),
            layer_init(nn.Conv2d(16, 32, 4, stride=2)),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            conv_out = self.encoder(torch.zeros(1, 3, image_size, image_size)).shape[1]
        self.lstm = nn.LSTMCell(conv_out + proprio_dim(env_info, image_size), lstm_size)
        self.critic = mlp([lstm_size, *hidden_sizes, 1], activation, out_std=1.0)
        self.actor = mlp([lstm_size, *hidden_sizes, env_info.action_dim], activation, out_std=0.01)
        if not self.discrete:
            self.log_std = nn.Parameter(torch.zeros(env_info.action_dim))

    def initial_state(self, batch: int) -> State:
        """Zeros on the model's device: the memory at the start of an episode."""
        zeros = torch.zeros(batch, self.lstm_size, device=next(self.parameters()).device)
        return zeros, zeros.clone()

    def encode(self, image: torch.Tensor, proprio: torch.Tensor) -> torch.Tensor:
        """LSTM inputs from images [B, H, W, 3] (0-255) and normalized proprio [B, P]."""
        x = self.encoder(image.permute(0, 3, 1, 2) / 255.0)
        return torch.cat([x, proprio], dim=1)

    def step(
        self, image: torch.Tensor, proprio: torch.Tensor, state: State
    ) -> tuple[torch.Tensor, State]:
        """One time step: (features [B, lstm_size], the next state)."""
        h, c = self.lstm(self.encode(image, proprio), state)
        return h, (h, c)

    def unroll(
        self, image: torch.Tensor, proprio: torch.Tensor, state: State, starts: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Run over sub-trajectories [T, B, ...] from `state`, zeroing the memory before step t
        where `starts[t]` (a new episode began there).

        Returns:
            features [T, B, lstm_size], and the states (h, c) each step started from [T, B, L].
        """
        steps = image.shape[0]
        inputs = self.encode(image.flatten(0, 1), proprio.flatten(0, 1))
        inputs = inputs.view(steps, image.shape[1], -1)
        h, c = state
        feats, hs, cs = [], [], []
        for t in range(steps):
            keep = (1.0 - starts[t].float()).unsqueeze(1)
            h, c = h * keep, c * keep
            hs.append(h)
            cs.append(c)
            h, c = self.lstm(inputs[t], (h, c))
            feats.append(h)
        return torch.stack(feats), torch.stack(hs), torch.stack(cs)
