"""Double buffering for env-only actors (Sample Factory's): two halves of an actor's environments,
each stepped by its own `Actor` in its own thread, so one half steps while the other waits for its
actions from a policy worker.

`actor.double_buffer` (default true) with `actor.inference=remote` and `env.num_envs` >= 2: the
runtime actor steps `SplitActor` halves instead of one `Actor`. Each half asks the worker as its
own client (`actor-I/0`, `actor-I/1`: its own recurrent memory there). Segments are the halves'
segments side by side along the env axis, in env order, so the learner sees the same shapes and
keys as with one `Actor` (environment i keeps seed `seed + i`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from surreal.api.core import Actor, Batch
from surreal.envs import VectorEnv


class Halves:
    """The two halves' VectorEnvs seen as one: `num_envs` and `close()`."""

    def __init__(self, envs: list[Any]) -> None:
        self.envs = envs
        self.num_envs = sum(env.num_envs for env in envs)

    def close(self) -> None:
        for env in self.envs:
            env.close()


class SplitActor:
    """`rollout`, `rollout_episodes` and `pop_episodes` of `surreal.api.core.Actor`, over two halves
    (`actors[0]` in the caller's thread, `actors[1]` in a helper thread)."""

    def __init__(self, actors: list[Actor]) -> None:
        self.actors = actors
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="half-1")

    def rollout(self) -> Batch:
        return self._both("rollout")

    def rollout_episodes(self) -> Batch:
        return self._both("rollout_episodes")

    def _both(self, method: str) -> Batch:
        other = self._pool.submit(getattr(self.actors[1], method))
        first = getattr(self.actors[0], method)()
        second = other.result()
        return {key: _side_by_side(first[key], second[key]) for key in first}

    def pop_episodes(self) -> tuple[list[float], list[int]]:
        returns: list[float] = []
        lengths: list[int] = []
        for actor in self.actors:
            r, n = actor.pop_episodes()
            returns += r
            lengths += n
        return returns, lengths

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _side_by_side(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Join two halves' arrays on the env axis: 1 for per-step [T, n, ...], 0 for [n] (next_value)."""
    return np.concatenate([a, b], axis=1 if a.ndim >= 2 else 0)


def build_actor(comp: Any, policy: Any, seed: int) -> tuple[Any, Any]:
    """(env, actor) for the runtime actor: one VectorEnv and `Actor`, or with remote inference and
    `actor.double_buffer` two halves (`Halves`, `SplitActor`)."""
    cfg = comp.config
    n = cfg.env.num_envs
    split = cfg.actor.inference == "remote" and cfg.actor.double_buffer and n >= 2
    if not split:
        env = VectorEnv(cfg.env.id, cfg.env, seed=seed)
        return env, Actor(env, policy, cfg.actor.rollout_length)
    sizes = (n - n // 2, n // 2)
    envs = [
        VectorEnv(cfg.env.id, cfg.env, seed=seed, num_envs=sizes[0]),
        VectorEnv(cfg.env.id, cfg.env, seed=seed + sizes[0], num_envs=sizes[1]),
    ]
    policies = [policy.twin(f"{policy.client}/0"), policy.twin(f"{policy.client}/1")]
    actors = [
        Actor(env, p, cfg.actor.rollout_length) for env, p in zip(envs, policies, strict=True)
    ]
    return Halves(envs), SplitActor(actors)
