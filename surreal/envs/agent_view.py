"""A multi-agent environment seen as a single-agent gymnasium env: its first agent, with every
other agent acting uniformly at random. This is what `surreal launch ppo --env pettingzoo:...`
trains, and what describes a multi-agent env to the single-agent parts of the runtime."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from surreal.api.config import EnvConfig
from surreal.envs.base import UnknownEnvironment
from surreal.envs.multiagent import check_multiagent_env, make_multiagent_env


class AgentView(gymnasium.Env):
    """The first agent of `env_id`; the others act at random.

    Args:
        env_id: a multi-agent id (`pettingzoo:...` or `ma:...`).
        seed: seeds the env and the other agents' random actions.
    """

    def __init__(self, env_id: str, seed: int | None = None) -> None:
        self.joint = make_multiagent_env(env_id, seed)
        self.agent = self.joint.agents[0]
        size = self.joint.infos[self.agent].obs_shape
        self.observation_space = spaces.Box(-np.inf, np.inf, size, np.float32)
        self.action_space = self.joint.env.action_space(self.agent)
        self.others = {a: self.joint.env.action_space(a) for a in self.joint.agents[1:]}
        for i, space in enumerate(self.others.values()):
            space.seed(None if seed is None else seed + i + 1)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        if seed is not None:
            self.joint.seed = seed
        return self.joint.reset()[self.agent], {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        actions = {a: space.sample() for a, space in self.others.items()}
        actions[self.agent] = action
        obs, reward, terminated, truncated = self.joint.step(actions)
        ended = any(terminated.values()) or any(truncated.values())
        term = terminated[self.agent]
        return obs[self.agent], reward[self.agent], term, ended and not term, {}

    def close(self) -> None:
        self.joint.close()


def check(family: str, name: str) -> None:
    """Raise UnknownEnvironment if `family:name` cannot be built."""
    check_multiagent_env(f"{family}:{name}")


def make(family: str, name: str, config: EnvConfig, seed: int | None, render: bool) -> Any:
    """The single-agent view of `family:name` (no rendering)."""
    if render:
        raise UnknownEnvironment(f"{family}:{name}: multi-agent envs do not render here")
    return AgentView(f"{family}:{name}", seed)
