"""DQNConfig: CleanRL's dqn.py defaults (CartPole) on the off-policy recipe's settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from surreal.api.bounds import bounded
from surreal.api.offpolicy import OffPolicyConfig


@dataclass
class DQNConfig(OffPolicyConfig):
    """Double DQN with a target network and epsilon-greedy actors (CleanRL's `dqn.py` as the
    reference: its defaults, the Double-DQN target on top; Huber loss as a setting)."""

    lr: float = 2.5e-4
    """Adam learning rate."""
    gamma: float = 0.99
    """Discount factor."""
    n_step: int = 1
    """n of the n-step return (CleanRL: 1)."""
    batch_size: int = 128
    """Transitions per update."""
    replay_capacity: int = 10_000
    """Transitions the replay keeps (CleanRL's buffer_size)."""
    replay_start: int = 10_000
    """Transitions stored before the first update (CleanRL's learning_starts)."""
    updates_per_step: float = 0.1
    """Updates per env step (CleanRL's train_frequency 10)."""
    hidden: tuple[int, ...] = (120, 84)
    """Hidden layer sizes of the Q-network."""
    target_period: int = bounded(50, ge=1)
    """Updates between copies of the Q-network into the target network (CleanRL: every 500
    env steps, i.e. 50 updates at 10 env steps per update)."""
    tau: float = bounded(1.0, ge=0, le=1)
    """The target's share of the copy: 1, a hard copy (CleanRL); < 1, Polyak averaging."""
    start_e: float = 1.0
    """Epsilon at the start of the run."""
    end_e: float = 0.05
    """Epsilon once `exploration_fraction` of the budget is used."""
    exploration_fraction: float = 0.5
    """The fraction of `run.steps` over which epsilon falls linearly from start_e to end_e."""
    double: bool = True
    """Double DQN: the online network picks the next action, the target network values it."""
    huber: bool = False
    """Huber (smooth L1) loss on the TD error instead of the squared error (CleanRL's). Off by
    default: with CleanRL's other settings (a target copy every 50 updates, Adam 2.5e-4) the
    Q-values ran away under Huber on CartPole (468 after 4,000 updates, returns 9.6; squared
    error: 47 and 290, bench/dqn_cartpole.py's single-process check, bench/reports/learning.md "DQN")."""
    grad_clip: float = bounded(10.0, ge=0)
    """Max global gradient norm (0: no clipping)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.hidden = tuple(int(h) for h in self.hidden)

    def check(self, env_info: Any = None) -> None:
        """The replay's checks, then DQN's: discrete actions, epsilons in [0, 1], tau in (0, 1]
        (`algo.target_period` >= 1 is declared beside the field)."""
        super().check(env_info)
        if env_info is not None and not env_info.discrete:
            raise ValueError(
                "dqn needs a discrete action space; use ddpg, td3 or sac for continuous actions"
            )
        if not (0 <= self.end_e <= 1 and 0 <= self.start_e <= 1):
            raise ValueError("algo.start_e and algo.end_e are probabilities: 0 <= e <= 1")
        if not 0 < self.exploration_fraction <= 1:
            raise ValueError("algo.exploration_fraction must be in (0, 1]")
        if not 0 < self.tau <= 1:
            raise ValueError("algo.tau must be in (0, 1] (1: a hard copy every target_period)")

    def epsilon(self, progress: float) -> float:
        """Epsilon at `progress` (the fraction of `run.steps` used): linear from start_e to end_e
        over `exploration_fraction` of the run, end_e after."""
        slope = min(max(progress, 0.0) / self.exploration_fraction, 1.0)
        return self.start_e + slope * (self.end_e - self.start_e)
