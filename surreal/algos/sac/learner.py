"""SACLearner and SACPolicy: SAC on DDPG's processes (actors, sharded replay, learner loop)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from surreal.algos.ddpg.learner import DDPGLearner, DDPGPolicy, OffPolicyAlgo
from surreal.algos.sac.config import SACConfig
from surreal.algos.sac.learning import SAC
from surreal.algos.sac.networks import GaussianActor, TanhMean
from surreal.api.spaces import EnvInfo


class SACPolicy(DDPGPolicy):
    """The squashed Gaussian pi(.|o), rescaled to the env's bounds: tanh(mean) when
    deterministic (evaluation), a sample otherwise; the actors explore by sampling it.

    Samples draw from this policy's own numpy generator, seeded from the OS, so that actors
    (and policy workers) explore independently."""

    def __init__(self, config: SACConfig, env_info: EnvInfo) -> None:
        super().__init__(config, env_info)
        self.rng = np.random.default_rng()

    @classmethod
    def make_actor(cls, obs_dim: int, act_dim: int, config: SACConfig) -> nn.Module:
        """SAC's `GaussianActor` (the learner's `SAC.actor`, whose params it loads)."""
        return GaussianActor(obs_dim, act_dim, config.hidden)

    def unit_module(self) -> nn.Module:
        """tanh(mean) as a torch module (`DDPGPolicy.export_module` scales it)."""
        return TanhMean(self.actor)

    def unit_action(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """Actions in [-1, 1] for a batch: tanh(mean), or tanh(mean + std * eps), eps ~ N(0, I)."""
        with torch.no_grad():
            x = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
            mean, log_std = (t.cpu().numpy() for t in self.actor(x))
        if not deterministic:
            mean = mean + np.exp(log_std) * self.rng.standard_normal(mean.shape)
        return np.tanh(mean).astype(np.float32)

    def explore(
        self,
        unit_action: Callable[..., np.ndarray],
        obs: np.ndarray,
        noises: Sequence[Callable[[], np.ndarray]],
    ) -> np.ndarray:
        """A sample of pi(.|o) per env (`unit_action(obs, deterministic=False)`); the actor's
        noise processes are not used."""
        return unit_action(obs, deterministic=False)


class SACLearner(DDPGLearner):
    """Soft Actor-Critic (`SACConfig`): DDPG's processes, batches, checkpoints and launch check,
    with SAC's update and policy."""

    config_class: ClassVar[type] = SACConfig

    @classmethod
    def make_algo(
        cls, obs_dim: int, act_dim: int, config: SACConfig, device: torch.device
    ) -> OffPolicyAlgo:
        """`SAC`: twin critics, the squashed Gaussian policy and the tuned temperature, seeded
        with torch's seed (`run.seed`, as `DDPGLearner.make_algo`)."""
        return SAC(obs_dim, act_dim, config, seed=torch.initial_seed(), device=device)

    @classmethod
    def make_policy(cls, config: SACConfig, env_info: EnvInfo) -> SACPolicy:
        return SACPolicy(config, env_info)
