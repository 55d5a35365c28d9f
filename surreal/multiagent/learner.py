"""MultiAgentPPOLearner (`surreal launch mappo`): PPO per policy on a multi-agent env.

Every policy of the run (`algo.policy_mapping`) is learned by one of these, on its agents'
trajectories, in its own process with its own buffer and parameter server; actors step the joint
env (`surreal.multiagent.actor`). With one shared policy and `algo.central_value` this is MAPPO;
with `algo.self_play` a two-player game is learned against a pool of past versions.
"""

from __future__ import annotations

from typing import Any

from surreal.algos.ppo.learner import PPOLearner
from surreal.api.spaces import EnvInfo
from surreal.multiagent.config import MultiAgentPPOConfig
from surreal.multiagent.policy_runs import policy_specs
from surreal.multiagent.topology import COMPONENTS, build_experiment


class MultiAgentPPOLearner(PPOLearner):
    """PPO for each policy of a multi-agent run; the topology is `surreal.multiagent.topology`."""

    config_class = MultiAgentPPOConfig

    @classmethod
    def check_config(cls, config: MultiAgentPPOConfig, env_info: EnvInfo) -> None:
        """PPO's checks plus the multi-agent settings' ranges."""
        super().check_config(config, env_info)
        if config.pool_size < 1 or config.pool_every < 1:
            raise ValueError("algo.pool_size and algo.pool_every must be >= 1")
        if not 0.0 <= config.pool_latest <= 1.0:
            raise ValueError("algo.pool_latest is a probability: 0 <= it <= 1")
        if config.actor_obs_dim < 0:
            raise ValueError("algo.actor_obs_dim must be >= 0 (it is set by the launcher)")

    @classmethod
    def check_run(cls, run_config: Any) -> None:
        """`surreal launch` asks before anything starts: the env is multi-agent and its agents
        fit the policy mapping (`policy_specs`; ValueError saying what to set)."""
        policy_specs(run_config)

    @classmethod
    def build_experiment(cls, plan: Any) -> Any:
        """One buffer, learner, parameter server and metrics sink per policy; joint-env actors
        (`surreal.multiagent.topology`). Checks the env and the mapping first."""
        return build_experiment(plan)

    @classmethod
    def components(cls) -> dict[str, str]:
        """The runtime's roles, with the multi-agent actor and league and the policy roles."""
        return {**super().components(), **COMPONENTS}
