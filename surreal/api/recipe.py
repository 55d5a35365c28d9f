"""Recipes: how an algorithm is fed and assembled, apart from how it learns (torch-free).

A `Learner` learns; its recipe (`Learner.recipe`: a name or a `Recipe` subclass) says what the
run around it is: the batch (`per_batch`, the one function that sizes it, which the buffer,
the actors and the learner all call), the replay the buffer keeps (`make_replay`), the processes
(`build_experiment`, `components`), the synthetic batch the launch check learns on
(`example_batch`) and the checks of a whole run config (`check_run`). Recipes that ship:

| name | what the learner's `learn(batch)` gets |
|---|---|
| `on-policy` (`OnPolicy`) | whole segments from a FIFO, each learned from once: [segments, rollout_length, num_envs, ...] (PPO's) |
| `episodes` (`Episodes`) | the same, every segment whole episodes padded with `mask` (REINFORCE) |
| `off-policy` (`surreal.algos.offpolicy.OffPolicy`) | transitions sampled from a sharded replay: obs, act, rew (n-step), next_obs, discount (DDPG/TD3/SAC/DQN) |

Nothing here imports torch: the buffer process reads its recipe (recorded in `run.json` as
`recipe`) without the learner's module. docs/new_algorithm.md shows both kinds of algorithm.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any, ClassVar

import numpy as np

from surreal.api.actor import Actor
from surreal.api.config import Config
from surreal.api.replay import FifoSampler, FifoStorage, Replay
from surreal.api.spaces import EnvInfo
from surreal.api.synthetic import SyntheticEnv

log = logging.getLogger(__name__)

RECIPES: dict[str, str] = {
    "on-policy": "surreal.api.recipe:OnPolicy",
    "episodes": "surreal.api.recipe:Episodes",
    "off-policy": "surreal.algos.offpolicy:OffPolicy",
}
"""Recipe name -> "module:Class" (each torch-free), for `Learner.recipe = "off-policy"`."""

HOOKS = ("segments_per_batch", "make_replay", "build_experiment", "components", "example_batch")
"""The recipe's classmethods that once lived on `Learner`: a learner class that still defines
one keeps it (`recipe_of` makes a recipe that calls it, with one warning line)."""


class Recipe:
    """The base: the on-policy standard (segments, FIFO, the standard topology). Subclass it
    and override what your algorithm changes; every method is a classmethod."""

    name: ClassVar[str] = "on-policy"
    episode_aligned: ClassVar[bool] = False
    """True: every segment starts fresh episodes and holds whole episodes only, padded with
    `mask` = 0 after each env's episode ended (for Monte Carlo returns); see `Actor`."""

    @classmethod
    def per_batch(cls, run_config: Config) -> int:
        """What one `learn` call gets: on-policy, whole segments (one actor rollout each). The
        one place the batch is sized: the buffer (its FIFO), the actors (their pace,
        `actor.max_ahead`) and the learner (what it asks for) all call it.

        `algo.batch_size` env steps (when the config has that field and it is not 0) in whole
        segments of `actor.rollout_length x env.num_envs`, the nearest count, at least one;
        otherwise one segment per actor."""
        steps = getattr(run_config.algo, "batch_size", 0)
        if not steps:
            return run_config.run.actors
        segment = run_config.actor.rollout_length * run_config.env.num_envs
        return max(1, round(steps / segment))

    @classmethod
    def make_replay(cls, run_config: Config) -> Replay:
        """The buffer process's replay: FIFO, each segment learned from once, holding up to 4
        batches plus 2 segments per actor; the oldest segment is dropped when full."""
        return fifo_replay(cls.per_batch(run_config), run_config.run.actors)

    @classmethod
    def build_experiment(cls, plan: Any) -> Any:
        """The symphony Experiment of a launch plan (`surreal.runtime.plan.topology.LaunchPlan`), or
        None: the launcher then builds `surreal.runtime.plan.topology.standard_experiment(plan)`
        (metrics sink, buffer, learner, parameter server, evaluator, `run.actors` actors)."""
        return None

    @classmethod
    def components(cls) -> dict[str, str]:
        """role -> "module:function(run_dir, index)" of every process `build_experiment`
        starts (`python -m surreal component ROLE RUN_DIR` runs one): the runtime's roles."""
        return dict(RUNTIME_COMPONENTS)

    @classmethod
    def example_batch(
        cls, run_config: Config, env_info: EnvInfo, policy: Any
    ) -> dict[str, np.ndarray] | None:
        """A small synthetic batch shaped like the ones `learn` gets, for the check `surreal
        launch` runs before anything starts (None skips `learn` there): 2 segments of 2
        synthetic envs collected by `Actor` with `policy` (so with its extras)."""
        return segment_batch(cls, run_config, env_info, policy)

    @classmethod
    def check_run(cls, run_config: Config) -> None:
        """Raise ValueError (saying what to set) on a whole run config the recipe cannot run."""
        return None


class OnPolicy(Recipe):
    """Segments from a FIFO, each learned from once (PPO's)."""


class Episodes(OnPolicy):
    """On-policy with whole episodes per segment (Monte Carlo returns: REINFORCE)."""

    name = "episodes"
    episode_aligned = True


RUNTIME_COMPONENTS = {
    "actor": "surreal.runtime.processes.actor:main",
    "buffer": "surreal.runtime.processes.replay:main",
    "learner": "surreal.runtime.processes.learner:main",
    "param-server": "surreal.runtime.processes.param_server:main",
    "evaluator": "surreal.runtime.processes.evaluator:main",
    "metrics": "surreal.runtime.processes.metrics:main",
    "policy-worker": "surreal.runtime.processes.policy_worker:main",
}
"""role -> "module:function(run_dir, index)" of the runtime's own processes
(`Recipe.components`' default; `surreal.runtime.plan.topology` starts them)."""


def load(ref: str) -> type[Recipe]:
    """The recipe class of a name in `RECIPES` or a "module:Class" reference."""
    target = RECIPES.get(ref, ref)
    if ":" not in target:
        raise LookupError(f"unknown recipe {ref!r}: one of {', '.join(RECIPES)} or module:Class")
    module, name = target.split(":", 1)
    return getattr(importlib.import_module(module), name)


def reference(recipe: type[Recipe]) -> str | None:
    """ "module:Class" of `recipe` for `run.json` (so the buffer loads it without the learner),
    or None for one made around a learner's old hooks (`recipe_of`)."""
    if getattr(recipe, "_learner", None) is not None:
        return None
    return f"{recipe.__module__}:{recipe.__qualname__}"


def recipe_of(learner_class: type) -> type[Recipe]:
    """The recipe of a learner class: its `recipe` (a name or a Recipe subclass). A class that
    still defines the hooks that moved here from `Learner` (`HOOKS`, or `episode_aligned`)
    gets a recipe calling them, after one warning line naming what to write instead."""
    declared = getattr(learner_class, "recipe", "on-policy")
    base = load(declared) if isinstance(declared, str) else declared
    old = [h for h in HOOKS if h in _own_attributes(learner_class)]
    aligned = getattr(learner_class, "episode_aligned", None)
    if not old and aligned is None:
        return base
    cached = learner_class.__dict__.get("_recipe_cache")
    if cached is not None:
        return cached
    log.warning(
        "%s: %s moved from Learner to its recipe (surreal.api.recipe); subclass the recipe "
        '(class MyRecipe(%s): ...) and set `recipe = MyRecipe`, or `recipe = "episodes"` for '
        "episode_aligned (docs/new_algorithm.md)",
        learner_class.__name__,
        ", ".join(old + (["episode_aligned"] if aligned is not None else [])),
        base.__name__,
    )
    hooks: dict[str, Any] = {"_learner": learner_class}
    if aligned is not None:
        hooks["episode_aligned"] = bool(aligned)
    if "segments_per_batch" in old:
        hooks["per_batch"] = classmethod(lambda cls, rc: learner_class.segments_per_batch(rc))
    for hook in old:
        if hook != "segments_per_batch":
            hooks[hook] = classmethod(_calling(learner_class, hook))
    recipe = type(f"{learner_class.__name__}Recipe", (base,), hooks)
    learner_class._recipe_cache = recipe
    return recipe


def _own_attributes(learner_class: type) -> set[str]:
    """Names defined by `learner_class` or its bases below the API's `Learner`."""
    names: set[str] = set()
    for klass in learner_class.__mro__:
        if klass.__module__ == "surreal.api.core" or klass is object:
            break
        names |= set(klass.__dict__)
    return names


def _calling(learner_class: type, hook: str) -> Any:
    method = getattr(learner_class, hook)
    return lambda cls, *args: method(*args)


def fifo_replay(per_batch: int, actors: int) -> Replay:
    """The on-policy default replay: FIFO, each segment learned from once, holding up to 4
    batches of `per_batch` segments plus 2 segments per actor."""
    return Replay(FifoStorage(capacity=4 * per_batch + 2 * actors), FifoSampler())


def segment_batch(
    feeding: type, run_config: Config, env_info: EnvInfo, policy: Any
) -> dict[str, np.ndarray]:
    """2 segments of `actor.rollout_length` steps of 2 synthetic envs, as the buffer stacks them
    (`Recipe.example_batch`'s default); `feeding`: the recipe, or a learner class (its recipe's
    `episode_aligned` decides whole episodes)."""
    aligned = (feeding if issubclass(feeding, Recipe) else recipe_of(feeding)).episode_aligned
    actor = Actor(SyntheticEnv(env_info), policy, run_config.actor.rollout_length)
    rollout = actor.rollout_episodes if aligned else actor.rollout
    segments = [rollout() for _ in range(2)]
    for segment in segments:
        segment["version"] = np.ones(actor.env.num_envs, np.int64)
    return {key: np.stack([s[key] for s in segments]) for key in segments[0]}
