"""Environments: `make_env("gym:CartPole-v1", config)`, a batched VectorEnv, and the EnvInfo."""

from surreal.envs.base import (
    UnknownEnvironment,
    check_env,
    env_info,
    make_env,
    register_env_family,
)
from surreal.envs.vector import VectorEnv

__all__ = [
    "UnknownEnvironment",
    "VectorEnv",
    "check_env",
    "env_info",
    "make_env",
    "register_env_family",
]
