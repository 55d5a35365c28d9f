"""Every config value checked before anything starts: finite numbers, ranges, algorithm vs env.

`check(config, algo_class, env_info)` runs inside `surreal.launch.experiment.plan`, so a refused launch has
written nothing and started nothing; each error is one line naming the key and the fix.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from surreal.api.config import ConfigError
from surreal.api.spaces import EnvInfo
from surreal.api.user_code import describe_failure
from symphony.backends import backend_class, backend_names
from symphony.errors import BackendError

# key -> (test, what the value must be). Keys an algorithm does not have are skipped.
_AT_LEAST_1 = (lambda v: v >= 1, ">= 1")
_AT_LEAST_0 = (lambda v: v >= 0, ">= 0")
_POSITIVE = (lambda v: v > 0, "> 0")
_UNIT = (lambda v: 0 <= v <= 1, "in [0, 1]")
FLAGS = {"run.actors": "--actors", "run.steps": "--steps"}
"""Settings with a flag of their own, named in the messages instead of `--set`."""
RANGES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "run.actors": _AT_LEAST_1,
    "run.steps": _AT_LEAST_1,
    "run.seed": _AT_LEAST_0,
    "run.checkpoint_every": _AT_LEAST_1,
    "run.torch_threads": _AT_LEAST_0,
    "run.learner_replicas": _AT_LEAST_1,
    "env.num_envs": _AT_LEAST_1,
    "env.frame_stack": _AT_LEAST_1,
    "env.action_repeat": _AT_LEAST_1,
    "env.max_episode_steps": _AT_LEAST_1,
    "env.clip_obs": _POSITIVE,
    "actor.rollout_length": _AT_LEAST_1,
    "actor.group_size": _AT_LEAST_1,
    "actor.max_ahead": _AT_LEAST_0,
    "eval.episodes": _AT_LEAST_1,
    "eval.every_s": _AT_LEAST_0,
    "algo.lr": _POSITIVE,
    "algo.gamma": _UNIT,
    "algo.gae_lambda": _UNIT,
    "algo.update_epochs": _AT_LEAST_0,
    "algo.num_minibatches": _AT_LEAST_1,
    "algo.minibatch_size": _AT_LEAST_0,
    "algo.clip_coef": _POSITIVE,
    "algo.ent_coef": _AT_LEAST_0,
    "algo.vf_coef": _AT_LEAST_0,
    "algo.max_grad_norm": _AT_LEAST_0,
    "algo.target_kl": _POSITIVE,
    "algo.lstm_size": _AT_LEAST_1,
    "algo.image_size": _AT_LEAST_1,
    "algo.bptt_length": _AT_LEAST_0,
    "algo.n_step": _AT_LEAST_1,
    "algo.batch_size": _AT_LEAST_0,  # PPO: 0 is one segment per actor; DDPG checks >= 1
    "algo.tau": _UNIT,
    "algo.target_period": _AT_LEAST_1,
    "algo.sigma": _AT_LEAST_0,
    "algo.actor_delay": _AT_LEAST_1,
    "algo.replay_capacity": _AT_LEAST_1,
    "algo.replay_start": _AT_LEAST_1,
    "algo.replay_shards": _AT_LEAST_1,
    "algo.param_shards": _AT_LEAST_1,
    "algo.grad_clip": _AT_LEAST_0,
    "algo.updates_per_step": _AT_LEAST_0,
    "algo.chunk_size": _AT_LEAST_1,
    "algo.fetch_batches": _AT_LEAST_1,
    "algo.publish_every": _AT_LEAST_1,
    "algo.checkpoint_every_s": _POSITIVE,
    "algo.noise_std": _POSITIVE,
    "algo.action_std": _AT_LEAST_0,
    "algo.population": _AT_LEAST_1,
    "algo.noise_size": _AT_LEAST_1,
    "algo.eval_every": _AT_LEAST_1,
    "algo.eval_episodes": _AT_LEAST_1,
    "algo.task_timeout": _POSITIVE,
    "algo.max_episode_steps": _AT_LEAST_0,
}


def check_values(config: Any) -> None:
    """Non-finite numbers and values out of range (ConfigError, one line): the checks that need
    neither the learner nor the environment, so `surreal launch` makes them first."""
    for key, value in _leaves(config):
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{key}={value} is not a finite number; --set {key}=<a number>")
    for key, (ok, what) in RANGES.items():
        value = _get(config, key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not ok(value):
            if key in FLAGS:
                raise ConfigError(f"{key} must be {what}, got {value} ({FLAGS[key]} N)")
            raise ConfigError(f"{key}={value} must be {what}; --set {key}=<a value {what}>")
    start, capacity = (_get(config, f"algo.{f}") for f in ("replay_start", "replay_capacity"))
    if isinstance(start, int) and isinstance(capacity, int):
        held = capacity * (_get(config, "algo.replay_shards") or 1)
        if start > held:
            raise ConfigError(
                f"algo.replay_start={start} exceeds what the replay holds "
                f"({held} = replay_capacity x replay_shards); lower it or raise the capacity"
            )


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
        shown = ", ".join(n for n in backend_names() if n != "test")
        raise ConfigError(f"--backend {name}: unknown backend {name!r}; choose one of: {shown}")


def check_backend(name: str) -> None:
    """Refuse an unknown (or not installed) symphony backend before the run folder is written."""
    check_backend_name(name)
    try:
        backend_class(name)
    except BackendError as err:
        raise ConfigError(f"--backend {name}: {err}") from None


def _get(config: Any, key: str) -> Any:
    value = config
    for part in key.split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


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
