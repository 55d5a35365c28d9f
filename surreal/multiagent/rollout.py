"""JointRollout: steps joint envs with every policy and cuts one segment per policy.

Policy P's segment has the keys and shapes of `surreal.api.core.Actor`'s, with one column per
(env, agent of P) pair: [rollout_length, num_envs * len(P's agents)], env-major. In self-play
P has one column per env: the seat that learns this episode (drawn at every reset); the other
seat plays an opponent from the pool, and its steps are not sent. A joint episode ends for all
agents when any agent's ends: agents not terminated then count as truncated (bootstrapped).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from surreal.api.core import Batch, Policy
from surreal.envs.multiagent import JointEnv
from surreal.multiagent.policy_runs import PolicySpec
from surreal.multiagent.selfplay import OpponentPool, seats_for


class JointRollout:
    """Route each agent's steps to its policy's segment.

    Args:
        envs: the joint envs this actor steps.
        specs: the run's policies (which agents each runs).
        policies: name -> the Policy acting for it.
        rollout_length: steps per segment.
        central_value: append the global state to every agent's observation.
        pool: self-play opponents (one policy only).
        seed: seeds the self-play seat draws.
    """

    def __init__(
        self,
        envs: list[JointEnv],
        specs: list[PolicySpec],
        policies: dict[str, Policy],
        rollout_length: int,
        central_value: bool = False,
        pool: OpponentPool | None = None,
        seed: int = 0,
    ) -> None:
        self.envs, self.specs, self.policies = envs, specs, policies
        self.T, self.central, self.pool = rollout_length, central_value, pool
        self.rng = np.random.default_rng(seed)
        self.agents = envs[0].agents
        self.obs: list[dict[str, np.ndarray]] | None = None
        n = len(envs)
        self.seat = [seats_for(self.agents, self.rng) for _ in range(n)]
        self.opponent = [pool.draw() if pool else -1 for _ in range(n)]
        self.returns = [dict.fromkeys(self.agents, 0.0) for _ in range(n)]
        self.lengths = [0] * n
        self.finished: list[dict[str, Any]] = []
        """Episodes ended since `pop_episodes`: {"returns": agent -> return, "length": steps,
        "seat": the learning seat (self-play), "opponent": pool version or -1 (current)}."""

    def columns(self, spec: PolicySpec) -> list[tuple[int, str]]:
        """(env index, agent) of each of `spec`'s columns, in segment order."""
        if self.pool is not None:
            return [(i, self.seat[i]) for i in range(len(self.envs))]
        return [(i, a) for i in range(len(self.envs)) for a in spec.agents]

    def _input(self, obs: dict[str, np.ndarray], agent: str, state: Any) -> np.ndarray:
        return np.concatenate([obs[agent], state]) if self.central else obs[agent]

    def _inputs(
        self, obs: list[dict[str, np.ndarray]], cols: list[tuple[int, str]], states: list
    ) -> np.ndarray:
        return np.stack([self._input(obs[i], a, states[i]) for i, a in cols]).astype(np.float32)

    def _states(self, obs: list[dict[str, np.ndarray]]) -> list:
        return [
            env.state(o) if self.central else None for env, o in zip(self.envs, obs, strict=True)
        ]

    def rollout(self) -> dict[str, Batch]:
        """One segment per policy, `rollout_length` joint steps of every env."""
        if self.obs is None:
            self.obs = [env.reset() for env in self.envs]
        steps: dict[str, dict[str, list]] = {s.name: {} for s in self.specs}
        for _ in range(self.T):
            self._step(steps)
        segments = {}
        states = self._states(self.obs)
        for spec in self.specs:
            segment = {k: np.stack(v) for k, v in steps[spec.name].items()}
            x = self._inputs(self.obs, self.columns(spec), states)
            value = self.policies[spec.name].value(x)
            if value is not None:
                segment["next_value"] = np.asarray(value, np.float32)
            segments[spec.name] = segment
        return segments

    def _step(self, steps: dict[str, dict[str, list]]) -> None:
        obs, n = self.obs, len(self.envs)
        states = self._states(obs)
        actions: list[dict[str, Any]] = [{} for _ in range(n)]
        taken: dict[str, tuple] = {}
        for spec in self.specs:
            cols = self.columns(spec)
            x = self._inputs(obs, cols, states)
            action, extras = self.policies[spec.name].act(x)
            for (i, agent), a in zip(cols, action, strict=True):
                actions[i][agent] = a
            taken[spec.name] = (cols, x, action, extras)
        if self.pool is not None:
            self._opponents(obs, states, actions)
        results = [env.step(a) for env, a in zip(self.envs, actions, strict=True)]
        ended = [any(r[2].values()) or any(r[3].values()) for r in results]
        final_states = self._states([r[0] for r in results])
        for spec in self.specs:
            cols, x, action, extras = taken[spec.name]
            policy = self.policies[spec.name]
            reward = np.array([results[i][1][a] for i, a in cols], np.float32)
            terminated = np.array([results[i][2][a] for i, a in cols], bool)
            truncated = np.array([ended[i] for i, _ in cols], bool) & ~terminated
            final_value = np.zeros(len(cols), np.float32)
            if truncated.any():
                final_x = self._inputs([r[0] for r in results], cols, final_states)
                value = policy.value(final_x)
                if value is not None:
                    final_value = np.where(truncated, value, 0.0).astype(np.float32)
            step = {
                "obs": x,
                "action": action,
                "reward": reward,
                "terminated": terminated,
                "truncated": truncated,
                "final_value": final_value,
                **extras,
            }
            for key, value in step.items():
                steps[spec.name].setdefault(key, []).append(np.asarray(value))
            policy.reset(terminated | truncated)
        self.obs = [r[0] for r in results]
        for i, (_, reward, _, _) in enumerate(results):
            for agent in self.agents:
                self.returns[i][agent] += reward[agent]
            self.lengths[i] += 1
            if ended[i]:
                self._end_episode(i)

    def _opponents(
        self, obs: list[dict[str, np.ndarray]], states: list, actions: list[dict[str, Any]]
    ) -> None:
        """The non-learning seats act with their episode's pool opponent."""
        current = self.policies[self.specs[0].name]
        by_choice: dict[int, list[tuple[int, str]]] = {}
        for i in range(len(self.envs)):
            for agent in self.agents:
                if agent != self.seat[i]:
                    by_choice.setdefault(self.opponent[i], []).append((i, agent))
        for choice, cols in by_choice.items():
            action, _ = self.pool.policy(choice, current).act(self._inputs(obs, cols, states))
            for (i, agent), a in zip(cols, action, strict=True):
                actions[i][agent] = a

    def _end_episode(self, i: int) -> None:
        opponent = self.opponent[i]
        version = self.pool.entries[opponent][0] if self.pool and opponent >= 0 else -1
        self.finished.append(
            {
                "returns": dict(self.returns[i]),
                "length": self.lengths[i],
                "seat": self.seat[i],
                "opponent": version,
            }
        )
        self.obs[i] = self.envs[i].reset()
        self.returns[i] = dict.fromkeys(self.agents, 0.0)
        self.lengths[i] = 0
        self.seat[i] = seats_for(self.agents, self.rng)
        self.opponent[i] = self.pool.draw() if self.pool else -1

    def pop_episodes(self) -> list[dict[str, Any]]:
        """The episodes ended since the last call."""
        out, self.finished = self.finished, []
        return out

    def policy_returns(self, spec: PolicySpec, episode: dict[str, Any]) -> list[float]:
        """The returns in `episode` that belong to `spec`'s trajectories (its agents', or in
        self-play the learning seat's)."""
        if self.pool is not None:
            return [episode["returns"][episode["seat"]]]
        return [episode["returns"][a] for a in spec.agents]
