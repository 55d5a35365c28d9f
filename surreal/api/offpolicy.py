"""What an off-policy algorithm declares (the `off-policy` recipe, `surreal.algos.offpolicy`):
its settings (`OffPolicyConfig`: replay, n-step returns, pacing) and the exploration its policy
gives the actors (`Explorer`). DDPG, TD3, SAC and DQN are written on these; so is yours
(docs/new_algorithm.md). Torch-free.

An off-policy policy has, besides `act`:
- `unit_action(obs, deterministic=False)`: the actions as replay stores them (DDPG: in [-1, 1]^A,
  DQN: action indices); a policy worker serves it with `actor.inference=remote`.
- `scale(units)`: those as the environment takes them (DDPG: to the action bounds).
- `explorer(num_envs, index, actors, seed)`: an `Explorer` for actor `index` of `actors`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from surreal.api.bounds import bounded, require
from surreal.api.config import ConfigError
from surreal.api.core import LearnerConfig


class Explorer(Protocol):
    """One actor's exploration (the off-policy actor process calls it every step)."""

    def act(
        self, unit_action: Callable[..., np.ndarray], obs: np.ndarray, progress: float
    ) -> np.ndarray:
        """The exploratory actions, as replay stores them, for a batch of observations;
        `unit_action` is the policy's (local or a policy worker's), `progress` the fraction of
        the run's budget the learner has used (e.g. an epsilon schedule)."""

    def random(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """`n` uniformly random actions, as replay stores them (before the first parameters)."""

    def reset(self, done: np.ndarray) -> None:
        """The envs where `done` [num_envs] is true start a new episode."""

    def metrics(self) -> dict[str, float]:
        """What the actor reports about its exploration (e.g. `actor/epsilon`)."""


@dataclass
class OffPolicyConfig(LearnerConfig):
    """The settings every off-policy algorithm has: replay, n-step returns and pacing."""

    n_step: int = bounded(3, ge=1)
    """n of the n-step return R_t^n used in the critic's target."""
    batch_size: int = bounded(256, ge=1)
    """Transitions per learner update."""
    replay_capacity: int = bounded(1_000_000, ge=1)
    """Transitions kept by the replay (by each shard when sharded)."""
    replay_start: int = bounded(1_000, ge=1)
    """Transitions stored before the learner samples (the sampling-start size); with K > 1
    replay shards each shard samples from half its share (`replay_shard.sampling_start`)."""
    replay_shards: int = bounded(1, ge=1)
    """Replay shards behind a load-balancing proxy (actors' chunks spread over them)."""
    param_shards: int = bounded(1, ge=1)
    """Parameter-server shards behind a load-balancing proxy."""
    dedup_obs: bool = False
    """Store each observation once; n-step transitions refer to it (less memory and traffic)."""
    updates_per_step: float = bounded(1.0, ge=0)
    """Learner updates per env step: the single-process loop does exactly this many; distributed
    actors pause once all of them together are more than replay_start + updates / updates_per_step
    env steps ahead of the learner, and the learner once it is more than a small slack ahead of
    updates_per_step x the env steps past the warm-up (0: neither waits, as in Ape-X)."""
    chunk_size: int = bounded(32, ge=1)
    """Transitions per message an actor pushes to replay."""
    fetch_batches: int = bounded(4, ge=1)
    """Batches per replay request: the learner takes this many updates per round trip."""
    publish_every: int = bounded(20, ge=1)
    """Learner updates between two parameter publications (a new version for the actors)."""
    checkpoint_every_s: float = bounded(60.0, gt=0)
    """Seconds between learner checkpoints (and one at exit)."""
    save_replay: bool = True
    """Each replay shard saves its transitions beside the checkpoint (`checkpoints/replay-K.npz`)
    whenever the learner writes one and when it stops, and loads them back on `--resume` and
    after a restart (false: shards neither save nor load them)."""

    def __post_init__(self) -> None:
        require(self, "n_step", "replay_shards", "param_shards", "batch_size")

    def check(self, env_info: Any = None) -> None:
        """The replay can reach `replay_start` (each field's own range is declared beside it)."""
        held = self.replay_capacity * self.replay_shards
        if self.replay_start > held:
            raise ConfigError(
                f"algo.replay_start={self.replay_start} exceeds what the replay holds "
                f"({held} = replay_capacity x replay_shards); lower it or raise the capacity"
            )

    def replay_items(self) -> int:
        """Transitions one replay buffer process stores (`LearnerConfig.replay_items`): the
        replay capacity, which each shard holds when sharded."""
        return self.replay_capacity
