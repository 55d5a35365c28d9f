"""surreal: distributed reinforcement learning (PPO, DDPG, ES) from a laptop to a cluster."""

from surreal.core import Actor, Learner, LearnerConfig, ParameterClient, Policy
from surreal.spaces import EnvInfo

__version__ = "0.1.0"

__all__ = ["Actor", "EnvInfo", "Learner", "LearnerConfig", "ParameterClient", "Policy"]
