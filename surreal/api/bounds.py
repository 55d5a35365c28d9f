"""A setting's range, declared beside its field: `lr: float = bounded(3e-4, gt=0)`.

`surreal launch` checks every declared range before torch is imported
(`surreal.launch.config_check.check_values`): a value out of range is one line naming the key,
the range and the `--set` that fixes it. A range is part of the field, so there is no list of
key names to keep in step with the configs (a misspelt name in such a list checked nothing).

A subclass that redeclares a field only to change its default keeps its base's range
(`declared_bounds` reads the nearest declaration that has one); `bounded` there replaces it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

BOUNDS = "surreal.bounds"
"""The key of a field's range in its `dataclasses.field` metadata."""


@dataclass(frozen=True)
class Bounds:
    """The range a number must be in: at least `ge`, above `gt`, at most `le` (None: no bound
    on that side)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None

    def __post_init__(self) -> None:
        if self.ge is None and self.gt is None and self.le is None:
            raise TypeError("bounded() needs a bound: ge=, gt= or le=")
        if self.ge is not None and self.gt is not None:
            raise TypeError("bounded() takes ge= or gt=, not both")

    def holds(self, value: float) -> bool:
        """Whether `value` is in the range (NaN is in no range)."""
        if isinstance(value, float) and math.isnan(value):
            return False
        return (
            (self.ge is None or value >= self.ge)
            and (self.gt is None or value > self.gt)
            and (self.le is None or value <= self.le)
        )

    def __str__(self) -> str:
        low = self.ge if self.ge is not None else self.gt
        if low is not None and self.le is not None:
            opening = "[" if self.ge is not None else "("
            return f"in {opening}{_num(low)}, {_num(self.le)}]"
        if self.ge is not None:
            return f">= {_num(self.ge)}"
        if self.gt is not None:
            return f"> {_num(self.gt)}"
        return f"<= {_num(self.le)}"


def bounded(
    default: Any, *, ge: float | None = None, gt: float | None = None, le: float | None = None
) -> Any:
    """A dataclass field with `default` whose value must be >= `ge` (or > `gt`) and <= `le`
    at launch (None, for an optional setting, is always allowed). E.g.
    `gamma: float = bounded(0.99, ge=0, le=1)`; the field's docstring follows as before."""
    return field(default=default, metadata={BOUNDS: Bounds(ge=ge, gt=gt, le=le)})


def declared_bounds(cls: type) -> dict[str, Bounds]:
    """Field name -> range of a config dataclass, each from its nearest declaration that has
    one (a redeclared default keeps the base's range)."""
    found: dict[str, Bounds] = {}
    for f in dataclasses.fields(cls):
        for klass in cls.__mro__:
            own = vars(klass).get("__dataclass_fields__", {}).get(f.name)
            if own is not None and BOUNDS in own.metadata:
                found[f.name] = own.metadata[BOUNDS]
                break
    return found


def out_of_bounds(config: Any, prefix: str = "") -> Iterator[tuple[str, Any, Bounds]]:
    """(dotted key, value, range) of every number out of its declared range in `config` and
    the config dataclasses nested in it (None and booleans are never out of range)."""
    if not dataclasses.is_dataclass(config) or isinstance(config, type):
        return
    ranges = declared_bounds(type(config))
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            yield from out_of_bounds(value, f"{prefix}{f.name}.")
        elif (
            f.name in ranges
            and isinstance(value, (int, float))
            and not isinstance(value, bool)
            and not ranges[f.name].holds(value)
        ):
            yield f"{prefix}{f.name}", value, ranges[f.name]


def require(config: Any, *names: str, prefix: str = "algo.") -> None:
    """The check a config makes of some of its fields when it is built or used outside a launch
    (e.g. `OffPolicyConfig.__post_init__`), against the ranges declared beside them: ValueError
    `algo.NAME=VALUE; it must be RANGE` for the first out of range. A name with no declared
    range is a TypeError, so a misspelt one fails on every use."""
    ranges = declared_bounds(type(config))
    for name in names:
        if name not in ranges:
            raise TypeError(f"{type(config).__name__}.{name} declares no range (bounded(...))")
        value = getattr(config, name)
        if value is not None and not ranges[name].holds(value):
            raise ValueError(f"{prefix}{name}={value}; it must be {ranges[name]}")


def _num(x: float) -> str:
    return f"{x:g}"
