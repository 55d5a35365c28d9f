"""TD3 (`surreal launch td3`): DDPG with its three options on by default (Fujimoto et al. 2018)."""

from __future__ import annotations

from typing import ClassVar

from surreal.algos.ddpg.config import TD3Config
from surreal.algos.ddpg.learner import DDPGLearner

__all__ = ["TD3Config", "TD3Learner"]


class TD3Learner(DDPGLearner):
    """DDPGLearner with `TD3Config`: the same processes (actors, sharded replay, learner)."""

    config_class: ClassVar[type] = TD3Config
