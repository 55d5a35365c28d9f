"""The small core of interfaces: Policy, Learner, Actor."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from surreal.api.config import Config, read_only
from surreal.api.device import auto_device, preference, resolve
from surreal.api.modules import load_model_params, model_params
from surreal.api.replay import FifoSampler, FifoStorage, Replay
from surreal.api.spaces import EnvInfo
from surreal.api.synthetic import SyntheticEnv

Batch = dict[str, np.ndarray]
Params = dict[str, np.ndarray]

RUNTIME_COMPONENTS = {
    "actor": "surreal.runtime.actor:main",
    "buffer": "surreal.runtime.replay:main",
    "learner": "surreal.runtime.learner:main",
    "param-server": "surreal.runtime.param_server:main",
    "evaluator": "surreal.runtime.evaluator:main",
    "metrics": "surreal.runtime.metrics:main",
    "policy-worker": "surreal.runtime.policy_worker:main",
}
"""role -> "module:function(run_dir, index)" of the runtime's own processes
(`Learner.components`' default; `surreal.runtime.topology` starts them)."""


def fifo_replay(per_batch: int, actors: int) -> Replay:
    """`Learner.make_replay`'s default: FIFO, each segment learned from once, holding up to 4
    batches of `per_batch` segments plus 2 segments per actor."""
    return Replay(FifoStorage(capacity=4 * per_batch + 2 * actors), FifoSampler())


@dataclass
class LearnerConfig:
    """Fields every algorithm config has; algorithms subclass this dataclass."""

    lr: float = 3e-4
    """Learning rate of the optimizer."""
    gamma: float = 0.99
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

    def replay_items(self) -> int:
        """Transitions one replay buffer process stores, for its memory request on compose and
        kube (`surreal.runtime.sizing`); default 0 (no replay storage: on-policy algorithms).
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
    `method(obs, **kwargs)` on a batch of observations (`surreal.runtime.policy_protocol`); a
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


class Learner(abc.ABC):
    """Learns from batches of experience; subclass it to write a new algorithm.

    The runtime calls, in order: `__init__(config, env_info)`, then repeatedly `learn(batch)` and
    `params()` (published to the actors), `state_dict()` at checkpoints and `load_state_dict()` on
    `--resume`. A batch holds the segments several actors sent, stacked: every key has shape
    [segments, rollout_length, num_envs, ...]; see `Actor` for the keys.

    Everything else the runtime asks of an algorithm is a classmethod below with a default that
    suits an on-policy learner on the standard topology (actors -> FIFO buffer -> learner ->
    parameter server): `check_config`, `segments_per_batch`, `make_replay`, `build_experiment` and
    `components`. Override the ones your algorithm needs to change.
    """

    config_class: ClassVar[type] = LearnerConfig
    """The dataclass that holds this algorithm's settings (`--set algo.<field>=...`)."""
    episode_aligned: ClassVar[bool] = False
    """True: every segment starts fresh episodes and holds whole episodes only, padded with
    `mask` = 0 after each env's episode ended (for Monte Carlo returns); see `Actor`."""
    run_config: Any = None
    """A read-only view of the whole run config (`run`, `env`, `actor`, `eval`, `algo`), set
    before `__init__` when the runtime builds the learner (`create`); None in bare unit tests."""

    def __init__(self, config: Any, env_info: EnvInfo) -> None:
        self.config = config
        self.env_info = env_info
        self.progress = 0.0
        """Fraction of `run.steps` consumed so far; the runtime sets it before each `learn`."""
        self.optimizer: Any = None
        """The torch optimizer the default `state_dict` saves, if you set one."""
        self.model: Any = self.make_model(config, env_info)
        """`make_model(config, env_info)`: the network the default params/state_dict use; moved
        to `self.device`."""
        if self.model is not None and hasattr(self.model, "to"):
            self.model = self.model.to(self.device)

    @property
    def device(self) -> Any:
        """The `torch.device` this learner computes on: `run.device` resolved (`auto`: the first
        GPU torch sees if `self.config.device_preference` asks for one, else the CPU:
        `surreal.api.device.auto_device`); the CPU in bare unit tests without a run config. Build
        your networks and optimizer state there; `to_device(batch)` moves a batch there."""
        cached = self.__dict__.get("_device")
        if cached is None:
            spec = self.run_config.run.device if self.run_config is not None else "cpu"
            if spec.strip().lower() == "auto":
                spec, _ = auto_device(*preference(self.run_config))
            cached = self.__dict__["_device"] = resolve(spec)
        return cached

    def compile_pays(self) -> bool:
        """Whether `run.compile=auto` compiles this learner's step in this run (`self.run_config`,
        `self.device`); default False: only where a benchmark showed it pays (PPO's MLP on the
        CPU in a long run: `PPOLearner.compile_pays`, `surreal.api.compiling.pays`)."""
        return False

    @property
    def compiling(self) -> bool:
        """Whether `compiled` compiles: `run.compile` on or graphs, or auto and
        `compile_pays()`; False in bare unit tests without a run config."""
        mode = self._compile_mode()
        return mode in ("on", "graphs") or (mode == "auto" and self.compile_pays())

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
        """`fn` (your update step) through `torch.compile` when `self.compiling`, else `fn`.

        Build it once in `__init__`; call it with tensors (changing floats as 0-d tensors, or
        each new value compiles again). What pays on a CPU (bench/learner_step.py): the loss's
        forward and `backward()` in one function plus a fused Adam; `zero_grad`, gradient sync
        and clipping stay outside. `run.compile=graphs` on a GPU runs it in CUDA graphs. If
        compiling or a compiled call raises, one warning line goes to the process's log and the
        call (after `reset()`, e.g. `self.optimizer.zero_grad`) and every later one run `fn`
        eagerly. Returns a `surreal.api.compiling.Compiled` (`active`: still compiled) or `fn`."""
        if not self.compiling:
            return fn
        from surreal.api.compiling import Compiled  # torch: the learner process only

        return Compiled(fn, name, reset, graphs=self._compile_mode() == "graphs")

    replicas: Any = None
    """`surreal.runtime.distributed.Replicas` when `run.learner_replicas` > 1 (set before `learn`), else
    None. With replicas, each learner gets its share of the batch: call `sync_gradients()` after
    every `backward()` and `gather(array)` for statistics over the whole batch."""

    def sync_gradients(self) -> None:
        """Average `self.model`'s gradients over the replicas (no-op for a single learner). Call
        it between `loss.backward()` and gradient clipping / `optimizer.step()`."""
        if self.replicas is not None:
            self.replicas.average_gradients(self._model("sync_gradients()").parameters())

    def gather(self, array: Any) -> Any:
        """`array` from every replica, concatenated along axis 0 (itself for a single learner)."""
        return array if self.replicas is None else self.replicas.gather(array)

    def to_device(self, batch: Batch) -> dict[str, Any]:
        """A batch dict of numpy arrays as torch tensors on `self.device`: zero-copy views on the
        CPU (valid while `learn` runs), one pinned-memory staging copy and an asynchronous
        transfer on a GPU (`surreal.api.transfer.to_device`)."""
        from surreal.api.transfer import to_device  # torch: the learner process only

        return to_device(batch, self.device)

    @classmethod
    def create(cls, run_config: Config, env_info: EnvInfo, **kwargs: Any) -> Learner:
        """How the runtime builds a learner: `run_config` (read-only) is visible from `__init__`
        on as `self.run_config`, then `__init__(run_config.algo, env_info, **kwargs)` runs."""
        learner = cls.__new__(cls)
        learner.run_config = read_only(run_config)
        learner.__init__(run_config.algo, env_info, **kwargs)
        return learner

    @classmethod
    def make_model(cls, config: Any, env_info: EnvInfo) -> Any:
        """The network shared by learner and policy (a torch `nn.Module`), or None (default).

        `__init__` stores it as `self.model`; build the policy's copy with the same call in
        `make_policy`. With a model, `params`, `state_dict` and `load_state_dict` (and
        `Policy.load_params`) work without being written.
        """
        return None

    @classmethod
    def check_config(cls, config: Any, env_info: EnvInfo) -> None:
        """Raise ValueError (saying what to set) if the algorithm settings `config` cannot work
        with this environment. `surreal launch` calls it before anything starts; default: accept."""
        return None

    @classmethod
    def check_run(cls, run_config: Config) -> None:
        """Like `check_config`, over the whole run config (e.g. agents vs policies); default: accept."""
        return None

    @classmethod
    def segments_per_batch(cls, run_config: Config) -> int:
        """Segments (one actor rollout each) in one `learn` batch, from the whole run config.

        The actors (to pace themselves, `actor.max_ahead`), the buffer (to size its FIFO) and the
        learner (to ask for batches) all read this one number. Default: one per actor.
        """
        return run_config.run.actors

    @classmethod
    def make_replay(cls, run_config: Config) -> Replay:
        """The buffer process's replay: a `surreal.api.replay.Replay(storage, sampler)`.

        Default: FIFO, each segment learned from once (on-policy), holding up to 4 batches plus 2
        segments per actor; the oldest segment is dropped when full.
        """
        return fifo_replay(cls.segments_per_batch(run_config), run_config.run.actors)

    @classmethod
    def build_experiment(cls, plan: Any) -> Any:
        """The symphony Experiment of a launch plan (`surreal.runtime.topology.LaunchPlan`), or None.

        Default: None, and the launcher builds `surreal.runtime.topology.standard_experiment(plan)`:
        metrics sink, buffer, learner, parameter server, evaluator and `run.actors` actors in
        groups. Return your own from the blocks in `surreal.runtime.topology` (see
        `surreal/algos/ddpg/topology.py`); start from the standard one with
        `standard_experiment(plan)`.
        """
        return None

    @classmethod
    def components(cls) -> dict[str, str]:
        """role -> "module:function(run_dir, index)" of every process `build_experiment` starts.

        `python -m surreal component ROLE RUN_DIR` runs the function. Default: the runtime's
        roles (`RUNTIME_COMPONENTS`); add or replace roles for your topology.
        """
        return dict(RUNTIME_COMPONENTS)

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

        Default: `self.model` and `self.optimizer` (if set).
        """
        optimizer = self.optimizer.state_dict() if self.optimizer is not None else None
        return {"model": self._model("state_dict()").state_dict(), "optimizer": optimizer}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned."""
        self._model("load_state_dict()").load_state_dict(state["model"])
        if self.optimizer is not None and state.get("optimizer") is not None:
            self.optimizer.load_state_dict(state["optimizer"])

    def set_hyperparameters(self, values: dict[str, Any]) -> None:
        """Change `algo.*` settings while learning (population-based training, `surreal.pbt`):
        `values` maps field names (`lr`, `ent_coef`, ...) to new values, set on `self.config`;
        `lr` also on every param group of `self.optimizer`. Override it (calling super) when your
        learner copies a setting elsewhere in `__init__`."""
        for name, value in values.items():
            if not hasattr(self.config, name):
                raise ValueError(f"{type(self.config).__name__} has no setting {name!r}")
            setattr(self.config, name, value)
        if "lr" in values and self.optimizer is not None:
            for group in self.optimizer.param_groups:
                group["lr"] = values["lr"]

    def _model(self, method: str) -> Any:
        if self.model is None:
            raise NotImplementedError(
                f"{type(self).__name__}: define {method} or make_model(config, env_info)"
            )
        return self.model

    @classmethod
    def example_batch(cls, run_config: Config, env_info: EnvInfo, policy: Policy) -> Batch | None:
        """A small synthetic batch shaped like the ones `learn` gets, for the check `surreal
        launch` runs before anything starts; None skips `learn` there.

        Default: 2 segments of `actor.rollout_length` steps from 2 synthetic environments,
        collected by `Actor` with `policy` (so with your policy's extras): `segment_batch`.
        """
        return segment_batch(cls, run_config, env_info, policy)


@dataclass
class Actor:
    """Steps a batch of environments with a policy and cuts the stream into segments.

    Each segment is a dict of arrays with leading dims [rollout_length, num_envs]:
    `obs`, `action`, `reward`, `terminated`, `truncated` (this step ended the episode),
    the policy's extras (e.g. `logprob`, `value`), and `next_value` [num_envs] (the value of the
    observation after the last step, when the policy has one) and `final_value`
    [rollout_length, num_envs] (the value of the true last observation of a truncated episode, so
    time limits are bootstrapped, not treated as failures). `rollout_episodes` adds `mask`.
    """

    env: Any
    """A `surreal.envs.VectorEnv`."""
    policy: Policy
    rollout_length: int
    obs: np.ndarray | None = None
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)

    def _step(self, obs: np.ndarray) -> tuple[Batch, dict[str, Any], np.ndarray]:
        """Act on `obs` and step every env: (the step's arrays, the env's info, next obs)."""
        action, extras = self.policy.act(obs)
        next_obs, reward, terminated, truncated, info = self.env.step(action)
        final_value = np.zeros(len(reward), np.float32)
        if truncated.any() and info.get("final_obs") is not None:
            value = self.policy.value(info["final_obs"])
            if value is not None:
                final_value = np.where(truncated & ~terminated, value, 0.0).astype(np.float32)
        step = {
            "obs": obs,
            "action": action,
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
            "final_value": final_value,
            **extras,
        }
        self.policy.reset(terminated | truncated)
        return {k: np.asarray(v) for k, v in step.items()}, info, next_obs

    def rollout(self) -> Batch:
        """Collect one segment of `rollout_length` steps from every environment."""
        if self.obs is None:
            self.obs = self.env.reset()
        steps: dict[str, list[np.ndarray]] = {}
        for _ in range(self.rollout_length):
            step, info, self.obs = self._step(self.obs)
            for key, value in step.items():
                steps.setdefault(key, []).append(value)
            self.episode_returns.extend(info.get("episode_returns", []))
            self.episode_lengths.extend(info.get("episode_lengths", []))
        segment = {key: np.stack(values) for key, values in steps.items()}
        next_value = self.policy.value(self.obs)
        if next_value is not None:
            segment["next_value"] = np.asarray(next_value, np.float32)
        return segment

    def rollout_episodes(self) -> Batch:
        """One segment of whole episodes (for a `Learner.episode_aligned` learner).

        Every environment starts a new episode and runs until it ends; the steps after its end
        are padding: zeros, with `mask` [rollout_length, num_envs] 0 there and 1 on real steps.
        An episode still running after `rollout_length` steps is cut there (`truncated`, with its
        `final_value`), so set `actor.rollout_length` to the environment's episode limit.
        `next_value` is 0: nothing follows the segment.
        """
        obs = self.env.reset()
        alive = np.ones(len(obs), bool)
        self.policy.reset(alive.copy())
        steps: dict[str, list[np.ndarray]] = {}
        for t in range(self.rollout_length):
            step, info, next_obs = self._step(obs)
            ended = step["terminated"] | step["truncated"]
            cut = alive & ~ended if t == self.rollout_length - 1 else np.zeros_like(alive)
            if cut.any():
                step["truncated"] = step["truncated"] | cut
                value = self.policy.value(next_obs)
                if value is not None:
                    step["final_value"] = np.where(cut, value, step["final_value"])
            for key, value in step.items():
                kept = np.zeros_like(value)
                kept[alive] = value[alive]
                steps.setdefault(key, []).append(kept)
            steps.setdefault("mask", []).append(alive.astype(np.float32))
            for i, ret, length in zip(
                np.flatnonzero(ended),
                info.get("episode_returns", []),
                info.get("episode_lengths", []),
                strict=False,
            ):
                if alive[i]:
                    self.episode_returns.append(ret)
                    self.episode_lengths.append(length)
            alive &= ~ended
            obs = next_obs
            if not alive.any():
                break
        for values in steps.values():  # pad every env's finished episode to rollout_length
            values.extend([np.zeros_like(values[0])] * (self.rollout_length - len(values)))
        segment = {key: np.stack(values) for key, values in steps.items()}
        segment["next_value"] = np.zeros(len(obs), np.float32)
        self.obs = None
        return segment

    def pop_episodes(self) -> tuple[list[float], list[int]]:
        """Returns and lengths of the episodes finished since the last call."""
        returns, lengths = self.episode_returns, self.episode_lengths
        self.episode_returns, self.episode_lengths = [], []
        return returns, lengths


def segment_batch(
    algo_class: type[Learner], run_config: Config, env_info: EnvInfo, policy: Policy
) -> Batch:
    """2 segments of `actor.rollout_length` steps of 2 synthetic envs, as the buffer stacks them
    (`Learner.example_batch`'s default)."""
    actor = Actor(SyntheticEnv(env_info), policy, run_config.actor.rollout_length)
    rollout = actor.rollout_episodes if algo_class.episode_aligned else actor.rollout
    segments = [rollout() for _ in range(2)]
    for segment in segments:
        segment["version"] = np.ones(actor.env.num_envs, np.int64)
    return {key: np.stack([s[key] for s in segments]) for key in segments[0]}
