"""PBTConfig: the population's settings (`--population N`, `--set pbt.<field>=...`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from surreal.api import config as config_io
from surreal.api.config import ConfigError
from surreal.pbt.space import Hyperparameter, parse_space


@dataclass
class PBTConfig:
    """Population-based training (Jaderberg et al. 2017); saved as `RUN/pbt.json`."""

    members: int = 4
    """Trials in the population (`--population N`), each with its own learner, buffer, actors."""
    interval: int = 20_000
    """Env steps (of each member's learner) between two exploit/explore rounds."""
    fraction: float = 0.25
    """Bottom fraction of the ranked members replaced by copies of the top fraction."""
    space: list[str] = field(default_factory=lambda: ["algo.lr:1e-5:1e-2:log"])
    """Searched settings, `KEY:LOW:HIGH[:log][:int]` each (see `surreal.pbt.space`)."""
    factors: list[float] = field(default_factory=lambda: [0.8, 1.2])
    """Explore: a copied value is multiplied by one of these..."""
    resample_probability: float = 0.25
    """...or, with this probability, drawn afresh from [LOW, HIGH]."""
    init: list[str] = field(default_factory=list)
    """Per-member starting values, `INDEX:KEY=VALUE` each (e.g. `2:algo.lr=1e-6`); the others
    start from the run's config."""
    seed: int = 0
    """Seed of the manager's choices (donors, factors, resamples): same scores, same decisions."""
    member_timeout_s: float = 120.0
    """A member whose status has not changed for this long is skipped (crashed, restarting)."""

    def hyperparameters(self) -> list[Hyperparameter]:
        """The parsed search space."""
        return parse_space(self.space)


@dataclass
class _Root:
    pbt: PBTConfig


def split_overrides(overrides: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(`pbt.*` overrides, the others) of `--set` items."""
    pbt = tuple(o for o in overrides if o.strip().startswith("pbt."))
    return pbt, tuple(o for o in overrides if o not in pbt)


def make_config(
    members: int, overrides: tuple[str, ...] = (), base: PBTConfig | None = None
) -> PBTConfig:
    """A checked PBTConfig of `members` (a copy of `base`, e.g. a resumed run's) with `pbt.*`
    overrides applied.

    Raises:
        ConfigError: unknown key, a bad value, saying what to set.
    """
    root = _Root(dataclasses.replace(base or PBTConfig(), members=members))
    config_io.apply_overrides(root, list(overrides))
    check(root.pbt)
    return root.pbt


def check(pbt: PBTConfig) -> None:
    """Values the types alone do not rule out."""
    if pbt.members < 2:
        raise ConfigError(f"--population must be >= 2 members, got {pbt.members}")
    if pbt.interval < 1:
        raise ConfigError(f"pbt.interval must be >= 1 env step, got {pbt.interval}")
    if not 0 < pbt.fraction <= 0.5:
        raise ConfigError(f"pbt.fraction must be in (0, 0.5], got {pbt.fraction}")
    if not pbt.factors or any(f <= 0 for f in pbt.factors):
        raise ConfigError("pbt.factors must be positive numbers, e.g. 0.8,1.2")
    if not 0 <= pbt.resample_probability <= 1:
        raise ConfigError("pbt.resample_probability must be in [0, 1]")
    pbt.hyperparameters()
    init_overrides(pbt)


def init_overrides(pbt: PBTConfig) -> dict[int, list[str]]:
    """`pbt.init` as member index -> `KEY=VALUE` overrides."""
    out: dict[int, list[str]] = {}
    for item in pbt.init:
        index, sep, override = item.partition(":")
        if not (sep and index.strip().isdigit() and "=" in override):
            raise ConfigError(
                f"pbt.init entry {item!r}: expected INDEX:KEY=VALUE, e.g. 2:algo.lr=1e-6"
            )
        if int(index) >= pbt.members:
            raise ConfigError(f"pbt.init entry {item!r}: member {index} of {pbt.members} (0-based)")
        out.setdefault(int(index), []).append(override.strip())
    return out


def to_dict(pbt: PBTConfig) -> dict[str, Any]:
    """JSON-friendly form (`RUN/pbt.json`)."""
    return dataclasses.asdict(pbt)


def from_dict(data: dict[str, Any]) -> PBTConfig:
    """Read what `to_dict` wrote."""
    return config_io.from_dict(PBTConfig, data)
