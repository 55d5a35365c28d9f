"""The small core of interfaces: Policy, Learner (and `Actor`, `surreal.api.actor`)."""

from __future__ import annotations

import abc
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from surreal.api.actor import Actor
from surreal.api.bounds import bounded
from surreal.api.config import Config, read_only
from surreal.api.device import auto_device, preference, resolve
from surreal.api.modules import load_model_params, model_params
from surreal.api.spaces import EnvInfo

__all__ = [
    "Actor",
    "Batch",
    "Learner",
    "LearnerConfig",
    "Params",
    "Policy",
    "check_settings",
    "set_hyperparameters",
]

Batch = dict[str, np.ndarray]
Params = dict[str, np.ndarray]


@dataclass
class LearnerConfig:
    """Fields every algorithm config has; algorithms subclass this dataclass."""

    lr: float = bounded(3e-4, gt=0)
    """Learning rate of the optimizer."""
    gamma: float = bounded(0.99, ge=0, le=1)
    """Discount factor."""

    @classmethod
    def family_defaults(cls, family: str) -> dict[str, Any]:
        """Dotted settings (`{"algo.lr": 1e-3}`) `surreal launch` applies for a task family
        ('classic', 'mujoco', 'robosuite', 'other'; `surreal.algos.families`) before the user's
        `--set`, through the same typed path; default: none."""
        return {}

    @classmethod
    def preset_defaults(cls, preset: str, family: str) -> dict[str, Any]:
        """Dotted settings of the preset PRESET (`run.preset`: 'cpu', 'gpu') for a task family,
        applied after `family_defaults` and before the user's `--set`; default: none."""
        return {}

    def device_preference(self, run_config: Any) -> tuple[bool, str]:
        """Whether `run.device=auto` puts this learner on a GPU when there is one, and why
        (`surreal.api.device.auto_device`); default: yes (a network of your own is usually
        large enough to pay for one). PPO's MLP and DDPG/TD3/SAC stay on the CPU below
        `GPU_MIN_MINIBATCH` samples per minibatch."""
        return True, "a GPU is there (LearnerConfig.device_preference's default)"

    def check(self, env_info: EnvInfo | None = None) -> None:
        """Raise ValueError (saying what to set) if these settings cannot work with this
        environment; `surreal launch` asks before anything starts. Default: accept."""
        return None

    def compile_pays(self, run_config: Any, device: Any) -> bool:
        """Whether `run.compile=auto` compiles the learner's step in this run on `device` (a
        torch.device); default False: only where a benchmark showed it pays (PPO's MLP on the
        CPU in a long run: `PPOConfig.compile_pays`, `surreal.api.compiling.pays`)."""
        return False

    def replay_items(self) -> int:
        """Transitions one replay buffer process stores, for its memory request on compose and
        kube (`surreal.runtime.plan.sizing`); default 0 (no replay storage: on-policy algorithms).
        Off-policy configs return their capacity (DDPG/TD3/SAC: `replay_capacity`)."""
        return 0


class Policy(abc.ABC):
    """Maps a batch of observations to actions; runs in actor and evaluator processes.

    A policy is built by `Learner.make_policy` and gets its weights only through
    `load_params`, with the flat dict of numpy arrays the learner's `params()` returned.
    Actors call `act(obs)`, the evaluator and `surreal eval` call `act(obs, deterministic=True)`:
    keep the default of `deterministic`.
    """

    model: Any = None
    """The torch module `load_params` fills by default (`Learner.make_model(config, env_info)`)."""
    remote_methods: ClassVar[tuple[str, ...]] = ("act", "value")
    """The methods a policy worker serves with `actor.inference=remote`, each called as
    `method(obs, **kwargs)` on a batch of observations (`surreal.runtime.wire.policy_protocol`); a
    request for any other is refused. Add a subclass's own inference methods (DDPG's
    `unit_action`); never `reset` or `load_params` (the worker calls those itself)."""
    recurrent: ClassVar[bool] = False
    """True for a policy that keeps per-environment memory (overrides `reset` and keeps it as a
    batch-first tuple of tensors in `self.state`, like `VisionPolicy`): a policy worker keeps one
    state per actor and resets it where that actor's episodes ended."""

    @abc.abstractmethod
    def act(self, obs: np.ndarray, deterministic: bool = False) -> tuple[np.ndarray, Batch]:
        """Choose actions for a batch of observations.

        Args:
            obs: observations, shape [num_envs, *obs_shape].
            deterministic: take the most likely action (evaluation) instead of sampling.

        Returns:
            (actions [num_envs, ...], extras): extras are per-env arrays the actor stores with the
            step (e.g. `logprob`, `value`); the learner reads them from the batch.
        """

    def value(self, obs: np.ndarray) -> np.ndarray | None:
        """Value estimates used to bootstrap a segment's last step; None if not needed."""
        return None

    def load_params(self, params: Params) -> None:
        """Load the weights (and normalizer) that the learner published.

        Default: the `model/*` entries into `self.model` (what `Learner.params` publishes).
        """
        if self.model is None:
            raise NotImplementedError(
                f"{type(self).__name__}: define load_params(params) or set self.model"
            )
        load_model_params(self.model, params)

    def reset(self, done: np.ndarray) -> None:
        """Forget per-environment state (a recurrent policy's memory) where `done` [num_envs] is
        true: those environments start a new episode at the next `act`."""
        return None  # feed-forward policies hold no state

    def export_module(self) -> Any:
        """This policy's greedy action as a `surreal.api.exporting.Exportable` torch module, for
        `surreal export` (docs/export.md); None (the default): it cannot be exported."""
        return None


class Learner(abc.ABC):
    """Learns from batches of experience; subclass it to write a new algorithm.

    A learner only learns: the runtime builds it (`create`), then calls `learn(batch)` and
    `params()` (published to the actors) over and over, `state_dict()` at checkpoints and
    `load_state_dict()` on `--resume`. How it is fed and what runs around it (the batch, the
    replay, the processes, the launch check's batch) is its recipe's (`recipe`: a name from
    `surreal.api.recipe.RECIPES` or a `Recipe` subclass): `on-policy` (the default) gives
    `learn` whole segments, [segments, rollout_length, num_envs, ...] (see `Actor` for the
    keys); `off-policy` gives sampled transitions (docs/new_algorithm.md).

    Set in `create` before `__init__` runs: `self.run_config` (a read-only view of the whole
    run config; None in bare unit tests) and `self.replicas` (`surreal.runtime.processes.distributed.
    Replicas` with `run.learner_replicas` > 1, else None).
    """

    config_class: ClassVar[type] = LearnerConfig
    """The dataclass that holds this algorithm's settings (`--set algo.<field>=...`)."""
    recipe: ClassVar[Any] = "on-policy"
    """How the algorithm is fed and assembled: a recipe name (`on-policy`, `episodes`,
    `off-policy`) or a `surreal.api.recipe.Recipe` subclass."""

    def __init__(self, config: Any, env_info: EnvInfo) -> None:
        self.config = config
        self.env_info = env_info
        self.__dict__.setdefault("run_config", None)
        self.__dict__.setdefault("replicas", None)
        self.progress = 0.0
        """Fraction of `run.steps` consumed so far; the runtime sets it before each `learn`."""
        self.optimizer: Any = None
        """The torch optimizer the default `state_dict` saves, if you set one."""
        self.model: Any = self.make_model(config, env_info)
        """`make_model(config, env_info)`: the network the default params/state_dict use; moved
        to `self.device`."""
        if self.model is not None and hasattr(self.model, "to"):
            self.model = self.model.to(self.device)

    @classmethod
    def create(cls, run_config: Config, env_info: EnvInfo, **kwargs: Any) -> Learner:
        """How the runtime builds a learner: `run_config` (read-only) is visible from `__init__`
        on as `self.run_config`, then `__init__(run_config.algo, env_info, **kwargs)` runs."""
        learner = cls.__new__(cls)
        learner.run_config = read_only(run_config)
        learner.__init__(run_config.algo, env_info, **kwargs)
        return learner

    @property
    def device(self) -> Any:
        """The `torch.device` this learner computes on: `run.device` resolved (`auto`: the first
        GPU torch sees if the algorithm config's `device_preference` asks for one, else the CPU:
        `surreal.api.device.auto_device`); the CPU in bare unit tests without a run config.
        Build your networks and optimizer state there; `to_device(batch)` moves a batch there."""
        cached = self.__dict__.get("_device")
        if cached is None:
            spec = self.run_config.run.device if self.run_config is not None else "cpu"
            if spec.strip().lower() == "auto":
                spec, _ = auto_device(*preference(self.run_config))
            cached = self.__dict__["_device"] = resolve(spec)
        return cached

    def to_device(self, batch: Batch) -> dict[str, Any]:
        """A batch dict of numpy arrays as torch tensors on `self.device`: zero-copy views on the
        CPU (valid while `learn` runs), one pinned-memory staging copy and an asynchronous
        transfer on a GPU (`surreal.api.transfer.to_device`)."""
        from surreal.api.transfer import to_device  # torch: the learner process only

        return to_device(batch, self.device)

    @property
    def _compiling(self) -> bool:
        """Whether `compiled` compiles: `run.compile` on or graphs, or auto where the algorithm
        config's `compile_pays(run_config, device)` says so; False without a run config."""
        mode = self._compile_mode()
        if mode in ("on", "graphs"):
            return True
        return mode == "auto" and bool(self.config.compile_pays(self.run_config, self.device))

    def _compile_mode(self) -> str | None:
        """`run.compile` on this learner's device, once per learner: `graphs` off a GPU is
        `auto`, with one warning line (`surreal.api.compiling.graphs_here`); None without a run
        config."""
        if self.run_config is None:
            return None
        if "_compile_setting" not in self.__dict__:
            from surreal.api.compiling import graphs_here  # torch: the learner process only

            mode = getattr(self.run_config.run, "compile", "auto")
            self.__dict__["_compile_setting"] = graphs_here(mode, self.device)
        return self.__dict__["_compile_setting"]

    def compiled(self, fn: Any, name: str, reset: Any = None) -> Any:
        """`fn` (your update step) through `torch.compile` when `run.compile` asks for it (on,
        graphs, or auto where `LearnerConfig.compile_pays`), else `fn` itself.

        Build it once in `__init__`; call it with tensors (changing floats as 0-d tensors, or
        each new value compiles again). What pays on a CPU (bench/learner_step.py): the loss's
        forward and `backward()` in one function plus a fused Adam; `zero_grad`, gradient sync
        and clipping stay outside. `run.compile=graphs` on a GPU runs it in CUDA graphs. If
        compiling or a compiled call raises, one warning line goes to the process's log and the
        call (after `reset()`, e.g. `self.optimizer.zero_grad`) and every later one run `fn`
        eagerly. Returns a `surreal.api.compiling.Compiled` (`active`: still compiled) or `fn`."""
        if not self._compiling:
            return fn
        from surreal.api.compiling import Compiled  # torch: the learner process only

        return Compiled(fn, name, reset, graphs=self._compile_mode() == "graphs")

    def sync_gradients(self) -> None:
        """Average `self.model`'s gradients over the replicas (no-op for a single learner). Call
        it between `loss.backward()` and gradient clipping / `optimizer.step()`."""
        if self.replicas is not None:
            self.replicas.average_gradients(self._model("sync_gradients()").parameters())

    def gather(self, array: Any) -> Any:
        """`array` from every replica, concatenated along axis 0 (itself for a single learner)."""
        return array if self.replicas is None else self.replicas.gather(array)

    @classmethod
    def make_model(cls, config: Any, env_info: EnvInfo) -> Any:
        """The network shared by learner and policy (a torch `nn.Module`), or None (default).

        `__init__` stores it as `self.model`; build the policy's copy with the same call in
        `make_policy`. With a model, `params`, `state_dict` and `load_state_dict` (and
        `Policy.load_params`) work without being written.
        """
        return None

    @classmethod
    @abc.abstractmethod
    def make_policy(cls, config: Any, env_info: EnvInfo) -> Policy:
        """Build the policy that actors and evaluators run (no weights needed yet)."""

    @abc.abstractmethod
    def learn(self, batch: Batch) -> dict[str, float]:
        """Do one learner iteration on a batch; return metrics named from the fixed vocabulary
        (`losses/policy_loss`, `losses/value_loss`, `losses/approx_kl`, ...)."""

    def params(self) -> Params:
        """The weights actors need, as a flat dict of numpy arrays (no torch tensors).

        Default: `self.model`'s weights under `model/` (what `Policy.load_params` loads).
        """
        return model_params(self._model("params()"))

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: model, optimizer, normalizers, counters.

        Default: `self.model`, `self.optimizer` (if set) and every other torch module,
        optimizer or learning-rate scheduler the learner holds as an attribute (a target
        network, a second optimizer), under `modules` by attribute name; counters and other
        plain values are the learner's own to add (override and extend this).
        """
        optimizer = self.optimizer.state_dict() if self.optimizer is not None else None
        state = {"model": self._model("state_dict()").state_dict(), "optimizer": optimizer}
        modules = {name: obj.state_dict() for name, obj in self._stateful().items()}
        return {**state, "modules": modules} if modules else state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned (a checkpoint of a learner without some of the
        attributes this one has leaves those as they are; one with attributes this learner
        lacks is refused: KeyError)."""
        self._model("load_state_dict()").load_state_dict(state["model"])
        if self.optimizer is not None and state.get("optimizer") is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        stateful, saved = self._stateful(), state.get("modules") or {}
        unknown = sorted(set(saved) - set(stateful))
        if unknown:
            raise KeyError(
                f"the checkpoint holds {unknown} that {type(self).__name__} does not have "
                "once built (create them in __init__, or override load_state_dict)"
            )
        for name, sub in saved.items():
            stateful[name].load_state_dict(sub)

    def _stateful(self) -> dict[str, Any]:
        """The learner's torch modules, optimizers and schedulers besides `model` and
        `optimizer`, by attribute name, each once (a module inside another is saved with it)."""
        torch = sys.modules.get("torch")  # a learner that holds torch objects imported it
        if torch is None:
            return {}
        kinds = (torch.nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler)
        taken = [obj for obj in (self.model, self.optimizer) if obj is not None]
        inside = {id(m) for obj in taken if isinstance(obj, torch.nn.Module) for m in obj.modules()}
        found: dict[str, Any] = {}
        for name, obj in sorted(vars(self).items()):
            if name in ("model", "optimizer") or not isinstance(obj, kinds):
                continue
            if id(obj) in inside or any(obj is seen for seen in taken):
                continue
            found[name] = obj
            taken.append(obj)
            if isinstance(obj, torch.nn.Module):
                inside |= {id(m) for m in obj.modules()}
        return found

    def _model(self, method: str) -> Any:
        if self.model is None:
            raise NotImplementedError(
                f"{type(self).__name__}: define {method} or make_model(config, env_info)"
            )
        return self.model


def check_settings(learner_class: type[Learner], config: Any, env_info: EnvInfo) -> None:
    """The algorithm's check of its settings against the environment: the config's
    `LearnerConfig.check(env_info)`, and a learner class's own `check_config(config, env_info)`
    classmethod where one is defined (the place for it before recipes)."""
    if isinstance(config, LearnerConfig):
        config.check(env_info)
    own = getattr(learner_class, "check_config", None)
    if own is not None:
        own(config, env_info)


def set_hyperparameters(learner: Learner, values: dict[str, Any]) -> None:
    """Change `algo.*` settings while learning (population-based training, `surreal.pbt`):
    `values` maps field names (`lr`, `ent_coef`, ...) to new values, set on `learner.config`;
    `lr` also on every param group of `learner.optimizer`. A learner that copies a setting
    elsewhere in `__init__` defines `set_hyperparameters(values)` and it is called instead."""
    own = getattr(type(learner), "set_hyperparameters", None)
    if own is not None:
        own(learner, values)
        return
    for name, value in values.items():
        if not hasattr(learner.config, name):
            raise ValueError(f"{type(learner.config).__name__} has no setting {name!r}")
        setattr(learner.config, name, value)
    if "lr" in values and learner.optimizer is not None:
        for group in learner.optimizer.param_groups:
            group["lr"] = values["lr"]
