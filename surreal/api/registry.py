"""The algorithm registry: a name (`ppo`) or `path/to/file.py:ClassName` -> a Learner class."""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import sys
from pathlib import Path

from surreal.api.core import Learner
from surreal.api.user_code import describe_failure

# name -> "module:Class"; imported lazily so that listing names never imports torch.
_REGISTRY: dict[str, str] = {
    "ppo": "surreal.algos.ppo:PPOLearner",
    "ppo-vision": "surreal.algos.ppo.vision_learner:RecurrentPPOLearner",
    "ddpg": "surreal.algos.ddpg:DDPGLearner",
    "td3": "surreal.algos.ddpg.td3:TD3Learner",
    "sac": "surreal.algos.sac:SACLearner",
    "es": "surreal.algos.es:ESLearner",
    "dqn": "surreal.algos.dqn.learner:DQNLearner",
    "mappo": "surreal.multiagent.learner:MultiAgentPPOLearner",
}


# name -> "module:Class" of its config dataclass, importable without torch: a command line's
# settings are checked before the learner (and torch) is imported.
_CONFIGS: dict[str, str] = {
    "ppo": "surreal.algos.ppo.config:PPOConfig",
    "ppo-vision": "surreal.algos.ppo.config:VisionPPOConfig",
    "ddpg": "surreal.algos.ddpg.config:DDPGConfig",
    "td3": "surreal.algos.ddpg.config:TD3Config",
    "sac": "surreal.algos.sac.config:SACConfig",
    "es": "surreal.algos.es.config:ESConfig",
    "dqn": "surreal.algos.dqn.config:DQNConfig",
    "mappo": "surreal.multiagent.config:MultiAgentPPOConfig",
}


class UnknownAlgorithm(LookupError):
    """The algorithm name or `file.py:Class` reference cannot be resolved."""


def register(name: str, target: str) -> None:
    """Register an algorithm: `register("a2c", "mypkg.a2c:A2CLearner")`."""
    if ":" not in target:
        raise ValueError(f"target must be 'module:Class', got {target!r}")
    _REGISTRY[name] = target


def config_class(ref: str) -> type:
    """The config dataclass of algorithm `ref`: for a built-in name without importing its
    learner (or torch); otherwise the resolved learner's `config_class`."""
    if ref in _CONFIGS and _REGISTRY.get(ref, "").startswith("surreal."):
        module_name, class_name = _CONFIGS[ref].split(":")
        return getattr(importlib.import_module(module_name), class_name)
    return resolve(ref).config_class


def names() -> list[str]:
    """Registered algorithm names."""
    return sorted(_REGISTRY)


def resolve(ref: str) -> type:
    """Return the Learner class for a registered name or a `path/to/file.py:ClassName` reference.

    Raises:
        UnknownAlgorithm: with the nearest registered name, or what is wrong with the file.
    """
    if ref.endswith(".py") or ".py:" in ref:
        cls = _load_from_file(ref)
    elif ref in _REGISTRY:
        module_name, class_name = _REGISTRY[ref].split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name and module_name.startswith(err.name):
                raise UnknownAlgorithm(
                    f"algorithm {ref!r} is registered as {_REGISTRY[ref]} but that module is not "
                    "installed in this checkout"
                ) from err
            raise
        cls = getattr(module, class_name)
    else:
        close = difflib.get_close_matches(ref, _REGISTRY, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnknownAlgorithm(
            f"unknown algorithm {ref!r}{hint} Known: {', '.join(names())}, "
            "or a custom learner as path/to/file.py:ClassName"
        )
    if not (isinstance(cls, type) and issubclass(cls, Learner)):
        raise UnknownAlgorithm(f"{ref} is not a subclass of surreal.api.core.Learner")
    return cls


def load_class(ref: str, what: str = "class") -> type:
    """The class named by `path/to/file.py:ClassName` or `package.module:ClassName`.

    Raises:
        UnknownAlgorithm: saying what is wrong (no such file, module or class), naming `what`.
    """
    if ref.endswith(".py") or ".py:" in ref:
        try:
            return _load_from_file(ref)
        except UnknownAlgorithm as err:
            raise UnknownAlgorithm(f"{what}={ref}: {err}") from err
    module_name, _, class_name = ref.partition(":")
    if not class_name:
        raise UnknownAlgorithm(f"{what}={ref}: expected path/to/file.py:ClassName or module:Class")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        raise UnknownAlgorithm(f"{what}={ref}: no module {module_name!r}") from err
    if class_name not in vars(module):
        raise UnknownAlgorithm(f"{what}={ref}: {module_name} has no {class_name!r}")
    return vars(module)[class_name]


def _load_from_file(ref: str) -> type:
    path_text, _, class_name = ref.partition(":")
    path = Path(path_text).resolve()
    if not path.is_file():
        raise UnknownAlgorithm(f"no such file {path_text!r} (expected path/to/file.py:ClassName)")
    if not class_name:
        raise UnknownAlgorithm(f"name the learner class: {path_text}:ClassName")
    module_name = f"surreal_user_{path.stem}_{abs(hash(str(path))) % 10**8}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as err:  # the user's code: one paragraph, the traceback in a log
            del sys.modules[module_name]
            raise UnknownAlgorithm(describe_failure(path_text, err)) from None
    if class_name not in vars(module):
        found = [n for n, v in vars(module).items() if isinstance(v, type)]
        close = difflib.get_close_matches(class_name, found, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnknownAlgorithm(f"{path_text} has no class {class_name!r}{hint}")
    return vars(module)[class_name]
