"""VisionPolicy: the actor-side conv+LSTM policy; it carries the LSTM state and ships it per step."""

from __future__ import annotations

import numpy as np
import torch

from surreal.algos.ppo.config import PPOConfig
from surreal.algos.ppo.export import GreedyRecurrent
from surreal.algos.ppo.policy import load_model_params
from surreal.algos.ppo.vision_layout import proprio_dim, split_obs
from surreal.algos.ppo.vision_model import ConvLSTMActorCritic, State
from surreal.api.core import Batch, Params, Policy
from surreal.api.exporting import ObsNormalizer
from surreal.api.normalizer import RunningNormalizer
from surreal.api.spaces import EnvInfo


class VisionPolicy(Policy):
    """Acts with `ConvLSTMActorCritic`, one LSTM state per environment.

    Each step's extras hold `lstm_h` and `lstm_c`, the state the step started from, so the learner
    can restart the LSTM at any step of a stored segment (truncated BPTT from stored states).
    `to(device)` moves the network and the memory (a policy worker with
    `actor.inference_device`); outputs come back as CPU numpy arrays.
    """

    device = torch.device("cpu")
    recurrent = True
    remote_methods = ("act", "value", "inputs")  # `inputs`: served before the marker, kept

    def __init__(self, config: PPOConfig, env_info: EnvInfo) -> None:
        self.image_size = config.image_size
        self.model = ConvLSTMActorCritic(
            env_info, config.image_size, config.lstm_size, config.hidden_sizes, config.activation
        )
        self.model.eval()
        size = proprio_dim(env_info, config.image_size)
        self.normalizer = RunningNormalizer((size,)) if config.norm_obs else None
        self.proprio_size, self.obs_dim = size, int(np.prod(env_info.obs_shape))
        self.discrete = env_info.discrete
        self.state: State | None = None

    def inputs(self, obs: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Image and normalized proprio tensors from flat observations [..., D]."""
        image, proprio = split_obs(np.asarray(obs, np.float32), self.image_size)
        if self.normalizer is not None:
            proprio = self.normalizer(proprio)
        return (
            torch.as_tensor(image, device=self.device),
            torch.as_tensor(proprio, dtype=torch.float32, device=self.device),
        )

    def to(self, device: str | torch.device) -> VisionPolicy:
        """Compute `act` and `value` on DEVICE from now on (the memory moves too)."""
        self.device = torch.device(device)
        self.model.to(self.device)
        if self.state is not None:
            self.state = tuple(s.to(self.device) for s in self.state)
        return self

    def _state(self, batch: int) -> State:
        if self.state is None or self.state[0].shape[0] != batch:
            self.state = self.model.initial_state(batch)
        return self.state

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = False) -> tuple[np.ndarray, Batch]:
        state = self._state(len(obs))
        features, self.state = self.model.step(*self.inputs(obs), state)
        dist = self.model.distribution(features)
        action = self.model.greedy(dist) if deterministic else dist.sample()
        extras = {
            "logprob": self.model.log_prob(dist, action).cpu().numpy(),
            "value": self.model.value(features).cpu().numpy(),
            "lstm_h": state[0].cpu().numpy().copy(),
            "lstm_c": state[1].cpu().numpy().copy(),
        }
        return action.cpu().numpy().astype(np.int64 if self.discrete else np.float32), extras

    @torch.no_grad()
    def value(self, obs: np.ndarray) -> np.ndarray:
        """V of `obs` as the next step from the current memory (the memory does not advance)."""
        features, _ = self.model.step(*self.inputs(obs), self._state(len(obs)))
        return self.model.value(features).cpu().numpy()

    def reset(self, done: np.ndarray) -> None:
        if self.state is None or len(done) != self.state[0].shape[0]:
            return
        keep = torch.as_tensor(~np.asarray(done, bool), dtype=torch.float32)
        keep = keep.to(self.state[0].device).unsqueeze(1)
        self.state = (self.state[0] * keep, self.state[1] * keep)

    def export_module(self) -> GreedyRecurrent:
        """The greedy action and the next LSTM state, normalization inside (`surreal export`)."""
        norm = ObsNormalizer(self.normalizer, (self.proprio_size,))
        return GreedyRecurrent(self.model, norm, self.obs_dim, self.image_size).to(self.device)

    def load_params(self, params: Params) -> None:
        load_model_params(self.model, params)
        if self.normalizer is not None:
            self.normalizer.load_params(params)
