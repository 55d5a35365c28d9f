"""The small core of interfaces: Policy, Learner, Actor and the parameter client."""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from surreal.spaces import EnvInfo

Batch = dict[str, np.ndarray]
Params = dict[str, np.ndarray]


@dataclass
class LearnerConfig:
    """Fields every algorithm config has; algorithms subclass this dataclass."""

    lr: float = 3e-4
    """Learning rate of the optimizer."""
    gamma: float = 0.99
    """Discount factor."""


class Policy(abc.ABC):
    """Maps a batch of observations to actions; runs in actor and evaluator processes.

    A policy is built by `Learner.make_policy` and gets its weights only through
    `load_params`, with the flat dict of numpy arrays the learner's `params()` returned.
    """

    @abc.abstractmethod
    def act(self, obs: np.ndarray, deterministic: bool = False) -> tuple[np.ndarray, Batch]:
        """Choose actions for a batch of observations.

        Args:
            obs: observations, shape [num_envs, *obs_shape].
            deterministic: take the most likely action (evaluation) instead of sampling.

        Returns:
            (actions [num_envs, ...], extras): extras are per-env arrays the actor stores with the
            step (e.g. `logprob`, `value`); the learner reads them from the batch.
        """

    def value(self, obs: np.ndarray) -> np.ndarray | None:
        """Value estimates used to bootstrap a segment's last step; None if not needed."""
        return None

    @abc.abstractmethod
    def load_params(self, params: Params) -> None:
        """Load the weights (and normalizer) that the learner published."""

    def reset(self, done: np.ndarray) -> None:
        """Forget per-environment state (a recurrent policy's memory) where `done` [num_envs] is
        true: those environments start a new episode at the next `act`."""
        return None  # feed-forward policies hold no state


class Learner(abc.ABC):
    """Learns from batches of experience; subclass it to write a new algorithm.

    The runtime calls, in order: `__init__(config, env_info)`, then repeatedly `learn(batch)` and
    `params()` (published to the actors), `state_dict()` at checkpoints and `load_state_dict()` on
    `--resume`. A batch holds the segments several actors sent, stacked: every key has shape
    [segments, rollout_length, num_envs, ...]; see `Actor` for the keys.
    """

    config_class: ClassVar[type] = LearnerConfig
    """The dataclass that holds this algorithm's settings (`--set algo.<field>=...`)."""
    on_policy: ClassVar[bool] = True
    """On-policy learners get each segment once (FIFO); off-policy ones sample a replay."""

    def __init__(self, config: Any, env_info: EnvInfo) -> None:
        self.config = config
        self.env_info = env_info
        self.progress = 0.0
        """Fraction of `run.steps` consumed so far; the runtime sets it before each `learn`."""

    @classmethod
    @abc.abstractmethod
    def make_policy(cls, config: Any, env_info: EnvInfo) -> Policy:
        """Build the policy that actors and evaluators run (no weights needed yet)."""

    @abc.abstractmethod
    def learn(self, batch: Batch) -> dict[str, float]:
        """Do one learner iteration on a batch; return metrics named from the fixed vocabulary
        (`losses/policy_loss`, `losses/value_loss`, `losses/approx_kl`, ...)."""

    @abc.abstractmethod
    def params(self) -> Params:
        """The weights actors need, as a flat dict of numpy arrays (no torch tensors)."""

    @abc.abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: model, optimizer, normalizers, counters."""

    @abc.abstractmethod
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""


@dataclass
class Actor:
    """Steps a batch of environments with a policy and cuts the stream into segments.

    Each segment is a dict of arrays with leading dims [rollout_length, num_envs]:
    `obs`, `action`, `reward`, `terminated`, `truncated` (this step ended the episode),
    the policy's extras (e.g. `logprob`, `value`), and `next_value` [num_envs] (the value of the
    observation after the last step, when the policy has one) and `final_value`
    [rollout_length, num_envs] (the value of the true last observation of a truncated episode, so
    time limits are bootstrapped, not treated as failures).
    """

    env: Any
    """A `surreal.envs.VectorEnv`."""
    policy: Policy
    rollout_length: int
    obs: np.ndarray | None = None
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)

    def rollout(self) -> Batch:
        """Collect one segment of `rollout_length` steps from every environment."""
        if self.obs is None:
            self.obs = self.env.reset()
        steps: dict[str, list[np.ndarray]] = {}
        for _ in range(self.rollout_length):
            obs = self.obs
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
            for key, value in step.items():
                steps.setdefault(key, []).append(np.asarray(value))
            self.policy.reset(terminated | truncated)
            self.episode_returns.extend(info.get("episode_returns", []))
            self.episode_lengths.extend(info.get("episode_lengths", []))
            self.obs = next_obs
        segment = {key: np.stack(values) for key, values in steps.items()}
        next_value = self.policy.value(self.obs)
        if next_value is not None:
            segment["next_value"] = np.asarray(next_value, np.float32)
        return segment

    def pop_episodes(self) -> tuple[list[float], list[int]]:
        """Returns and lengths of the episodes finished since the last call."""
        returns, lengths = self.episode_returns, self.episode_lengths
        self.episode_returns, self.episode_lengths = [], []
        return returns, lengths


class ParameterClient:
    """Fetches the learner's latest parameters from the parameter server, only when they changed.

    A parameter server that restarts (or a reply that is lost or garbled) does not end the
    caller: `fetch` keeps asking, prints one line when the server has not answered for `timeout`
    seconds and one when it answers again, and raises RequestTimeout only after `outage_s`
    seconds without an answer. Attempts start with a 1 s wait that doubles up to `timeout`, so a
    lost reply costs about a second while a large reply on a slow link still gets `timeout`.

    Args:
        address: the parameter server's ZeroMQ address ("tcp://host:port").
        timeout: the longest wait for one reply.
        outage_s: how long `fetch` keeps retrying a server that does not answer.
    """

    def __init__(self, address: str, timeout: float = 5.0, outage_s: float = 600.0) -> None:
        import caraml

        self._client = caraml.Client(address, timeout=timeout, retries=0)
        self.address, self.timeout, self.outage_s = address, timeout, outage_s
        self.version = 0
        self.step = 0
        self.latest_version = 0
        self.outages = 0

    def fetch(self) -> Params | None:
        """Ask for parameters newer than the ones held; returns them, or None if unchanged.

        Raises:
            caraml.RequestTimeout: no valid answer for `outage_s` seconds.
        """
        import caraml
        from surreal.components.guard import Invalid
        from surreal.components.schemas import params_reply

        started, wait, announced = time.monotonic(), min(1.0, self.timeout), False
        while True:
            try:
                request = {"version": self.version}
                reply = params_reply(self._client.request(request, timeout=wait))
                break
            except (caraml.CaramlError, Invalid) as exc:
                silent = time.monotonic() - started
                if not announced and silent >= self.timeout:
                    announced, self.outages = True, self.outages + 1
                    print(
                        f"parameter server at {self.address} did not answer for {silent:.0f} s "
                        f"({exc}); retrying for up to {self.outage_s:.0f} s",
                        flush=True,
                    )
                if silent > self.outage_s:
                    raise caraml.RequestTimeout(
                        f"parameter server at {self.address} gave no valid answer for "
                        f"{self.outage_s:.0f} s; check that it runs (`surreal status RUN_DIR`)"
                    ) from exc
                if isinstance(exc, caraml.RequestTimeout):
                    wait = min(wait * 2, self.timeout)
                else:
                    self._client_wait(0.5)  # an immediate error: pace the retries
        if announced:
            print(
                f"parameter server answers again after {time.monotonic() - started:.1f} s",
                flush=True,
            )
        self.latest_version = reply["version"]
        if reply.get("params") is None:
            return None
        self.version = reply["version"]
        self.step = reply["step"]
        return reply["params"]

    def wait_for(
        self, min_version: int, deadline_s: float = 600.0, poll_s: float = 0.02
    ) -> Params | None:
        """Poll until the server holds at least `min_version`; returns new params or None.

        Raises:
            TimeoutError: nothing new within `deadline_s` (is the learner running?).
        """
        deadline = time.monotonic() + deadline_s
        params = None
        while True:
            fresh = self.fetch()
            params = fresh if fresh is not None else params
            if self.version >= min_version:
                return params
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no parameters of version >= {min_version} after {deadline_s:.0f} s; "
                    "check that the learner is running (`surreal status RUN_DIR`)"
                )
            self._client_wait(poll_s)

    @staticmethod
    def _client_wait(seconds: float) -> None:
        # Polling with a deadline: the server has nothing newer yet.
        time.sleep(seconds)

    def close(self) -> None:
        """Close the connection."""
        self._client.close()
