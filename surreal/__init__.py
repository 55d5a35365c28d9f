"""surreal: distributed reinforcement learning (PPO, DDPG, ES) from a laptop to a cluster.

The rooms (docs/architecture.md): `surreal.api` (what you subclass), `surreal.algos` and
`surreal.envs` (built on it), `surreal.runtime` (a run's processes), `surreal.launch` (from a
command line to a running experiment), `surreal.pbt` and `surreal.monitoring`.
"""

from surreal import moved
from surreal.api import Actor, EnvInfo, Learner, LearnerConfig, Policy
from surreal.runtime.wire.parameter_client import ParameterClient

moved.install()

__version__ = "0.1.0"

__all__ = ["Actor", "EnvInfo", "Learner", "LearnerConfig", "ParameterClient", "Policy"]
