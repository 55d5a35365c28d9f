"""PPOPolicy: the actor-side half of PPO (sampling actions, log-probs and values)."""

from __future__ import annotations

import numpy as np
import torch

from surreal.algos.ppo.config import PPOConfig
from surreal.algos.ppo.networks import ActorCritic
from surreal.core import Batch, Params, Policy
from surreal.normalizer import RunningNormalizer
from surreal.spaces import EnvInfo


def model_params(model: torch.nn.Module, prefix: str = "model/") -> Params:
    """A torch module's weights as a flat dict of numpy arrays."""
    return {prefix + k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}


def load_model_params(model: torch.nn.Module, params: Params, prefix: str = "model/") -> None:
    """Inverse of `model_params`."""
    state = {
        k[len(prefix) :]: torch.as_tensor(np.array(v))
        for k, v in params.items()
        if k.startswith(prefix)
    }
    model.load_state_dict(state)


class PPOPolicy(Policy):
    """Runs the actor-critic on normalized observations; stores `logprob` and `value` per step."""

    def __init__(self, config: PPOConfig, env_info: EnvInfo) -> None:
        self.model = ActorCritic(env_info, config.hidden_sizes, config.activation)
        self.model.eval()
        self.normalizer = RunningNormalizer(env_info.obs_shape) if config.norm_obs else None
        self.discrete = env_info.discrete

    def _obs(self, obs: np.ndarray) -> torch.Tensor:
        if self.normalizer is not None:
            obs = self.normalizer(obs)
        return torch.as_tensor(obs, dtype=torch.float32)

    @torch.no_grad()
    def act(self, obs: np.ndarray, deterministic: bool = False) -> tuple[np.ndarray, Batch]:
        x = self._obs(obs)
        dist = self.model.distribution(x)
        action = self.model.greedy(dist) if deterministic else dist.sample()
        extras = {
            "logprob": self.model.log_prob(dist, action).numpy(),
            "value": self.model.value(x).numpy(),
        }
        out = action.numpy().astype(np.int64 if self.discrete else np.float32)
        return out, extras

    @torch.no_grad()
    def value(self, obs: np.ndarray) -> np.ndarray:
        return self.model.value(self._obs(obs)).numpy()

    def load_params(self, params: Params) -> None:
        load_model_params(self.model, params)
        if self.normalizer is not None:
            self.normalizer.load_params(params)
