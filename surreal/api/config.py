"""Typed run configuration (dataclasses), `--set a.b=value` overrides, and saving/loading it."""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from surreal.api.bounds import bounded


class ConfigError(ValueError):
    """A configuration value or key is wrong; the message says how to fix it."""


@dataclass
class RobosuiteConfig:
    """Settings of `robosuite:<Task>` environments (ignored by other families)."""

    robots: list[str] = field(default_factory=lambda: ["Panda"])
    """Robot per arm, e.g. [Sawyer] or, for TwoArm tasks, [Panda, Panda]."""
    camera_size: int = 84
    """Height and width of `<camera>_image` observations (camera mode: an image key in obs_keys)."""
    reward_shaping: bool = True
    """Dense, staged rewards (the paper's setting) instead of the sparse success reward."""
    control_freq: int = 20
    """Controller steps per simulated second."""
    video_size: int = 256
    """Height and width of the frames `surreal eval --video` records."""


@dataclass
class EnvConfig:
    """The environment every actor and evaluator builds."""

    id: str = "gym:CartPole-v1"
    """Environment name: `gym:<gymnasium id>` or `robosuite:<Task>`."""
    num_envs: int = bounded(8, ge=1)
    """Environments stepped together (batched inference) inside one actor process."""
    frame_stack: int = bounded(1, ge=1)
    """Stack this many consecutive observations (1: off)."""
    action_repeat: int = bounded(1, ge=1)
    """Repeat each action this many environment steps, summing rewards (1: off)."""
    max_episode_steps: int | None = bounded(None, ge=1)
    """Cut episodes after this many (agent) steps; None keeps the environment's own limit."""
    obs_keys: list[str] | None = None
    """For dict observations: the keys to keep, concatenated in this order (None: all, sorted)."""
    normalize_reward: bool = False
    """Scale rewards by a running std of the discounted return, per actor (MuJoCo tasks)."""
    clip_obs: float | None = bounded(None, gt=0)
    """Clip observations to [-clip_obs, clip_obs] after normalization (None: no clipping)."""
    robosuite: RobosuiteConfig = field(default_factory=RobosuiteConfig)
    """Robot, camera size and reward shaping of robosuite tasks."""


@dataclass
class ActorConfig:
    """How actors collect experience."""

    rollout_length: int = bounded(32, ge=1)
    """Steps per environment in one segment sent to the buffer."""
    group_size: int = bounded(8, ge=1)
    """Actor processes per ProcessGroup (one machine / Pod on a cluster)."""
    max_ahead: int | None = bounded(1, ge=0)
    """Versions an actor may run ahead of its share of the learner's batches (over the live
    actors) before it waits for newer parameters: bounds the policy lag (0: synchronous PPO;
    None: never wait, off-policy). See surreal/runtime/processes/pacing.py."""
    inference: str = "local"
    """Where actors' policies run: `local` (in each actor) or `remote` (on `run.policy_workers`
    batched policy workers; actors only step environments; see docs/policy_workers.md)."""
    double_buffer: bool = True
    """Remote inference: step two halves of the envs in turn, one while the other's actions are
    computed (Sample Factory's double buffering; the runtime actor, env.num_envs >= 2)."""
    inference_wait_ms: float = 2.0
    """Remote inference: how long a policy worker waits for more actors' requests to batch."""
    inference_device: str = "cpu"
    """Remote inference: where policy workers run the policy: cpu, cuda, cuda:N or auto (a GPU
    when the worker's machine has one). PPO (MLP, conv+LSTM) and DDPG/TD3 policies move; a
    policy of your own needs a `to(device)` method and inputs that follow it."""


@dataclass
class EvalConfig:
    """The evaluator process: greedy episodes with the latest parameters."""

    episodes: int = bounded(5, ge=1)
    """Episodes per evaluation."""
    every_s: float = bounded(5.0, ge=0)
    """Seconds between the starts of two evaluations (0: no evaluator)."""


@dataclass
class RunConfig:
    """The run as a whole."""

    actors: int = bounded(2, ge=1)
    """Number of actor processes."""
    policy_workers: int = 1
    """Policy worker processes with `actor.inference=remote` (actor i asks worker i % N)."""
    steps: int = bounded(100_000, ge=1)
    """Stop after the learner consumed this many environment steps."""
    seed: int = bounded(1, ge=0)
    """Seed of the learner; actor i uses seed + 1000 * (i + 1)."""
    checkpoint_every: int = bounded(25, ge=1)
    """Write a checkpoint every this many learner iterations (and always at exit)."""
    stop_at_return: float | None = None
    """Also stop once the evaluator's mean return reaches this value: `surreal launch`'s watch,
    and the learner itself, told by the evaluator (`surreal.runtime.wire.goal`), so a run that
    no launcher watches (kube; slurm or local once the launcher died) stops there too."""
    torch_threads: int = bounded(0, ge=0)
    """torch threads in the learner process (actors always use 1); 0: the CPUs the learner may
    run on minus one per actor and one for buffer and parameter server, at least 1
    (`surreal.api.device.learner_threads`)."""
    learner_replicas: int = bounded(1, ge=1)
    """Data-parallel learner processes (one symphony ProcessGroup) averaging gradients with
    torch.distributed; each learns on segments_per_batch / learner_replicas segments."""
    device: str = "auto"
    """Where the learner computes: cpu, cuda, cuda:N, or auto: the faster device for the
    configured step, a GPU when torch sees one unless the step is a small MLP's at minibatches
    under 2,048 samples (faster on a CPU core; `surreal.api.device.auto_device`). The launch
    summary says which and why."""
    preset: Literal["auto", "cpu", "gpu"] = "auto"
    """The algorithm's settings for where it learns, applied after the task family's and before
    `--set` (`LearnerConfig.preset_defaults`): cpu (the family's recipe), gpu (PPO on MuJoCo:
    batches of 32,768 env steps in minibatches of 4,096, for a GPU learner fed by many actors;
    docs/gpu.md), or auto: gpu when `run.device` names a GPU (cuda, cuda:N), else cpu."""
    compile: Literal["auto", "on", "off", "graphs"] = "auto"
    """The learner's update step through `torch.compile` (`Learner.compiled`, surreal/api/compiling.py):
    on, off, graphs (on, in CUDA graphs: a GPU only; on a CPU it is auto, after one warning
    line), or auto: on only where it was measured to pay, today PPO's MLP on the CPU in a run of
    at least 60,000 minibatch steps (`run.steps` x `algo.update_epochs` / minibatch size, e.g.
    HalfCheetah's 1M x 10 / 64), off everywhere else (shorter runs; TD3, 1.1x; GPUs: not
    measured yet). A cold compile costs 15-17 CPU-s (13 s wall on a quiet 2-core machine, up to
    2 minutes under load) and then saves ~0.6 ms of CPU per minibatch step (1.75x at minibatch
    64): bench/reports/learning.md "Compiled learner step". PPO learns its first batch eagerly; a step
    that fails to compile runs eagerly after one warning line."""
    curve: bool | None = None
    """Encrypt and authenticate traffic between processes with CurveZMQ and keys made for this
    run (`RUN/keys/`); unset: on for slurm, compose and kube, off for local and tmux."""
    max_restarts: int = 3
    """A process that crashes with an exception more than this many times stops the run, its
    traceback printed (`surreal.monitoring.crash`); deaths by a signal (kill, OOM) restart under
    symphony's policy (20 within 10 minutes). The learner comes back from its last checkpoint
    under this limit (crashes within 10 minutes; kills from outside never use it up); 0: a
    learner that dies ends the run (`surreal launch --resume` continues it)."""
    stall_timeout_s: float = bounded(300.0, ge=0)
    """A run whose learner step does not move for this many seconds ends `failed`, saying what
    its processes wait for (`surreal launch`'s watch; the checkpoint stays and `--resume`
    continues the run); 0: never. A run no launcher watches (kube; slurm or local once the
    launcher died) ends so too, 60 s later, through the learner's own watch
    (`surreal.runtime.processes.stall_watch`)."""
    prometheus: bool = True
    """Every process serves Prometheus `/metrics` on its own port (`docs/monitoring.md`)."""
    wandb: str = "disabled"
    """Weights & Biases logging from the metrics process: online, offline or disabled."""
    wandb_project: str = "surreal"
    """The W&B project (the group is the experiment, the run name experiment/trial)."""
    image: str | None = None
    """Container image of every process on compose and kube (`surreal launch --image`; made by
    `symphony build cpu -c docker/build.yaml`); unset: the backend's default image."""


@dataclass
class Config:
    """Everything a run needs; saved as `config.json` in the run folder."""

    algo: Any
    """The algorithm's own dataclass (the learner's `config_class`)."""
    run: RunConfig = field(default_factory=RunConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    actor: ActorConfig = field(default_factory=ActorConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)


def to_dict(config: Any) -> dict[str, Any]:
    """A JSON-friendly dict of a (nested) config dataclass."""
    return dataclasses.asdict(config)


def from_dict(cls: type, data: dict[str, Any], algo_class: type | None = None) -> Any:
    """Build `cls` (a config dataclass) from a dict, checking every key and value type.

    Args:
        cls: the dataclass to build.
        data: values by field name; missing fields keep their defaults.
        algo_class: for `Config`, the dataclass of the `algo` field.
    """
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in names:
            raise ConfigError(f"unknown config key {key!r} in {cls.__name__}{_suggest(key, names)}")
        hint = algo_class if (key == "algo" and algo_class) else hints[key]
        if dataclasses.is_dataclass(hint) and isinstance(value, dict):
            kwargs[key] = from_dict(hint, value)
        else:
            kwargs[key] = _check(key, value, hint)
    if cls is Config and "algo" not in kwargs:
        kwargs["algo"] = algo_class() if algo_class else None
    return cls(**kwargs)


def save(config: Config, path: Path) -> None:
    """Write the resolved config as JSON."""
    path.write_text(json.dumps(to_dict(config), indent=2, sort_keys=True) + "\n")


RETIRED = {
    "algo.segments_per_batch": "algo.batch_size, in env steps (segments x actor.rollout_length "
    "x env.num_envs; 0: one segment per actor)",
}
"""Keys that are gone, and what to set instead (`--set` says so in one line)."""


def load(path: Path, algo_class: type) -> Config:
    """Read a config written by `save` (a run saved before a key was retired is read as the
    same run: `algo.segments_per_batch=N` becomes the `algo.batch_size` of N segments)."""
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ConfigError(
            f"{path} is not valid JSON ({err.msg}: line {err.lineno} column {err.colno}); "
            "the run folder is damaged: restore the file from a copy"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds a JSON {type(data).__name__}, not a config")
    algo = data.get("algo") or {}
    if "segments_per_batch" in algo:
        segments = algo.pop("segments_per_batch")
        actor, env = data.get("actor", {}), data.get("env", {})
        rollout = actor.get("rollout_length", ActorConfig.rollout_length)
        algo["batch_size"] = segments * rollout * env.get("num_envs", EnvConfig.num_envs)
    return from_dict(Config, data, algo_class=algo_class)


def keys(config: Any, prefix: str = "") -> list[str]:
    """Every settable dotted key of a config, e.g. `algo.lr`, `env.num_envs`."""
    out = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            out.extend(keys(value, f"{prefix}{f.name}."))
        else:
            out.append(prefix + f.name)
    return out


def apply_overrides(config: Config, overrides: list[str]) -> Config:
    """Apply `key=value` strings (`algo.lr=3e-4`) in place, type-checked; returns the config.

    Raises:
        ConfigError: malformed override, unknown key (with the nearest valid key), or a value
            that does not parse as the field's type.
    """
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set expects key=value, got {item!r} (e.g. --set algo.lr=3e-4)")
        key, raw = item.split("=", 1)
        key = key.strip()
        target, leaf, hint = _field(config, key)
        setattr(target, leaf, _parse(key, raw.strip(), hint))
    return config


def set_value(config: Config, key: str, value: Any) -> None:
    """Set the dotted `key` to a Python `value`, checked like a loaded config (the path the task
    family's defaults take: a misspelt key or a wrong type is a ConfigError, never a new
    attribute)."""
    target, leaf, hint = _field(config, key)
    setattr(target, leaf, _check(key, value, hint))


def get_value(config: Config, key: str) -> Any:
    """The value at dotted `key`; ConfigError for an unknown or retired key (as `set_value`)."""
    target, leaf, _ = _field(config, key)
    return getattr(target, leaf)


def _field(config: Config, key: str) -> tuple[Any, str, Any]:
    """The dataclass that holds dotted `key`, the field's name and its type; ConfigError for an
    unknown or retired key."""
    if key in RETIRED:
        raise ConfigError(f"{key} is retired; set {RETIRED[key]}")
    parts = key.split(".")
    target = config
    for part in parts[:-1]:
        child = getattr(target, part, None) if dataclasses.is_dataclass(target) else None
        if not dataclasses.is_dataclass(child):
            raise ConfigError(f"unknown config key {key!r}{_suggest(key, keys(config))}")
        target = child
    leaf = parts[-1]
    names = {f.name for f in dataclasses.fields(target)}
    if leaf not in names or dataclasses.is_dataclass(getattr(target, leaf)):
        raise ConfigError(f"unknown config key {key!r}{_suggest(key, keys(config))}")
    return target, leaf, typing.get_type_hints(type(target))[leaf]


def _suggest(key: str, candidates: Any) -> str:
    close = difflib.get_close_matches(key, list(candidates), n=1, cutoff=0.5)
    if close:
        return f"; did you mean {close[0]!r}?"
    return "; `surreal launch ALGO --dry-run` prints every key"


def _optional_inner(hint: Any) -> tuple[Any, bool]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0], True
    return hint, False


def _parse(key: str, raw: str, hint: Any) -> Any:
    inner, optional = _optional_inner(hint)
    if optional and raw.lower() in ("none", "null", ""):
        return None
    origin = typing.get_origin(inner)
    if origin is Literal:
        return _check(key, raw, hint)
    if origin in (list, tuple):
        (item_type, *_) = typing.get_args(inner) or (str,)
        items = [s.strip() for s in raw.strip("[]()").split(",") if s.strip()]
        return origin(_parse(key, s, item_type) for s in items)
    try:
        if inner is bool:
            if raw.lower() in ("true", "1", "yes", "on"):
                return True
            if raw.lower() in ("false", "0", "no", "off"):
                return False
            raise ValueError(raw)
        if inner is int:
            return int(raw)
        if inner is float:
            return float(raw)
        if inner is str or inner is Any:
            return raw
    except ValueError:
        pass
    else:
        raise ConfigError(f"cannot set {key!r}: unsupported type {hint}")
    raise ConfigError(f"{key} expects {_type_name(hint)}, got {raw!r}")


def _check(key: str, value: Any, hint: Any) -> Any:
    """Check a value read from JSON against a field type (ints are accepted for floats)."""
    inner, optional = _optional_inner(hint)
    if value is None and optional:
        return None
    origin = typing.get_origin(inner)
    if origin is Literal:
        if value in typing.get_args(inner):
            return value
        raise ConfigError(f"{key} must be {_type_name(hint)}, got {value!r}")
    if origin in (list, tuple) and isinstance(value, (list, tuple)):
        return origin(value)
    if inner is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if inner is Any or (
        isinstance(inner, type)
        and isinstance(value, inner)
        and not (inner is int and isinstance(value, bool))
    ):
        return value
    raise ConfigError(f"{key} expects {_type_name(hint)}, got {value!r}")


def _type_name(hint: Any) -> str:
    inner, optional = _optional_inner(hint)
    if typing.get_origin(inner) is Literal:
        *first, last = (str(choice) for choice in typing.get_args(inner))
        name = f"{', '.join(first)} or {last}" if first else last
        return f"{name} or None" if optional else name
    name = getattr(inner, "__name__", str(inner))
    return f"{name} or None" if optional else name


class ReadOnly:
    """A read-only view of a config dataclass: attributes read through (nested dataclasses as
    views, lists as tuples); setting one raises AttributeError."""

    __slots__ = ("_target",)

    def __init__(self, target: Any) -> None:
        object.__setattr__(self, "_target", target)

    def __getattr__(self, name: str) -> Any:
        value = getattr(object.__getattribute__(self, "_target"), name)
        if dataclasses.is_dataclass(value):
            return ReadOnly(value)
        return tuple(value) if isinstance(value, list) else value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"the run config is read-only here (tried to set {name!r}); "
            "change it at launch with --set KEY=VALUE"
        )

    def __repr__(self) -> str:
        return f"ReadOnly({object.__getattribute__(self, '_target')!r})"


def read_only(config: Any) -> ReadOnly:
    """A read-only view of a (copied) config: later changes to `config` do not show through."""
    return ReadOnly(copy.deepcopy(config))
