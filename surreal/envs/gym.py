"""The `gym:<id>` family: any registered gymnasium environment, MuJoCo v5 tasks included.

Loaded by `surreal.envs.base` when a `gym:` id is checked or built, so gymnasium imports here.
"""

from __future__ import annotations

import difflib
from typing import Any

import gymnasium

from surreal.api.config import EnvConfig
from surreal.envs.base import UnknownEnvironment


def check(name: str) -> None:
    """Raise UnknownEnvironment (with the nearest ids) if gymnasium does not know `name`."""
    if name in gymnasium.registry:
        return
    close = difflib.get_close_matches(name, list(gymnasium.registry), n=3)
    hint = f"; did you mean {', '.join('gym:' + c for c in close)}?" if close else ""
    raise UnknownEnvironment(f"unknown environment 'gym:{name}'{hint}")


def make(name: str, config: EnvConfig, seed: int | None, render: bool = False) -> Any:
    """Build the gymnasium environment `name` (its own TimeLimit included)."""
    check(name)
    env = gymnasium.make(name, render_mode="rgb_array" if render else None)
    if seed is not None:
        env.action_space.seed(seed)
    return env
