"""EnvInfo: what a learner needs to know about an environment's observations and actions."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class EnvInfo:
    """Shapes and kinds of an environment's observations and actions (plain data, no gym objects).

    Attributes:
        obs_shape: shape of one observation.
        discrete: True for a Discrete action space (actions are ints in [0, num_actions)).
        num_actions: number of discrete actions (0 for continuous).
        action_shape: shape of one continuous action (() for discrete).
        action_low / action_high: bounds of a continuous action, per component.
    """

    obs_shape: tuple[int, ...]
    discrete: bool
    num_actions: int = 0
    action_shape: tuple[int, ...] = ()
    action_low: tuple[float, ...] = ()
    action_high: tuple[float, ...] = ()

    @property
    def action_dim(self) -> int:
        """Number of discrete actions, or the size of a continuous action vector."""
        if self.discrete:
            return self.num_actions
        size = 1
        for dim in self.action_shape:
            size *= dim
        return size

    def to_dict(self) -> dict:
        """A JSON-friendly dict (lists instead of tuples)."""
        return {
            key: list(value) if isinstance(value, tuple) else value
            for key, value in asdict(self).items()
        }

    @classmethod
    def from_dict(cls, data: dict) -> EnvInfo:
        """Inverse of `to_dict`."""
        return cls(
            **{
                key: tuple(value) if isinstance(value, list) else value
                for key, value in data.items()
            }
        )
