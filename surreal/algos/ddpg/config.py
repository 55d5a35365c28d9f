"""DDPGConfig: DDPG with the TD3 options, n-step returns and (sharded) uniform replay."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from surreal.api.core import LearnerConfig
from surreal.api.device import GPU_MIN_MINIBATCH


@dataclass
class DDPGConfig(LearnerConfig):
    """Deep Deterministic Policy Gradient; `DDPGConfig.td3()` turns on TD3's three options."""

    lr: float = 1e-3
    """Adam learning rate of the actor and the critic(s)."""
    gamma: float = 0.99
    """Discount factor."""
    hidden: tuple[int, ...] = (256, 256)
    """Hidden layer sizes of the actor and critic MLPs."""
    n_step: int = 3
    """n of the n-step return R_t^n used in the critic's target."""
    batch_size: int = 256
    """Transitions per learner update."""
    target_update: str = "soft"
    """'soft' (Polyak averaging at every actor update) or 'hard' (copy every target_period)."""
    tau: float = 0.005
    """Polyak factor of soft target updates."""
    target_period: int = 500
    """Learner updates between hard target copies."""
    noise: str = "gaussian"
    """Exploration noise: 'gaussian' or 'ou' (Ornstein-Uhlenbeck)."""
    sigma: float = 0.1
    """Noise scale (in units of half the action range) of actor 0."""
    sigma_spread: float = 4.0
    """Actor i of N explores with sigma * sigma_spread**(i/(N-1)): a spread of scales."""
    ou_theta: float = 0.15
    """Mean reversion of the OU process."""
    twin_critics: bool = False
    """TD3: two critics; the target takes their minimum."""
    policy_smoothing: float = 0.0
    """TD3: std of the clipped noise added to target actions (0: off)."""
    smoothing_clip: float = 0.5
    """TD3: clip of the target smoothing noise."""
    actor_delay: int = 1
    """TD3: critic updates per actor (and target) update."""
    replay_capacity: int = 1_000_000
    """Transitions kept by the replay (by each shard when sharded)."""
    replay_start: int = 1_000
    """Transitions stored before the learner samples (the sampling-start size)."""
    replay_shards: int = 1
    """Replay shards behind a load-balancing proxy (actors' chunks spread over them)."""
    param_shards: int = 1
    """Parameter-server shards behind a load-balancing proxy."""
    dedup_obs: bool = False
    """Store each observation once; n-step transitions refer to it (less memory and traffic)."""
    grad_clip: float = 0.0
    """Max global gradient norm (0: no clipping)."""
    updates_per_step: float = 1.0
    """Learner updates per env step: the single-process loop does exactly this many; distributed
    actors pause once all of them together are more than replay_start + updates / updates_per_step
    env steps ahead of the learner (0: actors never wait, as in Ape-X)."""
    chunk_size: int = 32
    """Transitions per message an actor pushes to replay."""
    fetch_batches: int = 4
    """Batches per replay request: the learner takes this many updates per round trip."""
    publish_every: int = 20
    """Learner updates between two parameter publications (a new version for the actors)."""
    checkpoint_every_s: float = 60.0
    """Seconds between learner checkpoints (and one at exit)."""

    def __post_init__(self) -> None:
        if self.target_update not in ("soft", "hard"):
            raise ValueError(f"algo.target_update={self.target_update!r}; use 'soft' or 'hard'")
        if self.noise not in ("gaussian", "ou"):
            raise ValueError(f"algo.noise={self.noise!r}; use 'gaussian' or 'ou'")
        for name in ("n_step", "actor_delay", "replay_shards", "param_shards", "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"algo.{name}={getattr(self, name)}; it must be >= 1")
        self.hidden = tuple(int(h) for h in self.hidden)

    @classmethod
    def family_defaults(cls, family: str) -> dict[str, Any]:
        """Settings `surreal launch` applies for a task family before the user's `--set`
        (`surreal.algos.families`): on mujoco tasks CleanRL's TD3/DDPG learning rate 3e-4 and
        a longer random warm-up (10k transitions); classic tasks keep the defaults above
        (Pendulum learns in a few thousand steps with them); robosuite: not measured, none."""
        if family == "mujoco":
            return {"algo.lr": 3e-4, "algo.replay_start": 10_000}
        return {}

    def check(self, env_info: Any = None) -> None:
        """`algo.batch_size` >= 1 (the shared ranges allow 0, PPO's one segment per actor)."""
        if self.batch_size < 1:
            raise ValueError(
                f"algo.batch_size={self.batch_size} must be >= 1; "
                "--set algo.batch_size=<a value >= 1>"
            )

    def device_preference(self, run_config: Any) -> tuple[bool, str]:
        """`run.device=auto`: the CPU below `GPU_MIN_MINIBATCH` samples per batch (TD3's batch
        of 256 ran 51.6k samples/CPU-s on one CPU core, 44.2k/s eager on an H200: docs/gpu.md),
        a GPU from there on."""
        if self.batch_size >= GPU_MIN_MINIBATCH:
            return True, f"algo.batch_size {self.batch_size:,} >= {GPU_MIN_MINIBATCH:,}"
        return False, (
            f"the MLPs at algo.batch_size {self.batch_size:,} < {GPU_MIN_MINIBATCH:,} run "
            "faster on a CPU core than on a GPU without CUDA graphs (docs/gpu.md)"
        )

    def replay_items(self) -> int:
        """Transitions one replay buffer process stores (`LearnerConfig.replay_items`): the
        replay capacity, which each shard holds when sharded."""
        return self.replay_capacity

    @classmethod
    def td3(cls, **overrides: object) -> DDPGConfig:
        """The TD3 variant: twin critics, target policy smoothing, actor updated every 2 steps."""
        base: dict[str, object] = {"twin_critics": True, "policy_smoothing": 0.2, "actor_delay": 2}
        base.update(overrides)
        return cls(**base)  # type: ignore[arg-type]


@dataclass
class TD3Config(DDPGConfig):
    """DDPG's settings with TD3's defaults: twin critics (the target takes their minimum),
    clipped noise on the target action, and the actor updated every second critic update.
    Each can still be changed with `--set algo.KEY=VALUE`."""

    twin_critics: bool = True
    """TD3: two critics; the target takes their minimum."""
    policy_smoothing: float = 0.2
    """TD3: std of the clipped noise added to target actions (0: off)."""
    actor_delay: int = 2
    """TD3: critic updates per actor (and target) update."""
