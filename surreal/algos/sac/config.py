"""SACConfig: Soft Actor-Critic's settings on top of DDPG's (replay, shards, pacing, n-step)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from surreal.algos.ddpg.config import DDPGConfig


@dataclass
class SACConfig(DDPGConfig):
    """Soft Actor-Critic (Haarnoja et al. 2018, with the temperature tuned as in their second
    paper): a tanh-squashed Gaussian policy, twin critics whose target takes their minimum minus
    alpha * log pi, and alpha tuned toward a target entropy. It runs on DDPG's processes, so
    DDPG's replay, sharding, pacing and n-step settings apply; DDPG's exploration-noise settings
    (noise, sigma, sigma_spread, ou_theta) do not: SAC's actors sample the policy itself."""

    n_step: int = 1
    """n of the n-step return R_t^n in the critics' target (1: SAC's one-step target)."""
    twin_critics: bool = True
    """Two critics; the target and the actor's loss take their minimum (False: one critic)."""
    init_alpha: float = 1.0
    """The entropy temperature alpha at the start (all along when autotune is off)."""
    autotune: bool = True
    """Tune alpha by gradient descent on log alpha so that the policy's entropy tracks
    target_entropy (the learning rate is `lr`); False: alpha stays init_alpha."""
    target_entropy: float | None = None
    """The entropy (nats) autotune aims at; None: -act_dim, the SAC papers' choice."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check()

    def check(self, env_info: Any = None) -> None:
        """Raise ValueError, saying what to set, for settings SAC cannot run with (called on
        construction and, after `--set`, by `surreal launch`); DDPG's checks first."""
        super().check(env_info)
        if self.policy_smoothing != 0:
            raise ValueError(
                f"algo.policy_smoothing={self.policy_smoothing} is a TD3 option; SAC's target "
                "samples the next action from the policy: --set algo.policy_smoothing=0"
            )
        if not self.init_alpha > 0:
            raise ValueError(
                f"algo.init_alpha={self.init_alpha}; the temperature must be > 0 (it is "
                "learned as log alpha): --set algo.init_alpha=1.0, or e.g. 0.2 for a fixed one"
            )

    @classmethod
    def family_defaults(cls, family: str) -> dict[str, Any]:
        """On mujoco tasks CleanRL's SAC learning rate 3e-4 (its policy's; one rate here), its
        5k random warm-up transitions and its one env per actor: HalfCheetah at 300k steps
        reached a greedy 7,445 with these, CleanRL's file beside it 6,309 (2 actors x 8 envs had
        reached 4,652 at 100k where this reached 5,693; bench/reports/learning.md). Classic
        tasks keep the defaults above (Pendulum reaches -200 within 5k steps with them);
        others: none."""
        if family == "mujoco":
            return {"algo.lr": 3e-4, "algo.replay_start": 5_000, "env.num_envs": 1}
        return {}
