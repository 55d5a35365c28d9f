"""DDPGLearner and DDPGPolicy: DDPG/TD3 behind the runtime's Learner and Policy interfaces."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol

import numpy as np
import torch
from torch import nn

from surreal.algos.ddpg.config import DDPGConfig
from surreal.algos.ddpg.export import ClippedActor, GreedyScaled
from surreal.algos.ddpg.learning import DDPG
from surreal.algos.ddpg.networks import Actor
from surreal.algos.ddpg.noise import NoiseExplorer
from surreal.api.core import Batch, Learner, Params, Policy
from surreal.api.spaces import EnvInfo


def _bounds(env_info: EnvInfo) -> tuple[np.ndarray, np.ndarray]:
    if env_info.discrete:
        raise ValueError(
            "DDPG, TD3 and SAC need a continuous (Box) action space; "
            "use ppo or dqn for discrete actions"
        )
    low = np.asarray(env_info.action_low, np.float32).reshape(env_info.action_shape)
    high = np.asarray(env_info.action_high, np.float32).reshape(env_info.action_shape)
    return low, high


class DDPGPolicy(Policy):
    """mu(o) rescaled to the env's bounds; extras carry the action in [-1, 1] (what replay stores).
    `to(device)` moves mu (a policy worker with `actor.inference_device`). A policy worker
    serves `unit_action` too; `explore` stays on the actor (it draws the actor's noise)."""

    device = torch.device("cpu")
    remote_methods = ("act", "value", "unit_action")

    def __init__(self, config: DDPGConfig, env_info: EnvInfo) -> None:
        self.config = config
        self.low, self.high = _bounds(env_info)
        self.actor = self.make_actor(int(np.prod(env_info.obs_shape)), env_info.action_dim, config)
        self.actor.requires_grad_(False)
        self.obs_shape = tuple(env_info.obs_shape)
        self.noise = None  # optional: a callable giving one noise vector for unit_action(obs)

    def explorer(self, num_envs: int, index: int, actors: int, seed: int) -> NoiseExplorer:
        """Actor `index` of `actors`' exploration (`surreal.api.offpolicy.Explorer`): one noise
        process per env at its scale, through `explore`."""
        dim = int(np.prod(self.low.shape))
        return NoiseExplorer(self, dim, self.config, num_envs, index, actors, seed)

    @classmethod
    def make_actor(cls, obs_dim: int, act_dim: int, config: DDPGConfig) -> nn.Module:
        """The policy network `load_params` fills: DDPG's deterministic mu(o)."""
        return Actor(obs_dim, act_dim, config.hidden)

    def unit_action(self, obs: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """Actions in [-1, 1] for a batch: mu(o), plus exploration noise unless deterministic."""
        with torch.no_grad():
            x = torch.as_tensor(obs, dtype=torch.float32, device=self.device)
            a = self.actor(x).cpu().numpy()
        if not deterministic and self.noise is not None:
            a = a + np.stack([self.noise() for _ in range(len(a))])
        return np.clip(a, -1.0, 1.0).astype(np.float32)

    def explore(
        self,
        unit_action: Callable[..., np.ndarray],
        obs: np.ndarray,
        noises: Sequence[Callable[[], np.ndarray]],
    ) -> np.ndarray:
        """The actors' exploratory actions in [-1, 1] for a batch of observations (the hook the
        DDPG actor process calls): mu(o) plus one draw of each env's noise process, clipped.

        Args:
            unit_action: the acting policy's `unit_action`: this policy's own, or a policy
                worker's with `actor.inference=remote` (so it is passed in, not called on self).
            obs: observations [num_envs, *obs_shape].
            noises: the actor's noise process of each env (`surreal.algos.ddpg.noise`): a
                call draws one vector.
        """
        greedy = unit_action(obs, deterministic=True)
        return np.clip(greedy + np.stack([nz() for nz in noises]), -1.0, 1.0).astype(np.float32)

    def to(self, device: str | torch.device) -> DDPGPolicy:
        """Compute `unit_action` on DEVICE from now on."""
        self.device = torch.device(device)
        self.actor.to(self.device)
        return self

    def scale(self, unit: np.ndarray) -> np.ndarray:
        """[-1, 1] -> [low, high]: center + unit x half-range (bounds [-1, 1]: `unit` itself)."""
        return (self.high + self.low) / 2.0 + unit * ((self.high - self.low) / 2.0)

    def unit_module(self) -> nn.Module:
        """`unit_action(obs, deterministic=True)` as a torch module (for `export_module`)."""
        return ClippedActor(self.actor)

    def export_module(self) -> GreedyScaled:
        """The greedy action scaled to the env's bounds (`surreal export`)."""
        return GreedyScaled(self.unit_module(), self.low, self.high, self.obs_shape).to(self.device)

    def act(self, obs: np.ndarray, deterministic: bool = False) -> tuple[np.ndarray, Batch]:
        unit = self.unit_action(obs, deterministic)
        return self.scale(unit), {"unit_action": unit}

    def load_params(self, params: Params) -> None:
        self.actor.load_state_dict({k: torch.as_tensor(np.array(v)) for k, v in params.items()})


class OffPolicyAlgo(Protocol):
    """What DDPGLearner asks of its algorithm object (`DDPG`, or SAC's)."""

    def update(self, batch: dict[str, np.ndarray]) -> dict[str, float]: ...

    def actor_params(self) -> dict[str, np.ndarray]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


class DDPGLearner(Learner):
    """DDPG (TD3 with `--set algo.twin_critics=true ...`) on batches sampled from uniform replay."""

    config_class: ClassVar[type] = DDPGConfig
    recipe = "off-policy"

    def __init__(self, config: DDPGConfig, env_info: EnvInfo) -> None:
        super().__init__(config, env_info)
        _bounds(env_info)
        obs_dim = int(np.prod(env_info.obs_shape))
        self.algo = self.make_algo(obs_dim, env_info.action_dim, config, self.device)
        if self._compiling and hasattr(self.algo, "use_compiled"):  # run.compile
            self.algo.use_compiled(self.compiled)

    @classmethod
    def make_algo(
        cls, obs_dim: int, act_dim: int, config: DDPGConfig, device: torch.device
    ) -> OffPolicyAlgo:
        """The networks, optimizers and update (`DDPG`); another algorithm on DDPG's processes
        (SAC) returns its own. Seeded with torch's seed, which the learner process set to
        `run.seed` (DDPG's own default, 0, once gave every seed of a run the same networks)."""
        return DDPG(obs_dim, act_dim, config, seed=torch.initial_seed(), device=device)

    @classmethod
    def make_policy(cls, config: DDPGConfig, env_info: EnvInfo) -> DDPGPolicy:
        return DDPGPolicy(config, env_info)

    def learn(self, batch: Batch) -> dict[str, float]:
        """One DDPG update on a batch of obs, act, rew (n-step), next_obs, discount."""
        return self.algo.update(batch)

    def params(self) -> Params:
        return self.algo.actor_params()

    def state_dict(self) -> dict[str, Any]:
        return self.algo.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.algo.load_state_dict(state)
