"""DDPGConfig: DDPG with the TD3 options, n-step returns and (sharded) uniform replay."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from surreal.api.bounds import bounded, require
from surreal.api.device import GPU_MIN_MINIBATCH
from surreal.api.offpolicy import OffPolicyConfig


@dataclass
class DDPGConfig(OffPolicyConfig):
    """Deep Deterministic Policy Gradient; `DDPGConfig.td3()` turns on TD3's three options."""

    lr: float = 1e-3
    """Adam learning rate of the actor and the critic(s)."""
    gamma: float = 0.99
    """Discount factor."""
    hidden: tuple[int, ...] = (256, 256)
    """Hidden layer sizes of the actor and critic MLPs."""
    target_update: str = "soft"
    """'soft' (Polyak averaging at every actor update) or 'hard' (copy every target_period)."""
    tau: float = bounded(0.005, ge=0, le=1)
    """Polyak factor of soft target updates."""
    target_period: int = bounded(500, ge=1)
    """Learner updates between hard target copies."""
    noise: str = "gaussian"
    """Exploration noise: 'gaussian' or 'ou' (Ornstein-Uhlenbeck)."""
    sigma: float = bounded(0.1, ge=0)
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
    actor_delay: int = bounded(1, ge=1)
    """TD3: critic updates per actor (and target) update."""
    grad_clip: float = bounded(0.0, ge=0)
    """Max global gradient norm (0: no clipping)."""

    def __post_init__(self) -> None:
        if self.target_update not in ("soft", "hard"):
            raise ValueError(f"algo.target_update={self.target_update!r}; use 'soft' or 'hard'")
        if self.noise not in ("gaussian", "ou"):
            raise ValueError(f"algo.noise={self.noise!r}; use 'gaussian' or 'ou'")
        super().__post_init__()
        require(self, "actor_delay")
        self.hidden = tuple(int(h) for h in self.hidden)

    @classmethod
    def family_defaults(cls, family: str) -> dict[str, Any]:
        """Settings `surreal launch` applies for a task family before the user's `--set`
        (`surreal.algos.families`): on mujoco tasks CleanRL's TD3/DDPG learning rate 3e-4, a
        longer random warm-up (10k transitions), and CleanRL's one env, one noise scale (every
        actor sigma 0.1) and 1-step returns. Measured on HalfCheetah (bench/reports/learning.md):
        2 actors x 8 envs reached 1,625 at 100k steps; 1 env per actor with 3-step returns and
        sigma 0.1/0.4 a greedy 6,180 at 300k (CleanRL's file beside it: 7,523); with 1-step
        returns and one sigma as well, 7,308 (CleanRL 7,523 again). Classic tasks keep the
        defaults above (Pendulum learns in a few thousand steps with them); robosuite: not
        measured, none."""
        if family == "mujoco":
            return {
                "algo.lr": 3e-4,
                "algo.replay_start": 10_000,
                "env.num_envs": 1,
                "algo.n_step": 1,
                "algo.sigma_spread": 1.0,
            }
        return {}

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
