"""n-step transitions: the writer that turns one env's steps into (o_t, a_t, R_t^n, o_t+m, discount).

For a step t of an episode, with m = min(n, steps left in the episode):

    R_t^n    = r_t + gamma r_t+1 + ... + gamma^(m-1) r_t+m-1
    discount = gamma^m if the episode did not terminate within those m steps, else 0

so the critic's target is R_t^n + discount * Q'(o_t+m, mu'(o_t+m)). A truncated episode (time
limit) still bootstraps from its last observation. Each observation gets a running id, so a chunk
can store every observation once (de-duplication: o_t+n of one transition is o_t of another).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np


@dataclass
class Transition:
    """One n-step transition; obs ids are unique within the writer's stream."""

    obs: np.ndarray
    act: np.ndarray
    ret: float
    next_obs: np.ndarray
    discount: float
    obs_id: int
    next_obs_id: int


class NStepWriter:
    """Accumulates one environment's steps and emits finished n-step transitions."""

    def __init__(self, n: int, gamma: float, stream: int = 0) -> None:
        """Args: n: return horizon (>= 1). gamma: discount factor. stream: this env's index
        (keeps obs ids of the envs of one actor apart when their transitions share a chunk)."""
        if n < 1:
            raise ValueError(f"n={n}; the n-step horizon must be >= 1")
        self.n, self.gamma = n, gamma
        self._pending: deque[tuple[np.ndarray, np.ndarray, float, int]] = deque()
        self._next_id = stream << 40
        self._cur_id: int | None = None

    def step(
        self,
        obs: np.ndarray,
        act: np.ndarray,
        rew: float,
        next_obs: np.ndarray,
        terminated: bool,
        truncated: bool,
    ) -> list[Transition]:
        """Record o_t, a_t, r_t -> o_t+1 and return the transitions that became complete."""
        if self._cur_id is None:
            self._cur_id = self._new_id()
        self._pending.append((np.asarray(obs), np.asarray(act), float(rew), self._cur_id))
        next_id = self._new_id()
        self._cur_id = next_id
        out: list[Transition] = []
        if terminated or truncated:
            while self._pending:
                out.append(self._pop(next_obs, next_id, terminated))
            self._cur_id = None  # the next step starts a new episode (its reset obs gets a new id)
        elif len(self._pending) == self.n:
            out.append(self._pop(next_obs, next_id, False))
        return out

    def _new_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def _pop(self, boot_obs: np.ndarray, boot_id: int, terminated: bool) -> Transition:
        ret = 0.0
        for k, (_, _, r, _) in enumerate(self._pending):
            ret += self.gamma**k * r
        m = len(self._pending)
        obs, act, _, obs_id = self._pending.popleft()
        discount = 0.0 if terminated else self.gamma**m
        return Transition(obs, act, ret, np.asarray(boot_obs), discount, obs_id, boot_id)


def pack_chunk(transitions: list[Transition], dedup: bool = False) -> dict[str, np.ndarray]:
    """Stack transitions into the dict of arrays that actors push to replay.

    Plain chunks hold obs/act/rew/next_obs/discount. De-duplicated chunks hold each distinct
    observation once in `obs_table` and refer to it by row from `obs_idx` / `next_obs_idx`.
    """
    chunk = {
        "act": _actions(np.stack([t.act for t in transitions])),
        "rew": np.array([t.ret for t in transitions], dtype=np.float32),
        "discount": np.array([t.discount for t in transitions], dtype=np.float32),
    }
    if not dedup:
        chunk["obs"] = np.stack([t.obs for t in transitions]).astype(np.float32)
        chunk["next_obs"] = np.stack([t.next_obs for t in transitions]).astype(np.float32)
        return chunk
    rows: dict[int, int] = {}
    table: list[np.ndarray] = []

    def row(obs_id: int, obs: np.ndarray) -> int:
        if obs_id not in rows:
            rows[obs_id] = len(table)
            table.append(obs)
        return rows[obs_id]

    chunk["obs_idx"] = np.array([row(t.obs_id, t.obs) for t in transitions], dtype=np.int32)
    chunk["next_obs_idx"] = np.array(
        [row(t.next_obs_id, t.next_obs) for t in transitions], dtype=np.int32
    )
    chunk["obs_table"] = np.stack(table).astype(np.float32)
    return chunk


def _actions(act: np.ndarray) -> np.ndarray:
    """Actions as replay keeps them: float32 (continuous), int64 (discrete indices)."""
    return act.astype(np.int64 if act.dtype.kind in "iu" else np.float32)
