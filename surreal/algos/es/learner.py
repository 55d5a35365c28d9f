"""ESLearner and ESPolicyAdapter: ES behind the runtime's Learner/Policy interfaces.

ES has no replay and no gradient batches: the master *is* the learner. Its `learn(record)` takes a
generation record (noise indices and returns), its `params()` are theta and the observation
normalizer, which the runtime's parameter server and evaluator use unchanged. The topology (one
master, `run.actors` workers) comes from `build_experiment`.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, ClassVar

import numpy as np

from surreal.algos.es.config import ESConfig
from surreal.algos.es.noise_table import SharedNoiseTable
from surreal.algos.es.policy import ESPolicy
from surreal.algos.es.state import ESState
from surreal.algos.es.topology import ESRecipe
from surreal.api.core import Batch, Learner, Params, Policy
from surreal.api.spaces import EnvInfo


def action_space(env_info: EnvInfo) -> SimpleNamespace:
    """What ESPolicy needs of an action space, from the runtime's plain EnvInfo."""
    if env_info.discrete:
        return SimpleNamespace(n=env_info.num_actions)
    shape = env_info.action_shape
    return SimpleNamespace(
        n=0,
        shape=shape,
        low=np.asarray(env_info.action_low, np.float32).reshape(shape),
        high=np.asarray(env_info.action_high, np.float32).reshape(shape),
    )


def make_es_policy(config: ESConfig, env_info: EnvInfo) -> ESPolicy:
    """The paper's policy for this environment."""
    return ESPolicy(
        int(np.prod(env_info.obs_shape)),
        action_space(env_info),
        config.hidden,
        config.action_std,
        config.discretize,
    )


class ESPolicyAdapter(Policy):
    """Runs theta with the shipped normalizer (deterministic: no action noise) for evaluators."""

    def __init__(self, config: ESConfig, env_info: EnvInfo) -> None:
        self.policy = make_es_policy(config, env_info)
        self.layers = self.policy.unflatten(self.policy.init_params(0))
        dim = int(np.prod(env_info.obs_shape))
        self.mean, self.std = np.zeros(dim, np.float32), np.ones(dim, np.float32)
        self.rng = np.random.default_rng(0)

    def act(self, obs: np.ndarray, deterministic: bool = False) -> tuple[np.ndarray, Batch]:
        rng = None if deterministic else self.rng
        norm = (np.asarray(obs, np.float32) - self.mean) / self.std
        return np.array([self.policy.act(self.layers, o, rng) for o in norm]), {}

    def load_params(self, params: Params) -> None:
        self.layers = self.policy.unflatten(np.array(params["theta"], np.float32))
        self.mean = np.array(params["obs_mean"], np.float32)
        self.std = np.array(params["obs_std"], np.float32)


class ESLearner(Learner):
    """The ES master's learning state; one `learn` per generation record."""

    config_class: ClassVar[type] = ESConfig
    recipe = ESRecipe

    def __init__(self, config: ESConfig, env_info: EnvInfo, seed: int = 0) -> None:
        super().__init__(config, env_info)
        self.policy = make_es_policy(config, env_info)
        self.state = ESState(
            self.policy.init_params(seed), int(np.prod(env_info.obs_shape)), config
        )
        self._noise: SharedNoiseTable | None = None

    @property
    def noise(self) -> SharedNoiseTable:
        """This machine's shared noise table (opened on first use)."""
        if self._noise is None:
            self._noise = SharedNoiseTable(self.config.noise_seed, self.config.noise_size)
        return self._noise

    @classmethod
    def make_policy(cls, config: ESConfig, env_info: EnvInfo) -> ESPolicyAdapter:
        return ESPolicyAdapter(config, env_info)

    def learn(self, batch: Batch) -> dict[str, float]:
        """Apply one generation record (indices, r_pos, r_neg, observation statistics)."""
        self.state.apply(batch, self.noise)
        returns = np.concatenate([batch["r_pos"], batch["r_neg"]])
        return {
            "es/population_return": float(np.mean(returns)),
            "es/max_return": float(np.max(returns)),
        }

    def params(self) -> Params:
        return {
            "theta": self.state.theta.copy(),
            "obs_mean": self.state.obs_mean.copy(),
            "obs_std": self.state.obs_std.copy(),
        }

    def state_dict(self) -> dict[str, Any]:
        return self.state.to_wire()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.state.load_wire(state)
