"""Soft Actor-Critic on DDPG's distributed processes: twin critics, a tanh-squashed Gaussian
policy, the entropy temperature tuned toward a target entropy.

`SACConfig` imports without torch; `SACLearner` (torch) is imported on first use.
"""

from surreal.algos.sac.config import SACConfig

__all__ = ["SACConfig", "SACLearner"]


def __getattr__(name: str):
    if name == "SACLearner":
        from surreal.algos.sac.learner import SACLearner

        return SACLearner
    raise AttributeError(f"module 'surreal.algos.sac' has no attribute {name!r}")
