"""MultiAgentPPOConfig: PPO's settings plus the agent-to-policy mapping, centralized value and
self-play."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from surreal.algos.ppo.config import PPOConfig


@dataclass
class MultiAgentPPOConfig(PPOConfig):
    """PPO for PettingZoo-style multi-agent environments (`surreal launch mappo`)."""

    batch_size: int = 0
    """Env steps per learner iteration of each policy (as in ppo); 0, mappo's default: one
    segment per actor."""
    policy_mapping: str = "shared"
    """Which policy each agent runs: shared (one policy for all agents), per-agent, or
    path/to/file.py:function (agent id -> policy name); see surreal.multiagent.mapping."""
    central_value: bool = False
    """MAPPO's centralized critic: the value network also sees the global state (the env's
    state(), else every agent's observation); the policy network sees the agent's own only."""
    self_play: bool = False
    """Two-player self-play: one seat per env plays the learning policy, the other a pool
    opponent; needs one policy (policy_mapping=shared) and agents with equal spaces."""
    pool_size: int = 8
    """Self-play: past policy versions kept as opponents."""
    pool_every: int = 5
    """Self-play: add the current parameters to the pool every this many versions."""
    pool_latest: float = 0.5
    """Self-play: probability that an episode's opponent is the current policy itself."""
    actor_obs_dim: int = 0
    """Set by the launcher for central_value: the size of an agent's own observation at the
    front of the policy's input (0: the whole input)."""

    def check(self, env_info: Any = None) -> None:
        """PPO's checks plus the multi-agent settings' ranges."""
        super().check(env_info)
        if self.pool_size < 1 or self.pool_every < 1:
            raise ValueError("algo.pool_size and algo.pool_every must be >= 1")
        if not 0.0 <= self.pool_latest <= 1.0:
            raise ValueError("algo.pool_latest is a probability: 0 <= it <= 1")
        if self.actor_obs_dim < 0:
            raise ValueError("algo.actor_obs_dim must be >= 0 (it is set by the launcher)")
