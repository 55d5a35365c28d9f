"""Defaults per task family: `surreal launch` picks PPO/DDPG/TD3 settings that suit the env.

The family comes from the env id alone (no environment is built): `robosuite:<Task>` is
`robosuite`; a `gym:<id>` whose gymnasium entry point lives in `gymnasium.envs.mujoco` is
`mujoco`, one in `classic_control` or `box2d` is `classic`; anything else is `other` (no family
defaults). The defaults are applied before the user's `--set` overrides, so a user's value always
wins; `--resume` keeps the saved config as it is. Each algorithm's config says what it sets
per family (`LearnerConfig.family_defaults`, overridden by PPOConfig and DDPGConfig; a config of your own may
define one too); what and why is in `bench/reports/learning.md` (measured there). On top of the
family's come the settings of the run's preset (`run.preset`: cpu, gpu or auto;
`LearnerConfig.preset_defaults`, e.g. PPO's GPU recipe for MuJoCo: docs/gpu.md).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from typing import Any

from surreal.api.config import get_value, set_value
from surreal.api.core import LearnerConfig
from surreal.api.device import wants_gpu

FAMILIES = ("classic", "mujoco", "robosuite", "other")
PRESETS = ("cpu", "gpu")
"""The presets `run.preset` names (`auto` picks one: `preset`)."""


def preset(config: Any) -> str:
    """`run.preset` resolved: `auto` is gpu when `run.device` names a GPU (cuda, cuda:N), else
    cpu (torch-free: whether this machine has a GPU is the device's question, not the recipe's)."""
    if config.run.preset != "auto":
        return config.run.preset
    return "gpu" if wants_gpu(config.run.device) else "cpu"


def env_family(env_id: str) -> str:
    """'classic', 'mujoco', 'robosuite' or 'other' for an env id such as `gym:CartPole-v1`."""
    if env_id.startswith("robosuite:"):
        return "robosuite"
    if not env_id.startswith("gym:"):
        return "other"
    try:
        import gymnasium

        entry = gymnasium.spec(env_id.removeprefix("gym:")).entry_point
    except Exception:  # unknown ids are reported by the env check, not here
        return "other"
    where = entry if isinstance(entry, str) else getattr(entry, "__module__", "")
    if ".mujoco" in where:
        return "mujoco"
    if ".classic_control" in where or ".box2d" in where:
        return "classic"
    return "other"


def family_defaults(config: Any) -> tuple[str, dict[str, Any]]:
    """The env's family and the settings the run's algorithm brings for it and the run's preset
    ({} if none): the algorithm config's `family_defaults(family)`, then its
    `preset_defaults(preset, family)` (declared on `surreal.api.core.LearnerConfig`)."""
    family = env_family(config.env.id)
    if not isinstance(config.algo, LearnerConfig):
        return family, {}
    settings = dict(config.algo.family_defaults(family))
    return family, settings | dict(config.algo.preset_defaults(preset(config), family))


def apply_family_defaults(config: Any) -> tuple[str, dict[str, Any]]:
    """Set the family's defaults on `config` (call before the user's overrides); returns
    (family, the settings applied)."""
    family, settings = family_defaults(config)
    for key, value in settings.items():
        set_value(config, key, value)  # typed, as `--set` is: a misspelt key is an error
    return family, settings


def user_keys(
    steps: int | None = None, actors: int | None = None, overrides: Iterable[str] = ()
) -> set[str]:
    """The dotted keys the user set on the command line: `--steps` is `run.steps`, `--actors`
    `run.actors`, each `--set key=value` its key (what `describe` leaves out)."""
    keys = {item.split("=", 1)[0].strip() for item in overrides if "=" in item}
    keys |= {"run.steps"} if steps is not None else set()
    return keys | ({"run.actors"} if actors is not None else set())


def describe(
    family: str,
    settings: dict[str, Any],
    config: Any = None,
    user: Iterable[str] = (),
    width: int | None = None,
) -> str:
    """The launch summary's line(s): `task family: classic (algo.norm_obs=False, ...)`; with a
    `config` whose preset is not cpu, `task family: mujoco, preset gpu (...)`.

    Only the family's settings in effect are shown: not those the user set (keys in `user`,
    see `user_keys`), nor, given the run's `config`, those whose value there is no longer the
    family's (the user's `--set`/`--steps` replaced it). Wrapped at `width` columns (None: one
    line), continuation lines indented by four spaces."""
    mine = set(user)
    shown = [
        f"{k}={v}"
        for k, v in settings.items()
        if k not in mine and (config is None or get_value(config, k) == v)
    ]
    rest = "no other changes" if settings else "no changes"
    named = f", preset {preset(config)}" if config is not None and preset(config) != "cpu" else ""
    text = f"task family: {family}{named} ({', '.join(shown) or rest}; --set overrides win)"
    if not width:
        return text
    return "\n".join(
        textwrap.wrap(
            text,
            width,
            subsequent_indent="    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    )


def summary(config: Any, user: Iterable[str] = (), width: int | None = 100) -> str:
    """`describe` for a planned run's config: its family and the family settings still in
    effect (what `surreal launch` prints before the run starts)."""
    family, settings = family_defaults(config)
    return describe(family, settings, config=config, user=user, width=width)
