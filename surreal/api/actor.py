"""`Actor`: steps a batch of environments with a policy and cuts the stream into segments (the
runtime's actor process and the launch check's synthetic batches use it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

Batch = dict[str, np.ndarray]


@dataclass
class Actor:
    """Steps a batch of environments with a policy and cuts the stream into segments.

    Each segment is a dict of arrays with leading dims [rollout_length, num_envs]:
    `obs`, `action`, `reward`, `terminated`, `truncated` (this step ended the episode),
    the policy's extras (e.g. `logprob`, `value`), and `next_value` [num_envs] (the value of the
    observation after the last step, when the policy has one) and `final_value`
    [rollout_length, num_envs] (the value of the true last observation of a truncated episode, so
    time limits are bootstrapped, not treated as failures). `rollout_episodes` adds `mask`.
    """

    env: Any
    """A `surreal.envs.VectorEnv`."""
    policy: Any
    """A `surreal.api.core.Policy`."""
    rollout_length: int
    obs: np.ndarray | None = None
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)

    def _step(self, obs: np.ndarray) -> tuple[Batch, dict[str, Any], np.ndarray]:
        """Act on `obs` and step every env: (the step's arrays, the env's info, next obs)."""
        action, extras = self.policy.act(obs)
        next_obs, reward, terminated, truncated, info = self.env.step(action)
        final_value = np.zeros(len(reward), np.float32)
        if truncated.any() and info.get("final_obs") is not None:
            value = self.policy.value(info["final_obs"])
            if value is not None:
                final_value = np.where(truncated & ~terminated, value, 0.0).astype(np.float32)
        step = {
            "obs": obs,
            "action": action,
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
            "final_value": final_value,
            **extras,
        }
        self.policy.reset(terminated | truncated)
        return {k: np.asarray(v) for k, v in step.items()}, info, next_obs

    def rollout(self) -> Batch:
        """Collect one segment of `rollout_length` steps from every environment."""
        if self.obs is None:
            self.obs = self.env.reset()
        steps: dict[str, list[np.ndarray]] = {}
        for _ in range(self.rollout_length):
            step, info, self.obs = self._step(self.obs)
            for key, value in step.items():
                steps.setdefault(key, []).append(value)
            self.episode_returns.extend(info.get("episode_returns", []))
            self.episode_lengths.extend(info.get("episode_lengths", []))
        segment = {key: np.stack(values) for key, values in steps.items()}
        next_value = self.policy.value(self.obs)
        if next_value is not None:
            segment["next_value"] = np.asarray(next_value, np.float32)
        return segment

    def rollout_episodes(self) -> Batch:
        """One segment of whole episodes (for a `Learner.episode_aligned` learner).

        Every environment starts a new episode and runs until it ends; the steps after its end
        are padding: zeros, with `mask` [rollout_length, num_envs] 0 there and 1 on real steps.
        An episode still running after `rollout_length` steps is cut there (`truncated`, with its
        `final_value`), so set `actor.rollout_length` to the environment's episode limit.
        `next_value` is 0: nothing follows the segment.
        """
        obs = self.env.reset()
        alive = np.ones(len(obs), bool)
        self.policy.reset(alive.copy())
        steps: dict[str, list[np.ndarray]] = {}
        for t in range(self.rollout_length):
            step, info, next_obs = self._step(obs)
            ended = step["terminated"] | step["truncated"]
            cut = alive & ~ended if t == self.rollout_length - 1 else np.zeros_like(alive)
            if cut.any():
                step["truncated"] = step["truncated"] | cut
                value = self.policy.value(next_obs)
                if value is not None:
                    step["final_value"] = np.where(cut, value, step["final_value"])
            for key, value in step.items():
                kept = np.zeros_like(value)
                kept[alive] = value[alive]
                steps.setdefault(key, []).append(kept)
            steps.setdefault("mask", []).append(alive.astype(np.float32))
            for i, ret, length in zip(
                np.flatnonzero(ended),
                info.get("episode_returns", []),
                info.get("episode_lengths", []),
                strict=False,
            ):
                if alive[i]:
                    self.episode_returns.append(ret)
                    self.episode_lengths.append(length)
            alive &= ~ended
            obs = next_obs
            if not alive.any():
                break
        for values in steps.values():  # pad every env's finished episode to rollout_length
            values.extend([np.zeros_like(values[0])] * (self.rollout_length - len(values)))
        segment = {key: np.stack(values) for key, values in steps.items()}
        segment["next_value"] = np.zeros(len(obs), np.float32)
        self.obs = None
        return segment

    def pop_episodes(self) -> tuple[list[float], list[int]]:
        """Returns and lengths of the episodes finished since the last call."""
        returns, lengths = self.episode_returns, self.episode_lengths
        self.episode_returns, self.episode_lengths = [], []
        return returns, lengths
