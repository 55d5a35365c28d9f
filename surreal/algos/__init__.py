"""The built-in algorithms (`ppo`, `ppo-vision`, `ddpg`/`td3`, `sac`, `es`), one folder each.

The registry that maps names to Learner classes is `surreal.api.registry`; its functions are
re-exported here for `surreal.algos.register("a2c", "mypkg.a2c:A2C")`.
"""

from surreal.api.registry import UnknownAlgorithm, names, register, resolve

__all__ = ["UnknownAlgorithm", "names", "register", "resolve"]
