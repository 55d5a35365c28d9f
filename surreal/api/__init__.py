"""What a user imports and subclasses: `Learner`, `Policy`, `Actor`, `Batch`, `EnvInfo`, the
config dataclasses and `bounded` (a setting's range, declared beside its field). Everything else
in surreal builds on this room; it builds on nothing else of surreal's (import-linter's
contracts in pyproject.toml)."""

from surreal.api.bounds import bounded
from surreal.api.config import Config, ConfigError
from surreal.api.core import Actor, Batch, Learner, LearnerConfig, Params, Policy
from surreal.api.offpolicy import Explorer, OffPolicyConfig
from surreal.api.replay import Replay
from surreal.api.spaces import EnvInfo

__all__ = [
    "Actor",
    "Batch",
    "Config",
    "ConfigError",
    "EnvInfo",
    "Explorer",
    "Learner",
    "LearnerConfig",
    "OffPolicyConfig",
    "Params",
    "Policy",
    "Replay",
    "bounded",
]
