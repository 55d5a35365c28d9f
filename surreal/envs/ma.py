"""The `ma:<name>` family as a single-agent env (its first agent; see surreal.multiagent)."""

from __future__ import annotations

from typing import Any

from surreal.api.config import EnvConfig
from surreal.envs import agent_view


def check(name: str) -> None:
    """Raise UnknownEnvironment if `ma:<name>` cannot be built."""
    agent_view.check("ma", name)


def make(name: str, config: EnvConfig, seed: int | None, render: bool = False) -> Any:
    """The first agent of `ma:<name>`, the others acting at random."""
    return agent_view.make("ma", name, config, seed, render)
