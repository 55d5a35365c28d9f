"""DDPG with TD3's options: n-step returns, target networks, per-actor noise, sharded uniform replay.

`DDPGConfig` imports without torch; `DDPGLearner` (torch) is imported on first use.
"""

from surreal.algos.ddpg.config import DDPGConfig

__all__ = ["DDPGConfig", "DDPGLearner"]


def __getattr__(name: str):
    if name == "DDPGLearner":
        from surreal.algos.ddpg.learner import DDPGLearner

        return DDPGLearner
    raise AttributeError(f"module 'surreal.algos.ddpg' has no attribute {name!r}")
