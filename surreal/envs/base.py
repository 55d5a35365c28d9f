"""The environment interface: `family:name` ids, one factory module per family, common wrappers."""

from __future__ import annotations

import importlib
from typing import Any

from surreal.api.config import EnvConfig
from surreal.api.spaces import EnvInfo


class UnknownEnvironment(ValueError):
    """The environment id cannot be built; the message says what ids exist."""


# family -> module with `make(name, config, seed, render=False) -> gymnasium.Env` and
# `check(name) -> None` (raises UnknownEnvironment).
# A family module returns a gymnasium-API env (Box or Dict observations); the wrappers below turn
# it into the flat, stacked, repeated, time-limited env every actor sees.
_FAMILIES: dict[str, str] = {
    "gym": "surreal.envs.gym",
    "robosuite": "surreal.envs.robosuite",
    "pettingzoo": "surreal.envs.pettingzoo",  # multi-agent (surreal.multiagent): its first agent
    "ma": "surreal.envs.ma",
}


def register_env_family(family: str, module: str) -> None:
    """Register a module that builds `family:<name>` envs (it defines `make` and `check`)."""
    _FAMILIES[family] = module


def _family(env_id: str) -> tuple[Any, str]:
    family, sep, name = env_id.partition(":")
    if not sep or not name:
        raise UnknownEnvironment(
            f"environment id {env_id!r} needs a family prefix, e.g. gym:CartPole-v1 or "
            f"robosuite:Lift (families: {', '.join(sorted(_FAMILIES))})"
        )
    if family not in _FAMILIES:
        raise UnknownEnvironment(
            f"unknown environment family {family!r} in {env_id!r}; "
            f"use one of: {', '.join(sorted(_FAMILIES))}"
        )
    try:
        module = importlib.import_module(_FAMILIES[family])
    except ModuleNotFoundError as err:
        raise UnknownEnvironment(
            f"environment family {family!r} needs a package that is not installed ({err.name}); "
            "install the matching extra, e.g. pip install -e '.[rl]'"
        ) from err
    return module, name


def check_env(env_id: str) -> None:
    """Fail early, before anything starts, if `env_id` cannot be built.

    Raises:
        UnknownEnvironment: with the nearest known ids.
    """
    module, name = _family(env_id)
    module.check(name)


def make_env(
    env_id: str, config: EnvConfig | None = None, seed: int | None = None, render: bool = False
) -> Any:
    """Build one environment with the surreal wrappers applied (gymnasium API, flat Box obs).

    Args:
        env_id: `gym:<id>` or `robosuite:<Task>`.
        config: wrapper settings (frame stack, action repeat, episode limit, obs keys, ...).
        seed: seeds the first reset.
        render: build it so that `env.render()` returns RGB frames (for videos).
    """
    import surreal.envs.wrappers as wrappers  # gymnasium: imported when an env is built

    config = config or EnvConfig(id=env_id)
    module, name = _family(env_id)
    env = module.make(name, config, seed, render=render)
    return wrappers.apply(env, config, seed)


def env_info(env_id: str, config: EnvConfig | None = None) -> EnvInfo:
    """Observation and action description of the wrapped environment (builds one and closes it)."""
    env = make_env(env_id, config)
    try:
        return info_from_spaces(env.observation_space, env.action_space)
    finally:
        env.close()


def info_from_spaces(observation_space: Any, action_space: Any) -> EnvInfo:
    """EnvInfo from gymnasium spaces (Box observations; Discrete or Box actions)."""
    from gymnasium import spaces

    obs_shape = tuple(int(d) for d in observation_space.shape)
    if isinstance(action_space, spaces.Discrete):
        return EnvInfo(obs_shape=obs_shape, discrete=True, num_actions=int(action_space.n))
    if isinstance(action_space, spaces.Box):
        return EnvInfo(
            obs_shape=obs_shape,
            discrete=False,
            action_shape=tuple(int(d) for d in action_space.shape),
            action_low=tuple(float(x) for x in action_space.low.ravel()),
            action_high=tuple(float(x) for x in action_space.high.ravel()),
        )
    raise UnknownEnvironment(f"unsupported action space {action_space}: use Discrete or Box")
