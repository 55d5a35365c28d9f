"""Multi-agent environments: PettingZoo's parallel API behind `pettingzoo:<module>` and `ma:<name>`.

    pettingzoo:mpe.simple_spread_v3        PettingZoo's (or, for `mpe.*`, the mpe2 package's) env
    pettingzoo:mpe.simple_spread_v3?N=2    ... with keyword arguments for `parallel_env(...)`
    ma:nim                                 a game registered with `register_multiagent_env`
    ma:path/to/game.py:make_env            a factory of your own (also `ma:package.module:fn`)

A factory returns a PettingZoo `ParallelEnv` (`possible_agents`, `observation_space(agent)`,
`action_space(agent)`, `reset(seed=)`, `step(actions)`); observations must be Box spaces (they are
flattened to float32), actions Discrete or Box. `JointEnv` adapts one to what actors need.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

from surreal.api.registry import UnknownAlgorithm, load_class
from surreal.api.spaces import EnvInfo
from surreal.envs.base import UnknownEnvironment, info_from_spaces

FAMILIES = ("pettingzoo", "ma")
"""Environment id prefixes that name multi-agent environments."""

_REGISTERED: dict[str, str] = {
    "nim": "surreal.envs.games:Nim",
    "pair": "surreal.envs.games:Pair",
}
"""`ma:<name>` -> "module:factory" (imported lazily)."""


def register_multiagent_env(name: str, factory: str) -> None:
    """Register `ma:<name>` as `"package.module:factory"` (a ParallelEnv class or function
    taking keyword arguments). Every process of a run imports it by that reference, so the
    module must be importable there; a file of your own can be named directly instead:
    `ma:path/to/game.py:make_env`."""
    if ":" not in factory:
        raise ValueError(f"factory must be 'module:function', got {factory!r}")
    _REGISTERED[name] = factory


def is_multiagent(env_id: str) -> bool:
    """Whether `env_id` names a multi-agent environment (`pettingzoo:` or `ma:`)."""
    return env_id.partition(":")[0] in FAMILIES


def _split_kwargs(name: str) -> tuple[str, dict[str, Any]]:
    """`simple_spread_v3?N=2&local_ratio=0.5` -> (name, {"N": 2, "local_ratio": 0.5})."""
    base, _, query = name.partition("?")
    kwargs: dict[str, Any] = {}
    for item in filter(None, query.split("&")):
        key, sep, raw = item.partition("=")
        if not sep:
            raise UnknownEnvironment(f"environment argument {item!r} must be key=value")
        kwargs[key] = _literal(raw)
    return base, kwargs


def _literal(raw: str) -> Any:
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            pass
    return raw


def _factory(env_id: str) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The callable that builds `env_id`'s ParallelEnv and its keyword arguments."""
    family, _, name = env_id.partition(":")
    if family not in FAMILIES or not name:
        raise UnknownEnvironment(
            f"{env_id!r} is not a multi-agent environment id (pettingzoo:<module> or ma:<name>)"
        )
    name, kwargs = _split_kwargs(name)
    if family == "pettingzoo":
        return _pettingzoo(name), kwargs
    ref = _REGISTERED.get(name, name)
    if ":" not in ref:
        close = difflib.get_close_matches(name, list(_REGISTERED), n=1)
        hint = f"; did you mean 'ma:{close[0]}'?" if close else ""
        raise UnknownEnvironment(
            f"unknown multi-agent environment 'ma:{name}'{hint} Known: "
            f"{', '.join('ma:' + n for n in sorted(_REGISTERED))}, or ma:path/to/file.py:factory"
        )
    try:
        return load_class(ref, "env"), kwargs
    except UnknownAlgorithm as err:
        raise UnknownEnvironment(str(err)) from None


def _pettingzoo(name: str) -> Callable[..., Any]:
    """`mpe.simple_spread_v3` -> `pettingzoo.mpe.simple_spread_v3.parallel_env` (MPE lives in
    the separate `mpe2` package since PettingZoo 1.25: `mpe2.simple_spread_v3` is used then)."""
    candidates = [f"pettingzoo.{name}"]
    if name.startswith("mpe."):
        candidates.insert(0, "mpe2." + name[len("mpe.") :])
    errors = []
    for module_name in candidates:
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            errors.append(f"{module_name}: {err}")
            continue
        if hasattr(module, "parallel_env"):
            return module.parallel_env
        errors.append(f"{module_name} has no parallel_env")
    raise UnknownEnvironment(
        f"cannot build 'pettingzoo:{name}' ({'; '.join(errors)}); install the extra: "
        "pip install -e '.[multiagent]'"
    )


def check_multiagent_env(env_id: str) -> None:
    """Raise UnknownEnvironment (saying what to do) if `env_id` cannot be built."""
    make_multiagent_env(env_id).close()


def make_multiagent_env(env_id: str, seed: int | None = None) -> JointEnv:
    """Build the multi-agent environment `env_id` as a `JointEnv`."""
    factory, kwargs = _factory(env_id)
    try:
        env = factory(**kwargs)
    except TypeError as err:
        raise UnknownEnvironment(f"{env_id}: {err}") from None
    return JointEnv(env, seed)


def agent_infos(env_id: str) -> dict[str, EnvInfo]:
    """agent -> EnvInfo (its observation and action spaces), in the env's agent order."""
    env = make_multiagent_env(env_id)
    try:
        return dict(env.infos)
    finally:
        env.close()


class JointEnv:
    """One PettingZoo parallel env seen by an actor: flat float32 observations per agent, the
    joint episode ends when any agent's ends (then `reset` starts the next for all).

    Args:
        env: a PettingZoo ParallelEnv.
        seed: seeds the first reset (later resets continue the env's random stream).
    """

    def __init__(self, env: Any, seed: int | None = None) -> None:
        self.env, self.seed = env, seed
        self.agents: list[str] = list(env.possible_agents)
        self.infos: dict[str, EnvInfo] = {}
        for agent in self.agents:
            obs_space = env.observation_space(agent)
            if getattr(obs_space, "shape", None) is None or obs_space.shape == ():
                raise UnknownEnvironment(
                    f"agent {agent!r} has observation space {obs_space}: use a Box space"
                )
            flat = _FlatBox(int(np.prod(obs_space.shape)))
            self.infos[agent] = info_from_spaces(flat, env.action_space(agent))
        self._last: dict[str, np.ndarray] = {}

    def _flat(self, obs: dict[str, Any]) -> dict[str, np.ndarray]:
        out = {}
        for agent in self.agents:
            if agent in obs:
                out[agent] = np.asarray(obs[agent], np.float32).ravel()
            else:  # an agent the env removed: its last observation
                out[agent] = self._last.get(
                    agent, np.zeros(self.infos[agent].obs_shape, np.float32)
                )
        self._last = out
        return out

    def reset(self) -> dict[str, np.ndarray]:
        """Start a joint episode; returns agent -> observation."""
        seed, self.seed = self.seed, None
        obs, _ = self.env.reset(seed=seed)
        return self._flat(obs)

    def step(
        self, actions: dict[str, Any]
    ) -> tuple[dict[str, np.ndarray], dict[str, float], dict[str, bool], dict[str, bool]]:
        """Step every live agent; returns (obs, reward, terminated, truncated) per agent.

        Agents absent from the env's reply count as terminated with reward 0."""
        live = set(getattr(self.env, "agents", self.agents))
        obs, rewards, terms, truncs, _ = self.env.step(
            {a: _action(actions[a]) for a in self.agents if a in live}
        )
        reward = {a: float(rewards.get(a, 0.0)) for a in self.agents}
        terminated = {a: bool(terms.get(a, a not in obs)) for a in self.agents}
        truncated = {a: bool(truncs.get(a, False)) for a in self.agents}
        return self._flat(obs), reward, terminated, truncated

    def state(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The global state for a centralized value: the env's `state()` when it has one, else
        every agent's observation concatenated in agent order."""
        state = getattr(self.env, "state", None)
        if callable(state):
            try:
                return np.asarray(state(), np.float32).ravel()
            except NotImplementedError:
                pass
        return np.concatenate([obs[a] for a in self.agents])

    def close(self) -> None:
        """Close the env."""
        self.env.close()


def _action(action: Any) -> Any:
    arr = np.asarray(action)
    return int(arr) if arr.ndim == 0 and arr.dtype.kind in "iu" else arr


class _FlatBox:
    """Just enough of a Box space for `info_from_spaces` (a flat observation of `size`)."""

    def __init__(self, size: int) -> None:
        self.shape = (size,)
