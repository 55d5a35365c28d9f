"""Self-play opponents: a pool of past parameter versions of the learning policy."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from surreal.api.core import Params, Policy


class OpponentPool:
    """Keeps up to `size` past versions; each episode's opponent is the current policy with
    probability `latest`, else a uniformly drawn past version.

    Args:
        make_policy: builds an empty policy (the pool loads past parameters into it).
        size: versions kept (the oldest goes first).
        every: versions between two snapshots.
        latest: probability of playing the current policy.
        seed: seeds the draws.
    """

    def __init__(
        self,
        make_policy: Callable[[], Policy],
        size: int,
        every: int,
        latest: float,
        seed: int = 0,
    ) -> None:
        self.make_policy, self.every, self.latest = make_policy, max(1, every), latest
        self.entries: deque[tuple[int, Policy]] = deque(maxlen=max(1, size))
        self.rng = np.random.default_rng(seed)
        self.last_version: int | None = None

    def offer(self, version: int, params: Params) -> bool:
        """Snapshot `params` if `every` versions passed since the last snapshot; True if kept."""
        if self.last_version is not None and version - self.last_version < self.every:
            return False
        policy = self.make_policy()
        policy.load_params({k: np.array(v, copy=True) for k, v in params.items()})
        self.entries.append((version, policy))
        self.last_version = version
        return True

    def draw(self) -> int:
        """An opponent: -1 for the current policy, else an index into `entries`."""
        if not self.entries or self.rng.random() < self.latest:
            return -1
        return int(self.rng.integers(len(self.entries)))

    def policy(self, choice: int, current: Policy) -> Policy:
        """The policy of a `draw`."""
        return current if choice < 0 else self.entries[choice][1]

    def versions(self) -> list[int]:
        """Versions held, oldest first."""
        return [v for v, _ in self.entries]


def seats_for(agents: list[str], rng: Any) -> str:
    """The learning seat of a new episode, drawn uniformly."""
    return agents[int(rng.integers(len(agents)))]
