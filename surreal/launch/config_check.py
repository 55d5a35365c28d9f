"""Every config value checked before anything starts: finite numbers, the ranges declared beside
the config fields (`surreal.api.bounds`), algorithm vs env.

`check(config, algo_class, env_info)` runs inside `surreal.launch.experiment.plan`, so a refused launch has
written nothing and started nothing; each error is one line naming the key and the fix.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from surreal.api.bounds import out_of_bounds
from surreal.api.config import ConfigError
from surreal.api.spaces import EnvInfo
from surreal.api.user_code import describe_failure
from symphony.backends import backend_class, backend_names
from symphony.errors import BackendError

FLAGS = {"run.actors": "--actors", "run.steps": "--steps"}
"""Settings with a flag of their own, named in the messages instead of `--set`."""


def check_values(config: Any) -> None:
    """Non-finite numbers and values out of the range declared beside their field
    (`surreal.api.bounds.bounded`), as ConfigError, one line: the checks that need neither the
    learner nor the environment, so `surreal launch` makes them first."""
    for key, value in _leaves(config):
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{key}={value} is not a finite number; --set {key}=<a number>")
    sections = ("run", "env", "actor", "eval", "algo")  # the order the messages come in
    found = (bad for name in sections for bad in out_of_bounds(getattr(config, name), f"{name}."))
    for key, value, bounds in found:
        if key in FLAGS:
            raise ConfigError(f"{key} must be {bounds}, got {value} ({FLAGS[key]} N)")
        raise ConfigError(f"{key}={value} must be {bounds}; --set {key}=<a value {bounds}>")


def check_fits(config: Any, algo_class: type, env_info: EnvInfo) -> None:
    """Build the policy actors would run: an algorithm whose policy cannot act in this
    environment's action space says so now (ConfigError, one line)."""
    try:
        algo_class.make_policy(config.algo, env_info)
    except (ValueError, TypeError, NotImplementedError) as err:
        space = (
            f"{env_info.num_actions} discrete actions"
            if env_info.discrete
            else f"continuous actions of shape {list(env_info.action_shape)}"
        )
        raise ConfigError(
            f"{algo_class.__name__} cannot run on {config.env.id} ({space}): {err}"
        ) from None
    except Exception as err:  # noqa: BLE001 - a custom learner's own code failed
        raise ConfigError(describe_failure(f"{algo_class.__name__}.make_policy", err)) from None


def check_backend_name(name: str) -> None:
    """Refuse a backend name symphony does not know (without loading the backend's client)."""
    if name not in backend_names():  # symphony's in-process `test` backend runs no surreal run
        shown = ", ".join(backend_names(internal=False))
        raise ConfigError(f"--backend {name}: unknown backend {name!r}; choose one of: {shown}")


def check_backend(name: str) -> None:
    """Refuse an unknown (or not installed) symphony backend before the run folder is written."""
    check_backend_name(name)
    try:
        backend_class(name)
    except BackendError as err:
        raise ConfigError(f"--backend {name}: {err}") from None


def _leaves(obj: Any, prefix: str = ""):
    """(dotted key, value) for every field of nested dataclasses (list items as key[i])."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from _leaves(getattr(obj, f.name), f"{prefix}{f.name}.")
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            yield from _leaves(item, f"{prefix.rstrip('.')}[{i}].")
    else:
        yield prefix.rstrip("."), obj
