"""Wrappers every family shares: dict-observation filter/concat, action repeat, episode limit,
frame stacking, episode statistics, reward normalization and action clipping."""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from surreal.api.config import EnvConfig


class FilterConcatObs(gymnasium.ObservationWrapper):
    """Keep some keys of a Dict observation and concatenate them into one flat float32 vector."""

    def __init__(self, env: gymnasium.Env, keys: list[str] | None = None) -> None:
        super().__init__(env)
        space = env.observation_space
        available = sorted(space.spaces)
        self.keys = list(keys) if keys else available
        missing = [k for k in self.keys if k not in space.spaces]
        if missing:
            raise ValueError(f"observation keys {missing} not in {available}; fix env.obs_keys")
        size = sum(int(np.prod(space.spaces[k].shape)) for k in self.keys)
        self.observation_space = spaces.Box(-np.inf, np.inf, (size,), np.float32)

    def observation(self, observation: dict) -> np.ndarray:
        return np.concatenate([np.asarray(observation[k], np.float32).ravel() for k in self.keys])


class ActionRepeat(gymnasium.Wrapper):
    """Repeat each action `repeat` times, summing rewards; stop early when the episode ends."""

    def __init__(self, env: gymnasium.Env, repeat: int) -> None:
        super().__init__(env)
        self.repeat = repeat

    def step(self, action: Any) -> tuple:
        total = 0.0
        for _ in range(self.repeat):
            obs, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        return obs, total, terminated, truncated, info


class EpisodeLimit(gymnasium.Wrapper):
    """Truncate episodes after `max_steps` agent steps."""

    def __init__(self, env: gymnasium.Env, max_steps: int) -> None:
        super().__init__(env)
        self.max_steps = max_steps
        self.steps = 0

    def reset(self, **kwargs: Any) -> tuple:
        self.steps = 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        return obs, reward, terminated, truncated or self.steps >= self.max_steps, info


class FrameStack(gymnasium.Wrapper):
    """Concatenate the last `k` observations along the first axis (oldest first)."""

    def __init__(self, env: gymnasium.Env, k: int) -> None:
        super().__init__(env)
        self.k = k
        self.frames: deque = deque(maxlen=k)
        box = env.observation_space
        low = np.concatenate([box.low] * k, axis=0)
        high = np.concatenate([box.high] * k, axis=0)
        self.observation_space = spaces.Box(low, high, dtype=box.dtype)

    def reset(self, **kwargs: Any) -> tuple:
        obs, info = self.env.reset(**kwargs)
        for _ in range(self.k):
            self.frames.append(obs)
        return np.concatenate(self.frames, axis=0), info

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.frames.append(obs)
        return np.concatenate(self.frames, axis=0), reward, terminated, truncated, info


class EpisodeStats(gymnasium.Wrapper):
    """Add `info["episode"] = {"r": return, "l": length}` at the end of each episode (raw reward)."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.ret, self.length = 0.0, 0

    def reset(self, **kwargs: Any) -> tuple:
        self.ret, self.length = 0.0, 0
        return self.env.reset(**kwargs)

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.ret += float(reward)
        self.length += 1
        if terminated or truncated:
            info = dict(info, episode={"r": self.ret, "l": self.length})
        return obs, reward, terminated, truncated, info


class NormalizeReward(gymnasium.Wrapper):
    """Divide rewards by a running std of the discounted return (as in CleanRL/SB3 for MuJoCo)."""

    def __init__(self, env: gymnasium.Env, gamma: float = 0.99, clip: float = 10.0) -> None:
        super().__init__(env)
        self.gamma, self.clip = gamma, clip
        self.ret = 0.0
        self.count, self.mean, self.m2 = 1e-4, 0.0, 0.0

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.ret = self.ret * self.gamma + float(reward)
        self._update(self.ret)
        if terminated or truncated:
            self.ret = 0.0
        std = np.sqrt(self.m2 / self.count + 1e-8)
        return obs, float(np.clip(reward / std, -self.clip, self.clip)), terminated, truncated, info

    def _update(self, x: float) -> None:
        self.count += 1
        delta = x - self.mean
        self.mean += delta / self.count
        self.m2 += delta * (x - self.mean)


class ClipAction(gymnasium.ActionWrapper):
    """Clip continuous actions to the action space bounds (policies sample unbounded Gaussians)."""

    def action(self, action: np.ndarray) -> np.ndarray:
        return np.clip(action, self.action_space.low, self.action_space.high)


class Float32Obs(gymnasium.ObservationWrapper):
    """Observations as float32 arrays."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        box = env.observation_space
        self.observation_space = spaces.Box(
            box.low.astype(np.float32), box.high.astype(np.float32), dtype=np.float32
        )

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.asarray(observation, np.float32)


def apply(env: gymnasium.Env, config: EnvConfig, seed: int | None = None) -> gymnasium.Env:
    """Apply the wrappers `config` asks for, in a fixed order, and seed the first reset."""
    if isinstance(env.observation_space, spaces.Dict):
        env = FilterConcatObs(env, config.obs_keys)
    elif config.obs_keys:
        raise ValueError("env.obs_keys applies to dict observations only; unset it")
    env = Float32Obs(env)
    if config.action_repeat > 1:
        env = ActionRepeat(env, config.action_repeat)
    if config.max_episode_steps:
        env = EpisodeLimit(env, config.max_episode_steps)
    if config.frame_stack > 1:
        env = FrameStack(env, config.frame_stack)
    env = EpisodeStats(env)
    if config.normalize_reward:
        env = NormalizeReward(env)
    if isinstance(env.action_space, spaces.Box):
        env = ClipAction(env)
    if seed is not None:
        env.reset(seed=seed)
    return env
