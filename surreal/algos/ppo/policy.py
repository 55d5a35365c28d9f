"""PPOPolicy: the actor-side half of PPO (sampling actions, log-probs and values)."""

from __future__ import annotations

import numpy as np
import torch

from surreal.algos.ppo.config import PPOConfig
from surreal.algos.ppo.export import GreedyActorCritic
from surreal.algos.ppo.networks import greedy, log_prob, make_model
from surreal.api.core import Batch, Params, Policy
from surreal.api.exporting import ObsNormalizer
from surreal.api.modules import load_model_params, model_params
from surreal.api.normalizer import RunningNormalizer
from surreal.api.spaces import EnvInfo

__all__ = ["PPOPolicy", "load_model_params", "model_params"]


class PPOPolicy(Policy):
    """Runs the actor-critic on normalized observations; stores `logprob` and `value` per step.

    The network is `make_model(config, env_info)`, the same the learner trains (`algo.model`).
    `to(device)` moves it (a policy worker with `actor.inference_device`); inputs follow it and
    outputs come back as CPU numpy arrays.
    """

    device = torch.device("cpu")

    def __init__(self, config: PPOConfig, env_info: EnvInfo) -> None:
        self.model = make_model(config, env_info)
        self.model.eval()
        self.normalizer = RunningNormalizer(env_info.obs_shape) if config.norm_obs else None
        self.discrete = env_info.discrete
        self.obs_shape = tuple(env_info.obs_shape)

    def _obs(self, obs: np.ndarray) -> torch.Tensor:
        if self.normalizer is not None:
            obs = self.normalizer(obs)
        return torch.as_tensor(obs, dtype=torch.float32, device=self.device)

    def to(self, device: str | torch.device) -> PPOPolicy:
        """Compute `act` and `value` on DEVICE from now on."""
        self.device = torch.device(device)
        self.model.to(self.device)
        return self

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = False) -> tuple[np.ndarray, Batch]:
        x = self._obs(obs)
        dist = self.model.distribution(x)
        action = greedy(dist) if deterministic else dist.sample()
        extras = {
            "logprob": log_prob(dist, action).cpu().numpy(),
            "value": self.model.value(x).cpu().numpy(),
        }
        out = action.cpu().numpy().astype(np.int64 if self.discrete else np.float32)
        return out, extras

    @torch.no_grad()
    def value(self, obs: np.ndarray) -> np.ndarray:
        return self.model.value(self._obs(obs)).cpu().numpy()

    def export_module(self) -> GreedyActorCritic:
        """The greedy action with the normalization inside (`surreal export`)."""
        norm = ObsNormalizer(self.normalizer, self.obs_shape)
        return GreedyActorCritic(self.model, norm, self.discrete).to(self.device)

    def load_params(self, params: Params) -> None:
        super().load_params(params)
        if self.normalizer is not None:
            self.normalizer.load_params(params)
