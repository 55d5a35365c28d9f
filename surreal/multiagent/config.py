"""MultiAgentPPOConfig: PPO's settings plus the agent-to-policy mapping, centralized value and
self-play."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from surreal.algos.ppo.config import PPOConfig
from surreal.api.bounds import bounded, require


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
    pool_size: int = bounded(8, ge=1)
    """Self-play: past policy versions kept as opponents."""
    pool_every: int = bounded(5, ge=1)
    """Self-play: add the current parameters to the pool every this many versions."""
    pool_latest: float = bounded(0.5, ge=0, le=1)
    """Self-play: probability that an episode's opponent is the current policy itself."""
    actor_obs_dim: int = bounded(0, ge=0)
    """Set by the launcher for central_value: the size of an agent's own observation at the
    front of the policy's input (0: the whole input)."""

    def check(self, env_info: Any = None) -> None:
        """PPO's checks plus the multi-agent settings' ranges (declared beside the fields)."""
        super().check(env_info)
        require(self, "pool_size", "pool_every", "pool_latest", "actor_obs_dim")
