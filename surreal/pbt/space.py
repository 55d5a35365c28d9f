"""The search space: which `algo.*` settings population-based training changes, and how."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from surreal.api.config import ConfigError


@dataclass(frozen=True)
class Hyperparameter:
    """One searched setting: `key` (`algo.<field>`, a number) kept within [low, high].

    Explore perturbs a copied value by a factor (`perturb`) or, now and then, draws a fresh one
    from [low, high] (`sample`: log-uniform when `log`, else uniform); integer fields are rounded.
    """

    key: str
    low: float
    high: float
    log: bool = False
    integer: bool = False

    @property
    def field(self) -> str:
        """The field name inside `algo` (`algo.lr` -> `lr`)."""
        return self.key.split(".", 1)[1]

    def clip(self, value: float) -> float:
        """`value` within [low, high] (rounded for an integer field)."""
        value = min(max(float(value), self.low), self.high)
        return float(round(value)) if self.integer else value

    def sample(self, rng: np.random.Generator) -> float:
        """A fresh value from [low, high] (log-uniform when `log`)."""
        if self.log:
            value = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        else:
            value = rng.uniform(self.low, self.high)
        return self.clip(value)

    def perturb(
        self,
        value: float,
        rng: np.random.Generator,
        factors: Sequence[float] = (0.8, 1.2),
        resample_probability: float = 0.25,
    ) -> float:
        """Explore from a copied `value`: with `resample_probability` a fresh `sample`, else
        `value` times one of `factors` (chosen uniformly), kept within [low, high]."""
        if rng.random() < resample_probability:
            return self.sample(rng)
        return self.clip(value * float(factors[int(rng.integers(len(factors)))]))


def parse_space(items: Sequence[str]) -> list[Hyperparameter]:
    """Hyperparameters from `KEY:LOW:HIGH[:log][:int]` strings, e.g. `algo.lr:1e-5:1e-2:log`.

    Raises:
        ConfigError: a malformed entry, saying the expected form.
    """
    space = []
    for item in items:
        parts = [p.strip() for p in item.split(":")]
        flags = set(parts[3:])
        if len(parts) < 3 or not parts[0].startswith("algo.") or flags - {"log", "int"}:
            raise ConfigError(
                f"pbt.space entry {item!r}: expected KEY:LOW:HIGH[:log][:int] with KEY an algo.* "
                "setting, e.g. --set pbt.space=algo.lr:1e-5:1e-2:log,algo.ent_coef:0:0.05"
            )
        try:
            low, high = float(parts[1]), float(parts[2])
        except ValueError:
            raise ConfigError(f"pbt.space entry {item!r}: LOW and HIGH must be numbers") from None
        if not low < high or ("log" in flags and low <= 0):
            raise ConfigError(f"pbt.space entry {item!r}: needs LOW < HIGH (and LOW > 0 with :log)")
        space.append(Hyperparameter(parts[0], low, high, "log" in flags, "int" in flags))
    keys = [h.key for h in space]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"pbt.space names a setting twice: {keys}")
    return space


def check_space(space: Sequence[Hyperparameter], algo_config: Any) -> None:
    """Raise ConfigError unless every key names a numeric field of `algo_config`."""
    fields = {f.name for f in dataclasses.fields(algo_config)}
    for hp in space:
        if hp.field not in fields:
            raise ConfigError(
                f"pbt.space: {type(algo_config).__name__} has no setting {hp.key!r}; "
                "`surreal launch ALGO --dry-run` prints every key"
            )
        value = getattr(algo_config, hp.field)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"pbt.space: {hp.key} is not a number ({value!r}); search numbers")
        if isinstance(value, int) and not hp.integer:
            raise ConfigError(f"pbt.space: {hp.key} is an integer setting; add :int to its entry")


def values_of(space: Sequence[Hyperparameter], algo_config: Any) -> dict[str, float]:
    """The current values of the searched settings, by key (`{"algo.lr": 0.001}`)."""
    return {hp.key: getattr(algo_config, hp.field) for hp in space}
