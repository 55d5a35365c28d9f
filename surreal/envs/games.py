"""Small multi-agent games with PettingZoo's parallel API (no PettingZoo needed to run them).

ma:nim    two-player, zero-sum take-away game (for self-play)
ma:pair   a fake two-agent env whose agents differ in observation and action spaces, and whose
          observations carry the agent's index first (for routing tests)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces


class Nim:
    """Take-away Nim: a pile of `min_pile`..`max_pile` stones, players alternate taking 1-3;
    whoever takes the last stone wins (+1, the other -1). Both agents act every step; only the
    action of the player to move counts. An agent observes the pile (one-hot) and whether it is
    its turn. The player who starts is drawn at random each episode.

    Perfect play: leave the opponent a multiple of 4 stones.
    """

    metadata = {"name": "nim"}
    possible_agents = ["player_0", "player_1"]

    def __init__(self, min_pile: int = 9, max_pile: int = 15) -> None:
        if not 1 <= min_pile <= max_pile:
            raise ValueError("nim needs 1 <= min_pile <= max_pile")
        self.min_pile, self.max_pile = min_pile, max_pile
        self.agents: list[str] = []
        self.rng = np.random.default_rng()
        self.pile, self.turn = 0, 0

    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(0.0, 1.0, (self.max_pile + 2,), np.float32)

    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(3)

    def _obs(self) -> dict[str, np.ndarray]:
        out = {}
        for i, agent in enumerate(self.possible_agents):
            obs = np.zeros(self.max_pile + 2, np.float32)
            obs[self.pile] = 1.0
            obs[-1] = float(i == self.turn)
            out[agent] = obs
        return out

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[dict, dict]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.pile = int(self.rng.integers(self.min_pile, self.max_pile + 1))
        self.turn = int(self.rng.integers(2))
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        mover = self.possible_agents[self.turn]
        take = min(int(actions[mover]) + 1, self.pile)
        self.pile -= take
        rewards = {a: 0.0 for a in self.agents}
        done = self.pile == 0
        if done:
            for a in self.agents:
                rewards[a] = 1.0 if a == mover else -1.0
        else:
            self.turn = 1 - self.turn
        obs = self._obs()
        terms = {a: done for a in self.agents}
        truncs = {a: False for a in self.agents}
        infos = {a: {} for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos

    def close(self) -> None:
        return None


class Pair:
    """A fake two-agent env: `left` sees 3 numbers and picks 1 of 2 actions, `right` sees 4 and
    picks 1 of 3; observation[0] is the agent's index (0 or 1), so a learner can tell whose
    steps it got. Reward 1 for the agent's last action (left: 1, right: 2), else 0; episodes
    last `length` steps."""

    metadata = {"name": "pair"}
    possible_agents = ["left", "right"]

    def __init__(self, length: int = 10) -> None:
        self.length, self.t = length, 0
        self.agents: list[str] = []

    def observation_space(self, agent: str) -> spaces.Box:
        return spaces.Box(-1.0, 10.0, (3 if agent == "left" else 4,), np.float32)

    def action_space(self, agent: str) -> spaces.Discrete:
        return spaces.Discrete(2 if agent == "left" else 3)

    def _obs(self) -> dict[str, np.ndarray]:
        clock = self.t / self.length
        return {
            "left": np.array([0.0, clock, 1.0], np.float32),
            "right": np.array([1.0, clock, 0.0, 1.0], np.float32),
        }

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[dict, dict]:
        self.t, self.agents = 0, list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        self.t += 1
        rewards = {
            "left": float(int(actions["left"]) == 1),
            "right": float(int(actions["right"]) == 2),
        }
        over = self.t >= self.length
        if over:
            self.agents = []
        none = {a: {} for a in self.possible_agents}
        terms = {a: False for a in self.possible_agents}
        truncs = {a: over for a in self.possible_agents}
        return self._obs(), rewards, terms, truncs, none

    def close(self) -> None:
        return None
