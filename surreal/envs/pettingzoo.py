"""The `pettingzoo:<name>` family as a single-agent env (its first agent; see surreal.multiagent)."""

from __future__ import annotations

from typing import Any

from surreal.api.config import EnvConfig
from surreal.envs import agent_view


def check(name: str) -> None:
    """Raise UnknownEnvironment if `pettingzoo:<name>` cannot be built."""
    agent_view.check("pettingzoo", name)


def make(name: str, config: EnvConfig, seed: int | None, render: bool = False) -> Any:
    """The first agent of `pettingzoo:<name>`, the others acting at random."""
    return agent_view.make("pettingzoo", name, config, seed, render)
