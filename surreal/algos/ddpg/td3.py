"""TD3 (`surreal launch td3`): DDPG with its three options on by default (Fujimoto et al. 2018)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from surreal.algos.ddpg.config import DDPGConfig
from surreal.algos.ddpg.learner import DDPGLearner


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


class TD3Learner(DDPGLearner):
    """DDPGLearner with `TD3Config`: the same processes (actors, sharded replay, learner)."""

    config_class: ClassVar[type] = TD3Config
