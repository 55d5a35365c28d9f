"""The `off-policy` recipe: transitions with their next observation and n-step returns, sampled
from a sharded replay that waits for a warm-up, on DDPG's processes (surreal/algos/ddpg/topology.py:
actors -> replay shards -> learner -> parameter servers). DDPG, TD3, SAC and DQN use it; a
learner of your own picks it with `recipe = "off-policy"` (docs/new_algorithm.md). Torch-free.

What `learn(batch)` gets: `obs` [B, *obs], `act` [B, A] (the actions the actors stored: a
policy's `explore` says what), `rew` [B] (the n-step return R_t^n), `next_obs` [B, *obs]
(o_t+m) and `discount` [B] (gamma^m, 0 where the episode terminated); B = `algo.batch_size`. The
budget and the steps/s count the env steps the actors took, never replayed samples.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from surreal.algos.ddpg.topology import COMPONENTS, build_experiment
from surreal.api.config import Config, ConfigError
from surreal.api.offpolicy import OffPolicyConfig
from surreal.api.recipe import Recipe
from surreal.api.spaces import EnvInfo


class OffPolicy(Recipe):
    """Transitions from sharded uniform replay, on DDPG's processes."""

    name = "off-policy"

    @classmethod
    def per_batch(cls, run_config: Config) -> int:
        """Transitions per `learn` call: `algo.batch_size`."""
        return int(run_config.algo.batch_size)

    @classmethod
    def build_experiment(cls, plan: Any) -> Any:
        """Actors, sharded replay and parameter servers, learner, evaluator, metrics."""
        return build_experiment(plan)

    @classmethod
    def components(cls) -> dict[str, str]:
        return {**super().components(), **COMPONENTS}

    @classmethod
    def check_run(cls, run_config: Config) -> None:
        """A config with the replay's settings (`OffPolicyConfig`'s), and a budget past the warm-up: the learner's first update waits for `replay_start`
        transitions, so a run of fewer steps would end with its networks untouched."""
        algo = run_config.algo
        missing = [f.name for f in dataclasses.fields(OffPolicyConfig) if not hasattr(algo, f.name)]
        if missing:
            raise ConfigError(
                f"{type(algo).__name__} has no {', '.join(missing)}: the off-policy recipe's "
                "processes read them; base the learner's config_class on "
                "surreal.api.OffPolicyConfig, which brings the replay's settings"
            )
        steps, start = int(run_config.run.steps), int(algo.replay_start)
        if steps <= start:
            raise ConfigError(
                f"--steps {steps:,} does not pass algo.replay_start={start:,}: the learner "
                "starts updating once the replay holds that many transitions, so this run "
                "would end without a single update; raise --steps or lower algo.replay_start"
            )

    @classmethod
    def example_batch(
        cls, run_config: Config, env_info: EnvInfo, policy: Any
    ) -> dict[str, np.ndarray]:
        """8 random transitions shaped like a replay shard's sample, the actions the policy's
        `explore` would store."""
        rng = np.random.default_rng(0)
        obs = rng.normal(size=(8, *env_info.obs_shape)).astype(np.float32)
        act = np.asarray(policy.act(obs)[1]["unit_action"], np.float32).reshape(8, -1)
        return {
            "obs": obs.reshape(8, -1),
            "act": act,
            "rew": rng.normal(size=8).astype(np.float32),
            "next_obs": rng.normal(size=obs.shape).astype(np.float32).reshape(8, -1),
            "discount": np.full(8, run_config.algo.gamma, np.float32),
        }
