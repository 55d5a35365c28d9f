"""Defaults per task family: `surreal launch` picks PPO/DDPG/TD3 settings that suit the env.

The family comes from the env id alone (no environment is built): `robosuite:<Task>` is
`robosuite`; a `gym:<id>` whose gymnasium entry point lives in `gymnasium.envs.mujoco` is
`mujoco`, one in `classic_control` or `box2d` is `classic`; anything else is `other` (no family
defaults). The defaults are applied before the user's `--set` overrides, so a user's value always
wins; `--resume` keeps the saved config as it is. Each algorithm's config says what it sets
per family (`LearnerConfig.family_defaults`, overridden by PPOConfig and DDPGConfig; a config of your own may
define one too); what and why is in `docs/learning.md` (measured there).
"""

from __future__ import annotations

from typing import Any

from surreal.config import set_value
from surreal.core import LearnerConfig

FAMILIES = ("classic", "mujoco", "robosuite", "other")


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
    """The env's family and the settings the run's algorithm brings for it ({} if none): the
    algorithm config's `family_defaults(family)` (declared on `surreal.core.LearnerConfig`)."""
    family = env_family(config.env.id)
    if not isinstance(config.algo, LearnerConfig):
        return family, {}
    return family, dict(config.algo.family_defaults(family))


def apply_family_defaults(config: Any) -> tuple[str, dict[str, Any]]:
    """Set the family's defaults on `config` (call before the user's overrides); returns
    (family, the settings applied)."""
    family, settings = family_defaults(config)
    for key, value in settings.items():
        set_value(config, key, value)  # typed, as `--set` is: a misspelt key is an error
    return family, settings


def describe(family: str, settings: dict[str, Any]) -> str:
    """One line for the launch summary: `task family: classic (algo.norm_obs=False)`."""
    shown = ", ".join(f"{k}={v}" for k, v in settings.items()) or "no changes"
    return f"task family: {family} ({shown}; --set overrides win)"
